package io.mrd.primary;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The daemon's counters as Prometheus metrics: what {@code mrd stat --prometheus} prints and what
 * {@code mrd start --metrics HOST:PORT} serves on {@code /metrics}. Both build the same snapshots from the
 * control file's counters section ({@link #snapshots}) and let the Prometheus Java client write them, so the
 * output is the same whoever renders it.
 * <p>
 * Every {@link MrdCounter} becomes {@code mrd_<metricName>}: a counter when the name ends in {@code _total},
 * else a gauge. Three gauges are added: {@code mrd_up} (1 while the heartbeat is fresh), {@code
 * mrd_heartbeat_age_seconds} (-1 once the daemon closed the file) and {@code mrd_dev_gen} (from the header; the
 * {@link MrdCounter#DEV_GEN} counter mirrors it and is not repeated). Names follow Prometheus' conventions
 * (base units: seconds and bytes; {@code _total} for counters), which {@code promtool check metrics} enforces.
 */
public final class MetricsText
{
    /** The content type to serve the text with. */
    public static final String CONTENT_TYPE = PrometheusTextFormatWriter.CONTENT_TYPE;
    /** Prefix of every metric name. */
    public static final String PREFIX = "mrd_";

    private static final String TOTAL = "_total";

    private MetricsText()
    {
    }

    /**
     * @param ctl a control file mapped by the daemon or opened read-only by a tool.
     * @return the exposition text, one {@code # HELP}, one {@code # TYPE} and one sample line per metric.
     */
    public static String render(final ControlFile ctl)
    {
        final ByteArrayOutputStream out = new ByteArrayOutputStream(4096);
        try
        {
            PrometheusTextFormatWriter.create().write(out, snapshots(ctl), EscapingScheme.DEFAULT);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    /**
     * @return the metrics of the control file now.
     */
    public static MetricSnapshots snapshots(final ControlFile ctl)
    {
        return snapshots(ctl, System.currentTimeMillis());
    }

    /**
     * @param nowMs the wall clock, for the heartbeat age.
     */
    public static MetricSnapshots snapshots(final ControlFile ctl, final long nowMs)
    {
        final List<MetricSnapshot> metrics = new ArrayList<>();
        final long heartbeatAgeMs = ctl.heartbeatAgeMs(nowMs);
        final boolean up = Heartbeat.isAlive(heartbeatAgeMs, Heartbeat.staleLimitMs(ctl.header()));
        metrics.add(gauge("up", "1 while the daemon's heartbeat is fresh, 0 when it is stale or the daemon closed",
            up ? 1 : 0));
        metrics.add(gauge("heartbeat_age_seconds", "seconds since the daemon's last heartbeat, -1 after a clean shutdown",
            heartbeatAgeMs == Heartbeat.CLOSED ? -1 : heartbeatAgeMs / 1000.0));
        metrics.add(gauge("dev_gen", "devGen: bumped on every memory event that invalidates local caches",
            ctl.header().devGen()));
        for (final Map.Entry<MrdCounter, Long> entry : ctl.counters().entrySet())
        {
            final MrdCounter counter = entry.getKey();
            if (counter == MrdCounter.DEV_GEN)
            {
                continue;
            }
            final String name = counter.metricName();
            metrics.add(name.endsWith(TOTAL) ?
                CounterSnapshot.builder()
                    .name(PREFIX + name.substring(0, name.length() - TOTAL.length()))
                    .help(counter.label())
                    .dataPoint(CounterSnapshot.CounterDataPointSnapshot.builder().value(entry.getValue()).build())
                    .build() :
                gauge(name, counter.label(), entry.getValue()));
        }
        return new MetricSnapshots(metrics);
    }

    private static GaugeSnapshot gauge(final String name, final String help, final double value)
    {
        return GaugeSnapshot.builder()
            .name(PREFIX + name)
            .help(help)
            .dataPoint(GaugeSnapshot.GaugeDataPointSnapshot.builder().value(value).build())
            .build();
    }
}
