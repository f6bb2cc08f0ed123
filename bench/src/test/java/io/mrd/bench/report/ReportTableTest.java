package io.mrd.bench.report;

import io.mrd.bench.report.ReportTable.Row;
import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

class ReportTableTest
{
    private final Results results = new Results();

    /** A value of round 1: a row and its reference each measured once. */
    private void put(final String source, final String row, final double value)
    {
        put(source, row, 1, value);
    }

    private void put(final String source, final String row, final int round, final double value)
    {
        results.add(new ResultFile.Result(source, row, round, value, "ns", ""));
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
        assertEquals("met", top.verdict());
        final Row other = row(table, "top-half hit, other slot");
        assertEquals("1.25×", other.ratio());
        assertEquals("≤ 1.20× C", other.target());
        assertEquals("no", other.verdict());
        final Row global = row(table, "global seqlock search, 4,096");
        assertEquals("2.00×", global.ratio());
        assertEquals("no", global.verdict());
    }

    @Test
    void aMissingMeasurementFailsItsTargetAndSaysSo()
    {
        final Row row = row(new ReportTable(results, 2), "global seqlock search, 1,048,576");
        assertEquals("missing", row.value());
        assertEquals("no (missing)", row.verdict());
    }

    @Test
    void writerRowIsTheThroughputRatioToNoWriter()
    {
        put("java", "globalwriter.0", 90);
        put("java", "globalwriter.100000", 100);
        final Row row = row(new ReportTable(results, 2), "global search, 65,536 entries, writer at 100k writes/s: Java");
        assertEquals("0.90× lookups/s", row.ratio());
        assertEquals("met", row.verdict());
    }

    @Test
    void scalingTargetFollowsTheCores()
    {
        put("multi", "lookups.1.total", 10e6);
        put("multi", "lookups.2.total", 18e6);
        put("multi", "lookups.4.total", 19e6);
        final ReportTable twoCores = new ReportTable(results, 2);
        assertEquals("met", row(twoCores, "lookups/s, 2 secondaries").verdict());
        assertEquals("n/a (2 cores)", row(twoCores, "lookups/s, 4 secondaries").verdict());
        final ReportTable eightCores = new ReportTable(results, 8);
        assertEquals("no", row(eightCores, "lookups/s, 4 secondaries").verdict());
        assertEquals("—", row(eightCores, "lookups/s, 2 secondaries").verdict());
    }

    @Test
    void failedLookupsAreShownAndFailTheTarget()
    {
        put("multi", "lookups.1.total", 10e6);
        put("multi", "lookups.1.writer.total", 9.5e6);
        put("multi", "lookups.1.writer.errors", 5);
        final Row row = row(new ReportTable(results, 2), "lookups/s, 1 secondary, writer");
        assertTrue(row.label().contains("5 lookups FAILED"), row.label());
        assertEquals("no (5 failed lookups)", row.verdict());
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
        assertEquals("p50 ≤ 1.10× C ping-pong", p50.target());
        assertEquals("met", p50.verdict());
        assertTrue(p50.value().startsWith("p50 20.0 / p99 60.0 / p99.9 200 µs"), p50.value());
        final Row p99 = row(table, "create round trip, MR exists (protocol + primary lookup), p99");
        assertEquals("1.50× (p99)", p99.ratio());
        assertEquals("p99 ≤ 2.00× C ping-pong", p99.target());
        assertEquals("met", p99.verdict());
        assertTrue(p99.reference().startsWith("ping-pong warm p50 25.0 / p99 40.0"), p99.reference());
        put("multi", "create.existing.p99", 81);
        assertEquals("no", row(new ReportTable(results, 2), "create round trip, MR exists (protocol + primary " +
            "lookup), p99").verdict());
    }

