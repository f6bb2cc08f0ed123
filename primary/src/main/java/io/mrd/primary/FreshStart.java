package io.mrd.primary;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.journal.MemoryJournaling;
import io.mrd.primary.memory.HugePages;
import io.mrd.primary.memory.MemoryConfig;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.mr.MrEngine;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.server.AdoptedClients;
import io.mrd.primary.provider.Registrars;
import io.mrd.primary.provider.TimedRegistrar;
import io.mrd.tools.RunDirectoryReader;
import org.agrona.concurrent.SystemEpochClock;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.HEARTBEAT_INTERVAL;
import static io.mrd.primary.DaemonSettings.JOURNAL_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_EXTERNAL;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static io.mrd.primary.DaemonSettings.MR_EXT_MEMSEG;
import static io.mrd.primary.DaemonSettings.PROVIDER;

/**
 * A daemon's fresh start, when there is no predecessor to adopt ({@link MrdDaemon#launch}): recovers what a dead
 * daemon left, creates and publishes the control file (on hugetlbfs when its pages are free), reserves the memory,
 * opens the provider last (what most often refuses to start), serves, and starts the heartbeat and the descriptor
 * holder. A failure at any step undoes the steps before it and unlocks the directory.
 */
final class FreshStart
{
    private static final Logger LOG = LoggerFactory.getLogger(FreshStart.class);

    private FreshStart()
    {
    }

