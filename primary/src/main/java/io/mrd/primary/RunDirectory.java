package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.FileFailure;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Posix;
import io.mrd.tools.RunDirectoryReader;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * What the daemon does to its run directory ({@link RunDirectoryPath} lists its files): create it, take the
 * lock that makes the daemon the only one there, and remove what a dead daemon left. Reading it (is the lock
 * held, what does the control file say) is the tools' {@link RunDirectoryReader}, which the daemon uses too.
 */
public final class RunDirectory
{
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
        return dir.resolve(RunDirectoryPath.SOCKET_FILE);
    }

    public Path lockFile()
    {
        return dir.resolve(RunDirectoryPath.LOCK_FILE);
    }

    public Path logFile()
    {
        return dir.resolve(RunDirectoryPath.LOG_FILE);
    }

    public Path memDir()
    {
        return dir.resolve(RunDirectoryPath.MEM_DIR);
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
            throw RunDirectoryPath.notADirectory(dir);
        }
        try
        {
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwxr-x---")));
            return this;
        }
        catch (final IOException ex)
        {
            throw FileFailure.of(ex, "cannot create run directory", dir, RunDirectoryPath.CHOOSE_ANOTHER);
        }
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
        // Who holds the lock, for a daemon that loses the race for it: the control file names its daemon only once
        // that daemon serves (a successor adopting its predecessor's file names the predecessor until then).
        try
        {
            Files.writeString(lockFile(), ProcessHandle.current().pid() + "\n");
        }
        catch (final IOException ex)
        {
            // the loser then names the control file's pid, as before
        }
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
        try
        {
            final long holder = Long.parseLong(Files.readString(lockFile()).strip());
            if (ProcessHandle.of(holder).map(ProcessHandle::isAlive).orElse(false))
            {
                return " (pid " + holder + ")";
            }
        }
        catch (final IOException | NumberFormatException ex)
        {
            // an older daemon's empty lock file: the control file names it
        }
        return RunDirectoryReader.readSummary(dir).map(s -> " (pid " + s.pid() + ")")
            .orElse(" (pid not yet published)");
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
