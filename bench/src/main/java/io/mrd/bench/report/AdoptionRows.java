package io.mrd.bench.report;

import io.mrd.bench.report.Format.Scale;
import io.mrd.bench.report.ReportTable.Row;
import io.mrd.bench.report.ReportTable.Side;

import java.util.List;
import java.util.OptionalDouble;
import java.util.SortedMap;
import java.util.TreeMap;

import static io.mrd.bench.report.Format.MISSING;
import static io.mrd.bench.report.Format.millis;
import static io.mrd.bench.report.ReportTable.compare;
import static io.mrd.bench.report.ReportTable.side;

/**
 * Issue 22's rows ({@code AdoptionBench}): a successor adopting after {@code kill -9} against one starting afresh
 * whose client registers everything again, the registrations the successor made, a request waiting through the
 * gap and the lookups answered in it, and {@code mrd restart} under load against the same window without one.
 * The figures whose target the issue states in absolute terms (the adoption step ≤ 500 ms, no registration, no
 * failed request) are the row's own, its reference shown beside it.
 */
final class AdoptionRows
{
    /** The ceiling for a successor's adoption of 1,000 MRs. */
    static final double ADOPTION_MAX_MS = 500;

    private final Results results;

    AdoptionRows(final Results results)
    {
        this.results = results;
    }

    List<Row> rows()
    {
        final Side adopted = side(results, "multi", "adopt.startToServing", Format::millis);
        final OptionalDouble held = results.median("multi", "adopt.mrs");
        final String mrs = held.isPresent() ? Scale.COUNT.value(held.getAsDouble()) : "?";
        return List.of(
            compare("after kill -9: successor's process start → serving, adopting " + mrs + " MRs of 1 MiB " +
                    "(reference: a successor afresh + the client registering them again)", adopted, afresh(),
                ReportTable::quotient, Scale.TIMES, "", Target.atMost(1.0, "≤ 1.00× afresh")),
            compare("after kill -9: the successor's adoption step of " + mrs + " MRs (its log: control file → " +
                    "serving)",
                side(results, "multi", "adopt.step", Format::millis),
                side(results, "multi", "fresh.register", v -> "registering them again: " + millis(v)),
                (row, reference) -> row, Scale.MS, "", Target.atMost(ADOPTION_MAX_MS, "≤ " +
                    millis(ADOPTION_MAX_MS))),
            compare("after kill -9: registrations the adopting successor made (the device context's count)",
                side(results, "multi", "adopt.registrations", Scale.COUNT::value),
                side(results, "multi", "fresh.registrations", v -> "afresh: " + Scale.COUNT.value(v)), (row, reference) -> row,
                Scale.COUNT, "", Target.atMost(0, "0")),
            compare("a FREE issued in the gap (successor 1 s after the kill): its wait" + gapLookups(),
                side(results, "multi", "adopt.waited", Format::millis),
                side(results, "multi", "adopt.startToServing", v -> "successor start → serving: " + millis(v)),
                (row, reference) -> row, Scale.MS, "", null),
            compare("lookups of held memory in the gap that failed or gave a wrong key",
                side(results, "multi", "adopt.gapLookupErrors", Scale.COUNT::value),
                side(results, "multi", "adopt.gapLookups", v -> "answered: " + Scale.COUNT.value(v)), (row, reference) -> row,
                Scale.COUNT, "", Target.atMost(0, "0")),
            compare("mrd restart under ALLOC + FREE 2 MiB without pause: failed requests" + restartTime(),
                side(results, "multi", "restart.failed", Scale.COUNT::value),
                side(results, "multi", "restart.requests", v -> "requests: " + Scale.COUNT.value(v)), (row, reference) -> row,
                Scale.COUNT, "", Target.atMost(0, "0")),
            compare("mrd restart under ALLOC + FREE 2 MiB: the longest request (reference: the same window " +
                    "without a restart)", side(results, "multi", "restart.maxMs", Format::millis),
                side(results, "multi", "steady.maxMs", v -> "without: " + millis(v)), ReportTable::quotient,
                Scale.TIMES, "", null));
    }

    /** The reference of the first row, round by round: the afresh successor's start to serving plus registering. */
    private Side afresh()
    {
        final SortedMap<Integer, Double> start = results.rounds("multi", "fresh.startToServing");
        final SortedMap<Integer, Double> register = results.rounds("multi", "fresh.register");
        final SortedMap<Integer, Double> sum = new TreeMap<>();
        start.forEach((round, ms) ->
        {
            final Double more = register.get(round);
            if (null != more)
            {
                sum.put(round, ms + more);
            }
        });
        final OptionalDouble median = sum.isEmpty() ? OptionalDouble.empty() :
            OptionalDouble.of(Spread.of(sum.values()).median());
        return new Side(sum, median.isPresent() ? "afresh " + millis(median.getAsDouble()) : MISSING);
    }

    private String gapLookups()
    {
        final OptionalDouble lookups = results.median("multi", "adopt.gapLookups");
        return lookups.isPresent() ? " (meanwhile " + Scale.COUNT.value(lookups.getAsDouble()) + " lookups of held memory)" : "";
    }

    private String restartTime()
    {
        final OptionalDouble ms = results.median("multi", "restart.ms");
        return ms.isPresent() ? " (mrd restart: " + millis(ms.getAsDouble()) + " from command to exit)" : "";
    }

}
