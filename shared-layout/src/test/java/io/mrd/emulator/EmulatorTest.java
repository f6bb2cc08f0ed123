package io.mrd.emulator;

import io.mrd.testing.EmulatedDevice;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The emulated RDMA device's own tests: {@code emulator/test/mrdemu_test.c} and {@code surface_test.c}, each
 * compiled against the installed {@code <infiniband/verbs.h>} and linked with {@code libmrdemu.so}, one JUnit test
 * per C case, each in its own process (the cross-process cases fork). A failing case shows the C program's output:
 * file:line, the check and the values. Each case gets a host directory of its own ({@code MRDEMU_DIR}), so that its
 * device is its own: the cases count objects, wait for an index to be reused and open the device in several
 * processes, and other tests on the host use the default device at the same time.
 */
final class EmulatorTest
{
    private static final long CASE_TIMEOUT_SECONDS = 120;

    @TestFactory
    Stream<DynamicTest> everyCaseOfTheDevicesTestProgramPasses()
    {
        return EmulatedDevice.testPrograms().stream().flatMap(program ->
        {
            final List<String> cases = run(program, "--list").lines().filter(s -> !s.isBlank()).toList();
            assertFalse(cases.isEmpty(), program + " --list printed no case");
            return cases.stream().map(name -> DynamicTest.dynamicTest(program.getFileName() + ": " + name, () ->
            {
                final String output = run(program, name);
                System.out.print(output);
            }));
        });
    }

    private static String run(final Path program, final String argument)
    {
        try
        {
            final Path out = Files.createTempFile("mrdemu-test-", ".out");
            final Path device = Files.createTempDirectory("mrdemu-dir-");
            try
            {
                final ProcessBuilder builder = new ProcessBuilder(program.toString(), argument)
                    .redirectErrorStream(true)
                    .redirectOutput(out.toFile());
                builder.environment().put("MRDEMU_DIR", device.toString());
                final Process process = builder.start();
                if (!process.waitFor(CASE_TIMEOUT_SECONDS, TimeUnit.SECONDS))
                {
                    process.destroyForcibly().waitFor();
                    fail(argument + " did not finish within " + CASE_TIMEOUT_SECONDS + " s; its output:\n" +
                        Files.readString(out, StandardCharsets.UTF_8));
                }
                final String output = Files.readString(out, StandardCharsets.UTF_8);
                assertEquals(0, process.exitValue(), () -> program.getFileName() + " " + argument + " failed:\n" +
                    output);
                return output;
            }
            finally
            {
                Files.deleteIfExists(out);
                try (Stream<Path> files = Files.walk(device))
                {
                    files.sorted(Comparator.reverseOrder()).forEach(path -> path.toFile().delete());
                }
            }
        }
        catch (final IOException ex)
        {
            throw new AssertionError("cannot run " + program + ": " + ex, ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", ex);
        }
    }
}
