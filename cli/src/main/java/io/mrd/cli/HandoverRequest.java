package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.DaemonConnection;
import io.mrd.tools.DaemonSummary;
import io.mrd.tools.RunDirectoryReader;

import java.nio.file.Path;

/**
 * Asking the daemon running in a directory to hand over (STOP with {@code FLAG_HANDOVER}: it stops accepting and
 * exits without deregistering anything, its descriptor holder keeping the device and the memory), and waiting
 * until it has released the directory's lock, so that the caller can start the daemon that adopts its state
 * (docs/adoption.md). {@code mrd start --take-over} does it once its own process is ready to adopt.
 */
final class HandoverRequest
{
    private HandoverRequest()
    {
    }

    /**
     * @return the pid of the daemon running in {@code dir}, which a take-over will replace.
     * @throws MrdException ESRCH when none runs there, EAGAIN when it has not published its pid yet.
     */
    static long runningDaemon(final Path dir)
    {
        if (!RunDirectoryReader.isLocked(dir))
        {
            throw new MrdException(ErrorCode.ESRCH, "no daemon running in " + dir + " to hand over: start one with " +
                "'mrd start --dir " + dir + "'");
        }
        return RunDirectoryReader.readSummary(dir).map(DaemonSummary::pid).orElseThrow(() -> new MrdException(
            ErrorCode.EAGAIN, "the daemon in " + dir + " has not published its pid yet: retry"));
    }

    /**
     * Asks daemon {@code pid} in {@code dir} to hand over and waits until the directory is unlocked and the
     * process has exited: its descriptor holder gives the state to a successor only once its owner's connection
     * is gone, which the exit closes.
     *
     * @throws MrdException when it cannot be asked, refuses, or still holds the lock after {@code timeoutSeconds}.
     */
    static void handOver(final Path dir, final long pid, final int timeoutSeconds)
    {
        final String who = "daemon pid " + pid + " in " + dir;
        try (DaemonConnection connection = DaemonConnection.open(
            UnixSocket.connect(dir.resolve(RunDirectoryPath.SOCKET_FILE)), who, dir, 10_000,
            new DaemonConnection.Listener()
            {
            }))
        {
            connection.hello("mrd-take-over");
            connection.call(new Message.Stop(true));
        }
        catch (final MrdException ex)
        {
            throw new MrdException(ex.code(), "cannot ask the " + who + " to hand over: " + ex.getMessage());
        }
        if (!DaemonExit.await(dir, pid, timeoutSeconds * 1_000_000_000L))
        {
            throw new MrdException(ErrorCode.ETIMEDOUT, "pid " + pid + " did not hand over within " +
                timeoutSeconds + " s: 'mrd stop --dir " + dir + "', or kill -9 " + pid + " (a new daemon " +
                "adopts its state as after a crash)");
        }
    }
}
