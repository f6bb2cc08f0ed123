package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.FileFailure;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Posix;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.stream.Stream;

/**
 * The files of one daemon instance (DESIGN §2) and the lock that makes it one:
 * <pre>
 *   DIR/mrd.ctl    control file (or a link to it on hugetlbfs), mode 0640
 *   DIR/mrd.sock   Unix socket, mode 0660
 *   DIR/mrd.lock   flock held for the daemon's lifetime; left in place on exit
 *   DIR/mrd.log    daemon log when started in the background
 *   DIR/mem/       backing files of the memory-segment lists on tmpfs
 * </pre>
 * Liveness is the lock, not the pid: the kernel releases an flock when its holder dies however it dies, so a
 * free lock always means no daemon, and a pid read from a stale file is never trusted on its own.
 */
public final class RunDirectory
{
    public static final String SOCKET_FILE = "mrd.sock";
    public static final String LOCK_FILE = "mrd.lock";
    public static final String LOG_FILE = "mrd.log";
    public static final String MEM_DIR = "mem";

    private static final String CHOOSE_ANOTHER = "give a directory this user may create or use, with --dir or MRD_DIR";

    private final Path dir;
    private int lockFd = -1;

    public RunDirectory(final Path dir)
    {
        this.dir = dir;
    }

    public Path dir()
    {
        return dir;
    }

    public Path controlFile()
    {
        return dir.resolve(ControlFile.FILE_NAME);
    }

    public Path socketFile()
    {
        return dir.resolve(SOCKET_FILE);
    }

    public Path lockFile()
    {
        return dir.resolve(LOCK_FILE);
    }

    public Path logFile()
    {
        return dir.resolve(LOG_FILE);
    }

    public Path memDir()
    {
        return dir.resolve(MEM_DIR);
    }

    /**
     * Creates the directory (mode 0750 when new) if it does not exist.
     *
     * @throws MrdException ENOTDIR when the path (or a part of it) is not a directory, EACCES naming what denies
     *                      access, or the errno of whatever else kept it from being created.
     */
    public RunDirectory ensureExists()
    {
        if (Files.isDirectory(dir))
        {
            return this;
        }
        if (Files.exists(dir))
        {
            throw notADirectory();
        }
        try
        {
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-x---")));
            return this;
        }
        catch (final IOException ex)
        {
            throw FileFailure.of(ex, "cannot create run directory", dir, CHOOSE_ANOTHER);
        }
    }

    private MrdException notADirectory()
    {
        return FileFailure.of(ErrorCode.ENOTDIR, "cannot use run directory", dir, CHOOSE_ANOTHER);
    }

