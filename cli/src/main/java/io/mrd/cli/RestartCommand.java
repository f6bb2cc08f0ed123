package io.mrd.cli;

import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;

/**
 * {@code mrd restart}: the upgrade path (docs/adoption.md). Runs {@code mrd start --take-over} in the same
 * directory: the new daemon starts and loads its libraries while the running one serves, then asks it to hand
 * over (STOP with {@code FLAG_HANDOVER}: it stops accepting and exits without deregistering anything, its holder
 * keeping the device and memory) and adopts its state as after a crash; clients that ride through gaps resume
 * with it.
 */
@Command(
    name = "restart",
    mixinStandardHelpOptions = true,
    description = {
        "Replace the running daemon with a new one that adopts its registrations (the upgrade path).",
        "Starts 'mrd start --take-over' in the same directory with the options that follow: the new daemon " +
            "starts while the running one serves, then asks it to hand over (it stops accepting and exits leaving " +
            "every MR, its memory and the device to its descriptor holder) and adopts them (docs/adoption.md). " +
            "Clients with ClientContext.adoptionWaitMs wait only for the adoption and resume with it; others get " +
            "DaemonDeadException and attach again. The new daemon needs the same --provider, --base-virtaddr and " +
            "sizes to adopt; with others it starts afresh and says why in its log. Exit 1 when no daemon runs " +
            "there, it refuses, it does not hand over in time, or the new one does not start (when it fails " +
            "before asking, the running one goes on serving).",
        "Under systemd (NOTIFY_SOCKET; scripts/mrd.service runs it as ExecReload, Type=notify, " +
            "NotifyAccess=all) the new daemon first makes itself the unit's main process (MAINPID=) and waits " +
            "until systemd has read it; when systemd does not confirm within 5 s it gives the pid back and exits 1.",
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

    public Integer call()
    {
        if (timeoutSeconds < 1 || timeoutSeconds > StopCommand.MAX_TIMEOUT_SECONDS)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--timeout " + timeoutSeconds +
                " must be between 1 and " + StopCommand.MAX_TIMEOUT_SECONDS + " seconds");
        }
        final Path dir = dirOption.resolve();
        final long replaced = HandoverRequest.runningDaemon(dir);
        final List<String> start = new ArrayList<>(List.of("start", "--dir", dir.toString(), "--take-over",
            "--take-over-timeout", String.valueOf(timeoutSeconds)));
        start.addAll(startOptions);
        final int status = Mrd.execute(start.toArray(String[]::new));
        if (0 == status)
        {
            spec.commandLine().getOut().println("mrd handed over: pid " + replaced + ", dir " + dir);
        }
        return status;
    }
}
