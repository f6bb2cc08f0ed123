package io.mrd.bench;

import io.mrd.bench.report.ResultFile;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * A C reference program (bench/src/main/c, compiled by scripts/bench), run by the Java part whose rows it is
 * the reference of, between that part's own measurements: one call is one round of the reference. The program
 * prints result lines ({@link ResultFile}, the round given on its command line) on its standard output, which
 * are checked and appended to the part's file, and progress on its standard error, which is appended to a log.
 */
public final class CProgram
{
    /** The system property naming the directory of the compiled programs; scripts/bench sets it. */
    public static final String DIR_PROPERTY = "mrd.bench.c";

    private CProgram()
    {
    }

    /**
     * Runs {@code name} with {@code args}.
     *
     * @throws IllegalStateException naming the program, its exit status and its log's tail when it fails, prints a
     *                               malformed line or outlives {@code timeout}.
     */
    public static void run(final String name, final List<String> args, final Path tsv, final Path log,
        final Duration timeout)
    {
        run(name, args, Map.of(), tsv, log, timeout);
    }

    /**
     * Runs {@code name} with {@code args} and {@code env} added to this JVM's environment (such as the emulated
     * device's {@code MRDEMU_DEVICES}).
     *
     * @throws IllegalStateException as {@link #run(String, List, Path, Path, Duration)}.
     */
    public static void run(final String name, final List<String> args, final Map<String, String> env,
        final Path tsv, final Path log, final Duration timeout)
    {
        final List<String> command = new ArrayList<>();
        command.add(path(name).toString());
        command.addAll(args);
        Path stdout = null;
        try
        {
            stdout = Files.createTempFile(tsv.toAbsolutePath().getParent(), name + "-", ".out");
            Files.writeString(log, "# " + String.join(" ", command) + "\n", StandardCharsets.UTF_8,
                StandardOpenOption.CREATE, StandardOpenOption.APPEND);
            final ProcessBuilder builder = new ProcessBuilder(command);
            builder.environment().putAll(env);
            final Process process = builder
                .redirectOutput(stdout.toFile())
                .redirectError(ProcessBuilder.Redirect.appendTo(log.toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")))
                .start();
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS))
            {
                process.destroyForcibly();
                process.waitFor(10, TimeUnit.SECONDS);
                throw new IllegalStateException(name + " did not finish within " + timeout + ": " +
                    String.join(" ", command) + "\n" + tail(log));
            }
            if (process.exitValue() != 0)
            {
                throw new IllegalStateException(name + " exited with " + process.exitValue() + ": " +
                    String.join(" ", command) + "\n" + tail(log));
            }
            final List<ResultFile.Result> results = Files.readAllLines(stdout, StandardCharsets.UTF_8).stream()
                .map(ResultFile::parse).filter(Objects::nonNull).toList();
            ResultFile.append(tsv, results);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot run " + String.join(" ", command), ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted running " + name, ex);
        }
        finally
        {
            if (null != stdout)
            {
                try
                {
                    Files.deleteIfExists(stdout);
                }
                catch (final IOException ignore)
                {
                    // a temporary file in the results directory: harmless if it stays
                }
            }
        }
    }

    private static Path path(final String name)
    {
        final String dir = System.getProperty(DIR_PROPERTY);
        final Path program = null != dir ? Path.of(dir, name) :
            Path.of(System.getProperty("mrd.root", "."), "bench", "target", "c", name);
        if (!Files.isExecutable(program))
        {
            throw new IllegalStateException("the C reference " + program + " is missing: scripts/bench compiles " +
                "it (gcc -O2 bench/src/main/c/" + name + ".c) and passes -D" + DIR_PROPERTY + "=DIR");
        }
        return program;
    }

    private static String tail(final Path log)
    {
        try
        {
            final List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
        }
        catch (final IOException ex)
        {
            return "(no log: " + ex.getMessage() + ")";
        }
    }
}
