package io.mrd.cli;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.FileFailure;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.DaemonSetting;
import io.mrd.primary.MrdDaemon;
import io.mrd.primary.RunDirectory;
import io.mrd.primary.memory.HugePages;
import io.mrd.primary.provider.ProviderConfig;
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
    defaultValueProvider = StartCommand.Defaults.class,
    description = {
        "Start the primary daemon.",
        "Without --foreground it starts in the background, waits until the control file is published and the " +
            "heartbeat runs, prints the pid and directory, and exits 0. A wrong value of an option or of an MRD_* " +
            "variable exits 2 before anything starts; a failure (the directory is not one, is in use or may not be " +
            "read, the daemon could not start) exits 1; either with a one-line reason on stderr. A directory left " +
            "by a daemon that died (lock free, heartbeat stale) is recovered: its files are removed and recreated."
    },
    footer = {
        "",
        "Every option but --foreground and --log-level can also be given by a variable: MRD_ and the option's " +
            "name in capitals (MRD_MAX_MEMORY=4GiB is --max-memory 4GiB, MRD_ALLOW_GID=100,200 two --allow-gid), " +
            "but MRD_HEARTBEAT_INTERVAL_MS for --heartbeat-interval. An option on the command line beats its " +
            "variable, even when it repeats the default. MRD_IBVERBS_LIBRARY names the libibverbs to load.",
        "",
        "Examples:",
        "  mrd start --dir /tmp/mrd",
        "  mrd start --dir /tmp/mrd --max-memory 4GiB --huge-dir /dev/hugepages --foreground",
        "  mrd start --base-virtaddr 0x200000000000 --max-pinned 1GiB",
        "  mrd start --metrics :9464            then: curl -s http://127.0.0.1:9464/metrics"
    })
public final class StartCommand implements Callable<Integer>
{
    /** How long the background start waits for the daemon to publish its control file. */
    private static final long READY_TIMEOUT_MS = 60_000;

    @Mixin
    DirOption dirOption;

    @Option(names = "--foreground", description = "Run in this process until SIGTERM, SIGINT or 'mrd stop'; log to stderr.")
    boolean foreground;

    @Option(names = "--huge-dir", paramLabel = "PATH",
        description = "hugetlbfs mount for the control file and memory (default: the first hugetlbfs mount in " +
            "/proc/mounts with free pages; 'none' = tmpfs only). Falls back to tmpfs when it has too few free pages.")
    String hugeDir;

    @Option(names = "--base-virtaddr", paramLabel = "ADDR", converter = SizeConverter.Address.class,
        description = "First virtual address of the memory-segment lists, a multiple of 1GiB " +
            "(default: ${DEFAULT-VALUE}). Secondaries map memory at the same addresses.")
    long baseVirtaddr;

    @Option(names = "--max-memory", paramLabel = "SIZE", converter = SizeConverter.class,
        description = "Total memory the daemon may hand out, e.g. 4GiB (default: ${DEFAULT-VALUE}).")
    long maxMemory;

    @Option(names = "--list-size", paramLabel = "SIZE", converter = SizeConverter.class,
        description = "Size of one memory-segment list; lists are never virtually contiguous " +
            "(default: ${DEFAULT-VALUE}).")
    long listSize;

    @Option(names = "--max-external", paramLabel = "SIZE", converter = SizeConverter.class,
        description = "Address space reserved for external memory registered by secondaries " +
            "(default: ${DEFAULT-VALUE}).")
    long maxExternal;

    @Option(names = "--max-mrs", paramLabel = "N",
        description = "Capacity of the MR table (default: ${DEFAULT-VALUE}).")
    int maxMrs;

    @Option(names = "--cache-capacity", paramLabel = "N",
        description = "Entries of the global MR cache (default: ${DEFAULT-VALUE}; the file is sparse).")
    int cacheCapacity;

    @Option(names = "--max-clients", paramLabel = "N",
        description = "Secondaries connected at once (default: ${DEFAULT-VALUE}).")
    int maxClients;

    @Option(names = "--worker-threads", paramLabel = "N",
        description = "Threads that serve requests (registrations are slow and never run on the socket's event " +
            "loop; default: ${DEFAULT-VALUE}).")
    int workerThreads;

    @Option(names = "--populate-threads", paramLabel = "N",
        description = "Threads that fault in a large range before it is pinned, the registering worker included; " +
            "1 faults in on the worker alone (1 to " + DaemonContext.MAX_POPULATE_THREADS + "; default: " +
            "${DEFAULT-VALUE}, one a processor and at most 4).")
    int populateThreads;

