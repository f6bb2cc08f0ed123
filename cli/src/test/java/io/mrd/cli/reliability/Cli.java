package io.mrd.cli.reliability;

import io.mrd.cli.Mrd;
import picocli.CommandLine;

import java.io.PrintWriter;
import java.io.StringWriter;

/**
 * Runs an {@code mrd} command in this JVM, as {@code Mrd.main} would without the exit: the command line, the
 * exit code and what it printed. {@code mrd start} (without --foreground) started this way spawns the daemon
 * as a process of its own, exactly as from a shell.
 */
final class Cli
{
    /**
     * One command's outcome.
     */
    record Result(int exitCode, String output)
    {
        public String toString()
        {
            return "exit " + exitCode + ": " + output;
        }
    }

    private Cli()
    {
    }

    static Result run(final String... args)
    {
        final StringWriter text = new StringWriter();
        final PrintWriter writer = new PrintWriter(text, true);
        final CommandLine commandLine = Mrd.commandLine();
        commandLine.setOut(writer);
        commandLine.setErr(writer);
        final int exit = commandLine.execute(args);
        writer.flush();
        return new Result(exit, text.toString());
    }
}
