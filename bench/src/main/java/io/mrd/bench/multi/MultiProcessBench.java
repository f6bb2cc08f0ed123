package io.mrd.bench.multi;

import io.mrd.bench.Plan;
import io.mrd.bench.report.ReportTable;
import io.mrd.bench.report.ResultFile;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The multi-process benchmark: a real daemon ({@code mrd start --foreground} in a child JVM), then 1, 2 and 4
 * secondary JVMs doing lookups for a fixed time, each without and with a writer JVM allocating, creating and
 * freeing at a fixed rate. Writes {@code multi.tsv} and keeps every child's output under {@code multi-logs/} in
 * the results directory. The round trips are {@link RoundTripBench}'s.
 * <p>
 * A round runs every configuration once, in order (1, 1 + writer, 2, ..., 4 + writer) in odd rounds and in the
 * reverse order in even rounds, so that a row (2 secondaries; 1 secondary + writer) and its reference (1
 * secondary; 1 secondary alone) run seconds apart and neither is always first. Each round's figures are
 * recorded with the round; the report compares them round by round. Smoke: 2 rounds of 0.5 s per
 * configuration; quick: 5 of 2 s; full: 9 of 4 s.
 * <p>
 * The daemon runs with {@code --no-mr-ext-memseg} (one MR per 2 MiB segment), so that a secondary's 32 MiB
 * are 16 MRs and its random buffers exercise both local levels (top half 8, bottom half), and with
 * {@code --huge-dir none} so that the run does not depend on free hugepages: its memory is tmpfs, in its run
 * directory ({@link BenchDaemon}).
 * <p>
 * With the writer, the CPU the writer and the daemon used in the window is recorded too, in cores (CPU seconds
 * over the window's seconds): on a machine with fewer cores than busy processes, it is what the lookups lost.
 */
public final class MultiProcessBench
{
    /** Allocation of each secondary: 16 segments, 16 MRs. */
    static final long SECONDARY_ALLOC = 32L << 20;
    /** Random buffers each secondary looks up (a power of two). */
    static final int SECONDARY_BUFFERS = 1 << 14;
    /** Writer cycles (allocate, create, free) per second. */
    static final double WRITER_RATE = 100;
    static final Duration START_TIMEOUT = BenchDaemon.START_TIMEOUT;
    /** Child JVMs of the benchmark: a small heap, the serial collector, no GC thread competing for the cores. */
    static final List<String> CHILD_FLAGS = List.of("-Xms256m", "-Xmx256m", "-XX:+UseSerialGC");

    private final Plan plan;
    private final Path logs;
    private final Path resultFile;

    private MultiProcessBench(final Plan plan, final Path out)
    {
        this.plan = plan;
        this.logs = Child.logDirectory(out, "multi-logs");
        this.resultFile = out.resolve("multi.tsv");
    }

    public static void run(final Plan plan, final Path out)
    {
        new MultiProcessBench(plan, out).run();
    }

    private void run()
    {
        final double seconds = plan.pick(0.5, 2, 4);
        final int maxSecondaries = ReportTable.PROCESS_COUNTS[ReportTable.PROCESS_COUNTS.length - 1];
        final List<Child> secondaries = new ArrayList<>();
        Child writer = null;
        try (BenchDaemon daemon = BenchDaemon.start(logs.resolve("daemon.log"),
            List.of("--huge-dir", "none", "--no-mr-ext-memseg", "--max-memory", "1GiB")))
        {
            final Path dir = daemon.dir();
            // Every secondary and the writer start once, together, and wait blocked on their standard input
            // between runs: no JVM start or JIT warm-up inside a run, no CPU spent by the idle ones.
            System.out.println("multi: starting " + maxSecondaries + " secondaries and a writer");
            writer = Child.start("writer", logs.resolve("writer.log"), CHILD_FLAGS, WriterMain.class.getName(),
                List.of(dir.toString()));
            for (int i = 0; i < maxSecondaries; i++)
            {
                secondaries.add(Child.start("secondary-" + i, logs.resolve("secondary-" + i + ".log"), CHILD_FLAGS,
                    SecondaryMain.class.getName(), List.of(dir.toString(), String.valueOf(SECONDARY_ALLOC),
                        String.valueOf(SECONDARY_BUFFERS), String.valueOf(1000 + i))));
            }
            writer.awaitLine(Handshake.READY::equals, START_TIMEOUT);
            for (final Child secondary : secondaries)
            {
                secondary.awaitLine(Handshake.READY::equals, START_TIMEOUT);
            }
            final int[] run = {0};
            for (int round = 1; round <= plan.rounds(); round++)
            {
                final int r = round;
                final Child w = writer;
                final List<Runnable> configurations = new ArrayList<>();
                for (final int n : ReportTable.PROCESS_COUNTS)
                {
                    for (final boolean withWriter : new boolean[] {false, true})
                    {
                        configurations.add(() -> record(lookups(++run[0], r, daemon, secondaries.subList(0, n),
                            withWriter ? w : null, seconds)));
                    }
                }
                Plan.alternate(round, configurations);
            }
            for (final Child child : secondaries)
            {
                child.send(Handshake.QUIT);
            }
            writer.send(Handshake.QUIT);
            for (final Child child : secondaries)
            {
                child.awaitExit(START_TIMEOUT);
            }
            writer.awaitExit(START_TIMEOUT);
        }
        finally
        {
            secondaries.forEach(Child::close);
            if (null != writer)
            {
                writer.close();
            }
        }
    }

    /**
     * One configuration's numbers in one round.
     */
    private record Measurement(String name, int round, double total, List<Double> rates, List<String> details,
        long errors, double writerRate, String writerDetails, double writerCores, double daemonCores)
    {
    }

    private Measurement lookups(
        final int run, final int round, final BenchDaemon daemon, final List<Child> secondaries, final Child writer,
        final double seconds)
    {
        final int n = secondaries.size();
        final String name = n + (null != writer ? ".writer" : "");
        final long startNs = System.nanoTime();
        final double daemonCpu = null != writer ? daemon.cpuSeconds() : Double.NaN;
        final double writerCpu = null != writer ? writer.cpuSeconds() : Double.NaN;
        if (null != writer)
        {
            writer.send("start " + run + " " + WRITER_RATE);
        }
        for (final Child secondary : secondaries)
        {
            secondary.send("run " + run + " " + seconds);
        }
        final Duration timeout = Duration.ofSeconds((long)seconds).plus(START_TIMEOUT);
        double total = 0;
        final List<Double> rates = new ArrayList<>();
        final List<String> details = new ArrayList<>();
        long errors = 0;
        for (int i = 0; i < n; i++)
        {
            final Child child = secondaries.get(i);
            final Map<String, String> result = Handshake.parseResult(child.awaitLine(Handshake.resultOf(run), timeout));
            // A failed lookup is a finding, not a reason to stop: it is counted, shown in the table, and the
            // secondary's log (multi-logs/) holds the first message.
            final long failed = Long.parseLong(result.get("errors"));
            if (failed > 0)
            {
                System.out.printf("multi: %s: %d lookups failed in run %d; first: %s%n", child.name(), failed, run,
                    child.lines().stream().filter(line -> line.startsWith("lookup failed")).findFirst().orElse("?"));
            }
            errors += failed;
            final double rate = Double.parseDouble(result.get("lookupsPerSecond"));
            total += rate;
            rates.add(rate);
            details.add(result.toString());
        }
        double writerRate = Double.NaN;
        String writerDetails = "";
        double writerCores = Double.NaN;
        double daemonCores = Double.NaN;
        if (null != writer)
        {
            writer.send("stop");
            final Map<String, String> result = Handshake.parseResult(writer.awaitLine(Handshake.resultOf(run), timeout));
            final long failed = Long.parseLong(result.get("errors"));
            if (failed > 0)
            {
                System.out.printf("multi: the writer failed %d cycles in run %d; first: %s%n", failed, run,
                    writer.lines().stream().filter(line -> line.startsWith("writer cycle failed")).findFirst()
                        .orElse("?"));
            }
            errors += failed;
            writerRate = Double.parseDouble(result.get("rate"));
            writerDetails = result.toString();
            final double windowSeconds = (System.nanoTime() - startNs) / 1e9;
            writerCores = (writer.cpuSeconds() - writerCpu) / windowSeconds;
            daemonCores = (daemon.cpuSeconds() - daemonCpu) / windowSeconds;
        }
        System.out.printf(Locale.ROOT, "multi: round %d, %d secondar%s%s: %.1f M lookups/s%s%n", round, n,
            n == 1 ? "y" : "ies", null != writer ? " + writer" : "", total / 1e6,
            null != writer ? String.format(Locale.ROOT, " (writer reached %.0f/s)", writerRate) : "");
        return new Measurement(name, round, total, rates, details, errors, writerRate, writerDetails, writerCores,
            daemonCores);
    }

    private void record(final Measurement m)
    {
        for (int i = 0; i < m.rates().size(); i++)
        {
            record("lookups." + m.name() + ".proc" + i, m.round(), m.rates().get(i), "lookups/s", m.details().get(i));
        }
        record("lookups." + m.name() + ".total", m.round(), m.total(), "lookups/s", "");
        record("lookups." + m.name() + ".errors", m.round(), m.errors(), "failed lookups", "");
        if (!Double.isNaN(m.writerRate()))
        {
            record("writer." + m.rates().size() + ".rate", m.round(), m.writerRate(), "cycles/s", m.writerDetails());
        }
        if (!Double.isNaN(m.writerCores()))
        {
            record("writer." + m.rates().size() + ".cores", m.round(), m.writerCores(), "cores", "the writer's CPU");
            record("writer." + m.rates().size() + ".daemonCores", m.round(), m.daemonCores(), "cores",
                "the daemon's CPU while the writer ran");
        }
    }

    private void record(final String row, final int round, final double value, final String unit, final String note)
    {
        ResultFile.append(resultFile, new ResultFile.Result("multi", row, round, value, unit, note));
    }
}
