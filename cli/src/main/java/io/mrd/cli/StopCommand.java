package io.mrd.cli;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.tools.DaemonSummary;
import io.mrd.tools.RunDirectoryReader;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.nio.file.Path;
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

    public Integer call()
    {
        if (timeoutSeconds < 1 || timeoutSeconds > MAX_TIMEOUT_SECONDS)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--timeout " + timeoutSeconds +
                " must be between 1 and " + MAX_TIMEOUT_SECONDS + " seconds");
        }
        final Path dir = dirOption.resolve();
        if (!RunDirectoryReader.isLocked(dir))
        {
            throw new MrdException(ErrorCode.ESRCH, "no daemon running in " + dir +
                ": give the --dir (or MRD_DIR) it was started with; 'mrd status --dir DIR' tells");
        }
        final DaemonSummary daemon = RunDirectoryReader.readSummary(dir).orElseThrow(() -> new MrdException(
            ErrorCode.EAGAIN, "the daemon in " + dir + " has not published its pid yet: retry"));
        final ProcessHandle process = ProcessHandle.of(daemon.pid()).orElseThrow(() -> new MrdException(
            ErrorCode.ESRCH, "pid " + daemon.pid() + " from " + dir.resolve(ControlFile.FILE_NAME) +
            " does not exist"));
        if (!process.destroy() && process.isAlive())
        {
            throw new MrdException(ErrorCode.EPERM, "cannot send SIGTERM to pid " + daemon.pid() + ", the daemon " +
                "in " + dir + ": run 'mrd stop' as the daemon's user or root");
        }
        if (!DaemonExit.await(dir, daemon.pid(), timeoutSeconds * 1_000_000_000L))
        {
            throw new MrdException(ErrorCode.ETIMEDOUT, "pid " + daemon.pid() + " did not stop within " +
                timeoutSeconds + " s: kill -9 " + daemon.pid() + ", then 'mrd start' recovers the directory");
        }
        spec.commandLine().getOut().println("mrd stopped: pid " + daemon.pid() + ", dir " + dir);
        return 0;
    }
}
