package io.mrd.primary.histogram;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdHistogram;
import io.mrd.layout.protocol.MessageType;
import io.mrd.testing.PromtoolCheck;
import io.mrd.tools.MetricsText;
import io.mrd.tools.PublishedHistogram;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Known values through the daemon's histograms and the control file, read back as {@code mrd stat} and the
 * metrics read them: the right {@code _sum} and {@code _count} per series, HdrHistogram's own percentiles after
 * the round trip, and each heartbeat adding only what was recorded since. Where the buckets' bounds fall is the
 * tools' {@code MetricsTextTest}.
 */
final class DaemonHistogramsTest
{
    private static final long MIB = 1L << 20;
    private static final long[] CREATE_NS = {3_000, 3_000, 3_000, 3_000, 3_000, 700_000, 700_000, 2_000_000_000L};
    private static final long[] SIZES = {2 * MIB, 2 * MIB, 2 * MIB, 4 * MIB};

    @TempDir
    Path dir;

    private ControlFile ctl;
    private ControlFile view;
    private DaemonHistograms histograms;

    @BeforeEach
    void createControlFile()
    {
        ctl = ControlFile.create(dir.resolve(ControlFile.FILE_NAME), ControlFileLayout.compute(1, 8, 16, 16, 4), 4096);
        ctl.header().magic(HeaderDescriptor.MAGIC).heartbeatMs(System.currentTimeMillis()).heartbeatIntervalMs(100)
            .heartbeatStaleLimitMs(1000);
        ctl.header().publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);
        view = ControlFile.openReadOnly(ctl.path());
        histograms = new DaemonHistograms(ctl);
    }

    @AfterEach
    void close()
    {
        view.close();
        ctl.close();
    }

    @Test
    void nothingIsPublishedBeforeTheFirstHeartbeat()
    {
        assertEquals(List.of(), PublishedHistogram.read(view));
        assertTrue(MetricsText.render(view).lines().noneMatch(l -> l.contains("_bucket")));
    }

    @Test
    void knownValuesGiveTheirSumAndCount()
    {
        recordKnownValues();
        histograms.publish(6 * MIB, 1_000);
        final String text = MetricsText.render(view);

        final Map<String, Double> create = PromtoolCheck.assertHistogram("known values", text,
            "mrd_request_duration_seconds", "type=\"create_mr\"", CREATE_NS.length);
        assertEquals(2.001415, create.get("sum"), 1e-12, "seconds, not nanoseconds");

        final Map<String, Double> sizes = PromtoolCheck.assertHistogram("known values", text,
            "mrd_registration_size_bytes", "", SIZES.length);
        assertEquals(10.0 * MIB, sizes.get("sum"));

        PromtoolCheck.assertHistogram("known values", text, "mrd_request_duration_seconds", "type=\"alloc\"", 0);
        PromtoolCheck.assertHistogram("known values", text, "mrd_registration_duration_seconds", "", SIZES.length);
        PromtoolCheck.assertHistogram("known values", text, "mrd_memory_event_duration_seconds", "", 0);
        final Map<String, Double> pinned =
            PromtoolCheck.assertHistogram("known values", text, "mrd_heartbeat_pinned_bytes", "", 1);
        assertEquals(6.0 * MIB, pinned.get("sum"));
        PromtoolCheck.assertClean("histograms of known values", text);
    }

    @Test
    void percentilesAreHdrHistogramsAfterTheRoundTrip()
    {
        recordKnownValues();
        histograms.publish(0, 1_000);
        final Histogram expected = new Histogram(1, DaemonHistograms.HIGHEST_DURATION_NS,
            IntervalHistogram.SIGNIFICANT_DIGITS);
        for (final long value : CREATE_NS)
        {
            expected.recordValue(value);
        }
        final PublishedHistogram create = PublishedHistogram.read(view).stream()
            .filter(h -> h.kind() == MrdHistogram.REQUEST_DURATION && "create_mr".equals(h.label()))
            .findFirst().orElse(null);
        assertNotNull(create);
        for (final double percentile : new double[]{50, 90, 99, 99.9, 100})
        {
            assertEquals(expected.getValueAtPercentile(percentile), create.histogram().getValueAtPercentile(percentile),
                "p" + percentile);
        }
        assertEquals(expected.getMaxValue(), create.histogram().getMaxValue());
        assertEquals(2_001_415_000L, create.sum());
    }

    @Test
    void publishingAgainAddsOnlyWhatWasRecordedSince()
    {
        recordKnownValues();
        histograms.publish(0, 1_000);
        histograms.publish(0, 2_000);
        histograms.registered(System.nanoTime(), 2 * MIB);
        histograms.publish(0, 3_000);
        final String text = MetricsText.render(view);
        PromtoolCheck.assertHistogram("three heartbeats", text, "mrd_registration_size_bytes", "", SIZES.length + 1);
        PromtoolCheck.assertHistogram("three heartbeats", text, "mrd_request_duration_seconds", "type=\"create_mr\"",
            CREATE_NS.length);
        PromtoolCheck.assertHistogram("three heartbeats", text, "mrd_heartbeat_pinned_bytes", "", 3);
        assertEquals(3_000, view.histograms().read().publishedTimeMs());
    }

    private void recordKnownValues()
    {
        for (final long value : CREATE_NS)
        {
            histograms.series(MrdHistogram.REQUEST_DURATION, MessageType.CREATE_MR).record(value);
        }
        for (final long size : SIZES)
        {
            histograms.registered(System.nanoTime(), size);
        }
    }
}
