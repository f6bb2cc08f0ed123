package io.mrd.stress;

import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Runs this module's jcstress tests ({@code io.mrd.*Stress}) in a child JVM, in a mode that fits CI (about a
 * minute on two cores; {@code -Dmrd.jcstress.mode=default} for a longer run), and fails on what jcstress
 * reports as failed (a FORBIDDEN or unknown outcome) or in error (a harness or test failure), or when it did
 * not run every test. The console output is in {@code target/jcstress/console.txt}, the HTML report beside it.
 */
final class JcstressTest
{
    private static final String[] TESTS = {"CacheLivenessStress", "GlobalCacheSeqLockStress", "TurnHandOnStress",
        "GiveUpHandOnStress",
        "GapLivenessStress.Lost", "GapLivenessStress.Resumed"};
    private static final long DEADLINE_MINUTES = 10;
    /** jcstress's progress line; its last one is the run's total. */
    private static final Pattern SUMMARY = Pattern.compile(
        "\\(Results: (\\d+) planned; (\\d+) passed, (\\d+) failed, (\\d+) soft errs, (\\d+) hard errs\\)");

    @Test
    void noForbiddenOutcome() throws IOException, InterruptedException
    {
        final Path out = Path.of("target", "jcstress").toAbsolutePath();
        Files.createDirectories(out);
        final Path console = out.resolve("console.txt");
        // jcstress starts its test JVMs with this JVM's own flags: mrd's (FFM, Agrona's Unsafe) go here.
        final String flags = System.getProperty("mrd.jvm.flags", "");
        final String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();

        final List<String> command = new ArrayList<>();
        command.add(java);
        command.addAll(List.of(flags.trim().split("\\s+")));
        command.addAll(List.of("-cp", System.getProperty("java.class.path"), "org.openjdk.jcstress.Main",
            "-m", System.getProperty("mrd.jcstress.mode", "quick"),
            "-t", "io\\.mrd\\..*Stress",
            "-f", "1",
            // the four VM modes (interpreter, C1, C2, C2 with stressed scheduling), not also their mixes
            "-sc", "false",
            "-v",
            "-r", out.resolve("results").toString()));
        final Process process = new ProcessBuilder(command)
            .directory(out.toFile())
            .redirectErrorStream(true)
            .redirectOutput(console.toFile())
            .start();
        if (!process.waitFor(DEADLINE_MINUTES, TimeUnit.MINUTES))
        {
            process.destroyForcibly().waitFor();
            fail("jcstress did not finish in " + DEADLINE_MINUTES + " minutes; see " + console);
        }
        final String output = Files.readString(console);
        assertEquals(0, process.exitValue(), () -> "jcstress exited with " + process.exitValue() + ":\n" + tail(output));
        for (final String test : TESTS)
        {
            assertTrue(output.contains("." + test + "\n"), () -> "jcstress did not run " + test + ":\n" + tail(output));
        }
        final Matcher summary = SUMMARY.matcher(output);
        String last = null;
        while (summary.find())
        {
            last = summary.group();
        }
        assertTrue(null != last, () -> "no jcstress summary line:\n" + tail(output));
        final Matcher counts = SUMMARY.matcher(last);
        assertTrue(counts.matches());
        assertEquals(counts.group(1), counts.group(2), last);
        assertEquals("0", counts.group(3), last);
        assertEquals("0", counts.group(4), last);
        assertEquals("0", counts.group(5), last);
        assertTrue(output.contains("Failed tests: No matches."), () -> "jcstress saw a forbidden outcome:\n" +
            tail(output));
        assertTrue(output.contains("Error tests: No matches."), () -> "a jcstress test errored:\n" + tail(output));
    }

    private static String tail(final String output)
    {
        final String[] lines = output.split("\n");
        return String.join("\n", List.of(lines).subList(Math.max(0, lines.length - 80), lines.length));
    }
}
