package io.mrd.bench.multi;

import io.mrd.bench.Plan;
import io.mrd.bench.report.ResultFile;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * Whether a registration in flight holds up other clients: a daemon with {@value #LATENCY_MICROS} µs of
 * injected provider latency ({@code --registration-latency}), a {@link RegistrarMain} registering
 * {@value #REGISTRATION_GIB} GiB, and a {@link ProbeMain} timing its {@code ALLOC}, {@code FREE} and
 * {@code CREATE_MR} of an existing MR. A round is a window without a registration ({@code idle}, as long as the
 * registration's latency) and a window from just before the registration's request to its reply ({@code busy}),
 * back to back on the same daemon: idle first in odd rounds, busy first in even ones. Each window's percentiles
 * are recorded with the round ({@code inflight.tsv}); the probe's histograms over all windows go to
 * {@code inflight-*.hgrm} in the results directory, and the children's output to {@code inflight-logs/}.
 * <p>
 * The busy window opens when the registrar prints that it is about to send its request and closes when it has
 * the key, both seen within a few milliseconds (the log is polled): a few cycles on either side are idle ones,
 * too few to move a p99 over thousands of cycles.
 */
public final class InFlightBench
{
    static final long LATENCY_MICROS = 2_000_000;
    static final int REGISTRATION_GIB = 1;
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private InFlightBench()
    {
    }

    public static void run(final Plan plan, final Path out)
    {
        final Path logs = Child.logDirectory(out, "inflight-logs");
        final Path tsv = out.resolve("inflight.tsv");
        try (BenchDaemon daemon = BenchDaemon.start(logs.resolve("daemon.log"), List.of("--huge-dir", "none",
            "--max-memory", "2GiB", "--list-size", "2GiB", "--registration-latency", String.valueOf(LATENCY_MICROS)));
            Child probe = Child.start("probe", logs.resolve("probe.log"), MultiProcessBench.CHILD_FLAGS,
                ProbeMain.class.getName(), List.of(daemon.dir().toString(), out.toString()));
            Child registrar = Child.start("registrar", logs.resolve("registrar.log"), MultiProcessBench.CHILD_FLAGS,
                RegistrarMain.class.getName(), List.of(daemon.dir().toString(),
                    String.valueOf((long)REGISTRATION_GIB << 30))))
        {
            probe.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            registrar.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            final int[] run = {0};
            for (int round = 1; round <= plan.rounds(); round++)
            {
                final int r = round;
                Plan.alternate(round, List.of(
                    () -> record(tsv, r, "idle", idle(probe, ++run[0])),
                    () -> record(tsv, r, "busy", busy(probe, registrar, ++run[0], r))));
            }
            registrar.send(Handshake.QUIT);
            probe.send(Handshake.QUIT);
            probe.awaitExit(TIMEOUT);
            registrar.awaitExit(TIMEOUT);
        }
    }

    private static Map<String, String> idle(final Child probe, final int run)
    {
        probe.send("start " + run + " idle");
        LockSupport.parkNanos(LATENCY_MICROS * 1000);
        probe.send("stop");
        return Handshake.parseResult(probe.awaitLine(Handshake.resultOf(run), TIMEOUT));
    }

    private static Map<String, String> busy(final Child probe, final Child registrar, final int run, final int round)
    {
        registrar.send("register " + run);
        registrar.awaitLine((RegistrarMain.REGISTERING + run)::equals, TIMEOUT);
        probe.send("start " + run + " busy");
        registrar.awaitLine((RegistrarMain.REGISTERED + run)::equals, TIMEOUT);
        probe.send("stop");
        final Map<String, String> window = Handshake.parseResult(probe.awaitLine(Handshake.resultOf(run), TIMEOUT));
        final Map<String, String> registered = Handshake.parseResult(registrar.awaitLine(Handshake.resultOf(run),
            TIMEOUT));
        System.out.printf(Locale.ROOT, "inflight: round %d: %d GiB registered in %s s (freed in %s s)%n", round,
            REGISTRATION_GIB, registered.get("register"), registered.get("free"));
        return window;
    }

    private static void record(final Path tsv, final int round, final String label, final Map<String, String> window)
    {
        final List<ResultFile.Result> lines = new ArrayList<>();
        for (final String op : ProbeMain.OPERATIONS)
        {
            for (final String p : new String[] {"p50", "p99", "p999", "max"})
            {
                lines.add(new ResultFile.Result("multi", "inflight." + label + "." + op + "." + p, round,
                    Double.parseDouble(window.get(op + "." + p)), "us", "count " + window.get(op + ".count")));
            }
        }
        ResultFile.append(tsv, lines);
        System.out.printf("inflight: round %d, %s: %s cycles; ALLOC p99 %s µs, FREE p99 %s µs, CREATE_MR p99 %s µs%n",
            round, label, window.get("cycles"), window.get("alloc.p99"), window.get("free.p99"),
            window.get("create.p99"));
    }
}
