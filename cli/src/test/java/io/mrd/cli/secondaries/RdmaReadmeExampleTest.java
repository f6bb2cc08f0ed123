package io.mrd.cli.secondaries;

import io.mrd.cli.ProjectRoot;
import io.mrd.layout.MrdCounter;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.EmulatedDevice;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
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
    private static final long BASE_VIRTADDR = 0x2B80_0000_0000L;
    static final String SOURCE = "cli/src/test/java/io/mrd/cli/secondaries/RdmaReadmeExample.java";
    static final String README_BEGIN = "<!-- example:RdmaReadmeExample -->";

    private LiveDaemon daemon;

    @AfterEach
    void stopDaemon()
    {
        if (null != daemon)
        {
            daemon.close();
        }
    }

    @Test
    void exampleMovesBytesWithMrdsKeysOnTheEmulatedDevice()
    {
        final Map<String, String> env = Map.of(EmulatedDevice.LIBRARY_ENV, EmulatedDevice.library().toString());
        daemon = LiveDaemon.start("rdma-readme", BASE_VIRTADDR, env, "--max-memory", "128MiB", "--provider",
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
        final Path root = ProjectRoot.path();
        final List<String> readme = Files.readAllLines(root.resolve("README.md"), StandardCharsets.UTF_8);
        final List<String> code = ReadmeExampleTest.between(Files.readAllLines(root.resolve(SOURCE),
            StandardCharsets.UTF_8), ReadmeExampleTest.BEGIN, ReadmeExampleTest.END, SOURCE);
        final List<String> block = ReadmeExampleTest.between(readme, README_BEGIN, ReadmeExampleTest.README_END,
            "README.md");
        assertTrue(block.size() >= 2 && block.getFirst().equals("```java") && block.getLast().equals("```"),
            "README.md: the example after " + README_BEGIN + " must be one ```java block");
        assertEquals(String.join("\n", code), String.join("\n", block.subList(1, block.size() - 1)),
            "README.md must show " + SOURCE + " between " + ReadmeExampleTest.BEGIN + " and " +
            ReadmeExampleTest.END + " verbatim; paste it again");
    }
}
