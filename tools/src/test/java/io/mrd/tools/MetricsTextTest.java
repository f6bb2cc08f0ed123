package io.mrd.tools;

import io.mrd.layout.DeviceTable;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdHistogram;
import io.mrd.layout.protocol.MessageType;
import io.mrd.testing.PromtoolCheck;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The Prometheus text of a control file: the three gauges from the header, one info sample per device, every
 * counter under its metric name, and every published histogram in seconds or bytes, as {@code promtool} accepts it.
 */
final class MetricsTextTest
{
    private static final long MIB = 1L << 20;

    @RegisterExtension
    final PublishedControlFile file = new PublishedControlFile();

    @Test
    void theHeaderGivesUpHeartbeatAgeAndDevGen()
    {
        file.written().header().devGen(7);
        final Map<String, Double> live = PromtoolCheck.samples(MetricsText.render(file.view()));
        assertEquals(1.0, live.get("mrd_up"));
        assertEquals(7.0, live.get("mrd_dev_gen"));
        assertTrue(live.get("mrd_heartbeat_age_seconds") >= 0, live.toString());

        file.written().header().heartbeatMs(HeaderDescriptor.HEARTBEAT_CLOSED);
        final Map<String, Double> closed = PromtoolCheck.samples(MetricsText.render(file.view()));
        assertEquals(0.0, closed.get("mrd_up"));
        assertEquals(-1.0, closed.get("mrd_heartbeat_age_seconds"));
    }

    @Test
    void eachDeviceIsOneInfoSampleByNameAndNumber()
    {
        final String none = MetricsText.render(file.view());
        assertTrue(none.lines().noneMatch(l -> l.contains("mrd_device")), "no device, no sample: " + none);

        file.written().header().deviceCount(2);
        new DeviceTable(file.written().buffer(), file.written().layout()).device(0, "mlx5_0", 3)
            .device(1, "mlx5_1", 4);
        final String text = MetricsText.render(file.view());
        final Map<String, Double> samples = PromtoolCheck.samples(text);
        assertEquals(1.0, samples.get("mrd_device_info{device=\"mlx5_0\",number=\"0\"}"), text);
        assertEquals(1.0, samples.get("mrd_device_info{device=\"mlx5_1\",number=\"1\"}"), text);
        assertEquals(2, samples.keySet().stream().filter(name -> name.startsWith("mrd_device_info")).count(), text);
        assertTrue(text.contains("# TYPE mrd_device_info gauge\n"), text);
        PromtoolCheck.assertClean("two devices", text);
    }

    @Test
    void countersKeepTheirNameAndGaugesTheirs()
    {
        file.counter(MrdCounter.CREATE_REQUESTS).set(3);
        file.counter(MrdCounter.BYTES_PINNED).set(2 * MIB);
        file.counter(MrdCounter.DEV_GEN).set(9);
        final String text = MetricsText.render(file.view());
        final Map<String, Double> samples = PromtoolCheck.samples(text);
        assertEquals(3.0, samples.get("mrd_" + MrdCounter.CREATE_REQUESTS.metricName()), text);
        assertEquals(2.0 * MIB, samples.get("mrd_" + MrdCounter.BYTES_PINNED.metricName()), text);
        assertTrue(text.contains("# TYPE mrd_create_requests_total counter\n"), text);
        assertTrue(text.contains("# TYPE mrd_" + MrdCounter.BYTES_PINNED.metricName() + " gauge\n"), text);
        assertEquals(0.0, samples.get("mrd_dev_gen"), "devGen from the header, its counter not repeated: " + text);
        PromtoolCheck.assertClean("counters", text);
    }

    @Test
    void knownValuesGiveTheirBucketsSumAndCount()
    {
        file.publish(1_000,
            PublishedControlFile.Entry.of(MrdHistogram.REQUEST_DURATION, MessageType.CREATE_MR.code(),
                3_000, 3_000, 3_000, 3_000, 3_000, 700_000, 700_000, 2_000_000_000L),
            PublishedControlFile.Entry.of(MrdHistogram.REGISTRATION_SIZE, 0, 2 * MIB, 2 * MIB, 2 * MIB, 4 * MIB));
        final String text = MetricsText.render(file.view());

        final Map<String, Double> create = PromtoolCheck.assertHistogram("known values", text,
            "mrd_request_duration_seconds", "type=\"create_mr\"", 8);
        assertEquals(0.0, create.get("2.5E-6"), text);
        assertEquals(5.0, create.get("5.0E-6"), text);
        assertEquals(7.0, create.get("0.001"), text);
        assertEquals(8.0, create.get("2.5"), text);
        assertEquals(2.001415, create.get("sum"), 1e-12, "seconds, not nanoseconds");

        final Map<String, Double> sizes = PromtoolCheck.assertHistogram("known values", text,
            "mrd_registration_size_bytes", "", 4);
        assertEquals(0.0, sizes.get("1048576.0"), text);
        assertEquals(3.0, sizes.get("2097152.0"), text);
        assertEquals(4.0, sizes.get("4194304.0"), text);
        assertEquals(10.0 * MIB, sizes.get("sum"));
        PromtoolCheck.assertClean("histograms of known values", text);
    }

    @Test
    void aSectionLeftMidWriteExportsNoHistogram()
    {
        file.publish(1_000, PublishedControlFile.Entry.of(MrdHistogram.REGISTRATION_SIZE, 0, 4096));
        file.tearHistograms();
        final String text = MetricsText.render(file.view());
        assertTrue(text.contains("mrd_up"), text);
        assertTrue(text.lines().noneMatch(l -> l.contains("_bucket")), text);
    }
}
