package io.mrd.cli;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdHistogram;
import io.mrd.tools.Format;
import io.mrd.tools.MetricsText;
import io.mrd.tools.PublishedHistogram;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.time.LocalTime;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code mrd stat}: the daemon's counters and histograms, read from the control file (AeronStat's job for
 * Aeron). The histograms are printed as HdrHistogram's percentiles of what the daemon published at its last
 * heartbeat ({@link PublishedHistogram}).
 */
@Command(
    name = "stat",
    mixinStandardHelpOptions = true,
    description = {
        "Print the daemon's counters and histograms: once, every few seconds, or for Prometheus.",
        "",
        "The counters (MRs, bytes registered and pinned, requests, errors, cache,",
        "memory, clients) are read from the control file, without asking the daemon;",
        "then the histograms (request duration per type, registration duration and",
        "size, memory event duration, pinned bytes per heartbeat) as count, p50, p90,",
        "p99, p99.9 and max, as of the daemon's last heartbeat.",
        "--watch repeats every SECONDS and shows what changed since the previous",
        "round; --prometheus prints the Prometheus text format that",
        "'mrd start --metrics' serves on /metrics."
    },
    footer = {
        "",
        "Examples:",
        "  mrd stat --dir /tmp/mrd                 the counters now",
        "  mrd stat --dir /tmp/mrd --watch 2       every 2 s until Ctrl-C",
        "  mrd stat --dir /tmp/mrd --prometheus | grep '^mrd_create'",
        "",
        "Exit codes: 0 printed, 1 no readable control file, 2 bad command line."
    })
public final class StatCommand implements Callable<Integer>
{
    /** Width of the label column: the longest {@link MrdCounter#label()} and then some. */
    static final int LABEL_WIDTH = 26;
    /** Width of a histogram's name column: the longest request type's series and then some. */
    static final int HISTOGRAM_WIDTH = 33;
    /** The percentiles printed per histogram, before the max. */
    static final double[] PERCENTILES = {50, 90, 99, 99.9};

    @Mixin
    ControlFileOption controlFileOption;

    /** Shortest --watch interval: faster than the heartbeat would only repeat the same numbers. */
    static final double MIN_WATCH_SECONDS = 0.01;
    /** Longest --watch interval: a day. */
    static final double MAX_WATCH_SECONDS = 86_400;

    @Option(names = "--watch", paramLabel = "SECONDS",
        description = "Print again every SECONDS (decimals allowed, 0.01 to 86400) until Ctrl-C or --count rounds.")
    Double watchSeconds;

    @Option(names = "--count", paramLabel = "K", description = "Stop after K rounds (default: 1, or endless with --watch).")
    Integer count;

