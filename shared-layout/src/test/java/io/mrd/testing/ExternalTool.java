package io.mrd.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * A program from the host (promtool, systemd-analyze) that a test runs when it is installed.
 * <p>
 * A missing program skips the test, or fails it where {@code MRD_REQUIRE_TOOLS} names it ({@link Equipment#program}).
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
     * @return the tool; the calling test is skipped (or fails, see {@link Equipment#program}) when it is missing.
     */
    public static ExternalTool require(final String name)
    {
        return new ExternalTool(Equipment.program(name));
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
