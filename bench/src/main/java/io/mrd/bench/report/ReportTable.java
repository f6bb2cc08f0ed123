package io.mrd.bench.report;

import io.mrd.bench.report.ResultFile.Result;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalDouble;

/**
 * The one table {@code scripts/bench} prints: every row of issues 6, 13 and 14, its Java value, the C reference (or
 * the value it is compared with), the ratio, the target and whether it was met. Built from the joined result
 * lines ({@link ResultFile}); a measurement that is missing shows as such and fails its target. Targets come in
 * four kinds: a ceiling on a ratio of times (lower is better), a floor on a ratio of rates (higher is better:
 * lookups/s, GB/s), a ceiling on a percentile's ratio, and an absolute margin over the reference in µs.
 */
public final class ReportTable
{
    /** Table sizes of the bottom-half rows. */
    public static final int[] BOTTOM_SIZES = {256, 4096, 65536};
    /** Table sizes of the global-cache rows. */
    public static final int[] GLOBAL_SIZES = {4096, 65536, 1048576};
    /** Secondary counts of the multi-process rows. */
    public static final int[] PROCESS_COUNTS = {1, 2, 4};
    /** Sizes in GiB of the allocate + first key rows, smallest first. */
    public static final int[] ALLOCATE_SIZES_GIB = {1, 8};
    /** Operations of the rows of requests while another client's registration is in flight. */
    public static final String[] INFLIGHT_OPERATIONS = {"alloc", "free", "create"};
    /** Buffer sizes of the pool rows (bytes), as PoolBenchmark's parameter. */
    public static final int[] POOL_SIZES = {4096, 65536, 1048576};
    /** Most a new 2 MiB registration's p50 may exceed the C reference's fresh 2 MiB mlock by, in µs. */
    public static final double NEW_REGISTRATION_MARGIN_US = 250;
    /** Most a round trip's p50 with the event journal may be over its p50 without it. */
    public static final double JOURNAL_MAX_RATIO = 1.05;

    static final String YES = "yes";
    static final String NO = "no";
    static final String NONE = "—";

    /**
     * One line of the table.
     */
    public record Row(String label, String value, String reference, String ratio, String target, String met)
    {
    }

    private final Map<String, Result> results;
    private final int cores;

    /**
     * @param results the joined results.
     * @param cores   the machine's cores: the 4-secondary scaling target needs at least 4, and on fewer the
     *                table asks of 2 secondaries what it asks of 4 (each its share: 3.5 / 4 per process).
     */
    public ReportTable(final Map<String, Result> results, final int cores)
    {
        this.results = results;
        this.cores = cores;
    }

    public List<Row> rows()
    {
        final List<Row> rows = new ArrayList<>();
        rows.add(versusC("top-half hit, MRU slot", "tophalf.mru", 1.0));
        rows.add(versusC("top-half hit, other slot", "tophalf.other", 1.2));
        rows.add(handle("key from handle, RegisteredMemory.lkey() (8 handles; C: MRU hit)", "handle.lkey"));
        rows.add(handle("key from handle, RegisteredMemory.keyPair() (8 handles; C: MRU hit)", "handle.keyPair"));
        for (final int size : BOTTOM_SIZES)
        {
            rows.add(versusC("bottom-half search, " + count(size) + " entries", "bottomhalf." + size, 0));
        }
        for (final int size : GLOBAL_SIZES)
        {
            rows.add(versusC("global seqlock search, " + count(size) + " entries", "global." + size, 1.5));
        }
        rows.add(versusC("lkey(addr, len) whole path, 4 MRs (top half)", "lkey.4", 1.15));
        rows.add(versusC("lkey(addr, len) whole path, 64 MRs (bottom half)", "lkey.64", 1.2));
        rows.add(writerJava());
        rows.add(writerC());
        rows.addAll(multiProcess());
        rows.add(createRoundTrip("create round trip, MR exists (protocol + primary lookup), p50", "p50", 0.8));
        rows.add(createRoundTrip("create round trip, MR exists (protocol + primary lookup), p99", "p99", 2.0));
        rows.add(newRegistration());
        rows.addAll(largeAllocations());
        rows.addAll(inFlight());
        rows.addAll(pool());
        rows.addAll(journal());
        return rows;
    }

