package io.mrd.cli;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.DaemonEventListener;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Stream;

/**
 * {@code mrd demo}: the README's main job. Runs the whole system once in a temporary directory and tears it
 * down: a daemon, two worker processes (one freeing memory as it goes, so the other's caches flush), the
 * address map and the counters.
 */
@Command(
    name = "demo",
    mixinStandardHelpOptions = true,
    description = {
        "Run mrd end to end in a temporary directory.",
        "Starts a daemon, runs two 'mrd worker' processes at once (the second frees and re-allocates memory as " +
            "it goes, so the first one's local caches flush on devGen), prints their summaries, 'mrd dump --map' " +
            "and 'mrd stat', stops the daemon and removes the directory. Exit 0 when every step worked; otherwise " +
            "1 with the step that failed and why.",
        "Then, when an RDMA device library is there (MRD_IBVERBS_LIBRARY, else the emulated device " +
            "emulator/target/libmrdemu.so, which scripts/mrd demo builds), a daemon with --provider ibverbs and " +
            "'mrd worker --rdma-peer' processes that RDMA-write into each other's buffers with mrd's keys; on a host " +
            "without an RDMA NIC this runs on the emulated device, offering two devices (--device all: every MR has " +
            "keys on both) with a pair of workers on each. That step fails unless data moved, no byte was wrong, no " +
            "live key was refused and every stale key was; without gcc or the verbs header it is skipped with one " +
            "line saying why. Last, a daemon on one device is killed with -9 and a successor adopts its MRs."
    },
    footer = {"", "Example:", "  scripts/mrd demo"})
public final class DemoCommand implements Callable<Integer>
{
    private static final int STEPS = 8;
    /** What the demo's registrations pin at most: its own 16 MiB and the two workers' 128 + 64 MiB. */
    private static final long DEMO_PINNED_BYTES = 208L << 20;
    /** How long the two RDMA workers move data. */
    private static final long RDMA_SECONDS = 3;
    private static final long WORKER_TIMEOUT_S = 120;
    /** Time the workers get to start, attach and warm up before their timed lookups begin together. */
    private static final long START_DELAY_MS = 5_000;

    /** Most --lookups: the demo then runs for about an hour on one core. */
    static final long MAX_LOOKUPS = 1_000_000_000L;

    @Option(names = "--lookups", paramLabel = "L", defaultValue = "3000000",
        description = "Scale of the workers' runs: 'steady' does 4L lookups, 'freeing' 2L; 1 to " + MAX_LOOKUPS +
            " (default: ${DEFAULT-VALUE}).")
    long lookups;

    @Option(names = "--keep", description = "Keep the daemon's directory (the log is in it) instead of removing it.")
    boolean keep;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    private PrintWriter out;
    private int step;

