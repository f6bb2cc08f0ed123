package io.mrd.primary.lineage;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import io.mrd.tools.Invariants;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * A dead daemon's state in a run directory, once a successor has checked that it may trust and adopt it: what
 * its control file shows, and the descriptors its holder kept. {@link #find} runs the checks in the order of
 * docs/adoption.md, and any failure means starting afresh, with the log saying which check failed:
 * <ol>
 *   <li>a control file of this layout version that a daemon published, whose heartbeat is not closed (a clean
 *   stop removes everything anyway);</li>
 *   <li>of the same provider and geometry as this daemon's settings (lists, segments, MR table, cache, clients,
 *   base address): the secondaries' mappings are of that file and those addresses;</li>
 *   <li>consistent, as {@code mrd check} holds it ({@link Invariants}): a daemon killed inside a write section
 *   leaves its seqlock odd, and a file changed by hand breaks an invariant;</li>
 *   <li>its descriptors still held: the device's command file (ibverbs) and every list's file, which only the
 *   daemon's uid can have taken or deposited.</li>
 * </ol>
 * What is then imported is checked against the device (the provider's {@code adopt}: each MR's handle must name
 * an MR of the recorded range and keys), so that neither a forged file nor another process's context is taken
 * for the predecessor's.
 * <p>
 * The caller holds the run directory's lock: no other daemon can be checking or taking meanwhile. The
 * descriptors stay this object's: the successor uses duplicates, and {@link #close} closes these, adopted or
 * not.
 */