    /**
     * @return the rows as a markdown table.
     */
    public String markdown()
    {
        final StringBuilder out = new StringBuilder();
        out.append("| row | Java | C / reference | ratio | target | met? |\n");
        out.append("|---|---:|---:|---:|---|---|\n");
        for (final Row row : rows())
        {
            out.append("| ").append(row.label()).append(" | ").append(row.value()).append(" | ")
                .append(row.reference()).append(" | ").append(row.ratio()).append(" | ").append(row.target())
                .append(" | ").append(row.met()).append(" |\n");
        }
        return out.toString();
    }

    /**
     * @return the number of rows with a target, and of those met, as {@code {withTarget, met}}.
     */
    public int[] targetCounts()
    {
        int withTarget = 0;
        int met = 0;
        for (final Row row : rows())
        {
            if (row.met().startsWith(YES) || row.met().startsWith(NO))
            {
                withTarget++;
                met += row.met().startsWith(YES) ? 1 : 0;
            }
        }
        return new int[] {withTarget, met};
    }

    private Row versusC(final String label, final String row, final double maxRatio)
    {
        final OptionalDouble java = value("java", row);
        final OptionalDouble c = value("c", row);
        final String target = maxRatio > 0 ? "≤ " + ratio(maxRatio) + " C" : NONE;
        if (java.isEmpty() || c.isEmpty())
        {
            return new Row(label, java.isPresent() ? ns(java.getAsDouble()) : "missing",
                c.isPresent() ? ns(c.getAsDouble()) : "missing", NONE, target, maxRatio > 0 ? NO + " (missing)" : NONE);
        }
        final double r = java.getAsDouble() / c.getAsDouble();
        return new Row(label, ns(java.getAsDouble()), ns(c.getAsDouble()), ratio(r), target,
            maxRatio > 0 ? yesNo(r <= maxRatio) : NONE);
    }

    private Row writerJava()
    {
        final String label = "global search, 65,536 entries, writer at 100k writes/s: Java" + rate("java");
        final OptionalDouble with = value("java", "globalwriter.100000");
        final OptionalDouble without = value("java", "globalwriter.0");
        if (with.isEmpty() || without.isEmpty())
        {
            return new Row(label, with.isPresent() ? ns(with.getAsDouble()) : "missing",
                without.isPresent() ? "no writer: " + ns(without.getAsDouble()) : "missing", NONE,
                "≥ 0.80× without", NO + " (missing)");
        }
        final double r = without.getAsDouble() / with.getAsDouble();
        return new Row(label, ns(with.getAsDouble()), "no writer: " + ns(without.getAsDouble()),
            ratio(r) + " lookups/s", "≥ 0.80× without", yesNo(r >= 0.8));
    }

    private Row writerC()
    {
        final String label = "global search, 65,536 entries, writer at 100k writes/s: C" + rate("c");
        final OptionalDouble with = value("c", "globalwriter.100000");
        final OptionalDouble without = value("c", "globalwriter.0");
        if (with.isEmpty() || without.isEmpty())
        {
            return new Row(label, NONE, "missing", NONE, "reference", NONE);
        }
        return new Row(label, NONE, ns(with.getAsDouble()) + " (no writer: " + ns(without.getAsDouble()) + ")",
            ratio(without.getAsDouble() / with.getAsDouble()) + " lookups/s", "reference", NONE);
    }

    private String rate(final String source)
    {
        final OptionalDouble rate = value(source, "globalwriter.rate");
        return rate.isPresent() ? String.format(Locale.ROOT, " (reached %,.0f/s)", rate.getAsDouble()) : "";
    }