    static MrdDaemon start(final DaemonContext context, final RunDirectory runDirectory,
        final ControlFileLayout layout, final long epoch)
    {
        ControlFile ctl = null;
        MemoryManager memory = null;
        Registrar registrar = null;
        EventJournal journal = EventJournal.OFF;
        try
        {
            recoverStale(runDirectory);
            LOG.info("starting with {}", context);
            HeapPolicy.apply();

            // The control file goes on hugetlbfs when its pages are free (searches of a large global cache then
            // miss the TLB less); the lists only when every segment of --max-memory can be backed too: a list
            // on hugetlbfs that runs out of pages fails allocations, where tmpfs would have served them.
            final long hugePage = 2 * Sizes.MIB;
            final long controlPages = Sizes.alignUp(layout.fileLength(), hugePage) / hugePage;
            final long listPages = context.get(MAX_MEMORY) / hugePage;
            final Optional<Path> huge = context.hugeDisabled() ? Optional.empty() :
                HugePages.findMountWithFreePages(context.hugeDir(), controlPages);
            final Optional<Path> hugeLists = huge.isEmpty() ? Optional.empty() :
                HugePages.findMountWithFreePages(huge, controlPages + listPages);
            if (huge.isEmpty() && context.hugeDir().isPresent())
            {
                LOG.warn("hugetlbfs at {} has fewer than {} free 2MiB pages for the control file: using tmpfs " +
                    "(add pages with scripts/setup-hugepages)", context.hugeDir().get(), controlPages);
            }
            else if (huge.isPresent() && hugeLists.isEmpty())
            {
                LOG.info("hugetlbfs at {} has fewer than {} free 2MiB pages for --max-memory {}: memory lists " +
                    "use tmpfs, the control file hugetlbfs", huge.get(), controlPages + listPages,
                    Sizes.format(context.get(MAX_MEMORY)));
            }

            final Path ctlLink = runDirectory.controlFile();
            final Path ctlTarget;
            if (huge.isPresent())
            {
                ctlTarget = huge.get().resolve("mrd-" + ProcessHandle.current().pid() + ".ctl");
                ctl = ControlFile.create(ctlTarget, layout, hugePage);
                Files.deleteIfExists(ctlLink);
                Files.createSymbolicLink(ctlLink, ctlTarget);
            }
            else
            {
                ctlTarget = ctlLink;
                ctl = ControlFile.create(ctlLink, layout, 4096);
            }
            LOG.info("control file {} ({} on {}), memory lists on {}", ctlLink, Sizes.describe(layout.fileLength()),
                huge.map(p -> "hugetlbfs " + p).orElse("tmpfs"), hugeLists.map(p -> "hugetlbfs " + p).orElse("tmpfs"));

            final long now = System.currentTimeMillis();
            final ControlHeader header = ctl.header();
            header.magic(HeaderDescriptor.MAGIC)
                .epoch(epoch)
                .pid(ProcessHandle.current().pid())
                .startTimeMs(now)
                .heartbeatMs(now)
                .heartbeatIntervalMs(context.get(HEARTBEAT_INTERVAL))
                .heartbeatStaleLimitMs(Heartbeat.staleLimitMs(context.get(HEARTBEAT_INTERVAL)))
                .flags(huge.isPresent() ? HeaderDescriptor.FLAG_HUGEPAGE_BACKED : 0)
                .baseVirtaddr(context.get(BASE_VIRTADDR))
                .segmentSize(DaemonContext.SEGMENT_SIZE)
                .providerName(context.get(PROVIDER));

            journal = MrdDaemon.openJournal(context, runDirectory, header.epoch());
            journal.daemonStarted(header.epoch(), header.pid(), context.get(JOURNAL_SIZE));
            final DaemonCounters counters = new DaemonCounters(ctl);
            final DistinctErrorLog errorLog = new DistinctErrorLog(ctl.errorLogBuffer(), SystemEpochClock.INSTANCE);
            memory = new MemoryManager(new MemoryConfig(context.get(BASE_VIRTADDR), DaemonContext.SEGMENT_SIZE,
                context.listCount(), context.segmentsPerList(), runDirectory.memDir(), hugeLists, ctl.buffer(), layout));
            header.externalBase(Sizes.alignUp(memory.endVirtaddr(), Sizes.GIB))
                .externalLength(context.get(MAX_EXTERNAL));
            memory.addEventListener(new MemoryJournaling(journal));

            // The provider comes last: it is what most often refuses to start (no device, no library), and
            // everything before it is cheap to undo.
            registrar = Registrars.create(context.providerConfig());
            Registrars.recordDevices(ctl, registrar);
            final MrEngine engine = new MrEngine(ctl, memory, new TimedRegistrar(registrar, counters.histograms()),
                counters, errorLog, context.get(MR_EXT_MEMSEG), journal);
            final MrdDaemon daemon = new MrdDaemon(
                context, runDirectory, ctl, ctlTarget, counters, errorLog, memory, registrar, engine, journal);
            // The socket listens before the control file is published, so a published file means a daemon
            // that answers; a client that connects in between finds the version still 0 and waits.
            daemon.serve(AdoptedClients.NONE);
            header.publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);
            daemon.startHeartbeat();
            daemon.startHolder();
            LOG.info("mrd ready: pid {} dir {} epoch {} memory {} at {}", header.pid(), context.get(DIR),
                Long.toHexString(header.epoch()), Sizes.format(memory.capacity()),
                Sizes.hex(context.get(BASE_VIRTADDR)));
            return daemon;
        }
        catch (final IOException ex)
        {
            cleanupFailedStart(runDirectory, ctl, memory, registrar, journal);
            throw new MrdException(ErrorCode.EIO, "cannot create the control file in " + context.get(DIR) + ": " +
                ex);
        }
        catch (final RuntimeException ex)
        {
            cleanupFailedStart(runDirectory, ctl, memory, registrar, journal);
            throw ex;
        }
    }

    private static void cleanupFailedStart(
        final RunDirectory runDirectory, final ControlFile ctl, final MemoryManager memory, final Registrar registrar,
        final EventJournal journal)
    {
        closeStarted(ctl, memory, registrar, journal);
        runDirectory.removeStaleFiles();
        runDirectory.unlock();
    }

    /**
     * Closes what a start that failed part way had opened (each null when not yet), the provider before the memory
     * its registrations pin; also {@link DaemonAdoption}'s.
     */
    static void closeStarted(final ControlFile ctl, final MemoryManager memory, final Registrar registrar,
        final EventJournal journal)
    {
        journal.close();
        if (null != registrar)
        {
            registrar.close();
        }
        if (null != memory)
        {
            memory.close();
        }
        if (null != ctl)
        {
            ctl.close();
        }
    }

    private static void recoverStale(final RunDirectory runDirectory)
    {
        if (!Files.exists(runDirectory.controlFile(), java.nio.file.LinkOption.NOFOLLOW_LINKS) &&
            !Files.exists(runDirectory.socketFile()))
        {
            return;
        }
        final String found = RunDirectoryReader.readSummary(runDirectory.dir())
            .map(s -> "pid " + s.pid() + ", epoch " + Long.toHexString(s.header().epoch()) + ", heartbeat " +
                (s.heartbeat().isClosed() ? "closed" : s.heartbeat().ageMs() + " ms old") +
                (ProcessHandle.of(s.pid()).map(ProcessHandle::isAlive).orElse(false) ?
                    " (that pid is alive but does not hold the lock: not an mrd daemon of this directory)" :
                    " (that process is gone)"))
            .orElse("an unreadable control file");
        final List<String> removed = runDirectory.removeStaleFiles();
        LOG.warn("recovered stale directory {}: previous daemon ({}) died without cleaning up; removed {}",
            runDirectory.dir(), found, removed);
    }
}
