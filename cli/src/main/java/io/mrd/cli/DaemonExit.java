package io.mrd.cli;

import io.mrd.tools.RunDirectoryReader;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.locks.LockSupport;

/**
 * The end of a daemon process, as {@code mrd stop} and a take-over wait for it: its run directory unlocked and
 * its process exited. A zombie has exited: its parent (a shell, a test, systemd) may reap it late, and nothing
 * of the daemon runs in it any more.
 */
final class DaemonExit
{
    private DaemonExit()
    {
    }

    /**
     * Waits until {@code dir} is unlocked and {@code pid} has exited.
     *
     * @return false when that did not happen within {@code timeoutNanos}.
     */
    static boolean await(final Path dir, final long pid, final long timeoutNanos)
    {
        final long deadline = System.nanoTime() + timeoutNanos;
        while (RunDirectoryReader.isLocked(dir) || !exited(pid))
        {
            if (System.nanoTime() - deadline > 0)
            {
                return false;
            }
            // The lock is released by the daemon's exit path: polled, as its pid file's readers do.
            LockSupport.parkNanos(2_000_000);
        }
        return true;
    }

    /** @return whether {@code pid} has exited: no such process, or a zombie its parent has not reaped yet. */
    private static boolean exited(final long pid)
    {
        try
        {
            final String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
            final char state = stat.charAt(stat.lastIndexOf(')') + 2);
            return state == 'Z' || state == 'X';
        }
        catch (final IOException | RuntimeException ex)
        {
            return true;
        }
    }
}
