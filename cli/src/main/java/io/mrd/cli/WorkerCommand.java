package io.mrd.cli;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mrd.cli.rdma.RdmaExchange;
import io.mrd.layout.ClientDescriptor;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * {@code mrd worker}: a secondary JVM worker that allocates memory from the daemon, looks up the lkeys of
 * random buffers in it from several threads (each with its own {@link MrCache}), optionally frees and
 * re-allocates parts of it while they do, checks a sample of the answers against the global cache, and prints
 * one JSON line of results.
 */
@Command(
    name = "worker",
    mixinStandardHelpOptions = true,
    description = {
        "Run a secondary worker against a running daemon.",
        "Attaches, allocates SIZE as 8 parts, then looks up the lkeys of random buffers in them from T threads, " +
            "each with its own per-queue cache. With --free-every K, thread 0 frees one part and allocates it " +
            "again every K of its lookups (its buffers move), so every thread's cache flushes on the daemon's " +
            "devGen. One lookup in every 1024 is checked against the global cache in the control file; a mismatch " +
            "or a failed lookup is an error (the first few are printed).",
        "Progress goes to stderr; the last line on stdout is one JSON object with lookups, nsPerLookup (per " +
            "thread), createRequests, globalHits, localHits (topHits + bottomHits, warm-up included; topHits " +
            "includes mruHits, which the cache does not count: derived from the calls made), flushes, errors, " +
            "frees, threads, seconds, ... Exit status 0 when errors is 0, else 1; 2 for a wrong option, found before it attaches."
    },
    footer = {
        "",
        "Examples:",
        "  mrd worker --dir /tmp/mrd --alloc 256MiB --buffers 4096 --lookups 5000000",
        "  mrd worker --dir /tmp/mrd --alloc 64MiB --buffers 1024 --lookups 2000000 \\",
        "             --threads 2 --free-every 100000",
        "  mrd worker --dir /tmp/mrd --name a --rdma-peer b --alloc 2MiB &  mrd worker --dir /tmp/mrd --name b \\",
        "             --rdma-peer a --alloc 2MiB"
    })
public final class WorkerCommand implements Callable<Integer>
{
    /** Parts the allocation is split into, so that one can be freed while the others stay. */
    static final int PARTS = 8;
    /** Smallest buffer. */
    static final long MIN_BUFFER_LENGTH = 64;
    /** Allocation granularity of the daemon: parts are whole segments. */
    static final long SEGMENT = 2 * Sizes.MIB;
    /** Most --alloc: far more than a daemon hands out, far from overflowing the arithmetic of parts. */
    static final long MAX_ALLOC = 64 * Sizes.TIB;
    /** Most --threads: each is a platform thread with a cache of its own. */
    static final int MAX_THREADS = 1024;
    /** Furthest in the future --start-at may be: a wait longer than this is a mistake of unit, not a plan. */
    static final long MAX_START_DELAY_MS = 3_600_000;
    /** Longest --rdma-seconds: an hour. */
    static final long MAX_RDMA_SECONDS = 3_600;

    @Mixin
    DirOption dirOption;

    @Option(names = "--alloc", paramLabel = "SIZE", required = true, converter = SizeConverter.class,
        description = "Memory to allocate, e.g. 256MiB: 8 parts of SIZE/8 rounded up to 2MiB.")
    long alloc;

    @Option(names = "--buffers", paramLabel = "N", defaultValue = "4096",
        description = "Buffers spread over the parts, each (part size)/(N/8) bytes, at least 64 " +
            "(default: ${DEFAULT-VALUE}).")
    int buffers;

    @Option(names = "--lookups", paramLabel = "L", defaultValue = "1000000",
        description = "Lookups in total, shared by the threads (default: ${DEFAULT-VALUE}).")
    long lookups;

    @Option(names = "--threads", paramLabel = "T", defaultValue = "1",
        description = "Threads, each with its own cache, 1 to " + MAX_THREADS + " (default: ${DEFAULT-VALUE}).")
    int threads;