    @Test
    void newRegistrationMayExceedTheFreshMlockByTheMargin()
    {
        put("multi", "create.new.p50", 600);
        put("c", "fresh2m.p50", 400);
        final Row within = row(new ReportTable(results, 2), "create round trip, new 2 MiB registration");
        assertEquals("C + 200 µs (p50)", within.ratio());
        assertEquals("p50 ≤ C + 250 µs", within.target());
        assertEquals("met", within.verdict());
        assertTrue(within.reference().startsWith("fresh 2 MiB mlock p50 400"), within.reference());
        put("multi", "create.new.p50", 651);
        final Row over = row(new ReportTable(results, 2), "create round trip, new 2 MiB registration");
        assertEquals("C + 251 µs (p50)", over.ratio());
        assertEquals("no", over.verdict());
        put("multi", "create.new.p50", 350);
        assertEquals("C − 50.0 µs (p50)", row(new ReportTable(results, 2), "create round trip, new 2 MiB").ratio());
    }

    @Test
    void largeAllocationsAreRatesWhereHigherIsBetter()
    {
        put("multi", "alloc.hugetlbfs", 0, 0);
        put("multi", "alloc.1g.lookup", 2.0);
        put("multi", "alloc.1g.registered", 3.0);
        put("c", "populate.1g", 2.5);
        final ReportTable table = new ReportTable(results, 2);
        final Row lazy = row(table, "allocate + first lkey(addr, len), 1 GiB, tmpfs");
        assertEquals("2.00 GB/s", lazy.value());
        assertEquals("MAP_POPULATE + mlock 2.50 GB/s", lazy.reference());
        assertEquals("0.80×", lazy.ratio());
        assertEquals("≥ 1.00× C", lazy.target());
        assertEquals("no", lazy.verdict());
        final Row registered = row(table, "allocateRegistered (keys in the reply), 1 GiB, tmpfs");
        assertEquals("1.20×", registered.ratio());
        assertEquals("met", registered.verdict());
        assertEquals("no (missing)", row(table, "allocateRegistered (keys in the reply), 8 GiB").verdict());
        put("multi", "alloc.hugetlbfs", 0, 1);
        assertEquals("met", row(new ReportTable(results, 2), "allocateRegistered (keys in the reply), 1 GiB, hugetlbfs")
            .verdict());
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
        assertEquals("met", alloc.verdict());
        assertTrue(alloc.reference().startsWith("without: p50 ? / p99 100"), alloc.reference());
        assertEquals("no", row(table, "CREATE_MR of an existing MR while").verdict());
        assertEquals("no (missing)", row(table, "FREE 2 MiB while").verdict());
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
        assertEquals("—", row.verdict());
    }

    @Test
    void markdownHasOneLinePerRowAndCountsTargets()
    {
        final ReportTable table = new ReportTable(results, 2);
        final List<String> lines = table.markdown().lines().toList();
        assertEquals(table.rows().size() + 2, lines.size());
        assertEquals("| row | Java | C / reference | ratio | min–max | rounds | target | verdict |", lines.get(0));
        final ReportTable.Counts counts = table.targetCounts();
        assertEquals(0, counts.met());
        assertEquals(0, counts.unstable());
        assertEquals(counts.withTarget(), counts.missed(), "every target is missing");
        assertTrue(counts.withTarget() >= 10, "rows with a target: " + counts.withTarget());
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
        assertEquals("met", one.verdict());
        final Row two = row(table, "pool acquire + release, 64 KiB, 2 threads");
        assertEquals("1.50×", two.ratio());
        assertEquals("no", two.verdict());
        assertEquals("no (missing)", row(table, "pool acquire + release, 1 MiB, 1 thread").verdict());
        final Row key = row(table, "key from pooled buffer");
        assertEquals("1.50 ns", key.value());
        assertEquals("1.50×", key.ratio());
        assertEquals("—", key.verdict(), "no target");
    }

    // The event journal (issue 14) --------------------------------------------------------------------------