    private List<Row> multiProcess()
    {
        final List<Row> rows = new ArrayList<>();
        final OptionalDouble one = value("multi", "lookups.1.total");
        for (final int n : PROCESS_COUNTS)
        {
            final long failed = errors(String.valueOf(n));
            final String label = "lookups/s, " + n + (n == 1 ? " secondary" : " secondaries, total") +
                perProcess("lookups." + n) + errorNote(failed);
            final OptionalDouble total = value("multi", "lookups." + n + ".total");
            if (n == 1)
            {
                rows.add(new Row(label, total.isPresent() ? perSecond(total.getAsDouble()) : "missing", NONE,
                    NONE, NONE, NONE));
                continue;
            }
            final double wanted = 3.5 * n / 4;
            final boolean applies = n == 4 ? cores >= 4 : cores < 4 && n <= cores;
            final String target = n == 4 ? "≥ 3.50× 1 secondary (≥ 4 cores)" :
                applies ? "≥ " + ratio(wanted) + " 1 secondary (" + cores + " cores: 3.5/4 per core)" : NONE;
            if (total.isEmpty() || one.isEmpty())
            {
                rows.add(new Row(label, total.isPresent() ? perSecond(total.getAsDouble()) : "missing",
                    one.isPresent() ? "1 secondary: " + perSecond(one.getAsDouble()) : "missing", NONE, target,
                    applies ? NO + " (missing)" : notApplicable(n)));
                continue;
            }
            final double r = total.getAsDouble() / one.getAsDouble();
            rows.add(new Row(label, perSecond(total.getAsDouble()), "1 secondary: " + perSecond(one.getAsDouble()),
                ratio(r), target, applies ? failedOr(failed, yesNo(r >= wanted)) : notApplicable(n)));
        }
        for (final int n : PROCESS_COUNTS)
        {
            final OptionalDouble writerRate = value("multi", "writer." + n + ".rate");
            final String writer = writerRate.isPresent() ?
                String.format(Locale.ROOT, " (reached %.0f/s)", writerRate.getAsDouble()) : "";
            final long failed = errors(n + ".writer");
            final String label = "lookups/s, " + n + (n == 1 ? " secondary" : " secondaries, total") +
                ", writer allocating+creating+freeing 100/s" + writer + errorNote(failed);
            final OptionalDouble with = value("multi", "lookups." + n + ".writer.total");
            final OptionalDouble without = value("multi", "lookups." + n + ".total");
            if (with.isEmpty() || without.isEmpty())
            {
                rows.add(new Row(label, with.isPresent() ? perSecond(with.getAsDouble()) : "missing",
                    without.isPresent() ? "no writer: " + perSecond(without.getAsDouble()) : "missing", NONE,
                    "≥ 0.80× without", NO + " (missing)"));
                continue;
            }
            final double r = with.getAsDouble() / without.getAsDouble();
            rows.add(new Row(label, perSecond(with.getAsDouble()), "no writer: " + perSecond(without.getAsDouble()),
                ratio(r), "≥ 0.80× without", failedOr(failed, yesNo(r >= 0.8))));
        }
        return rows;
    }

    private long errors(final String name)
    {
        final OptionalDouble failed = value("multi", "lookups." + name + ".errors");
        return failed.isPresent() ? (long)failed.getAsDouble() : 0;
    }

    private static String errorNote(final long failed)
    {
        return failed > 0 ? " — " + failed + " lookups FAILED (see multi-logs/)" : "";
    }

    private static String failedOr(final long failed, final String met)
    {
        return failed > 0 ? NO + " (" + failed + " failed lookups)" : met;
    }

    private String notApplicable(final int n)
    {
        return n == 4 && cores < 4 ? "n/a (" + cores + " cores)" : NONE;
    }

    private String perProcess(final String prefix)
    {
        final List<String> values = new ArrayList<>();
        for (int i = 0; ; i++)
        {
            final OptionalDouble v = value("multi", prefix + ".proc" + i);
            if (v.isEmpty())
            {
                break;
            }
            values.add(perSecond(v.getAsDouble()));
        }
        return values.size() > 1 ? " (each: " + String.join(", ", values) + ")" : "";
    }

    private Row createRoundTrip(final String label, final String percentile, final double maxRatio)
    {
        final OptionalDouble java = value("multi", "create.existing." + percentile);
        final OptionalDouble c = value("c", "pingpong." + percentile);
        final String target = percentile + " ≤ " + ratio(maxRatio) + " C ping-pong";
        final String javaText = java.isPresent() ? percentiles("multi", "create.existing") : "missing";
        final String cText = c.isPresent() ? "ping-pong " + percentiles("c", "pingpong") : "missing";
        if (java.isEmpty() || c.isEmpty())
        {
            return new Row(label, javaText, cText, NONE, target, NO + " (missing)");
        }
        final double r = java.getAsDouble() / c.getAsDouble();
        return new Row(label, javaText, cText, ratio(r) + " (" + percentile + ")", target, yesNo(r <= maxRatio));
    }

