package io.mrd.bench.multi;

import io.mrd.bench.report.ReportTable;
import io.mrd.bench.report.ResultFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * The multi-process benchmark: a real daemon ({@code mrd start --foreground} in a child JVM), then 1, 2 and 4
 * secondary JVMs doing lookups for a fixed time, each without and with a writer JVM allocating, creating and
 * freeing at a fixed rate; then the create round trip; then the round trips against two fresh daemons, the event
 * journal on and off ({@code journal.on|off.KIND.pN} rows). Writes {@code multi.tsv} and keeps every child's
 * output under {@code multi-logs/} in the results directory.
 * <p>
 * Quick: 3 rounds of 2 s per configuration; full: 4 rounds of 5 s. Each configuration reports its best round.
 * <p>
 * The daemon runs with {@code --no-mr-ext-memseg} (one MR per 2 MiB segment), so that a secondary's 32 MiB
 * are 16 MRs and its random buffers exercise both local levels (top half 8, bottom half), and with
 * {@code --huge-dir none} so that the run does not depend on free hugepages: its memory is tmpfs, in its run
 * directory ({@link BenchDaemon}), the file system the C reference of a fresh 2 MiB {@code mlock} maps from.
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
    /** The two daemons of the journal comparison. */
    static final String[] JOURNAL_CONFIGS = {"on", "off"};
    /** The round trips of the journal comparison, as {@link RoundTripMain} names them. */
    static final String[] JOURNAL_KINDS = {"existing", "allocfree", "new"};

    private final boolean quick;
    private final Path out;
    private final Path logs;
    private final Path resultFile;
    private final List<String> childFlags = List.of("-Xms256m", "-Xmx256m", "-XX:+UseSerialGC");

    private MultiProcessBench(final boolean quick, final Path out)
    {
        this.quick = quick;
        this.out = out;
        this.logs = out.resolve("multi-logs");
        this.resultFile = out.resolve("multi.tsv");
    }

    public static void run(final boolean quick, final Path out)
    {
        new MultiProcessBench(quick, out).run();
    }

    private void run()
    {
        try
        {
            Files.createDirectories(logs);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        final double seconds = quick ? 2 : 5;
        final int rounds = quick ? 3 : 4;
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
            writer = Child.start("writer", logs.resolve("writer.log"), childFlags, WriterMain.class.getName(),
                List.of(dir.toString()));
            for (int i = 0; i < maxSecondaries; i++)
            {
                secondaries.add(Child.start("secondary-" + i, logs.resolve("secondary-" + i + ".log"), childFlags,
                    SecondaryMain.class.getName(), List.of(dir.toString(), String.valueOf(SECONDARY_ALLOC),
                        String.valueOf(SECONDARY_BUFFERS), String.valueOf(1000 + i))));
            }
            writer.awaitLine(Handshake.READY::equals, START_TIMEOUT);
            for (final Child secondary : secondaries)
            {
                secondary.awaitLine(Handshake.READY::equals, START_TIMEOUT);
            }
            // Rounds of every configuration, interleaved, so that a burst of load from elsewhere on a shared
            // machine hits one round of one configuration, not all of one: each configuration keeps its best.
            final Map<String, Measurement> best = new LinkedHashMap<>();
            final Map<String, Long> errors = new LinkedHashMap<>();
            int run = 0;
            for (int round = 1; round <= rounds; round++)
            {
                for (final int n : ReportTable.PROCESS_COUNTS)
                {
                    for (final boolean withWriter : new boolean[] {false, true})
                    {
                        final Measurement m = lookups(++run, round, secondaries.subList(0, n),
                            withWriter ? writer : null, seconds);
                        best.merge(m.name(), m, (a, b) -> b.total() > a.total() ? b : a);
                        errors.merge(m.name(), m.errors(), Long::sum);
                    }
                }
            }
            best.values().forEach(this::record);
            errors.forEach((name, count) -> record("lookups." + name + ".errors", count, "failed lookups",
                "in all rounds"));
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
            roundTrips(dir);
        }
        finally
        {
            secondaries.forEach(Child::close);
            if (null != writer)
            {
                writer.close();
            }
        }
        journalRoundTrips();
    }

    /**
     * The round trips again against two fresh daemons, one with the event journal (the default 64 MiB) and one
     * with {@code --journal-size 0}, the rounds alternating between them so that load from elsewhere hits both
     * alike; each configuration and kind keeps its round of lowest p50. A CREATE_MR of an existing MR journals
     * nothing, so the ALLOC + FREE round trip (an event each, and the FREE's memory event) and the new
     * registration (MR_CREATED) are measured too.
     */
    private void journalRoundTrips()
    {
        final int existing = quick ? 20_000 : 100_000;
        final int fresh = quick ? 300 : 2_000;
        final int allocFree = quick ? 2_000 : 10_000;
        final int rounds = quick ? 2 : 3;
        final List<String> daemonArgs = List.of("--huge-dir", "none", "--no-mr-ext-memseg", "--max-memory", "1GiB");
        final List<String> offArgs = new ArrayList<>(daemonArgs);
        offArgs.addAll(List.of("--journal-size", "0"));
        System.out.printf("multi: round trips with the journal on and off (%d rounds each)%n", rounds);
        final Map<String, Map<String, String>> best = new LinkedHashMap<>();
        try (BenchDaemon on = BenchDaemon.start(logs.resolve("daemon-journal-on.log"), daemonArgs);
            BenchDaemon off = BenchDaemon.start(logs.resolve("daemon-journal-off.log"), offArgs))
        {
            for (int round = 1; round <= rounds; round++)
            {
                for (final String config : JOURNAL_CONFIGS)
                {
                    final String name = "rtt-journal-" + config + "-" + round;
                    try (Child child = Child.start(name, logs.resolve(name + ".log"), childFlags,
                        RoundTripMain.class.getName(), List.of((config.equals("on") ? on : off).dir().toString(),
                            out.toString(), String.valueOf(existing), String.valueOf(fresh),
                            String.valueOf(allocFree), "-journal-" + config)))
                    {
                        final Map<String, String> result = Handshake.parseResult(
                            child.awaitLine(line -> line.startsWith(Handshake.RESULT), Duration.ofMinutes(5)));
                        child.awaitExit(START_TIMEOUT);
                        for (final String kind : JOURNAL_KINDS)
                        {
                            best.merge(config + "." + kind, result, (a, b) ->
                                Double.parseDouble(b.get(kind + ".p50")) < Double.parseDouble(a.get(kind + ".p50")) ?
                                    b : a);
                        }
                        System.out.printf("multi:   journal %s, round %d: existing p50 %s µs, alloc+free p50 %s µs, " +
                            "new p50 %s µs%n", config, round, result.get("existing.p50"),
                            result.get("allocfree.p50"), result.get("new.p50"));
                    }
                }
            }
        }
        best.forEach((key, result) ->
        {
            final String kind = key.substring(key.indexOf('.') + 1);
            for (final String p : new String[] {"p50", "p99", "p999", "max"})
            {
                record("journal." + key + "." + p, Double.parseDouble(result.get(kind + "." + p)), "us",
                    "count " + result.get(kind + ".count") + ", best p50 of the rounds");
            }
        });
    }

    /**
     * One configuration's numbers in one round.
     */
    private record Measurement(String name, int round, double total, List<Double> rates, List<String> details,
        long errors, double writerRate, String writerDetails)
    {
    }

    private Measurement lookups(
        final int run, final int round, final List<Child> secondaries, final Child writer, final double seconds)
    {
        final int n = secondaries.size();
        final String name = n + (null != writer ? ".writer" : "");
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
        }
        System.out.printf(Locale.ROOT, "multi: round %d, %d secondar%s%s: %.1f M lookups/s%s%n", round, n,
            n == 1 ? "y" : "ies", null != writer ? " + writer" : "", total / 1e6,
            null != writer ? String.format(Locale.ROOT, " (writer reached %.0f/s)", writerRate) : "");
        return new Measurement(name, round, total, rates, details, errors, writerRate, writerDetails);
    }

    private void record(final Measurement m)
    {
        for (int i = 0; i < m.rates().size(); i++)
        {
            record("lookups." + m.name() + ".proc" + i, m.rates().get(i), "lookups/s", m.details().get(i));
        }
        record("lookups." + m.name() + ".total", m.total(), "lookups/s", "best of the rounds: round " + m.round());
        if (!Double.isNaN(m.writerRate()))
        {
            record("writer." + m.rates().size() + ".rate", m.writerRate(), "cycles/s", m.writerDetails());
        }
    }

    private void roundTrips(final Path dir)
    {
        final int existing = quick ? 20_000 : 100_000;
        final int fresh = quick ? 300 : 2_000;
        System.out.printf("multi: create round trips (%d to an existing MR, %d new registrations)%n", existing, fresh);
        try (Child child = Child.start("create-rtt", logs.resolve("create-rtt.log"), childFlags,
            RoundTripMain.class.getName(), List.of(dir.toString(), out.toString(), String.valueOf(existing),
                String.valueOf(fresh))))
        {
            final Map<String, String> result = Handshake.parseResult(
                child.awaitLine(line -> line.startsWith(Handshake.RESULT), Duration.ofMinutes(5)));
            child.awaitExit(START_TIMEOUT);
            for (final String kind : new String[] {"existing", "new"})
            {
                for (final String p : new String[] {"p50", "p99", "p999", "max"})
                {
                    record("create." + kind + "." + p, Double.parseDouble(result.get(kind + "." + p)), "us",
                        "count " + result.get(kind + ".count"));
                }
            }
            System.out.printf("multi:   existing p50 %s µs, new p50 %s µs%n", result.get("existing.p50"),
                result.get("new.p50"));
        }
    }

    private void record(final String row, final double value, final String unit, final String note)
    {
        ResultFile.append(resultFile, new ResultFile.Result("multi", row, value, unit, note));
    }
}
