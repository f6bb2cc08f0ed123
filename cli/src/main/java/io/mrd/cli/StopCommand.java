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
            "the directory's lock and exited. Exit 1 when no daemon runs there or it does not stop in time."
    },
    footer = {"", "Example:", "  mrd stop --dir /tmp/mrd"})
public final class StopCommand implements Callable<Integer>
{
    @Mixin
    DirOption dirOption;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "30",
        description = "How long to wait for the daemon to finish (default: ${DEFAULT-VALUE}).")
    int timeoutSeconds;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call() throws InterruptedException
    {
        final RunDirectory runDirectory = dirOption.runDirectory();
        if (!runDirectory.isLocked())
        {
            throw new MrdException(ErrorCode.ESRCH, "no daemon running in " + runDirectory.dir());
        }
        final RunDirectory.Snapshot snapshot = runDirectory.readSnapshot().orElseThrow(() -> new MrdException(
            ErrorCode.EAGAIN, "the daemon in " + runDirectory.dir() + " has not published its pid yet: retry"));
        final ProcessHandle process = ProcessHandle.of(snapshot.pid()).orElseThrow(() -> new MrdException(
            ErrorCode.ESRCH, "pid " + snapshot.pid() + " from " + runDirectory.controlFile() + " does not exist"));
        process.destroy();
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
