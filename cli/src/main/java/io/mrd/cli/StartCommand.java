package io.mrd.cli;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.FileFailure;
import io.mrd.layout.MrdException;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.DaemonSettings;
import io.mrd.primary.MrdDaemon;
import io.mrd.primary.RunDirectory;
import io.mrd.primary.memory.HugePages;
import io.mrd.tools.RunDirectoryReader;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code mrd start}: runs the primary, in the foreground or as a background process this command waits for.
 */
@Command(
    name = "start",
    mixinStandardHelpOptions = true,
    modelTransformer = SettingOptions.class,
    description = {
        "Start the primary daemon.",
        "Without --foreground it starts in the background, waits until the control file is published and the " +
            "heartbeat runs, prints the pid and directory, and exits 0. A wrong value of an option or of an MRD_* " +
            "variable exits 2 before anything starts; a failure (the directory is not one, is in use or may not be " +
            "read, the daemon could not start) exits 1; either with a one-line reason on stderr. A directory left " +
            "by a daemon that died (lock free, heartbeat stale) is recovered: its files are removed and recreated."
    },
    // SettingOptions puts the paragraph on the settings' variables before the examples.
    footer = {
        "",
        "Examples:",
        "  mrd start --dir /tmp/mrd",
        "  mrd start --dir /tmp/mrd --max-memory 4GiB --huge-dir /dev/hugepages --foreground",
        "  mrd start --base-virtaddr 0x200000000000 --max-pinned 1GiB",
        "  mrd start --metrics :9464            then: curl -s http://127.0.0.1:9464/metrics",
        "  mrd start --dir /tmp/mrd --provider ibverbs --take-over   (as 'mrd restart' does)"
    })
public final class StartCommand implements Callable<Integer>
{
    /** How long the background start waits for the daemon to publish its control file. */
    private static final long READY_TIMEOUT_MS = 60_000;

    /** {@code --dir}, as for every command; SettingOptions gives its value to the context as the DIR row's. */
    @Mixin
    DirOption dirOption;

    @Option(names = "--foreground", description = "Run in this process until SIGTERM, SIGINT or 'mrd stop'; log to stderr.")
    boolean foreground;

    @Option(names = "--log-level", paramLabel = "LEVEL", description = "TRACE, DEBUG, INFO (default), WARN or ERROR.")
    Mrd.LogLevel logLevel;

    @Option(names = "--take-over", description = "Replace the daemon running in --dir (the upgrade path; what " +
        "'mrd restart' runs): this daemon starts and loads its libraries, then asks the running one to hand over " +
        "and adopts its registrations, memory and clients (docs/adoption.md), so that requests wait only for the " +
        "adoption. Exit 1 when none runs there; a take-over that fails before asking leaves it serving.")
    boolean takeOver;

