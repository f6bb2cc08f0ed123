package io.mrd.cli;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.MrdRunner.Result;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdHistogram;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.MrdDaemon;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.testing.PromtoolCheck;
import io.mrd.testing.Wait;
import io.mrd.tools.Format;
import io.mrd.tools.PublishedHistogram;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static io.mrd.cli.fixture.MrdRunner.mrd;
import static io.mrd.layout.sys.Sizes.MIB;
import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.HUGE_DIR;
import static io.mrd.primary.DaemonSettings.LIST_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static io.mrd.primary.DaemonSettings.METRICS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The histograms of requests made over the socket, as {@code mrd stat --prometheus} and {@code /metrics} export
 * them and {@code mrd stat} prints them: the counts are those of the requests made, exactly.
 */
final class StatHistogramsTest
{
    private static final long SEGMENT = 2 * MIB;
    private static final int ALLOCATIONS = 3;
    private static final Duration DEADLINE = Duration.ofSeconds(30);

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private Path dir;
    private MrdDaemon daemon;

    @BeforeEach
    void startDaemon()
    {
        daemon = daemons.inProcess("stat-histograms",
            new DaemonContext().set(MAX_MEMORY, 32 * MIB).set(LIST_SIZE, 32 * MIB).set(METRICS, METRICS.parse(":0")));
        dir = daemon.context().get(DIR);
    }

    @Test
    void theCountsAreThoseOfTheRequestsMade() throws Exception
    {
        long creates = 0;
        try (MrdClient client = MrdClient.attach(dir))
        {
            final List<MemorySegment> segments = new ArrayList<>();
            final MrCache cache = client.newCache();
            for (int i = 0; i < ALLOCATIONS; i++)
            {
                final MemorySegment segment = client.allocate(SEGMENT);
                cache.lkey(segment);
                segments.add(segment);
            }
            creates = cache.createRequests();
            segments.forEach(client::free);
        }
        final long registrations = daemon.counters().get(MrdCounter.MRS_CREATED).get();
        final long memoryEvents = daemon.counters().get(MrdCounter.MEMORY_EVENTS).get();
        assertTrue(creates >= 1 && registrations >= 1 && memoryEvents >= 1,
            "creates " + creates + ", registrations " + registrations + ", memory events " + memoryEvents);
        final Map<String, Long> expected = Map.of("hello", 1L, "alloc", (long)ALLOCATIONS, "create_mr", creates,
            "free", (long)ALLOCATIONS, "reg_external", 0L, "dereg_external", 0L, "queues", 0L, "stop", 0L);

        // The histograms reach the control file at the daemon's next heartbeat: read until they are there.
        final String prometheus = Wait.await("mrd stat --prometheus to show the requests", DEADLINE, () ->
        {
            final Result run = mrd("stat", "--dir", dir.toString(), "--prometheus");
            assertEquals(0, run.exit(), run.both());
            return run.out();
        }, text -> published(text, "type=\"free\"", ALLOCATIONS) && published(text, "type=\"hello\"", 1));
        final String metrics = Wait.await("/metrics to show the requests", DEADLINE, this::scrape,
            text -> published(text, "type=\"free\"", ALLOCATIONS));
        for (final String[] output : new String[][]{{"mrd stat --prometheus", prometheus}, {"/metrics", metrics}})
        {
            for (final Map.Entry<String, Long> type : expected.entrySet())
            {
                PromtoolCheck.assertHistogram(output[0], output[1], "mrd_request_duration_seconds",
                    "type=\"" + type.getKey() + "\"", type.getValue());
            }
            PromtoolCheck.assertHistogram(output[0], output[1], "mrd_registration_duration_seconds", "", registrations);
            final Map<String, Double> sizes = PromtoolCheck.assertHistogram(output[0], output[1],
                "mrd_registration_size_bytes", "", registrations);
            assertEquals(daemon.counters().get(MrdCounter.MRS_CREATED).get() * SEGMENT, sizes.get("sum"),
                "one segment per MR: " + sizes);
            PromtoolCheck.assertHistogram(output[0], output[1], "mrd_memory_event_duration_seconds", "", memoryEvents);
            PromtoolCheck.assertClean(output[0], output[1]);
        }

        final Result human = mrd("stat", "--dir", dir.toString());
        assertEquals(0, human.exit(), human.both());
        final PublishedHistogram free = PublishedHistogram.read(daemon.controlFile()).stream()
            .filter(h -> "free".equals(h.label())).findFirst().orElseThrow();
        final Histogram counts = free.histogram();
        final PublishedHistogram sizes = PublishedHistogram.read(daemon.controlFile()).stream()
            .filter(h -> h.kind() == MrdHistogram.REGISTRATION_SIZE).findFirst().orElseThrow();
        final String row = "request duration free";
        final String line = human.out().lines().filter(l -> l.strip().startsWith(row + " ")).findFirst()
            .orElseThrow(() -> new AssertionError("no row '" + row + "':\n" + human.out()));
        final List<String> expectedCells = new ArrayList<>(List.of(Long.toString(ALLOCATIONS)));
        for (final double percentile : StatCommand.PERCENTILES)
        {
            expectedCells.add(StatCommand.duration(counts.getValueAtPercentile(percentile)));
        }
        expectedCells.add(StatCommand.duration(counts.getMaxValue()));
        assertEquals(expectedCells, List.of(line.strip().substring(row.length()).strip().split("\\s+")), human.out());
        assertTrue(human.out().lines().anyMatch(l -> l.strip().matches(
            "histogram\\s+count\\s+p50\\s+p90\\s+p99\\s+p99\\.9\\s+max")), human.out());
        assertTrue(human.out().lines().anyMatch(l -> l.strip().startsWith(MrdHistogram.REGISTRATION_SIZE.label() +
            " ") && l.contains(Format.size(sizes.histogram().getValueAtPercentile(50)))), human.out());
    }

    private static boolean published(final String exposition, final String labels, final long count)
    {
        final Double value = PromtoolCheck.samples(exposition).get("mrd_request_duration_seconds_count{" + labels + "}");
        return null != value && value == count;
    }

    private String scrape() throws Exception
    {
        final HttpResponse<String> response = HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + daemon.metrics().port() + "/metrics"))
                .timeout(DEADLINE).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, response.statusCode());
        return response.body();
    }
}
