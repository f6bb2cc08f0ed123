package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdCounter;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd status}, a client and the metrics judge one daemon, started with a heartbeat interval that is not the
 * default, by the one limit that daemon published: all call it alive while it runs and while it is frozen
 * (SIGSTOP) for longer than the default limit but not its own, and all call it dead once its heartbeat is older
 * than its own limit. A reader that assumed the default interval would call it dead too early; one that assumed
 * a longer limit would be late.
 */
final class HeartbeatAgreementTest
{
    static final int INTERVAL_MS = 400;
    /** The limit this daemon publishes. */
    static final long LIMIT_MS = Heartbeat.staleLimitMs(INTERVAL_MS);
    /** The limit a reader that assumed the default interval would use. */
    static final long DEFAULT_LIMIT_MS = Heartbeat.staleLimitMs(Heartbeat.DEFAULT_INTERVAL_MS);
    /**
     * How far past the default limit the frozen daemon is checked: the client's watchdog looks every 100 ms and a
     * wrong client must have had the time to say so.
     */
    static final long PAST_DEFAULT_MS = 500;
    /** How late after its limit a client may notice the daemon is dead. */
    static final long DETECTION_SLACK_MS = 2_000;
    static final Duration WAIT = Duration.ofSeconds(60);
    private static final Pattern METRICS_URL = Pattern.compile("metrics on (http://\\S+/metrics)");
    private static final Pattern DEAD = Pattern.compile("dead detected=(\\d+) lastLkey=\\d+ .* reason=(.*)");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("heartbeat");

    @TempDir
    Path signals;