    @Option(names = "--heartbeat-interval", paramLabel = "MS",
        description = "Milliseconds between heartbeats, " + Heartbeat.MIN_INTERVAL_MS + " to " +
            Heartbeat.MAX_INTERVAL_MS + "; every reader counts the daemon dead after " + Heartbeat.STALE_INTERVALS +
            " intervals without one (default: ${DEFAULT-VALUE}).")
    int heartbeatIntervalMs;

    @Option(names = "--provider", paramLabel = "NAME",
        description = "Registration provider: soft or ibverbs (default: ${DEFAULT-VALUE}).")
    String provider;

    @Option(names = "--device", paramLabel = "NAME", description = "RDMA device for --provider ibverbs (default: the first).")
    String device;

    @Option(names = "--max-pinned", paramLabel = "SIZE", converter = SizeConverter.class,
        description = "Most memory registrations may pin, e.g. 1GiB (default: ${DEFAULT-VALUE}, no mrd limit; " +
            "RLIMIT_MEMLOCK applies).")
    long maxPinned;

    @Option(names = "--mr-ext-memseg", negatable = true, fallbackValue = "true",
        description = "Register the whole virtually contiguous chunk around an address, or, with " +
            "--no-mr-ext-memseg, one 2MiB segment per MR (default: ${DEFAULT-VALUE}).")
    boolean mrExtMemseg;

    @Option(names = "--allow-gid", paramLabel = "GID",
        description = "Also accept peers of this group (repeatable). The daemon's uid and root are always accepted.")
    List<Integer> allowGids = new ArrayList<>();

    @Option(names = "--metrics", paramLabel = "HOST:PORT",
        description = "Serve the counters in Prometheus text format on http://HOST:PORT/metrics " +
            "(a bare :PORT or PORT listens on 127.0.0.1 only; default: off).")
    String metrics;

    @Option(names = "--journal-size", paramLabel = "SIZE",
        description = "Bound of the event journal in DIR/journal (mrd events reads it), all its files together; " +
            "0 or 'off' for none (default: ${DEFAULT-VALUE}).")
    String journalSize;

    @Option(names = "--log-level", paramLabel = "LEVEL", description = "TRACE, DEBUG, INFO (default), WARN or ERROR.")
    Mrd.LogLevel logLevel;

    @Option(names = "--fail-nth", paramLabel = "N", hidden = true,
        description = "Fault injection: fail the Nth registration (soft provider; default: ${DEFAULT-VALUE}).")
    int failNth;

