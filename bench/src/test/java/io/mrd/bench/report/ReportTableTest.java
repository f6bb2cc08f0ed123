package io.mrd.bench.report;

import io.mrd.bench.report.ReportTable.Row;
import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ReportTableTest
{
    private final Map<String, ResultFile.Result> results = new LinkedHashMap<>();

    private void put(final String source, final String row, final double value)
    {
        results.put(source + ":" + row, new ResultFile.Result(source, row, value, "ns", ""));
    }

    private Row row(final ReportTable table, final String labelStart)
    {
        return table.rows().stream().filter(r -> r.label().startsWith(labelStart)).findFirst().orElseThrow();
    }

    @Test
    void comparesJavaWithCAgainstTheTarget()
    {
        put("java", "tophalf.mru", 1.5);
        put("c", "tophalf.mru", 1.2);
        put("java", "global.4096", 40);
        put("c", "global.4096", 20);
        final ReportTable table = new ReportTable(results, 2);
        final Row top = row(table, "top-half hit, MRU");
        assertEquals("1.50 ns", top.value());
        assertEquals("1.20 ns", top.reference());
        assertEquals("1.25×", top.ratio());
        assertEquals("yes", top.met());
        final Row global = row(table, "global seqlock search, 4,096");
        assertEquals("2.00×", global.ratio());
        assertEquals("no", global.met());
    }

    @Test
    void aMissingMeasurementFailsItsTargetAndSaysSo()
    {
        final Row row = row(new ReportTable(results, 2), "global seqlock search, 1,048,576");
        assertEquals("missing", row.value());
        assertEquals("no (missing)", row.met());
    }

    @Test
    void writerRowIsTheThroughputRatioToNoWriter()
    {
        put("java", "globalwriter.0", 90);
        put("java", "globalwriter.100000", 100);
        final Row row = row(new ReportTable(results, 2), "global search, 65,536 entries, writer at 100k writes/s: Java");
        assertEquals("0.90× lookups/s", row.ratio());
        assertEquals("yes", row.met());
    }

    @Test
    void scalingTargetFollowsTheCores()
    {
        put("multi", "lookups.1.total", 10e6);
        put("multi", "lookups.2.total", 18e6);
        put("multi", "lookups.4.total", 19e6);
        final ReportTable twoCores = new ReportTable(results, 2);
        assertEquals("yes", row(twoCores, "lookups/s, 2 secondaries").met());
        assertEquals("n/a (2 cores)", row(twoCores, "lookups/s, 4 secondaries").met());
        final ReportTable eightCores = new ReportTable(results, 8);
        assertEquals("no", row(eightCores, "lookups/s, 4 secondaries").met());
        assertEquals("—", row(eightCores, "lookups/s, 2 secondaries").met());
    }

    @Test
    void failedLookupsAreShownAndFailTheTarget()
    {
        put("multi", "lookups.1.total", 10e6);
        put("multi", "lookups.1.writer.total", 9.5e6);
        put("multi", "lookups.1.writer.errors", 5);
        final Row row = row(new ReportTable(results, 2), "lookups/s, 1 secondary, writer");
        assertTrue(row.label().contains("5 lookups FAILED"), row.label());
        assertEquals("no (5 failed lookups)", row.met());
    }

    @Test
    void createRoundTripComparesP50WithThePingPong()
    {
        put("multi", "create.existing.p50", 30);
        put("multi", "create.existing.p99", 60);
        put("multi", "create.existing.p999", 200);
        put("c", "pingpong.p50", 25);
        final Row row = row(new ReportTable(results, 2), "create round trip, MR exists");
        assertEquals("1.20× (p50)", row.ratio());
        assertEquals("yes", row.met());
        assertTrue(row.value().startsWith("p50 30.0 / p99 60.0 / p99.9 200 µs"), row.value());
    }

    @Test
    void markdownHasOneLinePerRowAndCountsTargets()
    {
        final ReportTable table = new ReportTable(results, 2);
        final List<String> lines = table.markdown().lines().toList();
        assertEquals(table.rows().size() + 2, lines.size());
        assertTrue(lines.get(0).startsWith("| row | Java | C / reference | ratio | target | met? |"));
        final int[] counts = table.targetCounts();
        assertEquals(0, counts[1]);
        assertTrue(counts[0] >= 10, "rows with a target: " + counts[0]);
    }
}