    /**
     * A new 2 MiB registration against the C reference's fresh 2 MiB {@code mlock}: an absolute margin, not a
     * ratio, because the round trip adds a fixed cost (protocol, hand-offs, bookkeeping) to what the pin costs.
     */
    private Row newRegistration()
    {
        final String label = "create round trip, new 2 MiB registration, p50";
        final OptionalDouble java = value("multi", "create.new.p50");
        final OptionalDouble c = value("c", "fresh2m.p50");
        final String target = "p50 ≤ C + " + micros(OptionalDouble.of(NEW_REGISTRATION_MARGIN_US)) + " µs";
        final String javaText = java.isPresent() ? percentiles("multi", "create.new") : "missing";
        final String cText = c.isPresent() ? "fresh 2 MiB mlock " + percentiles("c", "fresh2m") : "missing";
        if (java.isEmpty() || c.isEmpty())
        {
            return new Row(label, javaText, cText, NONE, target, NO + " (missing)");
        }
        final double over = java.getAsDouble() - c.getAsDouble();
        return new Row(label, javaText, cText, String.format(Locale.ROOT, "C %s %s µs (p50)", over < 0 ? "−" : "+",
            micros(OptionalDouble.of(Math.abs(over)))), target, yesNo(over <= NEW_REGISTRATION_MARGIN_US));
    }

    /**
     * Allocate + first key in GB/s against the C reference's {@code MAP_POPULATE} + {@code mlock}: higher is
     * better, so the ratio is Java / C and the target a floor.
     */
    private List<Row> largeAllocations()
    {
        final List<Row> rows = new ArrayList<>();
        final OptionalDouble huge = value("multi", "alloc.hugetlbfs");
        final String backing = huge.isEmpty() ? "" : huge.getAsDouble() > 0 ? ", hugetlbfs" : ", tmpfs";
        for (final int gib : ALLOCATE_SIZES_GIB)
        {
            final OptionalDouble c = value("c", "populate." + gib + "g");
            for (final String way : new String[] {"lookup", "registered"})
            {
                final String label = (way.equals("lookup") ? "allocate + first lkey(addr, len)" :
                    "allocateRegistered (keys in the reply)") + ", " + gib + " GiB" + backing;
                final OptionalDouble java = value("multi", "alloc." + gib + "g." + way);
                final String cText = c.isPresent() ? "MAP_POPULATE + mlock " + gbps(c.getAsDouble()) : "missing";
                if (java.isEmpty() || c.isEmpty())
                {
                    rows.add(new Row(label, java.isPresent() ? gbps(java.getAsDouble()) : "missing", cText, NONE,
                        "≥ 1.00× C", NO + " (missing)"));
                    continue;
                }
                final double r = java.getAsDouble() / c.getAsDouble();
                rows.add(new Row(label, gbps(java.getAsDouble()), cText, ratio(r), "≥ 1.00× C", yesNo(r >= 1.0)));
            }
        }
        return rows;
    }

    /**
     * One client's requests while another registers: p99 with the registration in flight against p99 without
     * it, both from the same run and daemon.
     */
    private List<Row> inFlight()
    {
        final List<Row> rows = new ArrayList<>();
        for (final String op : INFLIGHT_OPERATIONS)
        {
            final String name = switch (op)
            {
                case "alloc" -> "ALLOC 2 MiB";
                case "free" -> "FREE 2 MiB";
                default -> "CREATE_MR of an existing MR";
            };
            final String label = name + " while another client registers 1 GiB (2 s injected latency), p99";
            final OptionalDouble busy = value("multi", "inflight.busy." + op + ".p99");
            final OptionalDouble idle = value("multi", "inflight.idle." + op + ".p99");
            final String busyText = busy.isPresent() ? percentiles("multi", "inflight.busy." + op) : "missing";
            final String idleText = idle.isPresent() ? "without: " + percentiles("multi", "inflight.idle." + op) :
                "missing";
            if (busy.isEmpty() || idle.isEmpty())
            {
                rows.add(new Row(label, busyText, idleText, NONE, "p99 ≤ 2.00× without", NO + " (missing)"));
                continue;
            }
            final double r = busy.getAsDouble() / idle.getAsDouble();
            rows.add(new Row(label, busyText, idleText, ratio(r) + " (p99)", "p99 ≤ 2.00× without",
                yesNo(r <= 2.0)));
        }
        return rows;
    }

