package io.mrd.cli;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.mrd.primary.MetricsText;
import io.mrd.tools.Format;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.PrintWriter;
import java.time.LocalTime;
import java.time.temporal.ChronoUnit;
import java.util.Map;
import java.util.concurrent.Callable;

/**
 * {@code mrd stat}: the daemon's counters, read from the control file (AeronStat's job for Aeron).
 */
@Command(
    name = "stat",
    mixinStandardHelpOptions = true,
    description = {
        "Print the daemon's counters: once, every few seconds, or for Prometheus.",
        "",
        "The counters (MRs, bytes registered and pinned, requests, errors, cache,",
        "memory, clients) are read from the control file, without asking the daemon.",
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
        final long age = ctl.heartbeatAgeMs(now);
        out.println("mrd counters of pid " + ctl.header().pid() + " (" + ctl.path() + ") at " +
            LocalTime.now().truncatedTo(ChronoUnit.MILLIS) + ", heartbeat " + (age < 0 ? "closed" :
                age + " ms ago" + (Heartbeat.isAlive(ctl.header(), now) ? "" : ": NOT RESPONDING")));
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
}