    @Test
    void journalAppendHasNoTargetAndStandsBesideTheRoundTripItIsAppendedOn()
    {
        put("java", "journalappend", 40);
        put("java", "journalappend2", 100);
        put("multi", "nojournal.allocfree.p50", 80);
        final ReportTable table = new ReportTable(results, 2);
        final Row one = row(table, "journal append, per event, 1 thread");
        assertEquals("40.0 ns", one.value());
        assertEquals("ALLOC + FREE round trip, journal off: p50 80.0 µs", one.reference());
        assertEquals("0.050% of it", one.ratio());
        assertEquals("0.050–0.050%", one.range());
        assertEquals("—", one.target());
        assertEquals("—", one.verdict());
        final Row two = row(table, "journal append, per event, 2 threads");
        assertEquals("100 ns", two.value());
        assertEquals("1 thread: 40.0 ns", two.reference());
        assertEquals("2.50×", two.ratio());
        assertEquals("—", two.verdict());
    }

    @Test
    void journalOnOffRoundTripsCompareP50AgainstFivePercent()
    {
        put("multi", "create.existing.p50", 21);
        put("multi", "nojournal.existing.p50", 20);
        put("multi", "create.existing.p99", 50);
        put("multi", "create.allocfree.p50", 106);
        put("multi", "nojournal.allocfree.p50", 100);
        final ReportTable table = new ReportTable(results, 2);
        final Row existing = row(table, "create round trip to an existing MR, journal on / off");
        assertEquals("1.05× (p50)", existing.ratio());
        assertEquals("p50 ≤ 1.05× off", existing.target());
        assertEquals("met", existing.verdict());
        assertTrue(existing.value().startsWith("p50 21.0 / p99 50.0"), existing.value());
        assertTrue(existing.reference().startsWith("off: p50 20.0"), existing.reference());
        final Row allocFree = row(table, "ALLOC + FREE 2 MiB round trip, journal on / off");
        assertEquals("1.06× (p50)", allocFree.ratio());
        assertEquals("no", allocFree.verdict());
        final Row fresh = row(table, "create round trip, new 2 MiB registration, journal on / off");
        assertEquals("missing", fresh.value());
        assertEquals("no (missing)", fresh.verdict());
    }

    // Rounds -----------------------------------------------------------------------------------------------

    @Test
    void theFigureIsPerRoundAndItsRangeCrossingTheTargetIsUnstable()
    {
        // The top-half other slot: 1.11×, 1.51×, 1.21× against ≤ 1.20×.
        final double[] java = {11.1, 15.1, 12.1};
        for (int round = 1; round <= java.length; round++)
        {
            put("java", "tophalf.other", round, java[round - 1]);
            put("c", "tophalf.other", round, 10);
        }
        final Row row = row(new ReportTable(results, 2), "top-half hit, other slot");
        assertEquals("12.1 ns", row.value(), "the median of the Java rounds");
        assertEquals("10.0 ns", row.reference());
        assertEquals("1.21×", row.ratio());
        assertEquals("1.11–1.51×", row.range());
        assertEquals("3", row.rounds());
        assertEquals("unstable", row.verdict());
    }

    @Test
    void aSlowRoundOnBothSidesDoesNotMoveTheRatio()
    {
        put("java", "global.65536", 1, 140);
        put("c", "global.65536", 1, 100);
        put("java", "global.65536", 2, 280);
        put("c", "global.65536", 2, 200);
        final Row row = row(new ReportTable(results, 2), "global seqlock search, 65,536");
        assertEquals("1.40×", row.ratio());
        assertEquals("1.40–1.40×", row.range());
        assertEquals("2", row.rounds());
        assertEquals("met", row.verdict());
    }

    @Test
    void onlyRoundsWithBothSidesCount()
    {
        put("java", "lkey.4", 1, 10);
        put("c", "lkey.4", 1, 10);
        put("java", "lkey.4", 2, 20);
        put("c", "lkey.4", 3, 5);
        final Row row = row(new ReportTable(results, 2), "lkey(addr, len) whole path, 4 MRs");
        assertEquals("1", row.rounds());
        assertEquals("1.00×", row.ratio());
        assertEquals("met", row.verdict());
    }