    @Option(names = "--free-every", paramLabel = "K", defaultValue = "0",
        description = "Thread 0 frees and re-allocates one part every K of its lookups (default: 0 = never).")
    long freeEvery;

    @Option(names = "--verify-every", paramLabel = "V", defaultValue = "1024",
        description = "Check one lkey in every V against the global cache (default: ${DEFAULT-VALUE}).")
    int verifyEvery;

    @Option(names = "--warmup", paramLabel = "W", defaultValue = "500000",
        description = "Lookups each thread does before the clock starts, so the JIT has compiled the path; " +
            "not in 'lookups', but in the cache counters (default: ${DEFAULT-VALUE}).")
    long warmup;

    @Option(names = "--start-at", paramLabel = "EPOCH_MS", defaultValue = "0",
        description = "After the warm-up, wait until this wall-clock time (ms since the epoch) before the timed " +
            "lookups, so that several workers run them at the same time; at most an hour ahead (default: 0 = do not " +
            "wait).")
    long startAt;

    @Option(names = "--name", paramLabel = "NAME",
        description = "This client's name in the daemon, at most 32 bytes (default: worker-<pid>).")
    String name;

    @Option(names = "--seed", paramLabel = "S", description = "Seed of the random buffer choice (default: random).")
    Long seed;

    @Option(names = "--rdma-peer", paramLabel = "NAME",
        description = "Instead of lookups, move data with the worker named NAME (its --name) for --rdma-seconds: " +
            "RDMA WRITE, SEND and RDMA READ into each other's memory over the daemon's device (mrd start " +
            "--provider ibverbs; without an RDMA NIC, MRD_IBVERBS_LIBRARY pointing at the emulated device for the " +
            "daemon and both workers), every byte checked at its target, and requests posted on purpose with the " +
            "keys of memory just freed. Needs --name. The JSON line has rdmaOps, bytesVerified, wrongBytes, " +
            "protectionErrors, staleKeyRequests, staleKeyRefusals and unboundTransfers (transfers the emulated " +
            "device refused because an MR's page had been freed: a key of freed memory; -1 on a real device).")
    String rdmaPeer;

    @Option(names = "--rdma-device", paramLabel = "N", defaultValue = "0",
        description = "The daemon's device --rdma-peer moves data on: its number, the place in mrd start " +
            "--device (default: ${DEFAULT-VALUE}); the queue pair and every key it posts are that device's. Both " +
            "workers name the same device.")
    int rdmaDevice;

    @Option(names = "--rdma-seconds", paramLabel = "S", defaultValue = "5",
        description = "How long --rdma-peer moves data (default: ${DEFAULT-VALUE}).")
    long rdmaSeconds;