    /**
     * The buffer pool (issue 14): acquire + release beside Netty's PooledByteBufAllocator of the same size in
     * the same JMH run, from one and two threads, and the key of a pooled buffer beside the MrCache MRU hit.
     */
    private List<Row> pool()
    {
        final List<Row> rows = new ArrayList<>();
        for (final String threads : new String[] {"AcquireRelease", "TwoThreads"})
        {
            for (final int size : POOL_SIZES)
            {
                final String label = "pool acquire + release, " + (size >= 1 << 20 ? (size >> 20) + " MiB" :
                    (size >> 10) + " KiB") + (threads.equals("TwoThreads") ? ", 2 threads" : ", 1 thread") +
                    " (reference: Netty PooledByteBufAllocator)";
                rows.add(versus(label, "pool" + threads + "." + size, "netty" + threads + "." + size, 1.2));
            }
        }
        final OptionalDouble key = value("java", "poolKey.4096");
        final OptionalDouble mru = value("java", "tophalf.mru");
        rows.add(new Row("key from pooled buffer, PooledBuffer.lkey() (8 buffers; reference: MrCache MRU hit)",
            key.isPresent() ? ns(key.getAsDouble()) : "missing", mru.isPresent() ? ns(mru.getAsDouble()) : "missing",
            key.isPresent() && mru.isPresent() ? ratio(key.getAsDouble() / mru.getAsDouble()) : NONE, NONE, NONE));
        return rows;
    }

    /** Two Java rows of one run: {@code row}'s time against {@code reference}'s, a ceiling on the ratio. */
    private Row versus(final String label, final String row, final String reference, final double maxRatio)
    {
        final OptionalDouble java = value("java", row);
        final OptionalDouble ref = value("java", reference);
        final String target = "≤ " + ratio(maxRatio) + " Netty";
        if (java.isEmpty() || ref.isEmpty())
        {
            return new Row(label, java.isPresent() ? ns(java.getAsDouble()) : "missing",
                ref.isPresent() ? ns(ref.getAsDouble()) : "missing", NONE, target, NO + " (missing)");
        }
        final double r = java.getAsDouble() / ref.getAsDouble();
        return new Row(label, ns(java.getAsDouble()), ns(ref.getAsDouble()), ratio(r), target, yesNo(r <= maxRatio));
    }

    /**
     * The event journal: the append cost of one event (no target: the issue sets none; beside it, as a scale,
     * the ALLOC + FREE round trip it is appended on, without the journal), and the round trips of two fresh
     * daemons, journal on and off, p50 against p50. A CREATE_MR of an existing MR journals nothing, so the
     * requests that do (ALLOC + FREE: ALLOC, FREE and its memory event; a new registration: MR_CREATED) have rows
     * of their own with the same target.
     */
    private List<Row> journal()
    {
        final List<Row> rows = new ArrayList<>();
        final OptionalDouble one = value("java", "journalappend");
        final OptionalDouble two = value("java", "journalappend2");
        final OptionalDouble allocFreeOff = value("multi", "journal.off.allocfree.p50");
        rows.add(new Row("journal append, per event, 1 thread (MappedEventJournal, 64 MiB on tmpfs)",
            one.isPresent() ? ns(one.getAsDouble()) : "missing",
            allocFreeOff.isPresent() ? "ALLOC + FREE round trip, journal off: p50 " + micros(allocFreeOff) + " µs" :
                "missing",
            one.isPresent() && allocFreeOff.isPresent() ? String.format(Locale.ROOT, "%.3f%% of it",
                100 * one.getAsDouble() / (allocFreeOff.getAsDouble() * 1e3)) : NONE, NONE, NONE));
        rows.add(new Row("journal append, per event, 2 threads appending at once",
            two.isPresent() ? ns(two.getAsDouble()) : "missing", one.isPresent() ? "1 thread: " +
            ns(one.getAsDouble()) : "missing",
            one.isPresent() && two.isPresent() ? ratio(two.getAsDouble() / one.getAsDouble()) : NONE, NONE, NONE));
        rows.add(journalOnOff("create round trip to an existing MR, journal on / off, p50 (journals nothing)",
            "existing"));
        rows.add(journalOnOff("ALLOC + FREE 2 MiB round trip, journal on / off, p50 (ALLOC, FREE, memory event)",
            "allocfree"));
        rows.add(journalOnOff("create round trip, new 2 MiB registration, journal on / off, p50 (MR_CREATED)",
            "new"));
        return rows;
    }