    @Test
    void theMarginOfANewRegistrationIsPerRoundToo()
    {
        put("multi", "create.new.p50", 1, 600);
        put("c", "fresh2m.p50", 1, 400);
        put("multi", "create.new.p50", 2, 900);
        put("c", "fresh2m.p50", 2, 500);
        final Row row = row(new ReportTable(results, 2), "create round trip, new 2 MiB registration");
        assertEquals("C + 300 µs (p50)", row.ratio(), "the median of +200 and +400");
        assertEquals("+200 to +400 µs", row.range());
        assertEquals("unstable", row.verdict());
    }

    @Test
    void failedLookupsOfEveryRoundAreSummed()
    {
        put("multi", "lookups.2.total", 1, 20e6);
        put("multi", "lookups.1.total", 1, 10e6);
        put("multi", "lookups.2.errors", 1, 2);
        put("multi", "lookups.2.errors", 2, 3);
        final Row row = row(new ReportTable(results, 2), "lookups/s, 2 secondaries");
        assertEquals("no (5 failed lookups)", row.verdict());
    }

    @Test
    void thePingPongIdleFigureIsShownBesideTheWarmOne()
    {
        put("multi", "create.existing.p50", 10);
        put("c", "pingpong.p50", 20);
        put("c", "pingpong.idle.p50", 58);
        put("c", "pingpong.idle.pause", 0, 1000);
        final Row row = row(new ReportTable(results, 2), "create round trip, MR exists (protocol + primary lookup), " +
            "p50");
        assertTrue(row.reference().endsWith("; idle (after a 1000 µs pause): p50 58.0 µs"), row.reference());
        assertEquals("0.50× (p50)", row.ratio());
    }

    @Test
    void countsSayHowManyTargetsWereMetUnstableAndMissed()
    {
        put("java", "tophalf.mru", 1, 1.0);
        put("c", "tophalf.mru", 1, 1.0);
        put("java", "tophalf.other", 1, 11);
        put("java", "tophalf.other", 2, 13);
        put("c", "tophalf.other", 1, 10);
        put("c", "tophalf.other", 2, 10);
        final ReportTable.Counts counts = new ReportTable(results, 2).targetCounts();
        assertEquals(1, counts.met());
        assertEquals(1, counts.unstable());
        assertEquals(counts.withTarget() - 2, counts.missed());
        assertTrue(counts.summary().startsWith("1 of " + counts.withTarget() + " targets met, 1 unstable, "),
            counts.summary());
    }

    @Test
    void adoptionRowsCompareWithStartingAfreshRoundByRoundAndHoldTheAbsoluteTargets()
    {
        for (int round = 1; round <= 2; round++)
        {
            put("multi", "adopt.mrs", round, 1000);
            put("multi", "adopt.startToServing", round, 1000 * round);
            put("multi", "fresh.startToServing", round, 900);
            // round 2: afresh 900 + 1,100 = 2,000 ms against 2,000 ms adopting: 1.00x, still met
            put("multi", "fresh.register", round, round == 1 ? 3100 : 1100);
            put("multi", "adopt.step", round, round == 1 ? 400 : 600);
            put("multi", "adopt.registrations", round, 0);
            put("multi", "fresh.registrations", round, 1000);
            put("multi", "restart.failed", round, round - 1);
            put("multi", "restart.requests", round, 5000);
        }
        final ReportTable table = new ReportTable(results, 2);
        final Row start = row(table, "after kill -9: successor's process start → serving, adopting 1,000 MRs");
        assertEquals("0.63×", start.ratio(), "the median of 1000/4000 and 2000/2000");
        assertEquals("0.25–1.00×", start.range());
        assertEquals("met", start.verdict());
        final Row step = row(table, "after kill -9: the successor's adoption step of 1,000 MRs");
        assertEquals("500 ms", step.ratio(), "the row's own milliseconds, not a ratio");
        assertEquals("unstable", step.verdict(), "400 ms meets 500 ms, 600 ms does not");
        assertEquals("registering them again: 2,100 ms", step.reference());
        final Row registrations = row(table, "after kill -9: registrations the adopting successor made");
        assertEquals("0", registrations.value());
        assertEquals("afresh: 1,000", registrations.reference());
        assertEquals("met", registrations.verdict());
        assertEquals("unstable", row(table, "mrd restart under ALLOC + FREE 2 MiB without pause: failed").verdict(),
            "one failed request in round 2");
        assertEquals("no (missing)", row(table, "lookups of held memory in the gap").verdict());
    }

