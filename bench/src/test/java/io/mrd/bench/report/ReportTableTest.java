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
        put("java", "tophalf.mru", 1.1);
        put("c", "tophalf.mru", 1.2);
        put("java", "tophalf.other", 15);
        put("c", "tophalf.other", 12);
        put("java", "global.4096", 40);
        put("c", "global.4096", 20);
        final ReportTable table = new ReportTable(results, 2);
        final Row top = row(table, "top-half hit, MRU");
        assertEquals("1.10 ns", top.value());
        assertEquals("1.20 ns", top.reference());
        assertEquals("0.92×", top.ratio());
        assertEquals("≤ 1.00× C", top.target());
        assertEquals("yes", top.met());
        final Row other = row(table, "top-half hit, other slot");
        assertEquals("1.25×", other.ratio());
        assertEquals("≤ 1.20× C", other.target());
        assertEquals("no", other.met());
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
    void createRoundTripComparesP50AndP99WithThePingPongEach()
    {
        put("multi", "create.existing.p50", 20);
        put("multi", "create.existing.p99", 60);
        put("multi", "create.existing.p999", 200);
        put("c", "pingpong.p50", 25);
        put("c", "pingpong.p99", 40);
        final ReportTable table = new ReportTable(results, 2);
        final Row p50 = row(table, "create round trip, MR exists (protocol + primary lookup), p50");
        assertEquals("0.80× (p50)", p50.ratio());
        assertEquals("p50 ≤ 0.80× C ping-pong", p50.target());
        assertEquals("yes", p50.met());
        assertTrue(p50.value().startsWith("p50 20.0 / p99 60.0 / p99.9 200 µs"), p50.value());
        final Row p99 = row(table, "create round trip, MR exists (protocol + primary lookup), p99");
        assertEquals("1.50× (p99)", p99.ratio());
        assertEquals("p99 ≤ 2.00× C ping-pong", p99.target());
        assertEquals("yes", p99.met());
        assertTrue(p99.reference().startsWith("ping-pong p50 25.0 / p99 40.0"), p99.reference());
        put("multi", "create.existing.p99", 81);
        assertEquals("no", row(new ReportTable(results, 2), "create round trip, MR exists (protocol + primary " +
            "lookup), p99").met());
    }

    @Test
    void newRegistrationMayExceedTheFreshMlockByTheMargin()
    {
        put("multi", "create.new.p50", 600);
        put("c", "fresh2m.p50", 400);
        final Row within = row(new ReportTable(results, 2), "create round trip, new 2 MiB registration");
        assertEquals("C + 200 µs (p50)", within.ratio());
        assertEquals("p50 ≤ C + 250 µs", within.target());
        assertEquals("yes", within.met());
        assertTrue(within.reference().startsWith("fresh 2 MiB mlock p50 400"), within.reference());
        put("multi", "create.new.p50", 651);
        final Row over = row(new ReportTable(results, 2), "create round trip, new 2 MiB registration");
        assertEquals("C + 251 µs (p50)", over.ratio());
        assertEquals("no", over.met());
        put("multi", "create.new.p50", 350);
        assertEquals("C − 50.0 µs (p50)", row(new ReportTable(results, 2), "create round trip, new 2 MiB").ratio());
    }

    @Test
    void largeAllocationsAreRatesWhereHigherIsBetter()
    {
        put("multi", "alloc.hugetlbfs", 0);
        put("multi", "alloc.1g.lookup", 2.0);
        put("multi", "alloc.1g.registered", 3.0);
        put("c", "populate.1g", 2.5);
        final ReportTable table = new ReportTable(results, 2);
        final Row lazy = row(table, "allocate + first lkey(addr, len), 1 GiB, tmpfs");
        assertEquals("2.00 GB/s", lazy.value());
        assertEquals("MAP_POPULATE + mlock 2.50 GB/s", lazy.reference());
        assertEquals("0.80×", lazy.ratio());
        assertEquals("≥ 1.00× C", lazy.target());
        assertEquals("no", lazy.met());
        final Row registered = row(table, "allocateRegistered (keys in the reply), 1 GiB, tmpfs");
        assertEquals("1.20×", registered.ratio());
        assertEquals("yes", registered.met());
        assertEquals("no (missing)", row(table, "allocateRegistered (keys in the reply), 8 GiB").met());
        put("multi", "alloc.hugetlbfs", 1);
        assertTrue(row(new ReportTable(results, 2), "allocateRegistered (keys in the reply), 1 GiB, hugetlbfs")
            .met().equals("yes"));
    }

    @Test
    void requestsDuringARegistrationCompareTheirP99WithoutIt()
    {
        put("multi", "inflight.busy.alloc.p99", 150);
        put("multi", "inflight.idle.alloc.p99", 100);
        put("multi", "inflight.busy.create.p99", 2_100_000);
        put("multi", "inflight.idle.create.p99", 100);
        final ReportTable table = new ReportTable(results, 2);
        final Row alloc = row(table, "ALLOC 2 MiB while another client registers");
        assertEquals("1.50× (p99)", alloc.ratio());
        assertEquals("p99 ≤ 2.00× without", alloc.target());
        assertEquals("yes", alloc.met());
        assertTrue(alloc.reference().startsWith("without: p50 ? / p99 100"), alloc.reference());
        assertEquals("no", row(table, "CREATE_MR of an existing MR while").met());
        assertEquals("no (missing)", row(table, "FREE 2 MiB while").met());
    }

    @Test
    void keyFromHandleStandsBesideTheCMruHitWithoutATarget()
    {
        put("java", "handle.lkey", 0.5);
        put("c", "tophalf.mru", 1.0);
        final Row row = row(new ReportTable(results, 2), "key from handle, RegisteredMemory.lkey()");
        assertEquals("0.50 ns", row.value());
        assertEquals("0.50×", row.ratio());
        assertEquals("—", row.target());
        assertEquals("—", row.met());
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

    @Test
    void poolRowsCompareWithNettyOfTheSameRun()
    {
        put("java", "poolAcquireRelease.4096", 24);
        put("java", "nettyAcquireRelease.4096", 20);
        put("java", "poolTwoThreads.65536", 30);
        put("java", "nettyTwoThreads.65536", 20);
        put("java", "poolKey.4096", 1.5);
        put("java", "tophalf.mru", 1.0);
        final ReportTable table = new ReportTable(results, 2);
        final Row one = row(table, "pool acquire + release, 4 KiB, 1 thread");
        assertEquals("24.0 ns", one.value());
        assertEquals("20.0 ns", one.reference());
        assertEquals("1.20×", one.ratio());
        assertEquals("≤ 1.20× Netty", one.target());
        assertEquals("yes", one.met());
        final Row two = row(table, "pool acquire + release, 64 KiB, 2 threads");
        assertEquals("1.50×", two.ratio());
        assertEquals("no", two.met());
        assertEquals("no (missing)", row(table, "pool acquire + release, 1 MiB, 1 thread").met());
        final Row key = row(table, "key from pooled buffer");
        assertEquals("1.50 ns", key.value());
        assertEquals("1.50×", key.ratio());
        assertEquals("—", key.met(), "no target");
    }

    // The event journal (issue 14) --------------------------------------------------------------------------

    @Test
    void journalAppendHasNoTargetAndStandsBesideTheRoundTripItIsAppendedOn()
    {
        put("java", "journalappend", 40);
        put("java", "journalappend2", 100);
        put("multi", "journal.off.allocfree.p50", 80);
        final ReportTable table = new ReportTable(results, 2);
        final Row one = row(table, "journal append, per event, 1 thread");
        assertEquals("40.0 ns", one.value());
        assertEquals("ALLOC + FREE round trip, journal off: p50 80.0 µs", one.reference());
        assertEquals("0.050% of it", one.ratio());
        assertEquals("—", one.target());
        assertEquals("—", one.met());
        final Row two = row(table, "journal append, per event, 2 threads");
        assertEquals("100 ns", two.value());
        assertEquals("1 thread: 40.0 ns", two.reference());
        assertEquals("2.50×", two.ratio());
        assertEquals("—", two.met());
    }

    @Test
    void journalOnOffRoundTripsCompareP50AgainstFivePercent()
    {
        put("multi", "journal.on.existing.p50", 21);
        put("multi", "journal.off.existing.p50", 20);
        put("multi", "journal.on.existing.p99", 50);
        put("multi", "journal.on.allocfree.p50", 106);
        put("multi", "journal.off.allocfree.p50", 100);
        final ReportTable table = new ReportTable(results, 2);
        final Row existing = row(table, "create round trip to an existing MR, journal on / off");
        assertEquals("1.05× (p50)", existing.ratio());
        assertEquals("p50 ≤ 1.05× off", existing.target());
        assertEquals("yes", existing.met());
        assertTrue(existing.value().startsWith("p50 21.0 / p99 50.0"), existing.value());
        assertTrue(existing.reference().startsWith("off: p50 20.0"), existing.reference());
        final Row allocFree = row(table, "ALLOC + FREE 2 MiB round trip, journal on / off");
        assertEquals("1.06× (p50)", allocFree.ratio());
        assertEquals("no", allocFree.met());
        final Row fresh = row(table, "create round trip, new 2 MiB registration, journal on / off");
        assertEquals("missing", fresh.value());
        assertEquals("no (missing)", fresh.met());
    }
}
