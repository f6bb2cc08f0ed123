package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.DaemonConnection;
import io.mrd.tools.DaemonSummary;
import io.mrd.tools.RunDirectoryReader;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code mrd restart}: the upgrade path (docs/adoption.md). Asks the running daemon to hand over (STOP with
 * {@code FLAG_HANDOVER}: it stops accepting and exits without deregistering anything, its holder keeping the
 * device and memory), waits until it has released the directory, then starts a daemon there, which adopts its
 * state as after a crash; clients that ride through gaps resume with it.
 */
@Command(
    name = "restart",
    mixinStandardHelpOptions = true,
    description = {
        "Replace the running daemon with a new one that adopts its registrations (the upgrade path).",
        "Asks the daemon to hand over: it stops accepting and exits leaving every MR, its memory and the device " +
            "to its descriptor holder; then starts 'mrd start' in the same directory with the options that " +
            "follow, which adopts them (docs/adoption.md). Clients with ClientContext.adoptionWaitMs resume with " +
            "it; others get DaemonDeadException and attach again. The new daemon needs the same --provider, " +
            "--base-virtaddr and sizes to adopt; with others it starts afresh and says why in its log. Exit 1 " +
            "when no daemon runs there, it refuses, it does not hand over in time, or the new one does not start.",
        "Unknown options are passed to 'mrd start'."
    },
    footer = {"", "Example:", "  mrd restart --dir /tmp/mrd --provider ibverbs"})
public final class RestartCommand implements Callable<Integer>
{
    @Mixin
    DirOption dirOption;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "30",
        description = "How long to wait for the daemon to hand over, 1 to " + StopCommand.MAX_TIMEOUT_SECONDS +
            " (default: ${DEFAULT-VALUE}).")
    int timeoutSeconds;

    @CommandLine.Unmatched
    List<String> startOptions = new ArrayList<>();

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call() throws InterruptedException
    {
        if (timeoutSeconds < 1 || timeoutSeconds > StopCommand.MAX_TIMEOUT_SECONDS)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--timeout " + timeoutSeconds +
                " must be between 1 and " + StopCommand.MAX_TIMEOUT_SECONDS + " seconds");
        }
        final Path dir = dirOption.resolve();
        if (!RunDirectoryReader.isLocked(dir))
        {
            throw new MrdException(ErrorCode.ESRCH, "no daemon running in " + dir + " to hand over: start one with " +
                "'mrd start --dir " + dir + "'");
        }
        final DaemonSummary daemon = RunDirectoryReader.readSummary(dir).orElseThrow(() -> new MrdException(
            ErrorCode.EAGAIN, "the daemon in " + dir + " has not published its pid yet: retry"));
        askToHandOver(dir, daemon.pid());
        final long deadline = System.currentTimeMillis() + timeoutSeconds * 1000L;
        while (RunDirectoryReader.isLocked(dir))
        {
            if (System.currentTimeMillis() > deadline)
            {
                throw new MrdException(ErrorCode.ETIMEDOUT, "pid " + daemon.pid() + " did not hand over within " +
                    timeoutSeconds + " s: 'mrd stop --dir " + dir + "', or kill -9 " + daemon.pid() + " (a new " +
                    "daemon adopts its state as after a crash)");
            }
            Thread.sleep(20);
        }
        spec.commandLine().getOut().println("mrd handed over: pid " + daemon.pid() + ", dir " + dir);
        spec.commandLine().getOut().flush();
        final List<String> start = new ArrayList<>(List.of("start", "--dir", dir.toString()));
        start.addAll(startOptions);
        return Mrd.execute(start.toArray(String[]::new));
    }

    private static void askToHandOver(final Path dir, final long pid)
    {
        final String who = "daemon pid " + pid + " in " + dir;
        try (DaemonConnection connection = DaemonConnection.open(
            UnixSocket.connect(dir.resolve(RunDirectoryPath.SOCKET_FILE)), who, dir, 10_000,
            new DaemonConnection.Listener()
            {
            }))
        {
            connection.hello("mrd-restart");
            connection.call(new Message.Stop(true));
        }
        catch (final MrdException ex)
        {
            throw new MrdException(ex.code(), "cannot ask the " + who + " to hand over: " + ex.getMessage());
        }
    }
}
