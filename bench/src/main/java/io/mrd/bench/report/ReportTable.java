package io.mrd.bench.report;

import io.mrd.bench.report.Format.Scale;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.SortedMap;
import java.util.function.DoubleBinaryOperator;
import java.util.function.DoubleFunction;

import static io.mrd.bench.report.Format.MISSING;
import static io.mrd.bench.report.Format.NONE;
import static io.mrd.bench.report.Format.count;
import static io.mrd.bench.report.Format.gbps;
import static io.mrd.bench.report.Format.micros;
import static io.mrd.bench.report.Format.ns;
import static io.mrd.bench.report.Format.perSecond;
import static io.mrd.bench.report.Format.ratio;

/**
 * The one table {@code scripts/bench} prints: every row of issues 6, 13, 14, 22 and 23, its value and its reference's
 * (medians over the rounds), the row's figure against the reference (a ratio, or a margin in µs), that figure's
 * range over the rounds, how many rounds there were, the target and the verdict. Built from the joined result
 * lines ({@link Results}).
 * <p>
 * A row and its reference are measured in alternating rounds, back to back, so the figure is computed per round
 * (the row's round k against the reference's round k), and the median and the range are of those figures: drift
 * of the machine between rounds moves both sides of a round alike. The verdict is "met" when every round meets
 * the target, "unstable" when the range crosses it, "no" when no round meets it ({@link Target#verdict}); a
 * measurement that is missing shows as such and fails its target. Rows without a target still show their
 * figure and range.
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
    /** Device counts of the allocate-and-register rows of several devices (issue 23), fewest first. */
    public static final int[] DEVICE_COUNTS = {1, 2, 4, 8};
    /** Operations of the rows of requests while another client's registration is in flight. */
    public static final String[] INFLIGHT_OPERATIONS = {"alloc", "free", "create"};
    /** Buffer sizes of the pool rows (bytes), as PoolBenchmark's parameter. */
    public static final int[] POOL_SIZES = {4096, 65536, 1048576};
    /** Most a new 2 MiB registration's p50 may exceed the C reference's fresh 2 MiB mlock by, in µs. */
    public static final double NEW_REGISTRATION_MARGIN_US = 250;
    /** Most a round trip's p50 with the event journal may be over its p50 without it. */
    public static final double JOURNAL_MAX_RATIO = 1.05;

    static final String MISSING_VERDICT = Target.Verdict.NO.word() + " (missing)";

    /**
     * One line of the table: {@code value} and {@code reference} are medians over the rounds, {@code ratio} the
     * median of the per-round figures and {@code range} their least and greatest.
     */
    public record Row(String label, String value, String reference, String ratio, String range, String rounds,
        String target, String verdict)
    {
        Row withVerdict(final String newVerdict)
        {
            return new Row(label, value, reference, ratio, range, rounds, target, newVerdict);
        }
    }

    /**
     * How many rows have a target, and of those how many were met, unstable and missed.
     */
    public record Counts(int withTarget, int met, int unstable, int missed)
    {
        public String summary()
        {
            return met + " of " + withTarget + " targets met, " + unstable + " unstable, " + missed + " not met";
        }
    }

    /** One side of a row: its values by round and the text that shows their median ({@link #MISSING} if none). */
    record Side(SortedMap<Integer, Double> rounds, String text)
    {
    }

    private final Results results;
    private final int cores;

    /**
     * @param results the joined results.
     * @param cores   the machine's cores: the 4-secondary scaling target needs at least 4, and on fewer the
     *                table asks of 2 secondaries what it asks of 4 (each its share: 3.5 / 4 per process).
     */
    public ReportTable(final Results results, final int cores)
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
        rows.add(writer("java", "Java"));
        rows.add(writer("c", "C"));
        rows.addAll(multiProcess());
        rows.add(createRoundTrip("create round trip, MR exists (protocol + primary lookup), p50", "p50", 1.1));
        rows.add(createRoundTrip("create round trip, MR exists (protocol + primary lookup), p99", "p99", 2.0));
        rows.add(createRoundTripVersusEpoll());
        rows.add(newRegistration());
        rows.addAll(largeAllocations());
        rows.addAll(inFlight());
        rows.addAll(pool());
        rows.addAll(journal());
        rows.addAll(new AdoptionRows(results).rows());
        rows.addAll(new DeviceRows(results).rows());
        return rows;
    }

    /**
     * @return the rows as a markdown table.
     */
    public String markdown()
    {
        final StringBuilder out = new StringBuilder();
        out.append("| row | Java | C / reference | ratio | min–max | rounds | target | verdict |\n");
        out.append("|---|---:|---:|---:|---:|---:|---|---|\n");
        for (final Row row : rows())
        {
            out.append("| ").append(String.join(" | ", row.label(), row.value(), row.reference(), row.ratio(),
                row.range(), row.rounds(), row.target(), row.verdict())).append(" |\n");
        }
        return out.toString();
    }

    /**
     * @return how many rows have a target (their verdict is met, unstable or no) and how they fared.
     */
    public Counts targetCounts()
    {
        int met = 0;
        int unstable = 0;
        int missed = 0;
        for (final Row row : rows())
        {
            final String word = row.verdict().split(" ")[0];
            if (word.equals(Target.Verdict.MET.word()))
            {
                met++;
            }
            else if (word.equals(Target.Verdict.UNSTABLE.word()))
            {
                unstable++;
            }
            else if (word.equals(Target.Verdict.NO.word()))
            {
                missed++;
            }
        }
        return new Counts(met + unstable + missed, met, unstable, missed);
    }

    // The common shape ---------------------------------------------------------------------------------------

    private Side side(final String source, final String row, final DoubleFunction<String> text)
    {
        return side(results, source, row, text);
    }

    static Side side(final Results results, final String source, final String row, final DoubleFunction<String> text)
    {
        final SortedMap<Integer, Double> rounds = results.rounds(source, row);
        final OptionalDouble median = results.median(source, row);
        return new Side(rounds, median.isPresent() ? text.apply(median.getAsDouble()) : MISSING);
    }

    /** A side shown as its percentiles (medians over the rounds), compared by one of them. */
    private Side percentiles(final String source, final String prefix, final String percentile, final String lead)
    {
        return side(source, prefix + "." + percentile, v -> lead + percentilesText(source, prefix));
    }

    /**
     * A row against its reference: the per-round figure {@code perRound(row, reference)}, its median and range,
     * the verdict against {@code target} (none: no verdict).
     */
    static Row compare(final String label, final Side row, final Side reference,
        final DoubleBinaryOperator perRound, final Scale scale, final String suffix, final Target target)
    {
        final Optional<Spread> spread = Spread.paired(row.rounds(), reference.rounds(), perRound);
        final String targetText = null == target ? NONE : target.text();
        if (spread.isEmpty())
        {
            return new Row(label, row.text(), reference.text(), NONE, NONE, "0", targetText,
                null == target ? NONE : MISSING_VERDICT);
        }
        final Spread s = spread.get();
        return new Row(label, row.text(), reference.text(), scale.value(s.median()) + suffix,
            scale.range(s.min(), s.max()), String.valueOf(s.rounds()), targetText,
            null == target ? NONE : target.verdict(s).word());
    }

    static double quotient(final double row, final double reference)
    {
        return row / reference;
    }

    // Lookups ---------------------------------------------------------------------------------------------------

    private Row versusC(final String label, final String row, final double maxRatio)
    {
        return compare(label, side("java", row, Format::ns), side("c", row, Format::ns), ReportTable::quotient,
            Scale.TIMES, "", maxRatio > 0 ? Target.atMost(maxRatio, "≤ " + ratio(maxRatio) + " C") : null);
    }

    /**
     * The key from a handle beside the C MRU hit: no target, the row shows what a kept buffer saves.
     */
    private Row handle(final String label, final String row)
    {
        return compare(label, side("java", row, Format::ns), side("c", "tophalf.mru", Format::ns),
            ReportTable::quotient, Scale.TIMES, "", null);
    }

    /**
     * The global search with a writer against the same search without one, as lookups/s (higher is better):
     * the Java row has the target, the C row is its reference.
     */
    private Row writer(final String source, final String language)
    {
        final OptionalDouble rate = results.median(source, "globalwriter.rate");
        final String label = "global search, 65,536 entries, writer at 100k writes/s: " + language +
            (rate.isPresent() ? String.format(Locale.ROOT, " (reached %,.0f/s)", rate.getAsDouble()) : "");
        final Side with = side(source, "globalwriter.100000", Format::ns);
        final Side without = side(source, "globalwriter.0", v -> "no writer: " + ns(v));
        final DoubleBinaryOperator lookupsPerSecond = (w, wo) -> wo / w;
        if (source.equals("java"))
        {
            return compare(label, with, without, lookupsPerSecond, Scale.TIMES, " lookups/s",
                Target.atLeast(0.8, "≥ 0.80× without"));
        }
        final Row row = compare(label, with, without, lookupsPerSecond, Scale.TIMES, " lookups/s", null);
        return new Row(label, NONE, with.text() + (without.rounds().isEmpty() ? "" : " (" + without.text() + ")"),
            row.ratio(), row.range(), row.rounds(), "reference", NONE);
    }

    // Multi-process lookups ------------------------------------------------------------------------------------

    private List<Row> multiProcess()
    {
        final List<Row> rows = new ArrayList<>();
        final Side one = side("multi", "lookups.1.total", v -> "1 secondary: " + perSecond(v));
        for (final int n : PROCESS_COUNTS)
        {
            final long failed = errors(String.valueOf(n));
            final String label = "lookups/s, " + n + (n == 1 ? " secondary" : " secondaries, total") +
                perProcess("lookups." + n) + errorNote(failed);
            final Side total = side("multi", "lookups." + n + ".total", Format::perSecond);
            if (n == 1)
            {
                final int rounds = total.rounds().size();
                rows.add(new Row(label, total.text(), NONE, NONE, rounds > 0 ? range(total, Format::perSecond) : NONE,
                    String.valueOf(rounds), NONE, NONE));
                continue;
            }
            final double wanted = 3.5 * n / 4;
            final boolean applies = n == 4 ? cores >= 4 : cores < 4 && n <= cores;
            final String targetText = n == 4 ? "≥ 3.50× 1 secondary (≥ 4 cores)" :
                applies ? "≥ " + ratio(wanted) + " 1 secondary (" + cores + " cores: 3.5/4 per core)" : NONE;
            final Row row = compare(label, total, one, ReportTable::quotient, Scale.TIMES, "",
                Target.atLeast(wanted, targetText));
            rows.add(applies ? failedOr(failed, row) : new Row(label, row.value(), row.reference(), row.ratio(),
                row.range(), row.rounds(), targetText, n == 4 && cores < 4 ? "n/a (" + cores + " cores)" : NONE));
        }
        for (final int n : PROCESS_COUNTS)
        {
            final OptionalDouble writerRate = results.median("multi", "writer." + n + ".rate");
            final OptionalDouble writerCores = results.median("multi", "writer." + n + ".cores");
            final OptionalDouble daemonCores = results.median("multi", "writer." + n + ".daemonCores");
            final String cpu = writerCores.isPresent() && daemonCores.isPresent() ?
                String.format(Locale.ROOT, "; CPU: writer %.2f, daemon %.2f cores", writerCores.getAsDouble(),
                    daemonCores.getAsDouble()) : "";
            final String writer = writerRate.isPresent() ?
                String.format(Locale.ROOT, " (reached %.0f/s%s)", writerRate.getAsDouble(), cpu) : "";
            final long failed = errors(n + ".writer");
            final String label = "lookups/s, " + n + (n == 1 ? " secondary" : " secondaries, total") +
                ", writer allocating+creating+freeing 100/s" + writer + errorNote(failed);
            rows.add(failedOr(failed, compare(label, side("multi", "lookups." + n + ".writer.total",
                    Format::perSecond), side("multi", "lookups." + n + ".total", v -> "no writer: " + perSecond(v)),
                ReportTable::quotient, Scale.TIMES, "", Target.atLeast(0.8, "≥ 0.80× without"))));
        }
        return rows;
    }

    /** A side's own range over its rounds, for a row with no reference. */
    private static String range(final Side side, final DoubleFunction<String> text)
    {
        final Spread spread = Spread.of(side.rounds().values());
        return text.apply(spread.min()) + " – " + text.apply(spread.max());
    }

    private long errors(final String name)
    {
        return (long)results.sum("multi", "lookups." + name + ".errors");
    }

    private static String errorNote(final long failed)
    {
        return failed > 0 ? " — " + failed + " lookups FAILED (see multi-logs/)" : "";
    }

    private static Row failedOr(final long failed, final Row row)
    {
        return failed > 0 ? row.withVerdict(Target.Verdict.NO.word() + " (" + failed + " failed lookups)") : row;
    }

    private String perProcess(final String prefix)
    {
        final List<String> values = new ArrayList<>();
        for (int i = 0; ; i++)
        {
            final OptionalDouble v = results.median("multi", prefix + ".proc" + i);
            if (v.isEmpty())
            {
                break;
            }
            values.add(perSecond(v.getAsDouble()));
        }
        return values.size() > 1 ? " (each: " + String.join(", ", values) + ")" : "";
    }

    // Round trips and registrations ----------------------------------------------------------------------------

    /**
     * The create round trip to an existing MR against the warm C ping-pong of the same round (both sides blocking
     * in {@code read}, back to back); the ping-pong after an idle pause is shown beside it, as information.
     */
    private Row createRoundTrip(final String label, final String percentile, final double maxRatio)
    {
        final OptionalDouble idle = results.median("c", "pingpong.idle.p50");
        final OptionalDouble pause = results.median("c", "pingpong.idle.pause");
        final String idleText = idle.isPresent() ? "; idle (after a " + micros(pause) + " µs pause): p50 " +
            micros(idle) + " µs" : "";
        return compare(label, percentiles("multi", "create.existing", percentile, ""),
            side("c", "pingpong." + percentile, v -> "ping-pong warm " + percentilesText("c", "pingpong") + idleText),
            ReportTable::quotient, Scale.TIMES, " (" + percentile + ")",
            Target.atMost(maxRatio, percentile + " ≤ " + ratio(maxRatio) + " C ping-pong"));
    }

    /**
     * The create round trip to an existing MR against the C ping-pong whose server waits in {@code epoll_wait}
     * before each read, as the daemon's event loop does: information, no target (how far the daemon is from the
     * least an event-loop server costs on this machine).
     */
    private Row createRoundTripVersusEpoll()
    {
        return compare("create round trip, MR exists, p50, against a C server in epoll_wait (as an event loop)",
            percentiles("multi", "create.existing", "p50", ""),
            side("c", "pingpong.epoll.p50", v -> "epoll ping-pong " + percentilesText("c", "pingpong.epoll")),
            ReportTable::quotient, Scale.TIMES, " (p50)", null);
    }

    /**
     * A new 2 MiB registration against the C reference's fresh 2 MiB {@code mlock}: an absolute margin, not a
     * ratio, because the round trip adds a fixed cost (protocol, hand-offs, bookkeeping) to what the pin costs.
     */
    private Row newRegistration()
    {
        return compare("create round trip, new 2 MiB registration, p50",
            percentiles("multi", "create.new", "p50", ""), percentiles("c", "fresh2m", "p50", "fresh 2 MiB mlock "),
            (row, reference) -> row - reference, Scale.MARGIN_US, " (p50)", Target.atMost(NEW_REGISTRATION_MARGIN_US,
                "p50 ≤ C + " + micros(NEW_REGISTRATION_MARGIN_US) + " µs"));
    }

    /**
     * Allocate + first key in GB/s against the C reference's {@code MAP_POPULATE} + {@code mlock}: higher is
     * better, so the ratio is Java / C and the target a floor.
     */
    private List<Row> largeAllocations()
    {
        final List<Row> rows = new ArrayList<>();
        final OptionalDouble huge = results.median("multi", "alloc.hugetlbfs");
        final String backing = huge.isEmpty() ? "" : huge.getAsDouble() > 0 ? ", hugetlbfs" : ", tmpfs";
        for (final int gib : ALLOCATE_SIZES_GIB)
        {
            final Side c = side("c", "populate." + gib + "g", v -> "MAP_POPULATE + mlock " + gbps(v));
            for (final String way : new String[] {"lookup", "registered"})
            {
                final String label = (way.equals("lookup") ? "allocate + first lkey(addr, len)" :
                    "allocateRegistered (keys in the reply)") + ", " + gib + " GiB" + backing;
                rows.add(compare(label, side("multi", "alloc." + gib + "g." + way, Format::gbps), c,
                    ReportTable::quotient, Scale.TIMES, "", Target.atLeast(1.0, "≥ 1.00× C")));
            }
        }
        return rows;
    }

    /**
     * One client's requests while another registers: p99 with the registration in flight against p99 without
     * it, the two windows of a round back to back on the same daemon.
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
            rows.add(compare(name + " while another client registers 1 GiB (2 s injected latency), p99",
                percentiles("multi", "inflight.busy." + op, "p99", ""),
                percentiles("multi", "inflight.idle." + op, "p99", "without: "), ReportTable::quotient, Scale.TIMES,
                " (p99)", Target.atMost(2.0, "p99 ≤ 2.00× without")));
        }
        return rows;
    }

    // The buffer pool and the journal --------------------------------------------------------------------------

    /**
     * The buffer pool (issue 14): acquire + release beside Netty's PooledByteBufAllocator of the same size in
     * the same JMH round, from one and two threads, and the key of a pooled buffer beside the MrCache MRU hit.
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
                rows.add(compare(label, side("java", "pool" + threads + "." + size, Format::ns),
                    side("java", "netty" + threads + "." + size, Format::ns), ReportTable::quotient, Scale.TIMES, "",
                    Target.atMost(1.2, "≤ " + ratio(1.2) + " Netty")));
            }
        }
        rows.add(compare("key from pooled buffer, PooledBuffer.lkey() (8 buffers; reference: MrCache MRU hit)",
            side("java", "poolKey.4096", Format::ns), side("java", "tophalf.mru", Format::ns), ReportTable::quotient,
            Scale.TIMES, "", null));
        return rows;
    }

    /**
     * The event journal: the append cost of one event (no target: the issue sets none; beside it, as a scale,
     * the ALLOC + FREE round trip it is appended on, without the journal, the rounds paired by number), and the
     * round trips of two daemons, journal on and off, p50 against p50 in the same round. A CREATE_MR of an
     * existing MR journals nothing, so the requests that do (ALLOC + FREE: ALLOC, FREE and its memory event; a new
     * registration: MR_CREATED) have rows of their own with the same target.
     */
    private List<Row> journal()
    {
        final List<Row> rows = new ArrayList<>();
        final Side one = side("java", "journalappend", Format::ns);
        rows.add(compare("journal append, per event, 1 thread (MappedEventJournal, 64 MiB on tmpfs)", one,
            side("multi", "nojournal.allocfree.p50", v -> "ALLOC + FREE round trip, journal off: p50 " + micros(v) +
                " µs"), (append, roundTrip) -> 100 * append / (roundTrip * 1e3), Scale.PERCENT, " of it", null));
        rows.add(compare("journal append, per event, 2 threads appending at once",
            side("java", "journalappend2", Format::ns), side("java", "journalappend", v -> "1 thread: " + ns(v)),
            ReportTable::quotient, Scale.TIMES, "", null));
        rows.add(journalOnOff("create round trip to an existing MR, journal on / off, p50 (journals nothing)",
            "existing"));
        rows.add(journalOnOff("ALLOC + FREE 2 MiB round trip, journal on / off, p50 (ALLOC, FREE, memory event)",
            "allocfree"));
        rows.add(journalOnOff("create round trip, new 2 MiB registration, journal on / off, p50 (MR_CREATED)",
            "new"));
        return rows;
    }

    /** The default daemon (journal on: the {@code create.*} rows) against one with {@code --journal-size 0}. */
    private Row journalOnOff(final String label, final String kind)
    {
        return compare(label, percentiles("multi", "create." + kind, "p50", ""),
            percentiles("multi", "nojournal." + kind, "p50", "off: "), ReportTable::quotient, Scale.TIMES, " (p50)",
            Target.atMost(JOURNAL_MAX_RATIO, "p50 ≤ " + ratio(JOURNAL_MAX_RATIO) + " off"));
    }

    private String percentilesText(final String source, final String prefix)
    {
        return "p50 " + micros(results.median(source, prefix + ".p50")) + " / p99 " +
            micros(results.median(source, prefix + ".p99")) + " / p99.9 " +
            micros(results.median(source, prefix + ".p999")) + " µs";
    }
}
