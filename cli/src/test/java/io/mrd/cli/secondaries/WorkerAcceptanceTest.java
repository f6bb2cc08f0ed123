package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mrd.layout.MrdCounter;
import io.mrd.testing.ChildJvm;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Issue 4's acceptance: with a daemon running in D, {@code mrd worker --dir D --alloc 256MiB --buffers 4096
 * --lookups 5000000} prints its JSON line with {@code "errors":0}, and so do two workers run at once. Each
 * worker is a real {@code mrd} process.
 */
final class WorkerAcceptanceTest
{
    private static final List<String> KEYS =
        List.of("lookups", "nsPerLookup", "createRequests", "globalHits", "localHits", "flushes", "errors");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private LiveDaemon daemon;

    @BeforeEach
    void startDaemon()
    {
        // Two workers of 256MiB each: 512MiB, in lists of 256MiB that each hold one worker's eight 32MiB parts.
        daemon = daemons.start("worker", "--max-memory", "512MiB", "--list-size", "256MiB");
    }

    @Test
    void oneWorkerThenTwoAtOncePrintErrorsZero() throws IOException
    {
        final JsonNode alone = result(startWorker("worker-alone"));
        System.out.println("one worker: " + alone);

        final ChildJvm first = startWorker("worker-1");
        final ChildJvm second = startWorker("worker-2");
        final JsonNode one = result(first);
        final JsonNode two = result(second);
        System.out.println("two workers at once: " + one + "\n                     " + two);

        daemon.awaitSnapshot("the workers' memory to be freed", s ->
            s.counter(MrdCounter.BYTES_ALLOCATED) == 0 && s.mrs().isEmpty() && s.clients().isEmpty());
        daemon.assertHealthy("after the workers");
    }

    private ChildJvm startWorker(final String name)
    {
        return daemon.startMrd(name, "worker", "--dir", daemon.dir().toString(), "--alloc", "256MiB", "--buffers",
            "4096", "--lookups", "5000000");
    }

    /**
     * Waits for the worker to exit and checks its last line.
     */
    private static JsonNode result(final ChildJvm worker) throws IOException
    {
        final int exit = worker.awaitExit(LiveDaemon.TIMEOUT);
        final List<String> lines = new ArrayList<>(worker.lines());
        assertTrue(!lines.isEmpty() && lines.getLast().startsWith("{"), "the last line is the JSON object:\n" +
            worker.output());
        final JsonNode json = new ObjectMapper().readTree(lines.getLast());
        for (final String key : KEYS)
        {
            assertTrue(json.has(key), "no " + key + " in " + json);
        }
        assertEquals(0, json.get("errors").asLong(), worker.output());
        assertEquals(5_000_000, json.get("lookups").asLong(), json.toString());
        assertEquals(0, exit, worker.output());
        return json;
    }
}
