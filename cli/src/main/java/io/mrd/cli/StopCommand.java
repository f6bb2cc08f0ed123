package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.primary.RunDirectory;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.util.concurrent.Callable;

/**
 * {@code mrd stop}: graceful shutdown through SIGTERM, waiting until the daemon has released its directory.
 */
@Command(
    name = "stop",
    mixinStandardHelpOptions = true,
    description = {
        "Stop the daemon gracefully.",
        "Sends SIGTERM, then waits until the daemon has deregistered everything, removed its files, released " +
            "the directory's lock and exited. Exit 1 when no daemon runs there, this user may not read the " +
            "directory or signal the daemon, or it does not stop in time; 2 for a wrong command line."
    },
    footer = {"", "Example:", "  mrd stop --dir /tmp/mrd"})
public final class StopCommand implements Callable<Integer>
{
    @Mixin
    DirOption dirOption;

    /** Longest --timeout: a day. A daemon that has not stopped by then will not. */
    static final int MAX_TIMEOUT_SECONDS = 86_400;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "30",
        description = "How long to wait for the daemon to finish, 1 to " + MAX_TIMEOUT_SECONDS +
            " (default: ${DEFAULT-VALUE}).")
    int timeoutSeconds;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call() throws InterruptedException
    {
        if (timeoutSeconds < 1 || timeoutSeconds > MAX_TIMEOUT_SECONDS)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--timeout " + timeoutSeconds +
                " must be between 1 and " + MAX_TIMEOUT_SECONDS + " seconds");
        }
        final RunDirectory runDirectory = dirOption.runDirectory();
        if (!runDirectory.isLocked())
        {
            throw new MrdException(ErrorCode.ESRCH, "no daemon running in " + runDirectory.dir() +
                ": give the --dir (or MRD_DIR) it was started with; 'mrd status --dir DIR' tells");
        }
        final RunDirectory.Snapshot snapshot = runDirectory.readSnapshot().orElseThrow(() -> new MrdException(
            ErrorCode.EAGAIN, "the daemon in " + runDirectory.dir() + " has not published its pid yet: retry"));
        final ProcessHandle process = ProcessHandle.of(snapshot.pid()).orElseThrow(() -> new MrdException(
            ErrorCode.ESRCH, "pid " + snapshot.pid() + " from " + runDirectory.controlFile() + " does not exist"));
        if (!process.destroy() && process.isAlive())
        {
            throw new MrdException(ErrorCode.EPERM, "cannot send SIGTERM to pid " + snapshot.pid() + ", the daemon " +
                "in " + runDirectory.dir() + ": run 'mrd stop' as the daemon's user or root");
        }
        final long deadline = System.currentTimeMillis() + timeoutSeconds * 1000L;
        while (runDirectory.isLocked() || process.isAlive())
        {
            if (System.currentTimeMillis() > deadline)
            {
                throw new MrdException(ErrorCode.ETIMEDOUT, "pid " + snapshot.pid() + " did not stop within " +
                    timeoutSeconds + " s: kill -9 " + snapshot.pid() + ", then 'mrd start' recovers the directory");
            }
            Thread.sleep(20);
        }
        spec.commandLine().getOut().println("mrd stopped: pid " + snapshot.pid() + ", dir " + runDirectory.dir());
        return 0;
    }
}
