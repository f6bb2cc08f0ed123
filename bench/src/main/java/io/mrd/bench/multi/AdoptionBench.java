package io.mrd.bench.multi;

import io.mrd.bench.Plan;
import io.mrd.bench.report.ResultFile;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Issue 22's measurements on the emulated device ({@link BenchDaemon#emulatedDevice()}), in
 * rounds with their references:
 * <ul>
 *   <li><b>adopt</b> against <b>afresh</b>, alternating: a client holds {@link #mrs} MRs of 1 MiB; the daemon is
 *       killed with -9 and a successor started 1 s later in the same run directory. With a descriptor holder
 *       ({@code --adoption-grace}) the successor adopts them: its process start to serving, its adoption step
 *       (its log), the registrations it made (the device context's count), how long the client's FREE issued in
 *       the gap waited, and the lookups answered in the gap. Without one ({@code --adoption-grace 0}, what a
 *       crash meant before) the successor starts afresh and a new client registers them again: its process start
 *       to serving plus the registering is the reference.</li>
 *   <li><b>restart</b> against <b>steady</b>, alternating on one daemon lineage: a client does ALLOC + FREE of
 *       2 MiB without pause for {@link #WINDOW}, once while {@code mrd restart} hands the daemon over and once
 *       without: the failed requests, the longest and the p99.</li>
 * </ul>
 * Writes {@code adopt.tsv}; the processes' output goes to {@code adopt-logs/}.
 */
public final class AdoptionBench
{
    static final Duration WINDOW = Duration.ofSeconds(4);
    private static final Duration GAP = Duration.ofSeconds(1);
    private static final Duration TIMEOUT = Duration.ofSeconds(120);
    private static final Pattern ADOPTED = Pattern.compile("adopted epoch \\p{XDigit}+ in (\\d+) ms: (\\d+) MRs");
    private static final List<String> DAEMON = List.of("--provider", "ibverbs", "--huge-dir", "none",
        "--max-memory", "2GiB", "--list-size", "2GiB", "--max-mrs", "2048");

    private final Plan plan;
    private final Path logs;
    private final Path tsv;
    private final Map<String, String> env;
    private final Path library;
    private final int mrs;

    private AdoptionBench(final Plan plan, final Path out, final Path library)
    {
        this.plan = plan;
        this.logs = Child.logDirectory(out, "adopt-logs");
        this.tsv = out.resolve("adopt.tsv");
        this.library = library;
        this.env = Map.of("MRD_IBVERBS_LIBRARY", library.toString());
        this.mrs = plan.pick(100, 1000, 1000);
    }

    public static void run(final Plan plan, final Path out)
    {
        new AdoptionBench(plan, out, BenchDaemon.emulatedDevice()).run();
    }

    private void run()
    {
        System.out.println("adopt: " + mrs + " MRs of 1 MiB, kill -9 and a successor " + GAP.toMillis() +
            " ms later, adopting or afresh; mrd restart under ALLOC + FREE for " + WINDOW.toSeconds() + " s; " +
            plan.rounds() + " rounds");
        for (int round = 1; round <= plan.rounds(); round++)
        {
            final int r = round;
            Plan.alternate(round, List.of(() -> adopt(r), () -> afresh(r)));
        }
        restartUnderLoad();
    }

    /** A kill with a descriptor holder: the successor adopts. */
    private void adopt(final int round)
    {
        final List<String> args = with("--adoption-grace", "60000");
        final BenchDaemon predecessor = BenchDaemon.start(log("adopt-daemon", round), args, env);
        try (Child client = client("adopt-client", round, predecessor.dir()))
        {
            final Map<String, String> registered = command(client, "register " + run(round, 1) + " " + mrs,
                run(round, 1));
            predecessor.awaitLine(line -> line.contains("descriptor holder pid") && line.contains(" holds "));
            predecessor.kill();
            client.send("ride " + run(round, 2));
            LockSupport.parkNanos(GAP.toNanos());
            final long startNs = System.nanoTime();
            try (BenchDaemon successor = BenchDaemon.startIn(predecessor.dir(), log("adopt-successor", round), args,
                env))
            {
                final double startToServingMs = (System.nanoTime() - startNs) / 1e6;
                final Matcher adopted = ADOPTED.matcher(successor.awaitLine(line -> ADOPTED.matcher(line).find()));
                if (!adopted.find() || Integer.parseInt(adopted.group(2)) != mrs)
                {
                    throw new IllegalStateException("the successor did not adopt " + mrs + " MRs: " + adopted);
                }
                final Map<String, String> rode = Handshake.parseResult(client.awaitLine(
                    Handshake.resultOf(run(round, 2)), TIMEOUT));
                if (rode.get("waitedMs").equals("failed"))
                {
                    throw new IllegalStateException("the FREE issued in the gap failed: " + client.tail());
                }
                record(round, "adopt.mrs", mrs, "MRs", "held by the client, 1 MiB each");
                record(round, "adopt.startToServing", startToServingMs, "ms", mrs + " MRs");
                record(round, "adopt.step", Double.parseDouble(adopted.group(1)), "ms", "the successor's log");
                record(round, "adopt.registrations", Long.parseLong(rode.get("registrations")) -
                    Long.parseLong(registered.get("registrations")), "registrations", "made by the successor");
                record(round, "adopt.waited", Double.parseDouble(rode.get("waitedMs")), "ms", "FREE issued in the gap");
                record(round, "adopt.gapLookups", Double.parseDouble(rode.get("lookups")), "lookups", "in the gap");
                record(round, "adopt.gapLookupErrors", Double.parseDouble(rode.get("lookupErrors")), "lookups",
                    "failed or wrong in the gap");
                System.out.printf("adopt: round %d, adopting: start to serving %.0f ms, adoption %s ms, %s " +
                    "registrations, FREE waited %s ms, %s lookups in the gap (%s failed)%n", round, startToServingMs,
                    adopted.group(1), Long.parseLong(rode.get("registrations")) -
                        Long.parseLong(registered.get("registrations")), rode.get("waitedMs"), rode.get("lookups"),
                    rode.get("lookupErrors"));
                client.send(Handshake.QUIT);
                client.awaitExit(TIMEOUT);
            }
        }
        finally
        {
            predecessor.close();
        }
    }

    /** A kill without a descriptor holder: the successor starts afresh and the client registers again. */
    private void afresh(final int round)
    {
        final List<String> args = with("--adoption-grace", "0");
        final BenchDaemon predecessor = BenchDaemon.start(log("afresh-daemon", round), args, env);
        try
        {
            try (Child client = client("afresh-client", round, predecessor.dir()))
            {
                command(client, "register " + round + " " + mrs, round);
                predecessor.kill();
            }
            final long startNs = System.nanoTime();
            try (BenchDaemon successor = BenchDaemon.startIn(predecessor.dir(), log("afresh-successor", round), args,
                env);
                Child client = client("afresh-again", round, predecessor.dir()))
            {
                final double startToServingMs = (System.nanoTime() - startNs) / 1e6;
                final Map<String, String> again = command(client, "register " + round + " " + mrs, round);
                record(round, "fresh.startToServing", startToServingMs, "ms", "afresh");
                record(round, "fresh.register", Double.parseDouble(again.get("ms")), "ms", mrs + " MRs again");
                record(round, "fresh.registrations", Double.parseDouble(again.get("registrations")), "registrations",
                    "made again");
                System.out.printf("adopt: round %d, afresh: start to serving %.0f ms, registering again %s ms%n", round,
                    startToServingMs, again.get("ms"));
                client.send(Handshake.QUIT);
                client.awaitExit(TIMEOUT);
            }
        }
        finally
        {
            predecessor.close();
        }
    }

    /** {@code mrd restart} under ALLOC + FREE, against the same window without one, on one daemon lineage. */
    private void restartUnderLoad()
    {
        final List<String> args = with("--adoption-grace", "60000");
        final BenchDaemon first = BenchDaemon.start(logs.resolve("restart-daemon.log"), args, env);
        final Path dir = first.dir();
        try (Child client = client("restart-client", 0, dir))
        {
            first.awaitLine(line -> line.contains("descriptor holder pid") && line.contains(" holds "));
            final int[] run = {0};
            for (int round = 1; round <= plan.rounds(); round++)
            {
                final int r = round;
                Plan.alternate(round, List.of(() -> window(client, ++run[0], r, "restart", dir, args),
                    () -> window(client, ++run[0], r, "steady", dir, args)));
            }
            client.send(Handshake.QUIT);
            client.awaitExit(TIMEOUT);
        }
        finally
        {
            mrd("restart-stop", List.of("stop", "--dir", dir.toString()));
            copyQuietly(dir.resolve("mrd.log"), logs.resolve("restart-successors.log"));
            first.close();
        }
    }

    private void window(final Child client, final int run, final int round, final String kind, final Path dir,
        final List<String> args)
    {
        final long startNs = System.nanoTime();
        client.send("load " + run);
        client.awaitLine(("LOADING run=" + run)::equals, TIMEOUT);
        double restartMs = 0;
        if (kind.equals("restart"))
        {
            final List<String> restart = new ArrayList<>(List.of("restart", "--dir", dir.toString()));
            restart.addAll(args);
            final long restartNs = System.nanoTime();
            mrd("restart-" + round, restart);
            restartMs = (System.nanoTime() - restartNs) / 1e6;
        }
        LockSupport.parkNanos(Math.max(0, startNs + WINDOW.toNanos() - System.nanoTime()));
        final Map<String, String> result = command(client, "end " + run, run);
        record(round, kind + ".maxMs", Double.parseDouble(result.get("maxMs")), "ms", "longest ALLOC + FREE");
        record(round, kind + ".p99Ms", Double.parseDouble(result.get("p99Ms")), "ms", "ALLOC + FREE p99");
        record(round, kind + ".failed", Double.parseDouble(result.get("failed")), "requests", "failed");
        record(round, kind + ".requests", Double.parseDouble(result.get("requests")), "requests", "in the window");
        if (kind.equals("restart"))
        {
            record(round, "restart.ms", restartMs, "ms", "mrd restart, command start to exit");
        }
        System.out.printf("adopt: round %d, %s: %s requests, %s failed, longest %s ms, p99 %s ms%s%n", round, kind,
            result.get("requests"), result.get("failed"), result.get("maxMs"), result.get("p99Ms"),
            kind.equals("restart") ? String.format(", mrd restart %.0f ms", restartMs) : "");
    }

    /** Runs {@code mrd ARGS} in a JVM of its own and requires exit 0. */
    private void mrd(final String name, final List<String> args)
    {
        try (Child mrd = Child.start(name, logs.resolve(name + ".log"), List.of(), "io.mrd.cli.Mrd", args, env))
        {
            final int exit = mrd.awaitExit(TIMEOUT);
            if (exit != 0)
            {
                throw new IllegalStateException("mrd " + String.join(" ", args) + " exited with " + exit + ": " +
                    mrd.tail());
            }
        }
    }

    private Child client(final String name, final int round, final Path dir)
    {
        final Child client = Child.start(name, log(name, round), MultiProcessBench.CHILD_FLAGS,
            AdoptMain.class.getName(), List.of(dir.toString(), library.toString()), env);
        client.awaitLine(Handshake.READY::equals, TIMEOUT);
        return client;
    }

    private static Map<String, String> command(final Child client, final String command, final int run)
    {
        client.send(command);
        return Handshake.parseResult(client.awaitLine(Handshake.resultOf(run), TIMEOUT));
    }

    /** The number of a client's command {@code k} in {@code round}: a RESULT line answers one command only. */
    private static int run(final int round, final int k)
    {
        return round * 10 + k;
    }

    private List<String> with(final String... more)
    {
        final List<String> args = new ArrayList<>(DAEMON);
        args.addAll(List.of(more));
        return args;
    }

    private Path log(final String name, final int round)
    {
        return logs.resolve(name + "-" + round + ".log");
    }

    private void record(final int round, final String row, final double value, final String unit, final String note)
    {
        ResultFile.append(tsv, new ResultFile.Result("multi", row, round, value, unit, note));
    }

    private static void copyQuietly(final Path from, final Path to)
    {
        try
        {
            Files.copy(from, to, StandardCopyOption.REPLACE_EXISTING);
        }
        catch (final IOException ignore)
        {
            // the successors' log is kept for reading, not for the figures
        }
    }
}