    /**
     * Takes the directory's lock for this process.
     *
     * @throws MrdException EBUSY naming the live daemon's pid when another process holds it.
     */
    public void lock()
    {
        ensureExists();
        final int fd = Posix.open(lockFile().toString(), Posix.O_RDWR | Posix.O_CREAT | Posix.O_CLOEXEC, 0640);
        final int errno = Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB);
        if (errno != 0)
        {
            Posix.close(fd);
            if (errno == ErrorCode.EAGAIN.errno())
            {
                throw new MrdException(ErrorCode.EBUSY, "a daemon is already running in " + dir +
                    describePid() + ": stop it with 'mrd stop --dir " + dir + "' or choose another --dir");
            }
            throw Posix.failure(errno, "flock(" + lockFile() + ")");
        }
        lockFd = fd;
    }

    /**
     * Releases the lock (the kernel would on exit anyway). The lock file stays: removing it while another
     * process may be opening it would let two daemons lock two different files of the same name.
     */
    public void unlock()
    {
        if (lockFd >= 0)
        {
            Posix.flock(lockFd, Posix.LOCK_UN);
            Posix.close(lockFd);
            lockFd = -1;
        }
    }

    /**
     * @return true when some process holds the directory's lock, i.e. a daemon is alive (or starting); false when
     * there is no lock file (or no directory).
     * @throws MrdException EACCES naming what denies access when this process may not read the lock, so that a
     *                      daemon this user cannot see is never reported as not running; ENOTDIR when the path is
     *                      not a directory.
     */
    public boolean isLocked()
    {
        final int fd;
        try
        {
            fd = Posix.open(lockFile().toString(), Posix.O_RDONLY | Posix.O_CLOEXEC, 0);
        }
        catch (final MrdException ex)
        {
            return switch (ex.code())
            {
                case ENOENT -> false;
                case EACCES -> throw RunDirectoryPath.accessDenied(lockFile(), "cannot read the lock");
                case ENOTDIR -> throw notADirectory();
                default -> throw ex;
            };
        }
        try
        {
            final int errno = Posix.flock(fd, Posix.LOCK_SH | Posix.LOCK_NB);
            if (errno == 0)
            {
                Posix.flock(fd, Posix.LOCK_UN);
                return false;
            }
            return errno == ErrorCode.EAGAIN.errno();
        }
        finally
        {
            Posix.close(fd);
        }
    }

    /**
     * What the control file says about the daemon that wrote it, when it can be read.
     */
    public record Snapshot(long pid, long epoch, long startTimeMs, Heartbeat.State heartbeat,
        String provider, long bytesAllocated, long capacity, boolean hugepageBacked)
    {
        /**
         * @param ctl a control file whose version has been checked.
         * @return what it says now.
         */
        public static Snapshot of(final ControlFile ctl)
        {
            final ControlHeader header = ctl.header();
            final long capacity = (long)ctl.layout().memsegListCount() * ctl.layout().segmentsPerList() *
                header.segmentSize();
            return new Snapshot(header.pid(), header.epoch(), header.startTimeMs(),
                Heartbeat.lookNow(header), header.providerName(),
                ctl.counter(MrdCounter.BYTES_ALLOCATED), capacity,
                (header.flags() & HeaderDescriptor.FLAG_HUGEPAGE_BACKED) != 0);
        }
    }

    /**
     * @return what the control file says, or empty when there is none or it is not (yet) a control file.
     * @throws MrdException EACCES naming what denies access when this process may not read it.
     */
    public Optional<Snapshot> readSnapshot()
    {
        try (ControlFile ctl = ControlFile.openReadOnly(controlFile()))
        {
            return Optional.of(Snapshot.of(ctl));
        }
        catch (final MrdException ex)
        {
            if (ex.code() == ErrorCode.EACCES)
            {
                throw ex;
            }
            return Optional.empty();
        }
    }

    /**
     * Removes what a dead daemon left: control file (and its hugetlbfs target), socket, tmpfs and hugetlbfs
     * backing files. Only to be called with the lock held.
     *
     * @return a description of each thing removed, for the log.
     */
    public List<String> removeStaleFiles()
    {
        final List<String> removed = new ArrayList<>();
        final Path ctl = controlFile();
        try (ControlFile old = ControlFile.openReadOnly(ctl))
        {
            final MemsegListRecord list = new MemsegListRecord();
            for (int i = 0; i < old.layout().memsegListCount(); i++)
            {
                final String backing = list.wrap(old.buffer(), old.layout().memsegListOffset(i)).backingPath();
                if (!backing.isEmpty() && !Path.of(backing).startsWith(memDir()) && deleteQuietly(Path.of(backing)))
                {
                    removed.add("backing file " + backing);
                }
            }
        }
        catch (final MrdException ex)
        {
            // an unreadable control file has nothing to tell about backing files; it is removed below
        }
        if (Files.isSymbolicLink(ctl))
        {
            try
            {
                final Path target = ctl.resolveSibling(Files.readSymbolicLink(ctl));
                if (deleteQuietly(target))
                {
                    removed.add("control file " + target);
                }
            }
            catch (final IOException ignore)
            {
                // a dangling link is removed below
            }
        }
        if (deleteQuietly(ctl))
        {
            removed.add(ctl.toString());
        }
        if (deleteQuietly(socketFile()))
        {
            removed.add(socketFile().toString());
        }
        if (Files.isDirectory(memDir(), LinkOption.NOFOLLOW_LINKS))
        {
            try (Stream<Path> files = Files.walk(memDir()))
            {
                files.sorted(Comparator.reverseOrder()).forEach(p ->
                {
                    if (deleteQuietly(p) && !p.equals(memDir()))
                    {
                        removed.add(p.toString());
                    }
                });
            }
            catch (final IOException ignore)
            {
                // best effort: a leftover file under mem/ is replaced when its list is created again
            }
        }
        return removed;
    }

    private String describePid()
    {
        return readSnapshot().map(s -> " (pid " + s.pid() + ")").orElse(" (pid not yet published)");
    }

    static boolean deleteQuietly(final Path path)
    {
        try
        {
            return Files.deleteIfExists(path);
        }
        catch (final IOException ex)
        {
            return false;
        }
    }
}
