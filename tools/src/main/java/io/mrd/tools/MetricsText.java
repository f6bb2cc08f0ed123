package io.mrd.tools;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ControlFile;
import io.mrd.layout.DeviceDescriptor;
import io.mrd.layout.DeviceTable;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdHistogram;
import io.prometheus.metrics.config.EscapingScheme;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets;
import io.prometheus.metrics.model.snapshots.CounterSnapshot;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.InfoSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricSnapshot;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
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
 * {@link MrdCounter#DEV_GEN} counter mirrors it and is not repeated); a daemon with RDMA devices adds
 * {@code mrd_device_info{device="mlx5_3",number="1"} 1}, one per device. Names follow Prometheus' conventions
 * (base units: seconds and bytes; {@code _total} for counters), which {@code promtool check metrics} enforces.
 * <p>
 * Every {@link MrdHistogram} the daemon published ({@link PublishedHistogram}) becomes a classic Prometheus
 * histogram {@code mrd_<metricName>} ({@code _bucket{le=...}}, {@code _sum}, {@code _count}); the request
 * durations carry a {@code type} label per request type. Durations are exported in seconds over
 * {@link #DURATION_BOUNDS_SECONDS}, sizes in bytes over {@link #SIZE_BOUNDS_BYTES}; {@code _sum} is the exact
 * sum of the values, the bucket counts are HdrHistogram's ({@link PublishedHistogram#bucketCounts}). A section
 * the daemon left mid-write (it was killed then) exports no histograms rather than torn ones.
 */
public final class MetricsText
{
    /** The content type to serve the text with. */
    public static final String CONTENT_TYPE = PrometheusTextFormatWriter.CONTENT_TYPE;
    /** Prefix of every metric name. */
    public static final String PREFIX = "mrd_";

    /** Upper bounds of the duration buckets, in seconds: 1 µs to 10 s in steps of 1, 2.5, 5. */
    public static final double[] DURATION_BOUNDS_SECONDS =
    {
        1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
        0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10
    };
    /** Upper bounds of the size buckets, in bytes: every power of two from 4 KiB to 1 TiB. */
    public static final double[] SIZE_BOUNDS_BYTES = powersOfTwo(12, 40);

    /** The info metric of the daemon's devices ({@code mrd_device_info}), and its labels. */
    public static final String DEVICE = "device";
    public static final String DEVICE_LABEL = "device";
    public static final String NUMBER_LABEL = "number";

    private static final String TOTAL = "_total";
    private static final double NANOS_PER_SECOND = 1e9;

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
        final Heartbeat.State heartbeat = Heartbeat.look(ctl.header(), nowMs);
        metrics.add(gauge("up", "1 while the daemon's heartbeat is fresh, 0 when it is stale or the daemon closed",
            heartbeat.isAlive() ? 1 : 0));
        metrics.add(gauge("heartbeat_age_seconds", "seconds since the daemon's last heartbeat, -1 after a clean shutdown",
            heartbeat.isClosed() ? -1 : heartbeat.ageMs() / 1000.0));
        metrics.add(gauge("dev_gen", "devGen: bumped on every memory event that invalidates local caches",
            ctl.header().devGen()));
        final InfoSnapshot devices = devices(ctl);
        if (null != devices)
        {
            metrics.add(devices);
        }
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
        final List<PublishedHistogram> histograms = PublishedHistogram.read(ctl);
        if (null != histograms)
        {
            for (final MrdHistogram kind : MrdHistogram.values())
            {
                final HistogramSnapshot.Builder builder = HistogramSnapshot.builder()
                    .name(PREFIX + kind.metricName()).help(kind.help());
                boolean any = false;
                for (final PublishedHistogram histogram : histograms)
                {
                    if (histogram.kind() == kind)
                    {
                        builder.dataPoint(dataPoint(histogram));
                        any = true;
                    }
                }
                if (any)
                {
                    metrics.add(builder.build());
                }
            }
        }
        return new MetricSnapshots(metrics);
    }

    /**
     * @return {@code mrd_device_info}, one sample of 1 per device labelled with its name and number (its place in
     * {@code --device}: what a secondary's {@code newCache(number)} takes), or null for a provider without a
     * device. The table is written once, before the control file is published, so it is read without the seqlock.
     */
    private static InfoSnapshot devices(final ControlFile ctl)
    {
        final DeviceTable table = new DeviceTable(ctl.buffer(), ctl.layout());
        final int count = Math.min(table.count(), DeviceDescriptor.MAX_DEVICES);
        if (count <= 0)
        {
            return null;
        }
        // An info metric: the writer adds the _info suffix, which a gauge's name may not carry.
        final InfoSnapshot.Builder builder = InfoSnapshot.builder().name(PREFIX + DEVICE)
            .help("1 for each RDMA device the daemon registers every MR on, by name and number (0 first)");
        for (int d = 0; d < count; d++)
        {
            builder.dataPoint(InfoSnapshot.InfoDataPointSnapshot.builder()
                .labels(Labels.of(DEVICE_LABEL, table.name(d), NUMBER_LABEL, Integer.toString(d))).build());
        }
        return builder.build();
    }

    private static HistogramSnapshot.HistogramDataPointSnapshot dataPoint(final PublishedHistogram histogram)
    {
        final boolean duration = histogram.kind().unit() == MrdHistogram.Unit.NANOSECONDS;
        final double[] bounds = duration ? DURATION_BOUNDS_SECONDS : SIZE_BOUNDS_BYTES;
        final double scale = duration ? 1 / NANOS_PER_SECOND : 1;
        final long[] unitBounds = new long[bounds.length];
        for (int i = 0; i < bounds.length; i++)
        {
            unitBounds[i] = Math.round(duration ? bounds[i] * NANOS_PER_SECOND : bounds[i]);
        }
        final double[] upperBounds = Arrays.copyOf(bounds, bounds.length + 1);
        upperBounds[bounds.length] = Double.POSITIVE_INFINITY;
        final HistogramSnapshot.HistogramDataPointSnapshot.Builder point =
            HistogramSnapshot.HistogramDataPointSnapshot.builder()
                .classicHistogramBuckets(ClassicHistogramBuckets.of(upperBounds, histogram.bucketCounts(unitBounds)))
                .sum(histogram.sum() * scale);
        if (null != histogram.label())
        {
            point.labels(Labels.of(MrdHistogram.TYPE_LABEL, histogram.label()));
        }
        return point.build();
    }

    private static double[] powersOfTwo(final int fromExponent, final int toExponent)
    {
        final double[] bounds = new double[toExponent - fromExponent + 1];
        for (int i = 0; i < bounds.length; i++)
        {
            bounds[i] = Math.scalb(1.0, fromExponent + i);
        }
        return bounds;
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
