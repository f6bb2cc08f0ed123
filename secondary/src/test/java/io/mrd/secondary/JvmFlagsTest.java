package io.mrd.secondary;

import io.mrd.testing.ChildJvm;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A worker started without the JVM flags gets one {@code EPERM} naming each of them, not Agrona's
 * {@code IllegalAccessError}; with exactly the flags of scripts/jvm-flags (none of the daemon's) it attaches
 * and prints no warning.
 */
final class JvmFlagsTest
{
    private static final Duration EXIT_TIMEOUT = Duration.ofSeconds(60);

    @TempDir
    Path dir;

    @ParameterizedTest
    @ValueSource(strings = {"path", "context"})
    void attachWithoutTheFlagsNamesEachFlagInOneError(final String overload) throws IOException
    {
        // A daemon is there: without the check, attach would go on to read its control file through Agrona.
        try (FakeDaemon daemon = new FakeDaemon(dir);
            ChildJvm worker = ChildJvm.startWithFlags("attach-without-flags", AttachOnce.class.getName(),
            List.of(dir.toString(), overload), Map.of(), List.of()))
        {
            assertEquals(1, worker.awaitExit(EXIT_TIMEOUT), worker.output());
            final String output = worker.output();
            final List<String> lines = mrdLines(worker);
            assertEquals(1, lines.size(), output);
            final String error = lines.getFirst();
            assertTrue(error.startsWith("EPERM: this JVM was started without the JVM flags mrd's client needs: "),
                error);
            for (final String flag : scriptsJvmFlags())
            {
                assertTrue(error.contains(flag + " ("), flag + " not named in: " + error);
            }
            assertTrue(error.endsWith("add them with java @<mrd checkout>/scripts/jvm-flags or copy them from there"),
                error);
            assertFalse(output.contains("IllegalAccessError"), output);
        }
    }

    @Test
    void theFlagsOfScriptsJvmFlagsAreEnoughToAttach() throws IOException
    {
        try (FakeDaemon daemon = new FakeDaemon(dir);
            ChildJvm worker = ChildJvm.startWithFlags("attach-with-client-flags", AttachOnce.class.getName(),
                List.of(dir.toString(), "path"), Map.of(), scriptsJvmFlags()))
        {
            assertEquals(0, worker.awaitExit(EXIT_TIMEOUT), worker.output());
            assertEquals(List.of("attached as client 7"), mrdLines(worker));
        }
    }

    @Test
    void thisJvmHasEveryFlag()
    {
        assertEquals(List.of(), JvmFlags.missing());
    }

    /**
     * @return what the worker printed, without slf4j's own three lines about the missing logging backend (the
     *         test class path has none).
     */
    private static List<String> mrdLines(final ChildJvm worker)
    {
        return worker.lines().stream().filter(line -> !line.startsWith("SLF4J(")).toList();
    }

    /** The flags of scripts/jvm-flags, as java reads the argument file: # starts a comment. */
    private static List<String> scriptsJvmFlags() throws IOException
    {
        final Path file = Path.of(System.getProperty("mrd.project.root"), "scripts", "jvm-flags");
        return Files.readAllLines(file).stream()
            .map(line -> line.replaceFirst("#.*", "").strip())
            .filter(flag -> !flag.isEmpty())
            .toList();
    }
}
