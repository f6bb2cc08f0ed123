package io.mrd.bench.report;

import io.mrd.bench.report.Format.Scale;
import io.mrd.bench.report.ReportTable.Row;

import java.util.ArrayList;
import java.util.List;

import static io.mrd.bench.report.Format.millis;
import static io.mrd.bench.report.Format.ns;
import static io.mrd.bench.report.Format.perPage;
import static io.mrd.bench.report.Format.ratio;
import static io.mrd.bench.report.ReportTable.DEVICE_COUNTS;
import static io.mrd.bench.report.ReportTable.compare;
import static io.mrd.bench.report.ReportTable.side;

/**
 * Issue 23's rows, several RDMA devices:
 * <ul>
 *   <li>the hit path of a cache of device 0 and of device 7 of 8 ({@code DeviceCacheBenchmark}), the MRU hit and
 *       the whole path over 64 MRs, each beside the C lookup reference of the same JMH round (DPDK keeps one
 *       cache per device, so one C loop is the reference of any device);</li>
 *   <li>one allocation of 1 GiB registered on 1, 2, 4 and 8 emulated devices ({@code DevicesBench}): its time
 *       beside the C reference's ({@code multi_reg_ref --once}) of the same device count and round; the daemon's
 *       minor faults per page (populated once: about 1, whatever the device count); the time on N devices
 *       against the time on 1 in the same round, mrd's and C's.</li>
 * </ul>
 */
final class DeviceRows
{
    /** The devices of the daemon the cache rows model, and the two whose caches they time: as DeviceCacheBenchmark. */
    private static final int CACHE_DEVICES = 8;
    private static final int[] CACHE_DEVICE_NUMBERS = {0, CACHE_DEVICES - 1};
    /** The "faults ≈ pages × 1": a tenth over one pass is what other threads of a JVM add. */
    static final double MAX_FAULTS_PER_PAGE = 1.1;
    /** The ceiling for the time on the most devices against the time on one. */
    static final double MAX_SCALING = 1.3;

    private final Results results;

    DeviceRows(final Results results)
    {
        this.results = results;
    }

    List<Row> rows()
    {
        final List<Row> rows = new ArrayList<>();
        for (final int device : CACHE_DEVICE_NUMBERS)
        {
            rows.add(versusC("device " + device + " of " + CACHE_DEVICES + ": top-half hit, MRU slot " +
                "(newCache(" + device + "))", "deviceMru." + device, "tophalf.mru", 1.0));
        }
        for (final int device : CACHE_DEVICE_NUMBERS)
        {
            rows.add(versusC("device " + device + " of " + CACHE_DEVICES + ": lkey(addr, len) whole path, 64 MRs " +
                "(newCache(" + device + "))", "deviceLkey." + device, "lkey.64", 1.2));
        }
        for (final int devices : DEVICE_COUNTS)
        {
            rows.add(compare("allocate-and-register 1 GiB on " + on(devices) + " (reference: C populate once + " +
                    "ibv_reg_mr per device in parallel)", side(results, "multi", "devices." + devices + ".ms",
                    Format::millis), side(results, "c", "devices.once." + devices, v -> "C " + millis(v)),
                ReportTable::quotient, Scale.TIMES, "", null));
        }
        for (final int devices : DEVICE_COUNTS)
        {
            rows.add(compare("allocate-and-register 1 GiB on " + on(devices) + ": the daemon's minor page faults " +
                    "per page (reference: C's)", side(results, "multi", "devices." + devices + ".faults",
                    Format::perPage), side(results, "c", "devices.once." + devices + ".faults", v -> "C " +
                    perPage(v)), (row, reference) -> row, Scale.PER_PAGE, "",
                Target.atMost(MAX_FAULTS_PER_PAGE, "≤ " + MAX_FAULTS_PER_PAGE + " per page (one pass)")));
        }
        final int most = DEVICE_COUNTS[DEVICE_COUNTS.length - 1];
        for (int i = 1; i < DEVICE_COUNTS.length; i++)
        {
            rows.add(scaling("multi", "devices.", DEVICE_COUNTS[i], "mrd", DEVICE_COUNTS[i] == most ?
                Target.atMost(MAX_SCALING, "≤ " + ratio(MAX_SCALING) + " 1 device") : null));
        }
        rows.add(scaling("c", "devices.once.", most, "C reference", null));
        return rows;
    }

    private Row versusC(final String label, final String row, final String cRow, final double maxRatio)
    {
        return compare(label, side(results, "java", row, Format::ns), side(results, "c", cRow, v -> "C " + ns(v)),
            ReportTable::quotient, Scale.TIMES, "", Target.atMost(maxRatio, "≤ " + ratio(maxRatio) + " C"));
    }

    /** The time on {@code devices} devices against the time on 1 of the same round and side. */
    private Row scaling(final String source, final String prefix, final int devices, final String who,
        final Target target)
    {
        final String suffix = source.equals("multi") ? ".ms" : "";
        return compare("allocate-and-register 1 GiB, " + who + ": " + on(devices) + " against 1 device",
            side(results, source, prefix + devices + suffix, Format::millis),
            side(results, source, prefix + 1 + suffix, v -> "1 device: " + millis(v)), ReportTable::quotient,
            Scale.TIMES, "", target);
    }

    private static String on(final int devices)
    {
        return devices + (devices == 1 ? " device" : " devices");
    }
}