    @Test
    void statusClientAndMetricsJudgeAFrozenDaemonByTheLimitItPublished() throws Exception
    {
        assertTrue(DEFAULT_LIMIT_MS + PAST_DEFAULT_MS < LIMIT_MS, "the test needs a window between the limits");
        try (LiveDaemon daemon = daemons.launch("heartbeat").in(dir).start("--max-memory", "64MiB",
            "--heartbeat-interval", Integer.toString(INTERVAL_MS), "--metrics", "127.0.0.1:0");
            ChildJvm client = ChildJvm.start("watcher", ReliabilitySecondary.class.getName(),
                List.of("watch", dir.toString(), "watcher", signals.toString(), "stay"), Map.of(),
                List.of("-XX:ErrorFile=" + signals.resolve("hs_err_pid%p.log"))))
        {
            assertEquals(INTERVAL_MS, daemon.controlFile().header().heartbeatIntervalMs(), "the interval published");
            assertEquals(LIMIT_MS, daemon.controlFile().header().heartbeatStaleLimitMs(), "the limit published");
            final Matcher url = METRICS_URL.matcher(
                daemon.process().awaitLine(line -> METRICS_URL.matcher(line).find(), WAIT));
            assertTrue(url.find());
            final URI metrics = URI.create(url.group(1));
            client.awaitLine(line -> line.startsWith("watching "), WAIT);

            final MrdRunner.Result running = daemon.status();
            assertEquals(0, running.exit(), running.toString());
            assertTrue(running.both().contains("(stale after " + LIMIT_MS + " ms)"), running.toString());
            assertEquals(1.0, samples(serve(metrics)).get("mrd_up"), "/metrics while it runs");
            assertEquals(1.0, samples(prometheus()).get("mrd_up"), "mrd stat --prometheus while it runs");

            daemon.freeze();
            try
            {
                Wait.await("the daemon stopped by SIGSTOP", WAIT, daemon::isFrozen);
                final long lastHeartbeatMs = daemon.controlFile().header().heartbeatMs();

                // Frozen longer than the default limit, not as long as its own: everyone still calls it alive.
                Wait.await("the heartbeat past the default limit", WAIT,
                    () -> ageMs(lastHeartbeatMs) > DEFAULT_LIMIT_MS + PAST_DEFAULT_MS);
                final MrdRunner.Result late = daemon.status();
                final Map<String, Double> lateSamples = samples(prometheus());
                final boolean clientSawDeath = client.lines().stream().anyMatch(line -> line.startsWith("dead "));
                final long observedAgeMs = ageMs(lastHeartbeatMs);
                assertTrue(observedAgeMs <= LIMIT_MS, "the checks between the limits took until the heartbeat was " +
                    observedAgeMs + " ms old, past the daemon's limit of " + LIMIT_MS + " ms: the machine is too slow");
                assertEquals(0, late.exit(), "mrd status past the default limit: " + late);
                assertTrue(late.both().contains("(stale after " + LIMIT_MS + " ms)"), late.toString());
                assertEquals(1.0, lateSamples.get("mrd_up"), "mrd stat --prometheus past the default limit");
                assertTrue(lateSamples.get("mrd_heartbeat_age_seconds") * 1000 > DEFAULT_LIMIT_MS, lateSamples::toString);
                assertFalse(clientSawDeath, "the client called the daemon dead before its limit:\n" + client.output());

                // Frozen longer than its own limit: everyone calls it dead and names that limit.
                final Matcher dead = DEAD.matcher(client.awaitLine(line -> line.startsWith("dead "), WAIT));
                assertTrue(dead.find(), client::output);
                final long detectedAfterMs = Long.parseLong(dead.group(1)) - lastHeartbeatMs;
                assertTrue(detectedAfterMs > LIMIT_MS && detectedAfterMs <= LIMIT_MS + DETECTION_SLACK_MS,
                    "the client called the daemon dead " + detectedAfterMs + " ms after its last heartbeat, limit " +
                        LIMIT_MS + " ms: " + dead.group(0));
                assertTrue(dead.group(2).contains("limit " + LIMIT_MS + " ms"), dead.group(0));

                Wait.await("the heartbeat past the daemon's limit", WAIT, () -> ageMs(lastHeartbeatMs) > LIMIT_MS);
                final MrdRunner.Result frozen = daemon.status();
                assertEquals(1, frozen.exit(), frozen.toString());
                assertTrue(frozen.both().contains("not responding") &&
                    frozen.both().contains("limit " + LIMIT_MS + " ms"), frozen.toString());
                final Map<String, Double> deadSamples = samples(prometheus());
                assertEquals(0.0, deadSamples.get("mrd_up"), "mrd stat --prometheus past the daemon's limit");
                assertTrue(deadSamples.get("mrd_heartbeat_age_seconds") * 1000 > LIMIT_MS, deadSamples::toString);
                System.out.println("FIGURE heartbeat-agreement limitMs=" + LIMIT_MS + " aliveCheckedAtAgeMs=" +
                    observedAgeMs + " clientDetectedAtAgeMs=" + detectedAfterMs);
            }
            finally
            {
                daemon.thaw();
            }

            client.awaitLine(line -> line.startsWith("after-death "), WAIT);
            Signals.send(signals, "watcher", "exit");
            assertEquals(0, client.awaitExit(WAIT), client::output);
            Wait.await("the daemon's heartbeat fresh again after SIGCONT", WAIT,
                () -> Heartbeat.lookNow(daemon.controlFile().header()).isAlive());
            assertEquals(1.0, samples(serve(metrics)).get("mrd_up"), "/metrics after SIGCONT");
            Wait.await("the client's connection closed", WAIT,
                () -> daemon.counter(MrdCounter.CLIENTS_CONNECTED), connected -> connected == 0);
            daemon.assertHealthy("after SIGSTOP and SIGCONT");
        }
    }

    private static long ageMs(final long heartbeatMs)
    {
        return System.currentTimeMillis() - heartbeatMs;
    }

    private String prometheus()
    {
        final MrdRunner.Result stat = MrdRunner.mrd("stat", "--dir", dir.toString(), "--prometheus");
        assertEquals(0, stat.exit(), stat.toString());
        return stat.out();
    }

    private static String serve(final URI metrics) throws IOException, InterruptedException
    {
        final HttpResponse<String> response = HttpClient.newHttpClient().send(
            HttpRequest.newBuilder(metrics).timeout(Duration.ofSeconds(30)).build(),
            HttpResponse.BodyHandlers.ofString());
        assertEquals(200, response.statusCode(), response.body());
        return response.body();
    }

    /**
     * @return every sample of a Prometheus text, by name.
     */
    private static Map<String, Double> samples(final String text)
    {
        final Map<String, Double> samples = new HashMap<>();
        for (final String line : text.lines().toList())
        {
            if (!line.startsWith("#") && !line.isBlank())
            {
                final String[] parts = line.trim().split(" ");
                samples.put(parts[0], Double.parseDouble(parts[1]));
            }
        }
        return samples;
    }
}