    private Row journalOnOff(final String label, final String kind)
    {
        final OptionalDouble on = value("multi", "journal.on." + kind + ".p50");
        final OptionalDouble off = value("multi", "journal.off." + kind + ".p50");
        final String target = "p50 ≤ " + ratio(JOURNAL_MAX_RATIO) + " off";
        final String onText = on.isPresent() ? percentiles("multi", "journal.on." + kind) : "missing";
        final String offText = off.isPresent() ? "off: " + percentiles("multi", "journal.off." + kind) : "missing";
        if (on.isEmpty() || off.isEmpty())
        {
            return new Row(label, onText, offText, NONE, target, NO + " (missing)");
        }
        final double r = on.getAsDouble() / off.getAsDouble();
        return new Row(label, onText, offText, ratio(r) + " (p50)", target, yesNo(r <= JOURNAL_MAX_RATIO));
    }

    /**
     * The key from a handle beside the C MRU hit: no target, the row shows what a kept buffer saves.
     */
    private Row handle(final String label, final String row)
    {
        final OptionalDouble java = value("java", row);
        final OptionalDouble c = value("c", "tophalf.mru");
        return new Row(label, java.isPresent() ? ns(java.getAsDouble()) : "missing",
            c.isPresent() ? ns(c.getAsDouble()) : "missing",
            java.isPresent() && c.isPresent() ? ratio(java.getAsDouble() / c.getAsDouble()) : NONE, NONE, NONE);
    }

    private String percentiles(final String source, final String prefix)
    {
        return "p50 " + micros(value(source, prefix + ".p50")) + " / p99 " + micros(value(source, prefix + ".p99")) +
            " / p99.9 " + micros(value(source, prefix + ".p999")) + " µs";
    }

    private OptionalDouble value(final String source, final String row)
    {
        final Result result = results.get(source + ":" + row);
        return null == result || Double.isNaN(result.value()) ? OptionalDouble.empty() :
            OptionalDouble.of(result.value());
    }

    static String yesNo(final boolean met)
    {
        return met ? YES : NO;
    }

    static String count(final int n)
    {
        return String.format(Locale.ROOT, "%,d", n);
    }

    static String ratio(final double r)
    {
        return String.format(Locale.ROOT, "%.2f×", r);
    }

    static String ns(final double ns)
    {
        if (ns < 10)
        {
            return String.format(Locale.ROOT, "%.2f ns", ns);
        }
        return ns < 100 ? String.format(Locale.ROOT, "%.1f ns", ns) : String.format(Locale.ROOT, "%.0f ns", ns);
    }

    static String micros(final OptionalDouble us)
    {
        if (us.isEmpty())
        {
            return "?";
        }
        final double v = us.getAsDouble();
        return v < 100 ? String.format(Locale.ROOT, "%.1f", v) : String.format(Locale.ROOT, "%.0f", v);
    }

    static String gbps(final double rate)
    {
        return String.format(Locale.ROOT, "%.2f GB/s", rate);
    }

    static String perSecond(final double rate)
    {
        return rate >= 1e6 ? String.format(Locale.ROOT, "%.1f M/s", rate / 1e6) :
            String.format(Locale.ROOT, "%.0f k/s", rate / 1e3);
    }
}
