package io.mrd.bench;

import io.mrd.bench.jmh.JmhRunner;
import io.mrd.bench.multi.InFlightBench;
import io.mrd.bench.multi.LargeAllocationBench;
import io.mrd.bench.multi.MultiProcessBench;
import io.mrd.bench.report.LookupPlot;
import io.mrd.bench.report.ReportTable;
import io.mrd.bench.report.ResultFile;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Entry point of {@code bench/target/mrd-bench.jar}, run by {@code scripts/bench}:
 * <pre>
 *   jmh    [--quick] --out DIR [--include REGEX]   JMH lookup benchmarks → DIR/jmh.{json,log,tsv}
 *   multi  [--quick] --out DIR                     daemon + secondaries   → DIR/multi.tsv, DIR/multi-logs/
 *   allocate [--quick] --out DIR                   1 and 8 GiB allocations → DIR/allocate.tsv, DIR/allocate-logs/
 *   inflight [--quick] --out DIR                   requests during a slow registration → DIR/inflight.tsv,
 *                                                  DIR/inflight-*.hgrm, DIR/inflight-logs/
 *   report --out DIR [--cores N] [--title TEXT]    every DIR/*.tsv        → DIR/table.md, DIR/lookup.png
 * </pre>
 * JMH's own launcher is in the jar too: {@code java -cp mrd-bench.jar org.openjdk.jmh.Main -l}.
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
        boolean quick = false;
        Path out = null;
        String include = null;
        int cores = Runtime.getRuntime().availableProcessors();
        String title = "";
        final List<String> rest = new ArrayList<>(List.of(args).subList(1, args.length));
        for (int i = 0; i < rest.size(); i++)
        {
            switch (rest.get(i))
            {
                case "--quick" -> quick = true;
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
        switch (command)
        {
            case "jmh" -> JmhRunner.run(quick, out, include);
            case "multi" -> MultiProcessBench.run(quick, out);
            case "allocate" -> LargeAllocationBench.run(quick, out);
            case "inflight" -> InFlightBench.run(quick, out);
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
        final Map<String, ResultFile.Result> results = ResultFile.readAll(out);
        final ReportTable table = new ReportTable(results, cores);
        final String markdown = table.markdown();
        final int[] counts = table.targetCounts();
        final String summary = counts[1] + " of " + counts[0] + " targets met";
        Files.writeString(out.resolve("table.md"), (title.isEmpty() ? "" : title + "\n\n") + markdown + "\n" +
            summary + "\n", StandardCharsets.UTF_8);
        LookupPlot.write(results, title, out.resolve("lookup.png"));
        System.out.print(markdown);
        System.out.println();
        System.out.println(summary);
    }

    private static void usage()
    {
        System.err.println("""
            usage: java <mrd JVM flags> -jar mrd-bench.jar COMMAND ...
              jmh    [--quick] --out DIR [--include REGEX]   JMH lookup benchmarks
              multi  [--quick] --out DIR                     daemon + secondary processes
              allocate [--quick] --out DIR                   allocate + first key of 1 and 8 GiB
              inflight [--quick] --out DIR                   ALLOC/FREE/CREATE_MR during a slow registration
              report --out DIR [--cores N] [--title TEXT]    table.md and lookup.png from DIR/*.tsv
            scripts/bench runs them all with the C references.""");
    }
}