public final class Predecessor implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(Predecessor.class);
    /** The violations a successor repairs itself: of the write section, the global cache and the counters. */
    private static final Pattern REBUILT = Pattern.compile("seqlock held for writing|global cache|counter '");

    private final Path controlFile;
    private final long epoch;
    private final String provider;
    private final String deviceName;
    private final int pdHandle;
    private final Optional<Path> hugeDir;
    private final HolderLink.Taken taken;
    private boolean closed;

    private Predecessor(final Path controlFile, final Seen seen, final HolderLink.Taken taken)
    {
        this.controlFile = controlFile;
        this.epoch = seen.epoch();
        this.provider = seen.provider();
        this.deviceName = seen.deviceName();
        this.pdHandle = seen.pdHandle();
        this.hugeDir = seen.hugeDir();
        this.taken = taken;
    }

    /** What the control file says of its daemon, read once. */
    private record Seen(long epoch, String provider, String deviceName, int pdHandle, Optional<Path> hugeDir)
    {
        static Seen of(final ControlFile ctl)
        {
            final ControlHeader header = ctl.header();
            return new Seen(header.epoch(), header.providerName(), header.deviceName(), header.pdHandle(),
                listsHugeDir(ctl));
        }
    }

    /**
     * What this daemon's settings make: the geometry a predecessor must have had.
     *
     * @param provider     {@code --provider}.
     * @param baseVirtaddr {@code --base-virtaddr}.
     * @param segmentSize  the daemon's segment size.
     * @param graceMs      {@code --adoption-grace}; 0 disables adoption.
     */
    public record Expected(ControlFileLayout layout, String provider, long baseVirtaddr, long segmentSize,
        long graceMs)
    {
    }

    /**
     * Looks for a predecessor to adopt in {@code dir} and checks it.
     *
     * @return the predecessor, its descriptors taken from its holder; empty when there is none, or it fails a
     *         check (logged, and its holder released so that its files can be cleaned away).
     */
    public static Optional<Predecessor> find(final Path dir, final Path controlFile, final Expected expected,
        final long newEpoch)
    {
        if (!Files.exists(controlFile, LinkOption.NOFOLLOW_LINKS))
        {
            return Optional.empty();
        }
        final Optional<String> why;
        final Seen seen;
        try (ControlFile ctl = ControlFile.openReadOnly(controlFile))
        {
            why = refusal(ctl, expected);
            seen = Seen.of(ctl);
        }
        catch (final MrdException ex)
        {
            LOG.warn("the control file a previous daemon left cannot be adopted ({}): starting afresh", ex.oneLine());
            release(dir, expected, newEpoch);
            return Optional.empty();
        }
        if (why.isPresent() && expected.graceMs() > 0)
        {
            LOG.warn("the previous daemon's state cannot be adopted: {}: starting afresh", why.get());
        }
        if (why.isPresent())
        {
            release(dir, expected, newEpoch);
            return Optional.empty();
        }
        final Optional<HolderLink.Taken> taken = HolderLink.take(dir, expected.graceMs(), newEpoch);
        if (taken.isEmpty())
        {
            LOG.warn("the previous daemon's descriptor holder is gone (its grace period passed, or it was never " +
                "started): its registrations cannot be adopted: starting afresh");
            return Optional.empty();
        }
        final Predecessor predecessor = new Predecessor(controlFile, seen, taken.get());
        final Optional<String> mismatch = predecessor.checkDescriptors(expected);
        if (mismatch.isPresent())
        {
            LOG.warn("the previous daemon's descriptor holder holds {}: starting afresh", mismatch.get());
            predecessor.releaseHolder();
            return Optional.empty();
        }
        return Optional.of(predecessor);
    }

    /**
     * @return why the file cannot be adopted, or empty.
     */
    private static Optional<String> refusal(final ControlFile ctl, final Expected expected)
    {
        final ControlHeader header = ctl.header();
        if (expected.graceMs() == 0)
        {
            return Optional.of("--adoption-grace is 0");
        }
        if (header.heartbeatMs() == HeaderDescriptor.HEARTBEAT_CLOSED)
        {
            return Optional.of("it stopped cleanly, releasing everything");
        }
        if (!header.providerName().equals(expected.provider()))
        {
            return Optional.of("it used --provider " + header.providerName() + ", this daemon " + expected.provider());
        }
        if (header.deviceCount() > 1)
        {
            // Its holder keeps device 0's command file only: the other devices' MRs went with its contexts.
            return Optional.of("it registered on " + header.deviceCount() + " devices, and a daemon of several " +
                "devices is not adopted yet (docs/multi-device.md)");
        }
        if (header.baseVirtaddr() != expected.baseVirtaddr() || header.segmentSize() != expected.segmentSize())
        {
            return Optional.of("its memory is at " + Sizes.hex(header.baseVirtaddr()) + " in segments of " +
                Sizes.format(header.segmentSize()) + ", this daemon's at " + Sizes.hex(expected.baseVirtaddr()) +
                " in " + Sizes.format(expected.segmentSize()) + " (another --base-virtaddr)");
        }
        if (!Arrays.deepEquals(ctl.layout().sections(), expected.layout().sections()))
        {
            return Optional.of("its control file has another layout (--max-memory, --list-size, --max-mrs, " +
                "--cache-capacity or --max-clients differ)");
        }
        // A daemon killed inside a write section leaves the seqlock odd, and the global cache and the counters it
        // was changing torn: all three are the successor's to rebuild (GlobalCacheWriter.finishAbandonedWrite).
        // The MR records and the lists are not rebuilt: a violation there means starting afresh.
        final List<String> violations = Invariants.check(ControlFileSnapshot.read(ctl)).stream()
            .filter(v -> !REBUILT.matcher(v).lookingAt()).toList();
        if (!violations.isEmpty())
        {
            return Optional.of("its control file fails mrd check (" + violations.size() + " violation" +
                (violations.size() == 1 ? "" : "s") + ", the first: " + violations.getFirst() + ")");
        }
        return Optional.empty();
    }

    /**
     * @return the hugetlbfs directory the lists' files are in, or empty for tmpfs.
     */
    private static Optional<Path> listsHugeDir(final ControlFile ctl)
    {
        final MemsegListRecord list = new MemsegListRecord().wrap(ctl.buffer(), ctl.layout().memsegListOffset(0));
        return 0 != (list.flags() & MemsegListDescriptor.FLAG_HUGETLBFS) ?
            Optional.ofNullable(Path.of(list.backingPath()).getParent()) : Optional.empty();
    }

    private Optional<String> checkDescriptors(final Expected expected)
    {
        final int lists = expected.layout().memsegListCount();
        final boolean needsDevice = HeaderDescriptor.NO_PD_HANDLE != pdHandle;
        if (taken.listFds().length != lists)
        {
            return Optional.of(taken.listFds().length + " list files, not the " + lists + " the control file has");
        }
        if (needsDevice != (taken.commandFd() >= 0))
        {
            return Optional.of(needsDevice ? "no device command file, where the control file names PD " + pdHandle +
                " of " + deviceName : "a device command file, where the control file names no device");
        }
        return Optional.empty();
    }

    /**
     * Releases the holder a predecessor that fails a check left, so that it lets go of the lists' files (and the
     * cleaning of stale files can remove them).
     */
    private static void release(final Path dir, final Expected expected, final long newEpoch)
    {
        HolderLink.take(dir, expected.graceMs(), newEpoch).ifPresent(taken ->
        {
            taken.closeDescriptors();
            taken.link().release();
        });
    }

    public Path controlFile()
    {
        return controlFile;
    }

    public long epoch()
    {
        return epoch;
    }

    public String provider()
    {
        return provider;
    }

    /** @return the device its MRs are on, as its header names it ("" without one). */
    public String deviceName()
    {
        return deviceName;
    }

    public int pdHandle()
    {
        return pdHandle;
    }

    /** @return where its lists' files are on hugetlbfs, or empty for tmpfs. */
    public Optional<Path> hugeDir()
    {
        return hugeDir;
    }

    /**
     * @return a duplicate of the device's command file, for the successor's provider to import (it is the
     * context's then); -1 without a device.
     */
    public int duplicateCommandFd()
    {
        return taken.commandFd() < 0 ? -1 : Posix.dupCloexec(taken.commandFd());
    }

    /**
     * @return duplicates of the lists' files, by list index, for the successor's lists to keep.
     */
    public int[] duplicateListFds()
    {
        final List<Integer> fds = new ArrayList<>();
        try
        {
            for (final int fd : taken.listFds())
            {
                fds.add(Posix.dupCloexec(fd));
            }
        }
        catch (final MrdException ex)
        {
            fds.forEach(Posix::close);
            throw ex;
        }
        return fds.stream().mapToInt(Integer::intValue).toArray();
    }

    /**
     * The successor has adopted: it keeps the holder, which now stands for it.
     *
     * @return the link to the holder.
     */
    public HolderLink keepHolder()
    {
        return taken.link();
    }

    /**
     * The adoption failed part way: the holder lets go of everything, so that the successor can start afresh.
     */
    public void releaseHolder()
    {
        close();
        taken.link().release();
    }

    /**
     * Closes the descriptors taken (the successor's duplicates live on); the holder stays unless released.
     */
    public void close()
    {
        if (!closed)
        {
            closed = true;
            taken.closeDescriptors();
        }
    }

    public String toString()
    {
        return "epoch " + Long.toHexString(epoch) + " (" + provider + (deviceName.isEmpty() ? "" : " on " +
            deviceName) + ")";
    }
}
