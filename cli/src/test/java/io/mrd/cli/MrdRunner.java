package io.mrd.cli;

import io.mrd.testing.ChildJvm;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs an {@code mrd} command line and keeps its exit code, stdout and stderr apart: in this JVM, through
 * {@link Mrd#execute} (what a command prints, its logger's lines included, is captured), or as a process of its
 * own, through {@link Mrd#main}, for what only a real process shows (its exit status, its environment, another
 * uid). {@link MrdProcess} runs commands as processes with the two streams merged.
 */
final class MrdRunner
{
    private MrdRunner()
    {
    }

    /**
     * The output of one command.
     */
    record Run(int exit, String out, String err)
    {
        String both()
        {
            return out + err;
        }

        public String toString()
        {
            return "exit " + exit + ", stdout:\n" + out + "stderr:\n" + err;
        }
    }

    /**
     * Runs {@code args} in this JVM. Synchronized: it swaps {@link System#out} and {@link System#err}.
     */
    static synchronized Run mrd(final String... args)
    {
        final PrintStream out = System.out;
        final PrintStream err = System.err;
        final ByteArrayOutputStream outBytes = new ByteArrayOutputStream();
        final ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
        final int exit;
        try (PrintStream capturedOut = new PrintStream(outBytes, true, StandardCharsets.UTF_8);
            PrintStream capturedErr = new PrintStream(errBytes, true, StandardCharsets.UTF_8))
        {
            System.setOut(capturedOut);
            System.setErr(capturedErr);
            exit = Mrd.execute(args);
        }
        finally
        {
            System.setOut(out);
            System.setErr(err);
        }
        return new Run(exit, outBytes.toString(StandardCharsets.UTF_8), errBytes.toString(StandardCharsets.UTF_8));
    }

    /**
     * Runs {@code args} as a process: {@code prefix} (e.g. {@code setpriv …}, or nothing), then this JVM's binary
     * with mrd's JVM flags, {@code classPath} and {@link Mrd}.
     *
     * @param env added to this process's environment.
     */
    static Run process(
        final List<String> prefix, final String classPath, final Map<String, String> env, final List<String> args)
    {
        final List<String> command = new ArrayList<>(prefix);
        command.add(ProcessHandle.current().info().command().orElse(
            Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(ChildJvm.jvmFlags());
        command.addAll(List.of("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-cp", classPath,
            Mrd.class.getName()));
        command.addAll(args);
        try
        {
            final Path out = Files.createTempFile("mrd-run-", ".out");
            final Path err = Files.createTempFile("mrd-run-", ".err");
            try
            {
                final ProcessBuilder builder = new ProcessBuilder(command)
                    .redirectOutput(out.toFile())
                    .redirectError(err.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()));
                builder.environment().putAll(env);
                final Process process = builder.start();
                if (!process.waitFor(MrdProcess.COMMAND_TIMEOUT.toSeconds(), TimeUnit.SECONDS))
                {
                    process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                    throw new AssertionError("mrd " + String.join(" ", args) + " did not exit within " +
                        MrdProcess.COMMAND_TIMEOUT + "; stdout:\n" + Files.readString(out) + "stderr:\n" +
                        Files.readString(err));
                }
                return new Run(process.exitValue(), Files.readString(out), Files.readString(err));
            }
            finally
            {
                Files.deleteIfExists(out);
                Files.deleteIfExists(err);
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted running mrd " + String.join(" ", args), ex);
        }
    }
}
