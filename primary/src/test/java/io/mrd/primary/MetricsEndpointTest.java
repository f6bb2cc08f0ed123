package io.mrd.primary;

import io.mrd.layout.MrdCounter;
import io.mrd.testing.PromtoolCheck;
import io.mrd.tools.MetricsText;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Optional;
import java.util.Set;
import java.util.stream.Collectors;

import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.HUGE_DIR;
import static io.mrd.primary.DaemonSettings.LIST_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static io.mrd.primary.DaemonSettings.METRICS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd start --metrics}: a daemon serves its counters on {@code /metrics}, in the same text as
 * {@code mrd stat --prometheus}.
 */
final class MetricsEndpointTest
{
    @TempDir
    Path dir;

    @Test
    void servesTheCountersOnLoopback() throws Exception
    {
        final DaemonContext context = new DaemonContext().set(DIR, dir).set(HUGE_DIR, Optional.of("none"))
            .set(MAX_MEMORY, 16L << 20).set(LIST_SIZE, 16L << 20).set(BASE_VIRTADDR, io.mrd.testing.BaseAddresses.next())
            .set(METRICS, METRICS.parse(":0"));
        try (MrdDaemon daemon = MrdDaemon.launch(context))
        {
            daemon.engine().createMr(daemon.engine().allocate(2L << 20, 5).address(), 5);
            final int port = daemon.metrics().port();
            // A histogram series appears once it has a record, at a heartbeat: families can appear between two
            // renders but never go, so the endpoint's lie between a render before and one after.
            final Set<String> before = families(MetricsText.render(daemon.controlFile()));
            final HttpResponse<String> response = HttpClient.newHttpClient().send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/metrics"))
                    .timeout(Duration.ofSeconds(30)).build(),
                HttpResponse.BodyHandlers.ofString());
            assertEquals(200, response.statusCode());
            final String body = response.body();
            assertTrue(body.contains("mrd_up 1"), body);
            assertTrue(body.contains("mrd_create_requests_total 1"), body);
            assertTrue(body.contains("mrd_" + MrdCounter.BYTES_PINNED.metricName() + " 2097152") ||
                body.contains("mrd_" + MrdCounter.BYTES_PINNED.metricName() + " 2.097152E6"), body);
            final Set<String> served = families(body);
            final Set<String> after = families(MetricsText.render(daemon.controlFile()));
            assertTrue(served.containsAll(before) && after.containsAll(served),
                "the same metrics as mrd stat --prometheus: before " + before + ", served " + served + ", after " +
                after);
            PromtoolCheck.assertClean("/metrics", body);
        }
    }

    /** @return the metric families a Prometheus text names in its {@code # TYPE} lines. */
    private static Set<String> families(final String text)
    {
        return text.lines().filter(line -> line.startsWith("# TYPE ")).map(line -> line.split(" ")[2])
            .collect(Collectors.toSet());
    }
}
