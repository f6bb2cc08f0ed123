package io.mrd.primary;

import io.mrd.layout.MrdCounter;
import io.mrd.testing.PromtoolCheck;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;

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
        final DaemonContext context = new DaemonContext().dir(dir).hugeDir("none")
            .maxMemory(16L << 20).listSize(16L << 20).baseVirtaddr(0x2C0000000000L).metrics(":0");
        try (MrdDaemon daemon = MrdDaemon.launch(context))
        {
            daemon.engine().createMr(daemon.engine().allocate(2L << 20, 5).address(), 5);
            final int port = daemon.metrics().port();
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
            assertEquals(MetricsText.render(daemon.controlFile()).lines().filter(l -> l.startsWith("# TYPE")).count(),
                body.lines().filter(l -> l.startsWith("# TYPE")).count(), "the same metrics as mrd stat --prometheus");
            PromtoolCheck.assertClean("/metrics", body);
        }
    }
}
