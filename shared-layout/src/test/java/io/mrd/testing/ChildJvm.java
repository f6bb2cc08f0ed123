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
import java.util.function.Predicate;

/**
 * The one launcher of real processes in mrd's tests: a JVM running a main class from the test class path
 * with the JVM flags mrd needs, its output in a file that can be waited on and is shown when a test fails.
 * Each instance is {@link AutoCloseable}: closing kills the process if it is still running and removes its output.
 */
public final class ChildJvm implements AutoCloseable
{
    private final String name;
    private final Process process;
    private final Path output;
    private final Path errors;

    private ChildJvm(final String name, final Process process, final Path output, final Path errors)
    {
        this.name = name;
        this.process = process;
        this.output = output;
        this.errors = errors;
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
        return launch(name, mainClass).args(args).env(env).extraJvmFlags(extraJvmFlags).start();
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
        return launch(name, mainClass).args(args).env(env).jvmFlags(jvmFlags).start();
    }

    /**
     * @return a launch of {@code mainClass} to complete and {@link Launch#start() start}: by default with no
     * arguments, this JVM's environment, mrd's JVM flags and this JVM's class path.
     */
    public static Launch launch(final String name, final String mainClass)
    {
        return new Launch(name, mainClass);
    }

    /**
     * What to start: the main class, its arguments and environment, its JVM's flags and class path, a program to
     * run it under ({@code setpriv …}), and whether its stderr is kept apart from its stdout.
     */
    public static final class Launch
    {
        private final String name;
        private final String mainClass;
        private List<String> args = List.of();
        private Map<String, String> env = Map.of();
        private List<String> jvmFlags = ChildJvm.jvmFlags();
        private List<String> extraJvmFlags = List.of();
        private List<String> prefix = List.of();
        private String classPath = System.getProperty("java.class.path");
        private boolean errorsApart;

        private Launch(final String name, final String mainClass)
        {
            this.name = name;
            this.mainClass = mainClass;
        }

        public Launch args(final List<String> args)
        {
            this.args = List.copyOf(args);
            return this;
        }

        /**
         * @param env added to this JVM's environment.
         */
        public Launch env(final Map<String, String> env)
        {
            this.env = Map.copyOf(env);
            return this;
        }

        /**
         * @param jvmFlags instead of mrd's JVM flags.
         */
        public Launch jvmFlags(final List<String> jvmFlags)
        {
            this.jvmFlags = List.copyOf(jvmFlags);
            return this;
        }

        /**
         * @param extraJvmFlags after the light JVM's flags, so that they may override them.
         */
        public Launch extraJvmFlags(final List<String> extraJvmFlags)
        {
            this.extraJvmFlags = List.copyOf(extraJvmFlags);
            return this;
        }

        /**
         * @param prefix a program and its arguments that run the JVM (e.g. {@code setpriv --reuid …}).
         */
        public Launch prefix(final List<String> prefix)
        {
            this.prefix = List.copyOf(prefix);
            return this;
        }

        public Launch classPath(final String classPath)
        {
            this.classPath = classPath;
            return this;
        }

        /**
         * Keeps stderr in a file of its own ({@link #errorOutput()}); by default it is merged into the output.
         */
        public Launch errorsApart()
        {
            this.errorsApart = true;
            return this;
        }

        public ChildJvm start()
        {
            final List<String> command = new ArrayList<>(prefix);
            // A shell without job control starts background jobs with SIGINT ignored, and an ignored signal stays
            // ignored across exec: the JVM then never exits on SIGINT. env(1) restores the default before it
            // execs the JVM (same pid), so a child behaves as a foreground command wherever the tests were started.
            command.addAll(List.of("env", "--default-signal=INT"));
            command.add(ProcessHandle.current().info().command().orElse(
                Path.of(System.getProperty("java.home"), "bin", "java").toString()));
            command.addAll(jvmFlags);
            command.add("-Xmx256m");
            command.add("-XX:+UseSerialGC");
            command.add("-XX:TieredStopAtLevel=1");
            command.addAll(extraJvmFlags);
            command.add("-cp");
            command.add(classPath);
            command.add(mainClass);
            command.addAll(args);
            Path output = null;
            Path errors = null;
            try
            {
                output = Files.createTempFile("mrd-" + name + "-", ".out");
                errors = errorsApart ? Files.createTempFile("mrd-" + name + "-", ".err") : null;
                final ProcessBuilder builder = new ProcessBuilder(command)
                    .redirectOutput(output.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
                if (null == errors)
                {
                    builder.redirectErrorStream(true);
                }
                else
                {
                    builder.redirectError(errors.toFile());
                }
                builder.environment().putAll(env);
                return new ChildJvm(name, builder.start(), output, errors);
            }
            catch (final IOException ex)
            {
                deleteQuietly(output);
                deleteQuietly(errors);
                throw new IllegalStateException("cannot start " + name + ": " + ex.getMessage(), ex);
            }
        }
    }

    public String name()
    {
        return name;
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
     * @return everything the process printed so far (its stderr too, unless it was {@link Launch#errorsApart()
     * kept apart}).
     */
    public String output()
    {
        return read(output);
    }

    /**
     * @return what the process printed on stderr so far, when it was {@link Launch#errorsApart() kept apart};
     * else nothing.
     */
    public String errorOutput()
    {
        return null == errors ? "" : read(errors);
    }

    private static String read(final Path file)
    {
        try
        {
            return Files.readString(file, StandardCharsets.UTF_8);
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
        final String text = Wait.await(name + " to print the expected line", timeout, () ->
        {
            // Whether it ran is read before its output: a line printed just before it exited is then seen.
            final boolean running = process.isAlive();
            final String now = output();
            if (!running && now.lines().noneMatch(predicate))
            {
                throw new AssertionError(name + " exited with " + process.exitValue() +
                    " before printing the expected line; output:\n" + now);
            }
            return now;
        }, now -> now.lines().anyMatch(predicate));
        return text.lines().filter(predicate).findFirst().orElseThrow();
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
                throw new AssertionError(name + " did not exit within " + timeout + "; output:\n" + output() +
                    (null == errors ? "" : "stderr:\n" + errorOutput()));
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

    /**
     * Kills the process if it still runs and removes its output.
     */
    public void close()
    {
        if (process.isAlive())
        {
            kill();
        }
        deleteQuietly(output);
        deleteQuietly(errors);
    }

    private static void deleteQuietly(final Path file)
    {
        try
        {
            if (null != file)
            {
                Files.deleteIfExists(file);
            }
        }
        catch (final IOException ignore)
        {
            // a leftover temp file is harmless
        }
    }
}
