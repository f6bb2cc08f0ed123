package io.mrd.bench.multi;

import io.mrd.bench.report.ResultFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * Whether a registration in flight holds up other clients: a daemon with {@value #LATENCY_MICROS} µs of
 * injected provider latency ({@code --registration-latency}), a {@link RegistrarMain} registering
 * {@value #REGISTRATION_GIB} GiB, and a {@link ProbeMain} timing its {@code ALLOC}, {@code FREE} and
 * {@code CREATE_MR} of an existing MR. Rounds alternate a window without a registration ({@code idle}, as long
 * as the registration's latency) and a window from just before the registration's request to its reply
 * ({@code busy}), so both labels share the run, the daemon and the machine's load. Writes {@code inflight.tsv}
 * (percentiles per label and operation), the probe's {@code inflight-*.hgrm} in the results directory, and the
 * children's output to {@code inflight-logs/}.
 * <p>
 * The busy window opens when the registrar prints that it is about to send its request and closes when it has
 * the key, both seen within a few milliseconds (the log is polled): a few cycles on either side are idle ones,
 * too few to move a p99 over thousands of cycles.
 * <p>
 * Quick: 3 rounds; full: 5.
 */
public final class InFlightBench
{
    static final long LATENCY_MICROS = 2_000_000;
    static final int REGISTRATION_GIB = 1;

    private InFlightBench()
    {
    }

    public static void run(final boolean quick, final Path out)
    {
        final Path logs = out.resolve("inflight-logs");
        try
        {
            Files.createDirectories(logs);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        final int rounds = quick ? 3 : 5;
        final List<String> childFlags = List.of("-Xms256m", "-Xmx256m", "-XX:+UseSerialGC");
        final Duration timeout = Duration.ofSeconds(60);
        try (BenchDaemon daemon = BenchDaemon.start(logs.resolve("daemon.log"), List.of("--huge-dir", "none",
            "--max-memory", "2GiB", "--list-size", "2GiB", "--registration-latency", String.valueOf(LATENCY_MICROS)));
            Child probe = Child.start("probe", logs.resolve("probe.log"), childFlags, ProbeMain.class.getName(),
                List.of(daemon.dir().toString(), out.toString()));
            Child registrar = Child.start("registrar", logs.resolve("registrar.log"), childFlags,
                RegistrarMain.class.getName(), List.of(daemon.dir().toString(),
                    String.valueOf((long)REGISTRATION_GIB << 30))))
        {
            probe.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            registrar.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            int run = 0;
            for (int round = 1; round <= rounds; round++)
            {
                final int idle = ++run;
                probe.send("start " + idle + " idle");
                LockSupport.parkNanos(LATENCY_MICROS * 1000);
                probe.send("stop");
                final String idleCycles = Handshake.parseResult(probe.awaitLine(Handshake.resultOf(idle), timeout))
                    .get("cycles");

                final int busy = ++run;
                registrar.send("register " + busy);
                registrar.awaitLine((RegistrarMain.REGISTERING + busy)::equals, timeout);
                probe.send("start " + busy + " busy");
                registrar.awaitLine((RegistrarMain.REGISTERED + busy)::equals, timeout);
                probe.send("stop");
                final String busyCycles = Handshake.parseResult(probe.awaitLine(Handshake.resultOf(busy), timeout))
                    .get("cycles");
                final Map<String, String> registered = Handshake.parseResult(
                    registrar.awaitLine(Handshake.resultOf(busy), timeout));
                System.out.printf(Locale.ROOT, "inflight: round %d: %s cycles idle, %s cycles while %d GiB " +
                    "registered in %s s (freed in %s s)%n", round, idleCycles, busyCycles, REGISTRATION_GIB,
                    registered.get("register"), registered.get("free"));
            }
            registrar.send(Handshake.QUIT);
            probe.send(Handshake.QUIT);
            final Map<String, String> result = Handshake.parseResult(
                probe.awaitLine(line -> line.startsWith(Handshake.RESULT + " run=final"), timeout));
            probe.awaitExit(timeout);
            registrar.awaitExit(timeout);
            final Path tsv = out.resolve("inflight.tsv");
            for (final String label : new String[] {"idle", "busy"})
            {
                for (final String op : ProbeMain.OPERATIONS)
                {
                    final String name = label + "." + op;
                    for (final String p : new String[] {"p50", "p99", "p999", "max"})
                    {
                        ResultFile.append(tsv, new ResultFile.Result("multi", "inflight." + name + "." + p,
                            Double.parseDouble(result.get(name + "." + p)), "us", "count " + result.get(name + ".count")));
                    }
                    System.out.println("inflight: " + name + " p50 " + result.get(name + ".p50") + " µs, p99 " +
                        result.get(name + ".p99") + " µs (" + result.get(name + ".count") + ")");
                }
            }
        }
    }
}
