package io.mrd.layout;

import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;

import java.util.EnumMap;
import java.util.Map;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;

/**
 * A mapping of the control file {@code mrd.ctl}: the primary creates it read-write; secondaries and tools
 * open it read-only, so no process but the primary can change it (a stray write in a secondary faults in
 * that secondary instead of corrupting everyone's cache).
 * <p>
 * The file is mapped with {@code mmap} through {@link Posix} rather than {@code FileChannel.map}, because
 * a hugetlbfs file must be sized by {@code ftruncate} and mapped in whole huge pages, and because both sides
 * then use one code path.
 */
public final class ControlFile implements AutoCloseable
{
    /** The file name inside the run directory. */
    public static final String FILE_NAME = "mrd.ctl";

    private final Path path;
    private final MemorySegment mapping;
    private final UnsafeBuffer buffer;
    private final ControlHeader header;
    private final ControlFileLayout layout;
    private final SeqLock seqLock;
    private boolean closed;

    private ControlFile(final Path path, final MemorySegment mapping, final ControlFileLayout layout)
    {
        this.path = path;
        this.mapping = mapping;
        this.buffer = new UnsafeBuffer(mapping.address(), (int)mapping.byteSize());
        this.header = new ControlHeader().wrap(buffer);
        this.layout = layout;
        this.seqLock = new SeqLock(buffer, HeaderDescriptor.SEQ_OFFSET);
    }

    /**
     * Creates a new, zeroed control file and maps it read-write. The caller fills it and then publishes
     * {@link HeaderDescriptor#LAYOUT_VERSION}.
     *
     * @param path     where to create it; an existing file is replaced.
     * @param layout   the section layout.
     * @param pageSize the page size of the file system it lives on (the length is rounded up to it:
     *                 hugetlbfs maps only whole huge pages).
     */
    public static ControlFile create(final Path path, final ControlFileLayout layout, final long pageSize)
    {
        final long length = Sizes.alignUp(layout.fileLength(), pageSize);
        try
        {
            Files.deleteIfExists(path);
        }
        catch (final IOException ex)
        {
            throw FileFailure.of(ex, "cannot remove old control file", path, "remove it, or choose another --dir");
        }
        final int fd = Posix.open(path.toString(), Posix.O_RDWR | Posix.O_CREAT | Posix.O_EXCL | Posix.O_CLOEXEC,
            0640);
        try
        {
            Posix.ftruncate(fd, length);
            final MemorySegment mapping = Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
            final ControlFile file = new ControlFile(path, mapping, layout);
            layout.writeTo(file.buffer);
            return file;
        }
        finally
        {
            Posix.close(fd);
        }
    }

    /**
     * Maps an existing control file read-only and checks that it is complete and of this layout version.
     *
     * @throws MrdException ENOENT when there is no file (no daemon ever ran there), EACCES naming what denies
     *                      access and who may read it, EISDIR or EINVAL when the path is a directory or not a
     *                      regular file, EAGAIN when the daemon has not finished writing it, EPROTO on another
     *                      magic or version.
     */
    public static ControlFile openReadOnly(final Path path)
    {
        return open(path, false);
    }

    /**
     * Maps an existing control file read-write, as {@link #openReadOnly} checks it: what a successor daemon does
     * with its predecessor's file, which the secondaries keep mapping meanwhile.
     *
     * @throws MrdException as {@link #openReadOnly}.
     */
    public static ControlFile openReadWrite(final Path path)
    {
        return open(path, true);
    }

    private static ControlFile open(final Path path, final boolean writable)
    {
        final long length = regularFileLength(path);
        if (length < HeaderDescriptor.HEADER_LENGTH)
        {
            throw new MrdException(ErrorCode.EAGAIN, "control file " + path + " is " + length +
                " bytes, shorter than its header: a daemon starting there has not sized it yet (retry in a " +
                "moment), or it is not a control file");
        }
        if (length > Integer.MAX_VALUE)
        {
            throw new MrdException(ErrorCode.EPROTO, path + " is " + Sizes.format(length) + ", larger than any " +
                "control file (they stay below 2GiB): give DIR/" + FILE_NAME + " or a copy of one");
        }
        final int fd;
        try
        {
            fd = Posix.open(path.toString(), (writable ? Posix.O_RDWR : Posix.O_RDONLY) | Posix.O_CLOEXEC, 0);
        }
        catch (final MrdException ex)
        {
            throw ex.code() == ErrorCode.EACCES ? RunDirectoryPath.accessDenied(path, "cannot read control file") : ex;
        }
        final MemorySegment mapping;
        try
        {
            mapping = Posix.map(length, writable ? Posix.PROT_READ | Posix.PROT_WRITE : Posix.PROT_READ,
                Posix.MAP_SHARED, fd, 0);
        }
        catch (final MrdException ex)
        {
            throw ex.code() != ErrorCode.ENODEV ? ex : new MrdException(ErrorCode.ENODEV, "cannot map control file " +
                path + ": its file system does not support mmap: a control file lives on tmpfs, hugetlbfs or a " +
                "local disk");
        }
        finally
        {
            Posix.close(fd);
        }
        try
        {
            final UnsafeBuffer buffer = new UnsafeBuffer(mapping.address(), (int)length);
            final ControlHeader header = new ControlHeader().wrap(buffer);
            checkReady(path, header);
            final ControlFileLayout layout = ControlFileLayout.read(buffer);
            if (layout.fileLength() > length)
            {
                throw new MrdException(ErrorCode.EPROTO, "control file " + path + " is " + length +
                    " bytes but its header says " + layout.fileLength() + ": the file is truncated or corrupt");
            }
            return new ControlFile(path, mapping, layout);
        }
        catch (final RuntimeException ex)
        {
            Posix.munmapQuietly(mapping.address(), length);
            throw ex;
        }
    }

