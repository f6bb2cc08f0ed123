package io.mrd.tools;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Posix;

import java.nio.file.Path;
import java.util.Optional;

/**
 * A run directory as a tool sees it, changing nothing: whether a daemon holds its lock, and what its control
 * file says about that daemon ({@link DaemonSummary}). What only the daemon does to it (create it, take the
 * lock, remove what a dead daemon left) is the daemon's {@code RunDirectory}.
 * <p>
 * Liveness is the lock, not the pid: the kernel releases an flock when its holder dies however it dies, so a
 * free lock always means no daemon, and a pid read from a stale file is never trusted on its own.
 */
public final class RunDirectoryReader
{
    private RunDirectoryReader()
    {
    }

    /**
     * @param dir a run directory.
     * @return true when some process holds the directory's lock, i.e. a daemon is alive (or starting); false when
     * there is no lock file (or no directory).
     * @throws MrdException EACCES naming what denies access when this process may not read the lock, so that a
     *                      daemon this user cannot see is never reported as not running; ENOTDIR when the path is
     *                      not a directory.
     */
    public static boolean isLocked(final Path dir)
    {
        final Path lockFile = dir.resolve(RunDirectoryPath.LOCK_FILE);
        final int fd;
        try
        {
            fd = Posix.open(lockFile.toString(), Posix.O_RDONLY | Posix.O_CLOEXEC, 0);
        }
        catch (final MrdException ex)
        {
            return switch (ex.code())
            {
                case ENOENT -> false;
                case EACCES -> throw RunDirectoryPath.accessDenied(lockFile, "cannot read the lock");
                case ENOTDIR -> throw RunDirectoryPath.notADirectory(dir);
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
     * @param dir a run directory.
     * @return what its control file says, or empty when there is none or it is not (yet) a control file.
     * @throws MrdException EACCES naming what denies access when this process may not read it.
     */
    public static Optional<DaemonSummary> readSummary(final Path dir)
    {
        try (ControlFile ctl = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
        {
            return Optional.of(DaemonSummary.read(ctl));
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
}
