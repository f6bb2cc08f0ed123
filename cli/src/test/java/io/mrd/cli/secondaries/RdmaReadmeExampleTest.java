package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.MrdCounter;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.EmulatedDevice;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * README.md's datapath example: {@link RdmaReadmeExample} runs against a daemon on the emulated device
 * ({@code --provider ibverbs}, {@code MRD_IBVERBS_LIBRARY} for both), and the README shows exactly its code.
 */
final class RdmaReadmeExampleTest
{
    static final String SOURCE = "cli/src/test/java/io/mrd/cli/secondaries/RdmaReadmeExample.java";
    static final String README_BEGIN = "<!-- example:RdmaReadmeExample -->";

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    @Test
    void exampleMovesBytesWithMrdsKeysOnTheEmulatedDevice()
    {
        final Map<String, String> env = Map.of(EmulatedDevice.LIBRARY_ENV, EmulatedDevice.library().toString());
        final LiveDaemon daemon = daemons.launch("rdma-readme").env(env).start("--max-memory", "128MiB", "--provider",
            "ibverbs");
        final String output;
        try (ChildJvm example = ChildJvm.start("rdma-readme-example", RdmaReadmeExample.class.getName(),
            List.of(daemon.dir().toString()), env, List.of()))
        {
            final int exit = example.awaitExit(LiveDaemon.TIMEOUT);
            output = example.output();
            assertEquals(0, exit, output);
        }
        assertTrue(output.contains("wr 1: IBV_WC_SUCCESS, target holds 42"), output);
        daemon.awaitSnapshot("the example's memory to be freed and its MR deregistered", snapshot ->
            snapshot.counter(MrdCounter.BYTES_ALLOCATED) == 0 && snapshot.mrs().isEmpty());
    }

    @Test
    void readmeShowsTheExampleVerbatim() throws IOException
    {
        ReadmeExampleTest.assertReadmeShows(SOURCE, README_BEGIN);
    }
}
