package io.mrd.bench;

import io.mrd.bench.jmh.LookupRounds;
import io.mrd.bench.multi.AdoptionBench;
import io.mrd.bench.multi.DevicesBench;
import io.mrd.bench.multi.InFlightBench;
import io.mrd.bench.multi.LargeAllocationBench;
import io.mrd.bench.multi.MultiProcessBench;
import io.mrd.bench.multi.RoundTripBench;
import io.mrd.bench.report.LookupPlot;
import io.mrd.bench.report.ReportTable;
import io.mrd.bench.report.ResultFile;
import io.mrd.bench.report.Results;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Entry point of {@code bench/target/mrd-bench.jar}, run by {@code scripts/bench}; every part runs in rounds,
 * each row beside its reference ({@link Plan}):
 * <pre>
 *   jmh       MODE --out DIR [--include REGEX]   JMH benchmarks with the C lookup reference → DIR/jmh.{json,log,tsv},
 *                                                DIR/c-lookup.{tsv,log}
 *   multi     MODE --out DIR                     daemon + secondaries → DIR/multi.tsv, DIR/multi-logs/
 *   roundtrip MODE --out DIR                     round trips, journal on/off, C ping-pong and fresh mlock
 *                                                → DIR/roundtrip.tsv, DIR/c-pingpong.tsv, DIR/c-pin.tsv, ...
 *   allocate  MODE --out DIR                     1 and 8 GiB allocations with the C populate → DIR/allocate.tsv
 *   inflight  MODE --out DIR                     requests during a slow registration → DIR/inflight.tsv
 *   adopt     MODE --out DIR                     a successor adopting vs starting afresh, mrd restart under
 *                                                load (emulated device: -Dmrd.bench.emulator) → DIR/adopt.tsv
 *   devices   MODE --out DIR                     1 GiB allocated and registered on 1/2/4/8 emulated devices, with
 *                                                the C multi_reg_ref → DIR/devices.tsv, DIR/c-devices.tsv
 *   report --out DIR [--cores N] [--title TEXT]  every DIR/*.tsv → DIR/table.md, DIR/lookup.png
 * </pre>
 * MODE is {@code --smoke}, {@code --quick} or nothing (full), optionally with {@code --rounds N}. JMH's own
 * launcher is in the jar too: {@code java -cp mrd-bench.jar org.openjdk.jmh.Main -l}.
 */
public final class BenchMain
{
    private BenchMain()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        if (args.length == 0 || args[0].equals("--help") || args[0].equals("-h"))
        {
            usage();
            System.exit(args.length == 0 ? 2 : 0);
        }
        final String command = args[0];
        Mode mode = Mode.FULL;
        int rounds = 0;
        Path out = null;
        String include = null;
        int cores = Runtime.getRuntime().availableProcessors();
        String title = "";
        final List<String> rest = new ArrayList<>(List.of(args).subList(1, args.length));
        for (int i = 0; i < rest.size(); i++)
        {
            switch (rest.get(i))
            {
                case "--quick" -> mode = Mode.QUICK;
                case "--smoke" -> mode = Mode.SMOKE;
                case "--rounds" -> rounds = Integer.parseInt(rest.get(++i));
                case "--out" -> out = Path.of(rest.get(++i));
                case "--include" -> include = rest.get(++i);
                case "--cores" -> cores = Integer.parseInt(rest.get(++i));
                case "--title" -> title = rest.get(++i);
                default ->
                {
                    System.err.println("bench: unknown argument " + rest.get(i));
                    usage();
                    System.exit(2);
                }
            }
        }
        if (null == out)
        {
            System.err.println("bench: --out DIR is required");
            System.exit(2);
        }
        Files.createDirectories(out);
        final Plan plan = new Plan(mode, rounds > 0 ? rounds : mode.defaultRounds());
        switch (command)
        {
            case "jmh" -> LookupRounds.run(plan, out, include);
            case "multi" -> MultiProcessBench.run(plan, out);
            case "roundtrip" -> RoundTripBench.run(plan, out);
            case "allocate" -> LargeAllocationBench.run(plan, out);
            case "inflight" -> InFlightBench.run(plan, out);
            case "adopt" -> AdoptionBench.run(plan, out);
            case "devices" -> DevicesBench.run(plan, out);
            case "report" -> report(out, cores, title);
            default ->
            {
                System.err.println("bench: unknown command " + command);
                usage();
                System.exit(2);
            }
        }
    }

    private static void report(final Path out, final int cores, final String title) throws Exception
    {
        final Results results = ResultFile.readAll(out);
        final ReportTable table = new ReportTable(results, cores);
        final String markdown = table.markdown();
        final String summary = table.targetCounts().summary();
        Files.writeString(out.resolve("table.md"), (title.isEmpty() ? "" : title + "\n\n") + markdown + "\n" +
            summary + "\n", StandardCharsets.UTF_8);
        LookupPlot.write(results.medians(), title, out.resolve("lookup.png"));
        System.out.print(markdown);
        System.out.println();
        System.out.println(summary);
    }

    private static void usage()
    {
        System.err.println("""
            usage: java <mrd JVM flags> -jar mrd-bench.jar COMMAND ...
              jmh       MODE --out DIR [--include REGEX]   JMH benchmarks, rounds alternating with the C lookups
              multi     MODE --out DIR                     daemon + secondary processes
              roundtrip MODE --out DIR                     round trips (journal on/off) with the C ping-pong and mlock
              allocate  MODE --out DIR                     allocate + first key of 1 and 8 GiB with the C populate
              inflight  MODE --out DIR                     ALLOC/FREE/CREATE_MR during a slow registration
              adopt     MODE --out DIR                     kill -9 + successor adopting vs afresh; mrd restart under load
              devices   MODE --out DIR                     1 GiB registered on 1/2/4/8 emulated devices, and C
              report --out DIR [--cores N] [--title TEXT]  table.md and lookup.png from DIR/*.tsv
            MODE: --smoke (2 tiny rounds), --quick (5 rounds) or nothing (full, 9 rounds); --rounds N overrides.
            The C programs are taken from -Dmrd.bench.c=DIR. scripts/bench runs them all.""");
    }
}
