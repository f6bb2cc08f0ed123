package io.mrd.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;

/**
 * The one launcher of real processes in mrd's tests: a JVM running a main class from the test class path
 * with the JVM flags mrd needs, its output in a file that can be waited on and is shown when a test fails.
 * Each instance is {@link AutoCloseable}: closing kills the process if it is still running.
 */
public final class ChildJvm implements AutoCloseable
{
    private final String name;
    private final Process process;
    private final Path output;

    private ChildJvm(final String name, final Process process, final Path output)
    {
        this.name = name;
        this.process = process;
        this.output = output;
    }

    /**
     * @return the JVM flags every mrd process runs with, as the pom passes them to tests.
     */
    public static List<String> jvmFlags()
    {
        final String flags = System.getProperty("mrd.jvm.flags", "--enable-native-access=ALL-UNNAMED");
        return Arrays.stream(flags.trim().split("\\s+")).filter(s -> !s.isEmpty()).toList();
    }

    /**
     * Starts {@code mainClass} in a new JVM with this JVM's class path.
     */
    public static ChildJvm start(final String name, final Class<?> mainClass, final List<String> args)
    {
        return start(name, mainClass.getName(), args, Map.of(), List.of());
    }

    public static ChildJvm start(
        final String name,
        final String mainClass,
        final List<String> args,
        final Map<String, String> env,
        final List<String> extraJvmFlags)
    {
        return launch(name, mainClass, args, env, jvmFlags(), extraJvmFlags);
    }

    /**
     * Starts {@code mainClass} with {@code jvmFlags} instead of mrd's (e.g. none, to see what a JVM started
     * without them does).
     */
    public static ChildJvm startWithFlags(
        final String name,
        final String mainClass,
        final List<String> args,
        final Map<String, String> env,
        final List<String> jvmFlags)
    {
        return launch(name, mainClass, args, env, jvmFlags, List.of());
    }

    private static ChildJvm launch(
        final String name,
        final String mainClass,
        final List<String> args,
        final Map<String, String> env,
        final List<String> jvmFlags,
        final List<String> extraJvmFlags)
    {
        final List<String> command = new ArrayList<>();
        // A shell without job control starts background jobs with SIGINT ignored, and an ignored signal stays
        // ignored across exec: the JVM then never exits on SIGINT. env(1) restores the default before it execs
        // the JVM (same pid), so a child behaves as a foreground command wherever the tests were started.
        command.addAll(List.of("env", "--default-signal=INT"));
        command.add(ProcessHandle.current().info().command().orElse(
            Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(jvmFlags);
        command.add("-Xmx256m");
        command.add("-XX:+UseSerialGC");
        command.add("-XX:TieredStopAtLevel=1");
        command.addAll(extraJvmFlags);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass);
        command.addAll(args);
        try
        {
            final Path output = Files.createTempFile("mrd-" + name + "-", ".out");
            final ProcessBuilder builder = new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(output.toFile())
                .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
            builder.environment().putAll(env);
            return new ChildJvm(name, builder.start(), output);
        }
        catch (final IOException ex)
        {
            throw new IllegalStateException("cannot start " + name + ": " + ex.getMessage(), ex);
        }
    }

    public Process process()
    {
        return process;
    }

    public long pid()
    {
        return process.pid();
    }

    /**
     * @return everything the process printed so far.
     */
    public String output()
    {
        try
        {
            return Files.readString(output, StandardCharsets.UTF_8);
        }
        catch (final IOException ex)
        {
            return "(cannot read output: " + ex.getMessage() + ")";
        }
    }

    /**
     * @return the lines printed so far.
     */
    public List<String> lines()
    {
        return output().lines().toList();
    }

    /**
     * Waits for a line matching {@code predicate}.
     *
     * @return the line.
     * @throws AssertionError naming the process and its output when none came before the deadline or the
     *                        process exited first.
     */
    public String awaitLine(final Predicate<String> predicate, final Duration timeout)
    {
        final long deadline = System.nanoTime() + timeout.toNanos();
        while (true)
        {
            for (final String line : lines())
            {
                if (predicate.test(line))
                {
                    return line;
                }
            }
            if (!process.isAlive())
            {
                for (final String line : lines())
                {
                    if (predicate.test(line))
                    {
                        return line;
                    }
                }
                throw new AssertionError(name + " exited with " + process.exitValue() +
                    " before printing the expected line; output:\n" + output());
            }
            if (System.nanoTime() > deadline)
            {
                throw new AssertionError(name + " did not print the expected line within " + timeout +
                    "; output:\n" + output());
            }
            sleepQuietly(20);
        }
    }

    /**
     * Waits for the process to exit.
     *
     * @return its exit code.
     * @throws AssertionError when it is still running at the deadline (it is then killed).
     */
    public int awaitExit(final Duration timeout)
    {
        try
        {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS))
            {
                process.destroyForcibly();
                throw new AssertionError(name + " did not exit within " + timeout + "; output:\n" + output());
            }
            return process.exitValue();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted waiting for " + name, ex);
        }
    }

    /**
     * kill -9.
     */
    public void kill()
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

    public void close()
    {
        if (process.isAlive())
        {
            kill();
        }
        try
        {
            Files.deleteIfExists(output);
        }
        catch (final IOException ignore)
        {
            // a leftover temp file is harmless
        }
    }

    /**
     * Waits for a condition with a deadline: the only way tests here wait.
     *
     * @throws AssertionError with {@code what} when the condition is still false at the deadline.
     */
    public static void await(final String what, final Duration timeout, final BooleanSupplier condition)
    {
        final long deadline = System.nanoTime() + timeout.toNanos();
        while (!condition.getAsBoolean())
        {
            if (System.nanoTime() > deadline)
            {
                throw new AssertionError("timed out after " + timeout + " waiting for " + what);
            }
            sleepQuietly(10);
        }
    }

    private static void sleepQuietly(final long ms)
    {
        try
        {
            Thread.sleep(ms);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", ex);
        }
    }
}