    @Option(names = "--rdma-exchange", paramLabel = "DIR", converter = PathConverter.class,
        description = "Directory where the two workers of --rdma-peer trade queue pair numbers, addresses and rkeys " +
            "(default: mrd-rdma-<daemon epoch> in the temporary directory).")
    Path rdmaExchange;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call() throws JsonProcessingException
    {
        if (null != rdmaPeer)
        {
            return rdma();
        }
        final WorkerRunner.Plan plan = plan();
        final PrintWriter err = spec.commandLine().getErr();
        final Path dir = dirOption.resolve();
        final long runSeed = null != seed ? seed : System.nanoTime();
        final ClientContext context = new ClientContext().dir(dir)
            .name(null != name ? name : "worker-" + ProcessHandle.current().pid());

        try (MrdClient client = MrdClient.attach(context);
            ControlFile verifierFile = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
        {
            final WorkerRunner.Part[] parts = new WorkerRunner.Part[PARTS];
            for (int i = 0; i < PARTS; i++)
            {
                parts[i] = new WorkerRunner.Part(client.allocate(plan.partLength()));
                parts[i].touch();
            }
            err.printf("mrd worker: client %d of daemon pid %d in %s: %d parts of %s at %s.., %d buffers of %d bytes, " +
                "%d threads, %d lookups after %d warm-up lookups per thread%s%n", client.clientId(), client.daemonPid(),
                dir, PARTS, Sizes.format(plan.partLength()), Sizes.hex(parts[0].address), buffers,
                plan.bufferLength(), threads, lookups, warmup, freeEvery > 0 ? ", free every " + freeEvery : "");
            err.flush();

            final WorkerRunner.Shared shared = new WorkerRunner.Shared(err);
            final WorkerRunner[] runners = new WorkerRunner[threads];
            final Thread[] workers = new Thread[threads];
            for (int t = 0; t < threads; t++)
            {
                final long quota = lookups / threads + (t < lookups % threads ? 1 : 0);
                runners[t] = new WorkerRunner(t, quota, client, plan, parts, new GlobalCacheReader(verifierFile),
                    new SplittableRandom(runSeed + t), shared);
                workers[t] = new Thread(runners[t], "mrd-worker-" + t);
            }
            for (final Thread worker : workers)
            {
                worker.start();
            }
            awaitAll(workers, runners, shared, err);
            long timedStart = Long.MAX_VALUE;
            long end = Long.MIN_VALUE;
            for (final WorkerRunner runner : runners)
            {
                timedStart = Math.min(timedStart, runner.timedStartNs);
                end = Math.max(end, runner.endNs);
            }
            final long elapsed = Math.max(0, end - timedStart);

            final Map<String, Object> result = summarize(runners, elapsed, plan, client);
            for (final WorkerRunner.Part part : parts)
            {
                freeQuietly(client, part, err);
            }
            err.printf("mrd worker: done: %d lookups in %.2f s, %s ns per lookup per thread, %d errors%n",
                result.get("lookups"), elapsed / 1e9, result.get("nsPerLookup"), result.get("errors"));
            err.flush();
            final PrintWriter out = spec.commandLine().getOut();
            out.println(new ObjectMapper().writeValueAsString(result));
            out.flush();
            return ((Long)result.get("errors")) == 0 ? 0 : Mrd.EXIT_FAILURE;
        }
    }

    /**
     * {@code --rdma-peer}: one side of an {@link RdmaExchange}, its counts as the JSON line.
     */
    private int rdma() throws JsonProcessingException
    {
        if (null == name)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--rdma-peer " + rdmaPeer + " needs --name: the peer finds this worker by it");
        }
        requireName("--name", name);
        requireName("--rdma-peer", rdmaPeer);
        if (rdmaPeer.equals(name))
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--rdma-peer '" + rdmaPeer +
                "' is this worker's own --name: name the other worker");
        }
        requireRange("--rdma-seconds", rdmaSeconds, 1, MAX_RDMA_SECONDS, Long.toString(MAX_RDMA_SECONDS));
        final PrintWriter err = spec.commandLine().getErr();
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dirOption.resolve()).name(name)))
        {
            final Path exchangeDir = null != rdmaExchange ? rdmaExchange :
                Path.of(System.getProperty("java.io.tmpdir"), "mrd-rdma-" + Long.toHexString(client.epoch()));
            final RdmaExchange exchange = new RdmaExchange(client, name, err, rdmaDevice);
            try
            {
                Files.createDirectories(exchangeDir);
                exchange.connect(exchangeDir, rdmaPeer);
            }
            catch (final IOException ex)
            {
                throw new MrdException(ErrorCode.EIO, "cannot trade cards with " + rdmaPeer + " in " + exchangeDir +
                    ": " + ex.getMessage());
            }
            exchange.run(TimeUnit.SECONDS.toNanos(rdmaSeconds));
            final RdmaExchange.Result r = exchange.result();
            final Map<String, Object> result = new LinkedHashMap<>();
            result.put("name", name);
            result.put("peer", rdmaPeer);
            result.put("device", client.deviceName(rdmaDevice));
            result.put("rdmaOps", r.wrs());
            result.put("bytesVerified", r.bytesVerified());
            result.put("wrongBytes", r.wrongBytes());
            result.put("protectionErrors", r.protectionErrors());
            result.put("otherErrors", r.otherErrors());
            result.put("staleKeyRequests", r.staleKeyRequests());
            result.put("staleKeyRefusals", r.staleKeyRefusals());
            result.put("stagingRotations", r.rotations());
            result.put("unboundTransfers", r.unboundTransfers());
            result.put("seconds", rdmaSeconds);
            result.put("firstError", r.firstError());
            final PrintWriter out = spec.commandLine().getOut();
            out.println(new ObjectMapper().writeValueAsString(result));
            out.flush();
            return r.clean() ? 0 : Mrd.EXIT_FAILURE;
        }
    }

    /**
     * Part size and buffer size from the options, with the options the threads follow.
     */
    private WorkerRunner.Plan plan()
    {
        final CommandLine commandLine = spec.commandLine();
        if (alloc < 1 || alloc > MAX_ALLOC)
        {
            throw new CommandLine.ParameterException(commandLine, "--alloc " + Sizes.format(alloc) +
                " must be between 1 byte and " + Sizes.format(MAX_ALLOC) + ", e.g. 256MiB");
        }
        requireAtLeast("--buffers", buffers, 1, "");
        requireAtLeast("--lookups", lookups, 0, "");
        requireRange("--threads", threads, 1, MAX_THREADS, Integer.toString(MAX_THREADS));
        requireAtLeast("--free-every", freeEvery, 0, " (0: never)");
        requireAtLeast("--verify-every", verifyEvery, 1, "");
        requireAtLeast("--warmup", warmup, 0, "");
        requireRange("--start-at", startAt, 0, System.currentTimeMillis() + MAX_START_DELAY_MS,
            "an hour from now (ms since the epoch; 0: do not wait)");
        if (null != name)
        {
            requireName("--name", name);
        }
        final long partLength = Sizes.alignUp((alloc + PARTS - 1) / PARTS, SEGMENT);
        final long perPart = (buffers + PARTS - 1) / PARTS;
        final long bufferLength = Sizes.alignDown(partLength / perPart, MIN_BUFFER_LENGTH);
        if (bufferLength < MIN_BUFFER_LENGTH)
        {
            throw new CommandLine.ParameterException(commandLine, "--buffers " + buffers + " is too many for --alloc " +
                Sizes.format(alloc) + ": parts of " + Sizes.format(partLength) + " hold at most " +
                partLength / MIN_BUFFER_LENGTH + " buffers of " + MIN_BUFFER_LENGTH + " bytes each");
        }
        return new WorkerRunner.Plan(partLength, bufferLength, buffers, warmup, verifyEvery, freeEvery, startAt);
    }

    /**
     * @throws CommandLine.ParameterException when {@code value} is not a name the daemon's client table holds.
     */
    private void requireName(final String option, final String value)
    {
        if (value.isBlank() || value.getBytes(StandardCharsets.UTF_8).length > ClientDescriptor.NAME_MAX_LENGTH)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), option + " '" + value + "' must be 1 to " +
                ClientDescriptor.NAME_MAX_LENGTH + " bytes, not blank" +
                ("--name".equals(option) ? " (or leave --name out for worker-<pid>)" : ""));
        }
    }

    /**
     * @param hint what the value means, appended to the message.
     * @throws CommandLine.ParameterException naming the option and its value when it is below {@code min}.
     */
    private void requireAtLeast(final String option, final long value, final long min, final String hint)
    {
        if (value < min)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), option + " " + value +
                (min == 0 ? " must not be negative" : " must be at least " + min) + hint);
        }
    }

    /**
     * @param maxText {@code max} as a person reads it.
     * @throws CommandLine.ParameterException naming the option and its value when it is out of range.
     */
    private void requireRange(final String option, final long value, final long min, final long max,
        final String maxText)
    {
        if (value < min || value > max)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), option + " " + value + " must be between " +
                min + " and " + maxText);
        }
    }

    private void awaitAll(
        final Thread[] workers, final WorkerRunner[] runners, final WorkerRunner.Shared shared, final PrintWriter err)
    {
        long lastReport = System.nanoTime();
        for (final Thread worker : workers)
        {
            while (worker.isAlive())
            {
                try
                {
                    worker.join(200);
                }
                catch (final InterruptedException ex)
                {
                    shared.abort = true;
                    Thread.currentThread().interrupt();
                }
                if (System.nanoTime() - lastReport >= 1_000_000_000L && worker.isAlive())
                {
                    lastReport = System.nanoTime();
                    long done = 0;
                    long errors = 0;
                    for (final WorkerRunner runner : runners)
                    {
                        done += runner.progress.get();
                        errors += runner.errorCount.get();
                    }
                    err.printf("mrd worker: %d/%d lookups (%d%%), %d errors%n", done, lookups,
                        lookups == 0 ? 100 : done * 100 / lookups, errors);
                    err.flush();
                }
            }
        }
    }

    private Map<String, Object> summarize(
        final WorkerRunner[] runners, final long elapsedNs, final WorkerRunner.Plan plan, final MrdClient client)
    {
        long done = 0;
        long busyNs = 0;
        long mruHits = 0;
        long topHits = 0;
        long bottomHits = 0;
        long globalHits = 0;
        long createRequests = 0;
        long flushes = 0;
        long errors = 0;
        long mismatches = 0;
        long verified = 0;
        long frees = 0;
        long warmedUp = 0;
        for (final WorkerRunner runner : runners)
        {
            done += runner.done;
            warmedUp += runner.warmedUp;
            busyNs += runner.busyNs;
            // The cache counts no MRU hit: they are derived from the runner's calls.
            mruHits += runner.cache.mruHits(runner.cacheCalls);
            topHits += runner.cache.mruHits(runner.cacheCalls) + runner.cache.topHits();
            bottomHits += runner.cache.bottomHits();
            globalHits += runner.cache.globalHits();
            createRequests += runner.cache.createRequests();
            flushes += runner.cache.flushes();
            errors += runner.errorCount.get();
            mismatches += runner.mismatches;
            verified += runner.verified;
            frees += runner.frees;
        }
        final Map<String, Object> result = new LinkedHashMap<>();
        result.put("lookups", done);
        result.put("nsPerLookup", done == 0 ? 0.0 : Math.round(busyNs * 100.0 / done) / 100.0);
        result.put("createRequests", createRequests);
        result.put("globalHits", globalHits);
        result.put("localHits", topHits + bottomHits);
        result.put("topHits", topHits);
        result.put("mruHits", mruHits);
        result.put("bottomHits", bottomHits);
        result.put("flushes", flushes);
        result.put("errors", errors);
        result.put("mismatches", mismatches);
        result.put("verified", verified);
        result.put("frees", frees);
        result.put("warmupLookups", warmedUp);
        result.put("threads", threads);
        result.put("seconds", Math.round(elapsedNs / 1e6) / 1000.0);
        result.put("buffers", buffers);
        result.put("bufferBytes", plan.bufferLength());
        result.put("partBytes", plan.partLength());
        result.put("clientId", client.clientId());
        result.put("daemonPid", client.daemonPid());
        return result;
    }

    private void freeQuietly(final MrdClient client, final WorkerRunner.Part part, final PrintWriter err)
    {
        if (null == part.segment || client.isBroken())
        {
            return;
        }
        try
        {
            client.free(part.segment);
        }
        catch (final MrdException ex)
        {
            err.println("mrd worker: could not free part at " + Sizes.hex(part.address) + ": " + ex.oneLine());
        }
    }
}
