package io.mrd.bench.multi;

import io.mrd.bench.JvmFlags;

import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;

/**
 * A JVM the multi-process benchmark started: this JVM's java and class path, the mrd flags, full JIT (the
 * test launcher's {@code TieredStopAtLevel=1} would distort every number), output to a log file that is
 * kept with the results, commands written to its standard input. Closing kills it if it is still running.
 */
final class Child implements AutoCloseable
{
    /** Where minflt (field 10 of {@code /proc/PID/stat}) stands among the fields after the command name. */
    private static final int MINFLT_AFTER_COMMAND = 7;

    private final String name;
    private final Process process;
    private final Path log;
    private final PrintStream input;

    private Child(final String name, final Process process, final Path log, final PrintStream input)
    {
        this.name = name;
        this.process = process;
        this.log = log;
        this.input = input;
    }

    static Child start(final String name, final Path log, final List<String> jvmFlags, final String mainClass,
        final List<String> args)
    {
        return start(name, log, jvmFlags, mainClass, args, Map.of());
    }

    /**
     * @param env variables added to this JVM's environment for the child (such as the emulated device's library).
     */
    static Child start(final String name, final Path log, final List<String> jvmFlags, final String mainClass,
        final List<String> args, final Map<String, String> env)
    {
        final List<String> command = new ArrayList<>(JvmFlags.javaCommand(jvmFlags, mainClass));
        command.addAll(args);
        try
        {
            final ProcessBuilder builder = new ProcessBuilder(command);
            builder.environment().putAll(env);
            final Process process = builder
                .redirectErrorStream(true)
                .redirectOutput(log.toFile())
                .redirectInput(ProcessBuilder.Redirect.PIPE)
                .start();
            return new Child(name, process, log, new PrintStream(process.getOutputStream(), true,
                StandardCharsets.UTF_8));
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot start " + name + ": " + String.join(" ", command), ex);
        }
    }

    /**
     * @return {@code out/name}, created: where a part keeps its children's output with the results.
     */
    static Path logDirectory(final Path out, final String name)
    {
        final Path dir = out.resolve(name);
        try
        {
            return Files.createDirectories(dir);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot create " + dir, ex);
        }
    }

    String name()
    {
        return name;
    }

    /**
     * @return the CPU time the child's process has used so far (user and system, all its threads), in seconds;
     *         NaN where the platform does not tell.
     */
    double cpuSeconds()
    {
        return process.toHandle().info().totalCpuDuration().map(d -> d.toNanos() / 1e9).orElse(Double.NaN);
    }

    /**
     * @return the minor page faults of the child's process so far, all its threads ({@code /proc/PID/stat}
     *         field 10).
     * @throws IllegalStateException when the process is gone or the platform has no {@code /proc}.
     */
    long minorFaults()
    {
        final Path stat = Path.of("/proc", String.valueOf(process.pid()), "stat");
        try
        {
            // The command name, field 2, is in parentheses and may hold spaces: count from the last ')'.
            final String line = Files.readString(stat, StandardCharsets.US_ASCII);
            final String[] fields = line.substring(line.lastIndexOf(')') + 2).split(" ");
            return Long.parseLong(fields[MINFLT_AFTER_COMMAND]);
        }
        catch (final IOException | RuntimeException ex)
        {
            throw new IllegalStateException("cannot read the minor faults of " + name + " from " + stat, ex);
        }
    }

    /**
     * Writes one command line to the child's standard input.
     *
     * @throws IllegalStateException when the child is gone.
     */
    void send(final String command)
    {
        input.println(command);
        if (input.checkError())
        {
            throw new IllegalStateException("cannot send '" + command + "' to " + name + ": it exited? " + tail());
        }
    }

    List<String> lines()
    {
        try
        {
            return Files.readAllLines(log, StandardCharsets.UTF_8);
        }
        catch (final IOException ex)
        {
            return List.of();
        }
    }

    /**
     * @return the first line matching {@code predicate}, waiting for it.
     * @throws IllegalStateException naming the process and its log when none comes before the deadline or the
     *                               process exits first.
     */
    String awaitLine(final Predicate<String> predicate, final Duration timeout)
    {
        final long deadline = System.nanoTime() + timeout.toNanos();
        while (true)
        {
            final boolean alive = process.isAlive();
            for (final String line : lines())
            {
                if (predicate.test(line))
                {
                    return line;
                }
            }
            if (!alive)
            {
                throw new IllegalStateException(name + " exited with " + process.exitValue() +
                    " before printing the expected line; its output (" + log + "):\n" + tail());
            }
            if (System.nanoTime() > deadline)
            {
                throw new IllegalStateException(name + " did not print the expected line within " + timeout +
                    "; its output (" + log + "):\n" + tail());
            }
            LockSupport.parkNanos(5_000_000);
        }
    }

    int awaitExit(final Duration timeout)
    {
        try
        {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS))
            {
                process.destroyForcibly();
                throw new IllegalStateException(name + " did not exit within " + timeout + "; its output:\n" + tail());
            }
            return process.exitValue();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted waiting for " + name, ex);
        }
    }

    /**
     * SIGTERM, then SIGKILL if it is still running after {@code grace}.
     */
    void stop(final Duration grace)
    {
        if (!process.isAlive())
        {
            return;
        }
        process.destroy();
        try
        {
            if (!process.waitFor(grace.toMillis(), TimeUnit.MILLISECONDS))
            {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * SIGKILL, and waits for the exit: a crash, which leaves the child no chance to clean up.
     *
     * @return the exit status (137 on Linux).
     */
    int kill()
    {
        process.destroyForcibly();
        return awaitExit(Duration.ofSeconds(30));
    }

    long pid()
    {
        return process.pid();
    }

    String tail()
    {
        final List<String> lines = lines();
        return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
    }

    public void close()
    {
        input.close();
        if (process.isAlive())
        {
            process.destroyForcibly();
            try
            {
                process.waitFor(10, TimeUnit.SECONDS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
    }
}