    public Integer call() throws IOException, InterruptedException
    {
        if (lookups < 1 || lookups > MAX_LOOKUPS)
        {
            // Checked before anything starts: a wrong value must not leave a daemon and a directory behind.
            throw new CommandLine.ParameterException(spec.commandLine(), "--lookups " + lookups +
                " must be between 1 and " + MAX_LOOKUPS);
        }
        requireMemlockForTheDemo();
        out = spec.commandLine().getOut();
        final long started = System.nanoTime();
        final Path dir = Files.createTempDirectory("mrd-demo-");
        boolean daemonStarted = false;
        try
        {
            progress("starting a daemon in " + dir);
            run("start", "--dir", dir.toString(), "--max-memory", "1GiB", "--list-size", "256MiB");
            daemonStarted = true;

            try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name("demo")))
            {
                // Memory the demo itself holds, so the map below shows allocated and registered segments even
                // after the workers have exited (their memory is reclaimed when they disconnect).
                final MemorySegment held = client.allocate(16L << 20);
                final MrCache cache = client.newCache();
                final int lkey = cache.lkey(held.address(), 4096);
                out.printf("      the demo itself allocated 16MiB at 0x%x: lkey 0x%x%n", held.address(), lkey);

                progress("running two workers at once: 'steady' looks up, 'freeing' also frees and re-allocates");
                // Both start their timed lookups at the same moment, a few seconds from now (JVM start, attach and
                // warm-up come first); 'freeing' frees a part every 1/40 of its lookups, so its frees fall inside
                // 'steady''s run and steady's caches see devGen move.
                final String startAt = Long.toString(System.currentTimeMillis() + START_DELAY_MS);
                final List<Worker> workers = List.of(
                    Worker.start(dir, "steady", List.of("--alloc", "128MiB", "--buffers", "2048",
                        "--lookups", Long.toString(4 * lookups), "--threads", "2", "--start-at", startAt)),
                    Worker.start(dir, "freeing", List.of("--alloc", "64MiB", "--buffers", "1024",
                        "--lookups", Long.toString(2 * lookups), "--free-every", Long.toString(Math.max(1, lookups / 20)),
                        "--start-at", startAt)));
                final List<JsonNode> results = new ArrayList<>();
                for (final Worker worker : workers)
                {
                    results.add(worker.await());
                }

                progress("worker summaries");
                out.printf("      %-8s %12s %12s %10s %12s %12s %8s %7s%n",
                    "worker", "lookups", "ns/lookup", "creates", "globalHits", "localHits", "flushes", "errors");
                for (int i = 0; i < workers.size(); i++)
                {
                    final JsonNode r = results.get(i);
                    out.printf("      %-8s %12d %12.1f %10d %12d %12d %8d %7d%n", workers.get(i).name,
                        r.path("lookups").asLong(), r.path("nsPerLookup").asDouble(), r.path("createRequests").asLong(),
                        r.path("globalHits").asLong(), r.path("localHits").asLong(), r.path("flushes").asLong(),
                        r.path("errors").asLong());
                    if (r.path("errors").asLong() != 0)
                    {
                        throw new MrdException(ErrorCode.EIO, "worker " + workers.get(i).name + " reported " +
                            r.path("errors").asLong() + " errors (its stderr: " + workers.get(i).log + ")");
                    }
                }
                if (results.get(0).path("flushes").asLong() == 0)
                {
                    out.println("      note: 'freeing' freed nothing while 'steady' ran (one of them started late on a " +
                        "busy machine), so steady's caches did not flush this time");
                }

                progress("mrd dump --map (the demo's own 16MiB is still allocated and registered)");
                run("dump", "--dir", dir.toString(), "--map");

                progress("mrd stat");
                run("stat", "--dir", dir.toString());
            }
            rdmaStep();
        }
        catch (final MrdException ex)
        {
            out.flush();
            throw new MrdException(ex.code(), "step " + step + " failed: " + ex.getMessage(), ex);
        }
        finally
        {
            if (daemonStarted)
            {
                progress("stopping the daemon" + (keep ? "" : " and removing " + dir));
                Mrd.execute("stop", "--dir", dir.toString());
            }
            if (!keep)
            {
                deleteTree(dir);
            }
        }
        out.printf("demo: done in %.1f s%n", (System.nanoTime() - started) / 1e9);
        return 0;
    }

    /**
     * Pairs of workers RDMA-write into each other's buffers, on a daemon of their own with {@code --provider
     * ibverbs} on the device library found: with the emulated device, on two of its devices (a pair on each);
     * with another library, on its first device. Skipped, saying why, without one.
     */
    private void rdmaStep() throws IOException, InterruptedException
    {
        final String given = System.getenv("MRD_IBVERBS_LIBRARY");
        final Path emulator = Path.of(System.getenv().getOrDefault("MRD_HOME", "."), "emulator/target/libmrdemu.so");
        final String library = null != given && !given.isBlank() ? given : Files.isRegularFile(emulator) ?
            emulator.toString() : null;
        if (null == library)
        {
            final String why = System.getenv("MRD_EMULATOR_UNAVAILABLE");
            progress("RDMA between two workers: skipped, no device library (MRD_IBVERBS_LIBRARY is unset and " +
                emulator + " is not built: " + (null != why && !why.isBlank() ? why :
                "scripts/mrd emulator builds it") + ")");
            progress("the daemon killed and adopted: skipped, as the RDMA step (adoption keeps a device's MRs)");
            return;
        }
        // The emulated device offers two devices here, so that every MR has keys on both and each pair of
        // workers runs on its own; a real library's host has the devices it has, and the pairs use the first.
        final boolean emulated = library.equals(emulator.toString());
        final int devices = emulated ? 2 : 1;
        progress((2 * devices) + " workers RDMA-write into each other's buffers, " + (devices == 1 ?
            "on the first device" : "a pair on each of " + devices + " devices") + " (" + library + ")");
        final Path rdmaDir = Files.createTempDirectory("mrd-demo-rdma-");
        final Map<String, String> env = emulated ? Map.of("MRD_IBVERBS_LIBRARY", library, "MRDEMU_DEVICES", "2") :
            Map.of("MRD_IBVERBS_LIBRARY", library);
        boolean started = false;
        try
        {
            startIbverbsDaemon(rdmaDir, env, emulated ? List.of("--device", "all") : List.of(), "start.log",
                "'mrd start --provider ibverbs' failed");
            started = true;
            final Path exchange = Files.createDirectories(rdmaDir.resolve("exchange"));
            final List<Worker> workers = new ArrayList<>();
            final String[][] pairs = {{"rdma-a", "rdma-b", "0"}, {"rdma-b", "rdma-a", "0"}, {"rdma-c", "rdma-d", "1"},
                {"rdma-d", "rdma-c", "1"}};
            for (final String[] pair : List.of(pairs).subList(0, 2 * devices))
            {
                workers.add(Worker.start(rdmaDir, pair[0], List.of("--alloc", "2MiB", "--rdma-peer", pair[1],
                    "--rdma-device", pair[2], "--rdma-seconds", Long.toString(RDMA_SECONDS), "--rdma-exchange",
                    exchange.toString()), env));
            }
            out.printf("      %-8s %-8s %10s %14s %10s %16s %17s %16s%n", "worker", "device", "rdmaOps",
                "bytesVerified", "wrongBytes", "protectionErrors", "staleKeyRefusals", "unboundTransfers");
            for (final Worker worker : workers)
            {
                final JsonNode r = worker.await();
                out.printf("      %-8s %-8s %10d %14d %10d %16d %11d of %-3d %16d%n", worker.name,
                    r.path("device").asText(), r.path("rdmaOps").asLong(), r.path("bytesVerified").asLong(), r.path("wrongBytes").asLong(),
                    r.path("protectionErrors").asLong(), r.path("staleKeyRefusals").asLong(),
                    r.path("staleKeyRequests").asLong(), r.path("unboundTransfers").asLong());
                requireCorrectRdma(worker.name, r);
            }
        }
        finally
        {
            if (started)
            {
                Mrd.execute("stop", "--dir", rdmaDir.toString());
            }
            if (!keep)
            {
                deleteTree(rdmaDir);
            }
        }
        adoptionStep(library);
    }

    /**
     * {@code mrd start --provider ibverbs} in {@code dir} with {@code deviceArgs}, its output in {@code logName}.
     *
     * @throws MrdException EIO saying {@code failure} and the output when it does not start.
     */
    private static void startIbverbsDaemon(final Path dir, final Map<String, String> env,
        final List<String> deviceArgs, final String logName, final String failure)
        throws IOException, InterruptedException
    {
        final List<String> args = new ArrayList<>(List.of("start", "--dir", dir.toString(), "--provider", "ibverbs",
            "--max-memory", "256MiB", "--list-size", "128MiB"));
        args.addAll(deviceArgs);
        final ProcessBuilder daemon = new ProcessBuilder(MrdLauncher.command(false, args))
            .redirectErrorStream(true).redirectOutput(dir.resolve(logName).toFile());
        daemon.environment().putAll(env);
        final Process start = daemon.start();
        if (!start.waitFor(WORKER_TIMEOUT_S, TimeUnit.SECONDS) || start.exitValue() != 0)
        {
            start.destroyForcibly();
            throw new MrdException(ErrorCode.EIO, failure + ": " + String.join(" ",
                Files.readAllLines(dir.resolve(logName))));
        }
    }

    /**
     * The daemon killed with -9 under a client that rides through the gap, and a successor started in its
     * directory: the client's key stays the same through it, and the successor registered nothing again.
     */
    private void adoptionStep(final String library) throws IOException, InterruptedException
    {
        // A daemon of its own, on one device: a daemon of several devices is not adopted (docs/multi-device.md).
        progress("a daemon on one device killed with -9 and a successor adopting its MRs (docs/adoption.md)");
        final Path rdmaDir = Files.createTempDirectory("mrd-demo-adopt-");
        final Map<String, String> env = Map.of("MRD_IBVERBS_LIBRARY", library);
        startIbverbsDaemon(rdmaDir, env, List.of(), "start.log", "'mrd start --provider ibverbs' failed");
        try
        {
            adoptAfterAKill(rdmaDir, library, env);
        }
        finally
        {
            Mrd.execute("stop", "--dir", rdmaDir.toString());
            if (!keep)
            {
                deleteTree(rdmaDir);
            }
        }
    }

    private void adoptAfterAKill(final Path rdmaDir, final String library, final Map<String, String> env)
        throws IOException, InterruptedException
    {
        final CompletableFuture<Long> adopted = new CompletableFuture<>();
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(rdmaDir).name("demo-gap")
            .ibverbsLibrary(library).adoptionWaitMs(WORKER_TIMEOUT_S * 1000).daemonEventListener(
                new DaemonEventListener()
                {
                    public void onDaemonLost(final DaemonDeadException reason, final long atMs)
                    {
                        adopted.completeExceptionally(reason);
                    }

                    public void onDaemonAdopted(final long epoch, final long gapMs)
                    {
                        adopted.complete(gapMs);
                    }
                })))
        {
            final MemorySegment held = client.allocate(8L << 20);
            final MrCache cache = client.newCache();
            final int lkey = cache.lkey(held.address(), 4096);
            final long pid = client.controlFile().header().pid();
            awaitHolder(rdmaDir);
            ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
            out.printf("      killed daemon pid %d; in the gap the client's lkey for 0x%x is still 0x%x%n", pid,
                held.address(), lookupInGap(cache, held, pid));
            startIbverbsDaemon(rdmaDir, env, List.of(), "successor.log", "the successor did not start");
            final long gapMs;
            try
            {
                gapMs = adopted.get(WORKER_TIMEOUT_S, TimeUnit.SECONDS);
            }
            catch (final ExecutionException | TimeoutException ex)
            {
                throw new MrdException(ErrorCode.EIO, "the client did not resume with the successor: " + ex);
            }
            final int after = cache.lkey(held.address(), 4096);
            out.printf("      successor pid %d adopted epoch 0x%x: the client resumed after %d ms as client %d, " +
                "lkey 0x%x (%s)%n", client.controlFile().header().pid(), client.controlFile().header().adoptedEpoch(),
                gapMs, client.clientId(), after, after == lkey ? "the same" : "CHANGED");
            if (after != lkey)
            {
                throw new MrdException(ErrorCode.EIO, "the lkey changed through the adoption: 0x" +
                    Integer.toHexString(lkey) + " then 0x" + Integer.toHexString(after));
            }
        }
        final String log = Files.readString(rdmaDir.resolve("mrd.log"));
        log.lines().filter(line -> line.contains("adopted epoch")).findFirst()
            .ifPresent(line -> out.println("      " + line.substring(line.indexOf("mrd ready"))));
    }

    /** The holder starts beside the daemon; a kill before it holds anything leaves nothing to adopt. */
    private static void awaitHolder(final Path dir) throws IOException, InterruptedException
    {
        final Path log = dir.resolve(RunDirectoryPath.HOLD_LOG_FILE);
        final long deadline = System.currentTimeMillis() + WORKER_TIMEOUT_S * 1000;
        while (!(Files.exists(log) && Files.readString(log).contains("holding")))
        {
            if (System.currentTimeMillis() > deadline)
            {
                throw new MrdException(ErrorCode.ETIMEDOUT, "the daemon's descriptor holder did not start: see " + log);
            }
            Thread.sleep(20);
        }
    }

    /** A lookup once the client has noticed the death: the gap, not the loss. */
    private static int lookupInGap(final MrCache cache, final MemorySegment held, final long pid)
        throws InterruptedException
    {
        while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false))
        {
            Thread.sleep(10);
        }
        return cache.lkey(held.address(), 4096);
    }

    /**
     * The RDMA step proves mrd's keys only if data moved, every byte arrived right, no live key was refused, every
     * stale key was, and the device never had to refuse a transfer to memory mrd had freed (unboundTransfers; -1, a
     * device that cannot say, passes): anything else fails the demo.
     */
    private static void requireCorrectRdma(final String worker, final JsonNode r)
    {
        final long ops = r.path("rdmaOps").asLong();
        final long wrong = r.path("wrongBytes").asLong();
        final long protection = r.path("protectionErrors").asLong();
        final long staleRequests = r.path("staleKeyRequests").asLong();
        final long staleRefusals = r.path("staleKeyRefusals").asLong();
        final long unbound = r.path("unboundTransfers").asLong();
        if (0 == ops || 0 != wrong || 0 != protection || staleRefusals != staleRequests || unbound > 0)
        {
            throw new MrdException(ErrorCode.EIO, "RDMA worker " + worker + ": " + ops + " operations, " + wrong +
                " wrong bytes, " + protection + " protection errors on live keys, " + staleRefusals + " of " +
                staleRequests + " stale keys refused, " + unbound + " unbound transfers (expected > 0, 0, 0, all, 0)");
        }
    }

    /**
     * The soft provider pins what it registers, and the kernel counts that against RLIMIT_MEMLOCK (8 MiB for an
     * ordinary user on Debian) unless the daemon is root: the demo's registrations (its own 16 MiB and the
     * workers' 192 MiB) would fail at step 1, so a too small limit is said before anything starts.
     */
    private static void requireMemlockForTheDemo()
    {
        final long limit = Posix.memlockLimit();
        if (0 != Posix.getuid() && Posix.RLIM_INFINITY != limit && limit < DEMO_PINNED_BYTES)
        {
            throw new MrdException(ErrorCode.ENOMEM, "the demo pins up to " + Sizes.format(DEMO_PINNED_BYTES) +
                " with --provider soft, and RLIMIT_MEMLOCK is " + Sizes.format(limit) + " for this user: run " +
                "'ulimit -l unlimited' first (root raises the hard limit: memlock in /etc/security/limits.conf), or run " +
                "it as root");
        }
    }

    private void progress(final String what)
    {
        step++;
        out.printf("demo: [%d/%d] %s%n", step, STEPS, what);
        out.flush();
    }

    private void run(final String... args)
    {
        out.flush();
        final int exit = Mrd.commandLine().setOut(out).setErr(spec.commandLine().getErr()).execute(args);
        if (exit != 0)
        {
            throw new MrdException(ErrorCode.EIO, "'mrd " + String.join(" ", args) + "' exited with " + exit);
        }
    }

    private static void deleteTree(final Path dir) throws IOException
    {
        if (Files.exists(dir))
        {
            try (Stream<Path> paths = Files.walk(dir))
            {
                for (final Path path : paths.sorted(Comparator.reverseOrder()).toList())
                {
                    Files.deleteIfExists(path);
                }
            }
        }
    }

    /**
     * One {@code mrd worker} process, its stdout (the JSON line) and stderr kept in files.
     */
    private static final class Worker
    {
        private final String name;
        private final Process process;
        private final Path output;
        private final Path log;

        private Worker(final String name, final Process process, final Path output, final Path log)
        {
            this.name = name;
            this.process = process;
            this.output = output;
            this.log = log;
        }

        static Worker start(final Path dir, final String name, final List<String> options) throws IOException
        {
            return start(dir, name, options, Map.of());
        }

        static Worker start(final Path dir, final String name, final List<String> options, final Map<String, String> env)
            throws IOException
        {
            final List<String> args = new ArrayList<>(List.of("worker", "--dir", dir.toString(), "--name", name));
            args.addAll(options);
            final Path output = dir.resolve("worker-" + name + ".json");
            final Path log = dir.resolve("worker-" + name + ".log");
            final ProcessBuilder builder = new ProcessBuilder(MrdLauncher.command(false, args))
                .redirectOutput(output.toFile())
                .redirectError(log.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
            builder.environment().putAll(env);
            final Process process = builder.start();
            return new Worker(name, process, output, log);
        }

        JsonNode await() throws InterruptedException, IOException
        {
            if (!process.waitFor(WORKER_TIMEOUT_S, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                throw new MrdException(ErrorCode.ETIMEDOUT, "worker " + name + " did not finish within " +
                    WORKER_TIMEOUT_S + " s");
            }
            final List<String> lines = Files.readAllLines(output);
            if (process.exitValue() != 0 || lines.isEmpty())
            {
                final List<String> errors = Files.readAllLines(log);
                throw new MrdException(ErrorCode.EIO, "worker " + name + " exited with " + process.exitValue() + ": " +
                    (errors.isEmpty() ? "no output" : errors.getLast()));
            }
            return new ObjectMapper().readTree(lines.getLast());
        }
    }
}
