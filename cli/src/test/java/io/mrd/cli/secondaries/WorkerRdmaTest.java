package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.mrd.cli.Mrd;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.EmulatedDevice;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd worker --rdma-peer}, the RDMA step of {@code mrd demo}: two workers against a daemon on the emulated
 * device RDMA-write into each other's buffers and print rdmaOps, bytesVerified, wrongBytes, protectionErrors,
 * staleKeyRefusals and unboundTransfers (0: the device never refused a transfer to freed memory) in their JSON line; against a soft daemon the option fails naming the provider to use.
 */
final class WorkerRdmaTest
{
    @TempDir
    Path exchange;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    @Test
    void twoWorkersRdmaWriteIntoEachOthersBuffersAndSayWhatTheyChecked() throws Exception
    {
        final Map<String, String> env = Map.of(EmulatedDevice.LIBRARY_ENV, EmulatedDevice.library().toString());
        final LiveDaemon daemon = daemons.launch("worker-rdma").env(env).start("--max-memory", "128MiB", "--provider",
            "ibverbs");
        final List<ChildJvm> workers = new ArrayList<>();
        try
        {
            for (final String[] pair : new String[][]{{"a", "b"}, {"b", "a"}})
            {
                workers.add(ChildJvm.start("worker-" + pair[0], Mrd.class.getName(), List.of("worker", "--dir",
                    daemon.dir().toString(), "--alloc", "2MiB", "--name", pair[0], "--rdma-peer", pair[1],
                    "--rdma-seconds", "2", "--rdma-exchange", exchange.toString()), env, List.of()));
            }
            for (final ChildJvm worker : workers)
            {
                assertEquals(0, worker.awaitExit(LiveDaemon.TIMEOUT), worker::output);
                final List<String> lines = worker.lines();
                final JsonNode result = new ObjectMapper().readTree(lines.getLast());
                System.out.println("FIGURE worker-rdma " + lines.getLast());
                assertTrue(result.path("rdmaOps").asLong() > 1000, lines.getLast());
                assertTrue(result.path("bytesVerified").asLong() > 0, lines.getLast());
                assertEquals(0, result.path("wrongBytes").asLong(), lines.getLast());
                assertEquals(0, result.path("protectionErrors").asLong(), lines.getLast());
                assertEquals(0, result.path("unboundTransfers").asLong(-1), lines.getLast());
                assertTrue(result.path("staleKeyRequests").asLong() > 0, lines.getLast());
                assertEquals(result.path("staleKeyRequests").asLong(), result.path("staleKeyRefusals").asLong(),
                    lines.getLast());
            }
        }
        finally
        {
            workers.forEach(ChildJvm::close);
        }
    }

    @Test
    void aSoftDaemonHasNoDeviceToShare()
    {
        final LiveDaemon daemon = daemons.start("worker-rdma-soft", "--max-memory", "64MiB");
        try (ChildJvm worker = ChildJvm.start("worker-soft", Mrd.class.getName(), List.of("worker", "--dir",
            daemon.dir().toString(), "--alloc", "2MiB", "--name", "a", "--rdma-peer", "b", "--rdma-exchange",
            exchange.toString()), Map.of(), List.of()))
        {
            assertEquals(1, worker.awaitExit(LiveDaemon.TIMEOUT), worker::output);
            assertTrue(worker.output().contains("IMPORT_PD needs the daemon's RDMA device, and this daemon runs " +
                "--provider soft, which has none: start it with --provider ibverbs"), worker.output());
        }
    }
}