    /**
     * @return the length of the regular file at {@code path} (a link is followed: on hugetlbfs the control file
     * is one).
     */
    private static long regularFileLength(final Path path)
    {
        final BasicFileAttributes attributes;
        try
        {
            attributes = Files.readAttributes(path, BasicFileAttributes.class);
        }
        catch (final NoSuchFileException ex)
        {
            final Path dir = path.toAbsolutePath().getParent();
            if (null != dir && Files.exists(dir) && !Files.isDirectory(dir))
            {
                throw FileFailure.of(ErrorCode.ENOTDIR, "cannot read control file", path, "give a run directory");
            }
            throw new MrdException(ErrorCode.ENOENT, "no control file at " + path +
                ": is a daemon running there? start one with 'mrd start --dir " + path.getParent() + "'");
        }
        catch (final AccessDeniedException ex)
        {
            throw RunDirectoryPath.accessDenied(path, "cannot read control file");
        }
        catch (final IOException ex)
        {
            throw FileFailure.of(ex, "cannot read control file", path,
                "give a run directory (DIR/mrd.ctl is read) or the path of a control file");
        }
        if (attributes.isDirectory())
        {
            throw new MrdException(ErrorCode.EISDIR, path + " is a directory, not a control file: give the " +
                "control file (DIR/" + FILE_NAME + "), or the directory as the run directory (--dir)");
        }
        if (!attributes.isRegularFile())
        {
            throw new MrdException(ErrorCode.EINVAL, path + " is not a regular file (a device, pipe or socket), " +
                "so not a control file: give DIR/" + FILE_NAME + " or a copy of one");
        }
        return attributes.size();
    }

    /**
     * @throws MrdException unless the header carries mrd's magic and this layout version.
     */
    public static void checkReady(final Path path, final ControlHeader header)
    {
        if (header.magic() != HeaderDescriptor.MAGIC)
        {
            throw new MrdException(ErrorCode.EPROTO, path + " is not an mrd control file (magic " +
                Integer.toHexString(header.magic()) + ", expected " + Integer.toHexString(HeaderDescriptor.MAGIC) + ")");
        }
        final int version = header.layoutVersion();
        if (version == 0)
        {
            throw new MrdException(ErrorCode.EAGAIN, "control file " + path +
                " is still being written by the daemon: retry in a moment");
        }
        if (version != HeaderDescriptor.LAYOUT_VERSION)
        {
            throw new MrdException(ErrorCode.EPROTO, "control file " + path + " has layout version " + version +
                " but this mrd reads version " + HeaderDescriptor.LAYOUT_VERSION +
                ": run the mrd build that matches the daemon");
        }
    }

    public Path path()
    {
        return path;
    }

    public UnsafeBuffer buffer()
    {
        return buffer;
    }

    public ControlHeader header()
    {
        return header;
    }

    public ControlFileLayout layout()
    {
        return layout;
    }

    public SeqLock seqLock()
    {
        return seqLock;
    }

    private CountersReader countersReader()
    {
        return new CountersReader(
            new UnsafeBuffer(buffer, layout.countersMetadataOffset(), layout.countersMetadataLength()),
            new UnsafeBuffer(buffer, layout.countersValuesOffset(), layout.countersValuesLength()));
    }

    /**
     * @return the value of a counter, or 0 when the daemon did not allocate it.
     */
    public long counter(final MrdCounter counter)
    {
        return counters().getOrDefault(counter, 0L);
    }

    /**
     * The one reader of the counters section: the tools, the metrics and the snapshot all read through it.
     *
     * @return the value of every {@link MrdCounter} the daemon allocated, in enum order.
     */
    public Map<MrdCounter, Long> counters()
    {
        final CountersReader reader = countersReader();
        final Map<MrdCounter, Long> values = new EnumMap<>(MrdCounter.class);
        reader.forEach((counterId, typeId, keyBuffer, label) ->
        {
            final MrdCounter counter = MrdCounter.ofTypeId(typeId);
            if (null != counter)
            {
                values.put(counter, reader.getCounterValue(counterId));
            }
        });
        return values;
    }

    /**
     * @return a buffer over the error log section.
     */
    public UnsafeBuffer errorLogBuffer()
    {
        return new UnsafeBuffer(buffer, layout.errorLogOffset(), layout.errorLogLength());
    }

    /**
     * @return the histograms section, for the daemon to write and tools to read.
     */
    public HistogramsSection histograms()
    {
        return new HistogramsSection(buffer, layout.histogramsOffset(), layout.histogramsLength());
    }

    /**
     * @param nowMs the wall clock.
     * @return ms since the last heartbeat, or -1 when the daemon closed the file cleanly.
     */
    public long heartbeatAgeMs(final long nowMs)
    {
        return Heartbeat.ageMs(header, nowMs);
    }

    public void close()
    {
        if (!closed)
        {
            closed = true;
            Posix.munmapQuietly(mapping.address(), mapping.byteSize());
        }
    }
}
