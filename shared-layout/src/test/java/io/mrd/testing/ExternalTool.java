package io.mrd.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * A program from the host (promtool, systemd-analyze) that a test runs when it is installed.
 * <p>
 * A test skips when the program is missing, unless {@code MRD_REQUIRE_TOOLS} names it (comma-separated; .ci/run
 * sets it for what it installed): then a missing program fails the test instead of hiding a gap in CI.
 */
public final class ExternalTool
{
    /** What a run printed (stdout and stderr together) and its exit status. */
    public record Result(int exitCode, String output)
    {
    }

    private final Path program;

    private ExternalTool(final Path program)
    {
        this.program = program;
    }

    /**
     * @param name a program looked up in {@code $PATH}.
     * @return the tool; the calling test is skipped (or fails, see the class comment) when it is missing.
     */
    public static ExternalTool require(final String name)
    {
        final String path = System.getenv().getOrDefault("PATH", "/usr/bin:/bin");
        for (final String dir : path.split(":"))
        {
            final Path candidate = Path.of(dir.isEmpty() ? "." : dir, name);
            if (Files.isExecutable(candidate))
            {
                return new ExternalTool(candidate);
            }
        }
        final String required = System.getenv().getOrDefault("MRD_REQUIRE_TOOLS", "");
        if (Arrays.asList(required.split(",")).contains(name))
        {
            fail(name + " is not installed but MRD_REQUIRE_TOOLS=" + required + " requires it");
        }
        assumeTrue(false, name + " is not installed: skipped (install it, or set MRD_REQUIRE_TOOLS=" + name +
            " to make this a failure)");
        throw new AssertionError("unreachable");
    }

    /**
     * Runs the tool with {@code args}, feeding it {@code input} on stdin, and waits at most 60 s.
     */
    public Result run(final String input, final String... args)
    {
        final List<String> command = new ArrayList<>();
        command.add(program.toString());
        command.addAll(List.of(args));
        try
        {
            final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            try (var stdin = process.getOutputStream())
            {
                stdin.write(input.getBytes(StandardCharsets.UTF_8));
            }
            final byte[] output = process.getInputStream().readAllBytes();
            if (!process.waitFor(60, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                fail(command + " did not finish within 60 s");
            }
            return new Result(process.exitValue(), new String(output, StandardCharsets.UTF_8));
        }
        catch (final IOException ex)
        {
            throw new AssertionError("cannot run " + command + ": " + ex, ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted while running " + command, ex);
        }
    }
}