    @Option(names = "--registration-latency", paramLabel = "MICROS", hidden = true,
        description = "Fault injection: add this many microseconds to every registration (soft provider; " +
            "default: ${DEFAULT-VALUE}).")
    long registrationLatencyMicros;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /**
     * The defaults {@code --help} prints: {@link DaemonContext}'s own, so that help and daemon cannot disagree.
     * Picocli also stores them into the fields of options not given; {@link #context} passes on only the
     * options that were given, which is what lets an {@code MRD_*} variable fill the others.
     */
    static final class Defaults implements CommandLine.IDefaultValueProvider
    {
        public String defaultValue(final CommandLine.Model.ArgSpec argument)
        {
            if (!(argument instanceof CommandLine.Model.OptionSpec option))
            {
                return null;
            }
            return switch (option.longestName())
            {
                case "--base-virtaddr" -> Sizes.hex(DaemonContext.DEFAULT_BASE_VIRTADDR);
                case "--max-memory" -> Sizes.format(DaemonContext.DEFAULT_MAX_MEMORY);
                case "--list-size" -> Sizes.format(DaemonContext.DEFAULT_LIST_SIZE);
                case "--max-external" -> Sizes.format(DaemonContext.DEFAULT_MAX_EXTERNAL);
                case "--max-mrs" -> Integer.toString(DaemonContext.DEFAULT_MAX_MRS);
                case "--cache-capacity" -> Integer.toString(DaemonContext.DEFAULT_CACHE_CAPACITY);
                case "--max-clients" -> Integer.toString(DaemonContext.DEFAULT_MAX_CLIENTS);
                case "--worker-threads" -> Integer.toString(DaemonContext.DEFAULT_WORKER_THREADS);
                case "--populate-threads" -> Integer.toString(DaemonContext.DEFAULT_POPULATE_THREADS);
                case "--heartbeat-interval" -> Integer.toString(Heartbeat.DEFAULT_INTERVAL_MS);
                case "--provider" -> ProviderConfig.SOFT;
                case "--max-pinned" -> Long.toString(DaemonContext.DEFAULT_MAX_PINNED);
                case "--mr-ext-memseg" -> Boolean.toString(DaemonContext.DEFAULT_MR_EXT_MEMSEG);
                case "--journal-size" -> Sizes.format(DaemonContext.DEFAULT_JOURNAL_SIZE);
                case "--fail-nth" -> Integer.toString(DaemonContext.DEFAULT_FAIL_NTH);
                case "--registration-latency" -> Long.toString(DaemonContext.DEFAULT_REGISTRATION_LATENCY_NANOS / 1000);
                default -> null;
            };
        }
    }

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
        return foreground ? runForeground(context) : startBackground(context);
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
        final CommandLine.ParseResult given = spec.commandLine().getParseResult();
        final DaemonContext context = new DaemonContext();
        if (null != dirOption.dir)
        {
            context.dir(dirOption.dir);
        }
        if (null != hugeDir)
        {
            context.hugeDir(hugeDir);
        }
        if (given.hasMatchedOption("--base-virtaddr"))
        {
            context.baseVirtaddr(baseVirtaddr);
        }
        if (given.hasMatchedOption("--max-memory"))
        {
            context.maxMemory(maxMemory);
        }
        if (given.hasMatchedOption("--list-size"))
        {
            context.listSize(listSize);
        }
        if (given.hasMatchedOption("--max-external"))
        {
            context.maxExternal(maxExternal);
        }
        if (given.hasMatchedOption("--max-mrs"))
        {
            context.maxMrs(maxMrs);
        }
        if (given.hasMatchedOption("--cache-capacity"))
        {
            context.cacheCapacity(cacheCapacity);
        }
        if (given.hasMatchedOption("--max-clients"))
        {
            context.maxClients(maxClients);
        }
        if (given.hasMatchedOption("--worker-threads"))
        {
            context.workerThreads(workerThreads);
        }
        if (given.hasMatchedOption("--populate-threads"))
        {
            context.populateThreads(populateThreads);
        }
        if (given.hasMatchedOption("--heartbeat-interval"))
        {
            context.heartbeatIntervalMs(heartbeatIntervalMs);
        }
        if (given.hasMatchedOption("--provider"))
        {
            context.provider(provider);
        }
        if (null != device)
        {
            context.device(device);
        }
        if (given.hasMatchedOption("--max-pinned"))
        {
            context.maxPinned(maxPinned);
        }
        if (given.hasMatchedOption("--mr-ext-memseg"))
        {
            context.mrExtMemseg(mrExtMemseg);
        }
        allowGids.forEach(context::allowGid);
        if (null != metrics)
        {
            context.metrics(metrics);
        }
        if (given.hasMatchedOption("--journal-size"))
        {
            context.journalSize(journalSize);
        }
        if (given.hasMatchedOption("--fail-nth"))
        {
            context.failNth(failNth);
        }
        if (given.hasMatchedOption("--registration-latency"))
        {
            context.registrationLatencyNanos(DaemonSetting.microsToNanos(registrationLatencyMicros));
        }
        return context.applyEnvironment(env).conclude();
    }

    private int runForeground(final DaemonContext context)
    {
        final MrdDaemon daemon = MrdDaemon.launch(context);
        Runtime.getRuntime().addShutdownHook(new Thread(daemon::close, "mrd-shutdown"));
        // SIGTERM and SIGINT are the graceful stop, not a failure: exit 0 (the JVM's default is 128 + signal,
        // which supervisors such as systemd report as a failed unit). The shutdown hook does the work.
        for (final String signal : new String[] {"TERM", "INT"})
        {
            sun.misc.Signal.handle(new sun.misc.Signal(signal), ignored -> System.exit(0));
        }
        spec.commandLine().getOut().println("mrd started: pid " + ProcessHandle.current().pid() + ", dir " +
            context.dir());
        spec.commandLine().getOut().flush();
        daemon.awaitClosed();
        return 0;
    }

    private int startBackground(final DaemonContext context)
    {
        final RunDirectory runDirectory = new RunDirectory(context.dir()).ensureExists();
        if (RunDirectoryReader.isLocked(runDirectory.dir()))
        {
            throw new MrdException(ErrorCode.EBUSY, "a daemon is already running in " + context.dir() +
                RunDirectoryReader.readSummary(runDirectory.dir()).map(s -> " (pid " + s.pid() + ")").orElse("") +
                ": stop it with 'mrd stop --dir " + context.dir() + "' or choose another --dir");
        }
        final Process process = spawn(runDirectory, context);
        final long deadline = System.currentTimeMillis() + READY_TIMEOUT_MS;
        while (true)
        {
            if (!process.isAlive())
            {
                throw startFailure(process.exitValue(), lastError(runDirectory.logFile()));
            }
            if (isReady(runDirectory, process.pid()))
            {
                spec.commandLine().getOut().println("mrd started: pid " + process.pid() + ", dir " + context.dir() +
                    ", log " + runDirectory.logFile());
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
    private Process spawn(final RunDirectory runDirectory, final DaemonContext context)
    {
        final List<String> args = new ArrayList<>(spec.root().commandLine().getParseResult().originalArgs());
        args.addAll(List.of("--foreground", "--dir", context.dir().toString()));
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