    @Option(names = "--take-over-timeout", paramLabel = "SECONDS", defaultValue = "30",
        description = "With --take-over: how long to wait for the running daemon to hand over, 1 to " +
            StopCommand.MAX_TIMEOUT_SECONDS + " (default: ${DEFAULT-VALUE}).")
    int takeOverTimeoutSeconds;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call()
    {
        final DaemonContext context;
        try
        {
            context = context(System.getenv());
        }
        catch (final MrdException ex)
        {
            // A value wrong by itself, on the command line or in an MRD_* variable: a wrong command line.
            throw Mrd.usage(spec, ex);
        }
        checkHugeDir(context);
        if (takeOverTimeoutSeconds < 1 || takeOverTimeoutSeconds > StopCommand.MAX_TIMEOUT_SECONDS)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--take-over-timeout " +
                takeOverTimeoutSeconds + " must be between 1 and " + StopCommand.MAX_TIMEOUT_SECONDS + " seconds");
        }
        final long replaced = takeOver ? HandoverRequest.runningDaemon(context.get(DaemonSettings.DIR)) : 0;
        return foreground ? runForeground(context, replaced) : startBackground(context);
    }

    /**
     * Checks an explicit {@code --huge-dir} here, as the daemon will, so that a background start fails before it
     * starts a process and names what the path is.
     */
    private static void checkHugeDir(final DaemonContext context)
    {
        if (context.hugeDisabled() || context.hugeDir().isEmpty())
        {
            return;
        }
        final Path dir = context.hugeDir().get();
        final String todo = "give the mount point of a hugetlbfs (scripts/setup-hugepages makes one), 'none', or " +
            "leave --huge-dir out to use the first one with free pages";
        if (!Files.isDirectory(dir))
        {
            final ErrorCode code = Files.exists(dir, LinkOption.NOFOLLOW_LINKS) ? ErrorCode.ENOTDIR : ErrorCode.ENOENT;
            throw FileFailure.of(code, "cannot use --huge-dir", dir, todo);
        }
        HugePages.findMountWithFreePages(context.hugeDir(), 0);
    }

    /**
     * @param env the environment, for the settings no option was given for.
     * @return the context of the options given on the command line, then of the {@code MRD_*} variables.
     */
    DaemonContext context(final Map<String, String> env)
    {
        return SettingOptions.given(spec.commandLine().getParseResult(), new DaemonContext())
            .applyEnvironment(env).conclude();
    }

    /**
     * @param replaced the daemon this one takes over from ({@code --take-over}), else 0.
     */
    private int runForeground(final DaemonContext context, final long replaced)
    {
        final long self = ProcessHandle.current().pid();
        final ServiceManager serviceManager = ServiceManager.of(System.getenv());
        if (takeOver)
        {
            // Everything that does not need the directory first: the running daemon serves meanwhile.
            MrdDaemon.prepare();
            takeOver(context.get(DaemonSettings.DIR), replaced, serviceManager, self);
        }
        final MrdDaemon daemon = MrdDaemon.launch(context);
        Runtime.getRuntime().addShutdownHook(new Thread(daemon::close, "mrd-shutdown"));
        // SIGTERM and SIGINT are the graceful stop, not a failure: exit 0 (the JVM's default is 128 + signal,
        // which supervisors such as systemd report as a failed unit). The shutdown hook does the work.
        for (final String signal : new String[] {"TERM", "INT"})
        {
            sun.misc.Signal.handle(new sun.misc.Signal(signal), ignored -> System.exit(0));
        }
        serviceManager.ready(self);
        spec.commandLine().getOut().println("mrd started: pid " + self + ", dir " + context.get(DaemonSettings.DIR));
        spec.commandLine().getOut().flush();
        daemon.awaitClosed();
        return 0;
    }

    /**
     * Becomes the service manager's main process, then asks daemon {@code replaced} to hand over. When either
     * fails while {@code replaced} still holds the directory, it is made the main process again: it serves on.
     */
    private void takeOver(final Path dir, final long replaced, final ServiceManager serviceManager, final long self)
    {
        try
        {
            serviceManager.mainPid(self);
            HandoverRequest.handOver(dir, replaced, takeOverTimeoutSeconds);
        }
        catch (final MrdException ex)
        {
            if (RunDirectoryReader.isLocked(dir) &&
                RunDirectoryReader.readSummary(dir).map(s -> s.pid() == replaced).orElse(false))
            {
                serviceManager.restoreMainPid(replaced);
            }
            throw ex;
        }
        spec.commandLine().getOut().println("mrd take-over: pid " + replaced + " handed over");
    }

    private int startBackground(final DaemonContext context)
    {
        final Path dir = context.get(DaemonSettings.DIR);
        final RunDirectory runDirectory = new RunDirectory(dir).ensureExists();
        if (!takeOver && RunDirectoryReader.isLocked(dir))
        {
            throw new MrdException(ErrorCode.EBUSY, "a daemon is already running in " + dir +
                RunDirectoryReader.readSummary(dir).map(s -> " (pid " + s.pid() + ")").orElse("") +
                ": stop it with 'mrd stop --dir " + dir + "' or choose another --dir");
        }
        final Process process = spawn(runDirectory, dir);
        final long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        while (true)
        {
            if (!process.isAlive())
            {
                throw startFailure(process.exitValue(), lastError(runDirectory.logFile()));
            }
            if (isReady(runDirectory, process.pid()))
            {
                spec.commandLine().getOut().println("mrd started: pid " + process.pid() + ", dir " + dir + ", log " +
                    runDirectory.logFile());
                return 0;
            }
            if (System.currentTimeMillis() > deadline)
            {
                process.destroyForcibly();
                throw new MrdException(ErrorCode.ETIMEDOUT, "the daemon (pid " + process.pid() +
                    ") did not publish its control file within " + READY_TIMEOUT_MS / 1000 +
                    " s and was killed; see " + runDirectory.logFile());
            }
            try
            {
                Thread.sleep(20);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                throw new MrdException(ErrorCode.EIO, "interrupted while waiting for the daemon to start");
            }
        }
    }

    private static boolean isReady(final RunDirectory runDirectory, final long pid)
    {
        try (ControlFile ctl = ControlFile.openReadOnly(runDirectory.controlFile()))
        {
            return ctl.header().pid() == pid && !Heartbeat.lookNow(ctl.header()).isClosed();
        }
        catch (final MrdException ex)
        {
            return false;
        }
    }

    /**
     * Starts {@code mrd start --foreground} with this JVM's binary, flags and class path, detached from the
     * terminal's session (setsid) and writing to {@code DIR/mrd.log}.
     */
    private Process spawn(final RunDirectory runDirectory, final Path dir)
    {
        final List<String> args = new ArrayList<>(spec.root().commandLine().getParseResult().originalArgs());
        args.addAll(List.of("--foreground", "--dir", dir.toString()));
        final List<String> command = MrdLauncher.command(true, args);
        try
        {
            final Path log = runDirectory.logFile();
            return new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()))
                .start();
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot start the daemon process: " + ex.getMessage());
        }
    }

    /**
     * @param reason the daemon's own line without its {@code mrd start: } prefix.
     * @return the failure with the daemon's errno, so that the line says why once ({@code EBUSY: the daemon
     * exited …: cannot serve metrics …}), or EIO when the daemon gave none.
     */
    private static MrdException startFailure(final int status, final String reason)
    {
        final int colon = reason.indexOf(": ");
        ErrorCode code = ErrorCode.EIO;
        String text = reason;
        if (colon > 0 && reason.startsWith("E"))
        {
            try
            {
                code = ErrorCode.valueOf(reason.substring(0, colon));
                text = reason.substring(colon + 2);
            }
            catch (final IllegalArgumentException ex)
            {
                // not an errno: the reason stays whole under EIO
            }
        }
        return new MrdException(code, "the daemon exited with status " + status + " while starting: " + text);
    }

    /**
     * @return the daemon's own one-line reason from the end of its log ("mrd start: CODE: …").
     */
    private static String lastError(final Path log)
    {
        try
        {
            final List<String> lines = Files.readAllLines(log);
            for (int i = lines.size() - 1; i >= 0; i--)
            {
                if (lines.get(i).startsWith("mrd start: "))
                {
                    return lines.get(i).substring("mrd start: ".length());
                }
            }
            return "no reason in " + log + " (last line: " + (lines.isEmpty() ? "none" : lines.getLast()) + ")";
        }
        catch (final IOException ex)
        {
            return "cannot read " + log + ": " + FileFailure.code(ex).text();
        }
    }
}