    @Test
    void deviceRowsCompareEachDeviceWithCAndEightDevicesWithOneRoundByRound()
    {
        put("java", "deviceMru.7", 1.0);
        put("c", "tophalf.mru", 1.25);
        put("java", "deviceLkey.0", 60);
        put("c", "lkey.64", 50);
        for (int round = 1; round <= 2; round++)
        {
            put("multi", "devices.1.ms", round, 1000);
            // round 1: 1,200 / 1,000 = 1.20x, met; round 2: 1,400 / 1,000 = 1.40x, not met
            put("multi", "devices.8.ms", round, 1000 + 200 * round);
            put("c", "devices.once.8", round, 800);
            put("c", "devices.once.1", round, 400);
            put("multi", "devices.8.faults", round, 1.02);
            put("c", "devices.once.8.faults", round, 1.03);
            put("multi", "devices.2.faults", round, round == 1 ? 1.01 : 2.0);
            put("c", "devices.once.2.faults", round, 1.01);
        }
        final ReportTable table = new ReportTable(results, 2);
        final Row mru = row(table, "device 7 of 8: top-half hit, MRU slot");
        assertEquals("0.80×", mru.ratio());
        assertEquals("C 1.25 ns", mru.reference());
        assertEquals("met", mru.verdict());
        final Row path = row(table, "device 0 of 8: lkey(addr, len) whole path, 64 MRs");
        assertEquals("1.20×", path.ratio());
        assertEquals("≤ 1.20× C", path.target());
        assertEquals("no (missing)", row(table, "device 7 of 8: lkey(addr, len)").verdict());
        final Row time = row(table, "allocate-and-register 1 GiB on 8 devices (reference");
        assertEquals("1,300 ms", time.value());
        assertEquals("C 800 ms", time.reference());
        assertEquals("1.63×", time.ratio(), "the median of 1200/800 and 1400/800");
        assertEquals(Format.NONE, time.target(), "no target: the issue sets none against C");
        final Row faults = row(table, "allocate-and-register 1 GiB on 8 devices: the daemon's minor page faults");
        assertEquals("1.020 per page", faults.ratio());
        assertEquals("C 1.030 per page", faults.reference());
        assertEquals("met", faults.verdict());
        assertEquals("unstable", row(table, "allocate-and-register 1 GiB on 2 devices: the daemon's minor").verdict(),
            "two passes in round 2");
        final Row scaling = row(table, "allocate-and-register 1 GiB, mrd: 8 devices against 1 device");
        assertEquals("1.30×", scaling.ratio());
        assertEquals("1.20–1.40×", scaling.range());
        assertEquals("≤ 1.30× 1 device", scaling.target());
        assertEquals("unstable", scaling.verdict());
        final Row c = row(table, "allocate-and-register 1 GiB, C reference: 8 devices against 1 device");
        assertEquals("2.00×", c.ratio());
        assertEquals(Format.NONE, c.target());
        assertEquals(Format.NONE, row(table, "allocate-and-register 1 GiB, mrd: 4 devices against 1").target());
    }
}
