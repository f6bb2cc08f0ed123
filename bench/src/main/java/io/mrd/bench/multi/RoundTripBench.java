package io.mrd.bench.multi;

import io.mrd.bench.CProgram;
import io.mrd.bench.Plan;
import io.mrd.bench.report.ResultFile;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The round trips and their references, in rounds: two daemons with the create round trip's options, one with
 * the default event journal ({@code create.KIND.pNN} rows: the create round trip's) and one with
 * {@code --journal-size 0} ({@code nojournal.KIND.pNN}), a {@link RoundTripMain} attached to each, and the C
 * references run between their windows: the ping-pong ({@code pingpong.c}) beside the round trip to an existing
 * MR, the fresh 2 MiB {@code mlock} ({@code pin_ref.c --fresh}) beside the new registration.
 * <p>
 * A round runs, for each kind (existing, new, allocfree), the journal-off window, the journal-on window and the
 * kind's C reference, in that order in odd rounds and in the reverse order in even ones: every row is next to its
 * reference (journal on beside off, and beside the C reference). The C ping-pong runs warm, a fresh pair of
 * processes with both sides blocking in {@code read}, back to back, after a fifth of its count of untimed round
 * trips, right before or after the Java round trip it is the floor of. It then times round trips each after a
 * {@value #IDLE_PAUSE_US} µs pause, an idle machine's figure ({@code pingpong.idle.*}), and back to back again
 * against a server that waits in {@code epoll_wait} before each read, as the daemon's event loop does
 * ({@code pingpong.epoll.*}): both shown as information.
 * <p>
 * Per window: smoke 1,000 existing, 20 new, 100 ALLOC + FREE; quick 10,000, 100, 1,000; full 40,000, 300,
 * 3,000; the references the same counts. Writes {@code roundtrip.tsv}, {@code c-pingpong.tsv}, {@code c-pin.tsv},
 * the histograms over all rounds ({@code create-KIND.hgrm}, {@code create-KIND-journal-off.hgrm}) and every
 * process's output to {@code roundtrip-logs/}.
 */
public final class RoundTripBench
{
    /** The pause before each idle ping-pong round trip, µs: long enough for the cores to go idle. */
    static final int IDLE_PAUSE_US = 1000;
    static final List<String> DAEMON_ARGS = List.of("--huge-dir", "none", "--no-mr-ext-memseg", "--max-memory",
        "1GiB");

    private final Plan plan;
    private final Path out;
    private final Path logs;
    private final Path tsv;

    private RoundTripBench(final Plan plan, final Path out)
    {
        this.plan = plan;
        this.out = out;
        this.logs = Child.logDirectory(out, "roundtrip-logs");
        this.tsv = out.resolve("roundtrip.tsv");
    }

    public static void run(final Plan plan, final Path out)
    {
        new RoundTripBench(plan, out).run();
    }

    private void run()
    {
        final int existing = plan.pick(1_000, 10_000, 40_000);
        final int fresh = plan.pick(20, 100, 300);
        final int allocFree = plan.pick(100, 1_000, 3_000);
        final List<String> offArgs = new ArrayList<>(DAEMON_ARGS);
        offArgs.addAll(List.of("--journal-size", "0"));
        System.out.printf("roundtrip: %d rounds of %d round trips to an existing MR, %d new registrations, %d " +
            "ALLOC + FREE, journal on and off, with the C references%n", plan.rounds(), existing, fresh, allocFree);
        try (BenchDaemon on = BenchDaemon.start(logs.resolve("daemon-journal-on.log"), DAEMON_ARGS);
            BenchDaemon off = BenchDaemon.start(logs.resolve("daemon-journal-off.log"), offArgs);
            Child onClient = Child.start("rtt-journal-on", logs.resolve("rtt-journal-on.log"),
                MultiProcessBench.CHILD_FLAGS, RoundTripMain.class.getName(),
                List.of(on.dir().toString(), out.toString(), ""));
            Child offClient = Child.start("rtt-journal-off", logs.resolve("rtt-journal-off.log"),
                MultiProcessBench.CHILD_FLAGS, RoundTripMain.class.getName(),
                List.of(off.dir().toString(), out.toString(), "-journal-off")))
        {
            onClient.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            offClient.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            final int[] run = {0};
            for (int round = 1; round <= plan.rounds(); round++)
            {
                final int r = round;
                Plan.alternate(round, List.of(
                    () -> window(offClient, "nojournal", "existing", existing, ++run[0], r),
                    () -> window(onClient, "create", "existing", existing, ++run[0], r),
                    () -> pingPong(existing, r)));
                Plan.alternate(round, List.of(
                    () -> window(offClient, "nojournal", "new", fresh, ++run[0], r),
                    () -> window(onClient, "create", "new", fresh, ++run[0], r),
                    () -> freshMlock(fresh, r)));
                Plan.alternate(round, List.of(
                    () -> window(onClient, "create", "allocfree", allocFree, ++run[0], r),
                    () -> window(offClient, "nojournal", "allocfree", allocFree, ++run[0], r)));
            }
            for (final Child client : List.of(onClient, offClient))
            {
                client.send(Handshake.QUIT);
                client.awaitExit(BenchDaemon.START_TIMEOUT);
            }
        }
    }

    private void window(final Child client, final String prefix, final String kind, final int count, final int run,
        final int round)
    {
        client.send(kind + " " + run + " " + count);
        final Map<String, String> result = Handshake.parseResult(
            client.awaitLine(Handshake.resultOf(run), Duration.ofMinutes(5)));
        final List<ResultFile.Result> lines = new ArrayList<>();
        for (final String p : new String[] {"p50", "p99", "p999", "max"})
        {
            lines.add(new ResultFile.Result("multi", prefix + "." + kind + "." + p, round,
                Double.parseDouble(result.get(kind + "." + p)), "us", "count " + result.get(kind + ".count")));
        }
        ResultFile.append(tsv, lines);
        System.out.printf("roundtrip: round %d, %s %s: p50 %s µs, p99 %s µs%n", round, client.name(), kind,
            result.get(kind + ".p50"), result.get(kind + ".p99"));
    }

    private void pingPong(final int count, final int round)
    {
        CProgram.run("pingpong", List.of("--dir", "/tmp", "--round", String.valueOf(round),
                "--count", String.valueOf(count), "--warmup", String.valueOf(Math.max(10, count / 5)),
                "--idle-count", String.valueOf(plan.pick(20, 100, 200)),
                "--idle-pause-us", String.valueOf(IDLE_PAUSE_US)),
            out.resolve("c-pingpong.tsv"), logs.resolve("c-pingpong.log"), Duration.ofMinutes(5));
    }

    private void freshMlock(final int count, final int round)
    {
        CProgram.run("pin_ref", List.of("--dir", BenchDaemon.runBase().toString(), "--round", String.valueOf(round),
            "--fresh", String.valueOf(count)), out.resolve("c-pin.tsv"), logs.resolve("c-pin.log"),
            Duration.ofMinutes(5));
    }
}