    @Option(names = "--prometheus", description = "Print the Prometheus text exposition format (metrics mrd_*).")
    boolean prometheus;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call() throws InterruptedException
    {
        if (null != watchSeconds && !(watchSeconds >= MIN_WATCH_SECONDS && watchSeconds <= MAX_WATCH_SECONDS))
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--watch " + watchSeconds +
                " must be between " + MIN_WATCH_SECONDS + " and " + MAX_WATCH_SECONDS + " seconds");
        }
        if (null != count && count < 1)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--count takes at least 1, not " + count);
        }
        final long rounds = null != count ? count : null != watchSeconds ? Long.MAX_VALUE : 1;
        final long intervalMs = Math.round((null != watchSeconds ? watchSeconds : 1.0) * 1000);
        final PrintWriter out = spec.commandLine().getOut();
        Map<MrdCounter, Long> previous = null;
        for (long round = 0; round < rounds; round++)
        {
            if (round > 0)
            {
                out.println();
                out.flush();
                Thread.sleep(intervalMs);
            }
            // Opened every round: a daemon restarted meanwhile has a new control file.
            try (ControlFile ctl = controlFileOption.open())
            {
                if (prometheus)
                {
                    out.print(MetricsText.render(ctl));
                }
                else
                {
                    previous = printCounters(out, ctl, previous);
                    printHistograms(out, ctl);
                }
            }
            out.flush();
        }
        return 0;
    }

    /**
     * @return the values printed, for the next round's differences.
     */
    static Map<MrdCounter, Long> printCounters(
        final PrintWriter out, final ControlFile ctl, final Map<MrdCounter, Long> previous)
    {
        final long now = System.currentTimeMillis();
        final Map<MrdCounter, Long> values = ctl.counters();
        final Heartbeat.State heartbeat = Heartbeat.look(ctl.header(), now);
        out.println("mrd counters of pid " + ctl.header().pid() + " (" + ctl.path() + ") at " +
            LocalTime.now().truncatedTo(ChronoUnit.MILLIS) + ", heartbeat " + (heartbeat.isClosed() ? "closed" :
                heartbeat.ageMs() + " ms ago" + (heartbeat.isAlive() ? "" : ": NOT RESPONDING")));
        for (final Map.Entry<MrdCounter, Long> entry : values.entrySet())
        {
            final MrdCounter counter = entry.getKey();
            final long value = entry.getValue();
            final StringBuilder line = new StringBuilder(80);
            line.append("  ").append(String.format("%-" + LABEL_WIDTH + "s %15d", counter.label(), value));
            line.append(String.format("  %-9s",
                counter.metricName().endsWith("_bytes") && value != 0 ? Format.size(value) : ""));
            if (null != previous && previous.containsKey(counter) && previous.get(counter) != value)
            {
                final long delta = value - previous.get(counter);
                line.append("  ").append(delta > 0 ? "+" : "").append(delta);
            }
            out.println(line.toString().stripTrailing());
        }
        return values;
    }

    /**
     * One line per histogram: count, {@link #PERCENTILES} and max, as HdrHistogram computes them (a percentile is
     * the highest value equal to it within the histogram's 1% resolution).
     */
    static void printHistograms(final PrintWriter out, final ControlFile ctl)
    {
        final List<PublishedHistogram> histograms = PublishedHistogram.read(ctl);
        if (null == histograms)
        {
            out.println("histograms unreadable: the daemon was killed while writing them");
            return;
        }
        if (histograms.isEmpty())
        {
            out.println("histograms not published yet: the daemon writes them at its first heartbeat");
            return;
        }
        final StringBuilder header = new StringBuilder(String.format(Locale.ROOT, "  %-" + HISTOGRAM_WIDTH +
            "s %9s", "histogram", "count"));
        for (final double percentile : PERCENTILES)
        {
            header.append(String.format(Locale.ROOT, " %9s", "p" + (percentile == Math.rint(percentile) ?
                Long.toString((long)percentile) : Double.toString(percentile))));
        }
        out.println(header.append(String.format(Locale.ROOT, " %9s", "max")));
        for (final PublishedHistogram published : histograms)
        {
            final Histogram histogram = published.histogram();
            final boolean duration = published.kind().unit() == MrdHistogram.Unit.NANOSECONDS;
            final StringBuilder line = new StringBuilder(String.format(Locale.ROOT, "  %-" + HISTOGRAM_WIDTH +
                "s %9d", published.kind().label() + (null == published.label() ? "" : " " + published.label()),
                histogram.getTotalCount()));
            for (final double percentile : PERCENTILES)
            {
                line.append(String.format(Locale.ROOT, " %9s", histogram.getTotalCount() == 0 ? "-" :
                    value(histogram.getValueAtPercentile(percentile), duration)));
            }
            line.append(String.format(Locale.ROOT, " %9s", histogram.getTotalCount() == 0 ? "-" :
                value(histogram.getMaxValue(), duration)));
            out.println(line);
        }
    }

    private static String value(final long value, final boolean nanoseconds)
    {
        return nanoseconds ? duration(value) : Format.size(value);
    }

    /**
     * @return {@code 850ns}, {@code 12.3us}, {@code 4.56ms}, {@code 1.20s}.
     */
    static String duration(final long nanoseconds)
    {
        if (nanoseconds < 1_000)
        {
            return nanoseconds + "ns";
        }
        if (nanoseconds < 1_000_000)
        {
            return String.format(Locale.ROOT, "%.1fus", nanoseconds / 1e3);
        }
        if (nanoseconds < 1_000_000_000)
        {
            return String.format(Locale.ROOT, "%.2fms", nanoseconds / 1e6);
        }
        return String.format(Locale.ROOT, "%.2fs", nanoseconds / 1e9);
    }
}
