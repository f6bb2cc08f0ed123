package io.mrd.cli;

import io.mrd.layout.MrdException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.util.Arrays;

/**
 * The {@code mrd} command: one picocli class per subcommand.
 * <p>
 * Exit codes, for every subcommand: 0 success; 1 the operation failed or the daemon is not running (one line
 * on stderr says why and what to do); 2 the command line was wrong.
 */
@Command(
    name = "mrd",
    mixinStandardHelpOptions = true,
    versionProvider = Mrd.Version.class,
    description = {
        "Memory-registration daemon for multi-process zero-copy I/O.",
        "The primary (mrd start) owns memory and registrations and publishes an address->lkey cache in a " +
            "control file; JVM workers attach as secondaries and read it without system calls."
    },
    footer = {
        "",
        "Examples:",
        "  mrd demo                            the whole system once, in a temporary directory",
        "  mrd start --dir /tmp/mrd            start a daemon in the background",
        "  mrd status --dir /tmp/mrd           is it alive?",
        "  mrd stop --dir /tmp/mrd             graceful shutdown",
        "",
        "Exit codes: 0 success, 1 failure or not running, 2 bad command line."
    },
    subcommands = {
        StartCommand.class,
        StopCommand.class,
        StatusCommand.class,
        DumpCommand.class,
        StatCommand.class,
        CheckCommand.class,
        LookupCommand.class,
        WorkerCommand.class,
        DemoCommand.class,
        CommandLine.HelpCommand.class
    })
public final class Mrd implements Runnable
{
    /** Exit code of a failed operation or a daemon that is not running. */
    public static final int EXIT_FAILURE = 1;
    /** Exit code of a wrong command line. */
    public static final int EXIT_USAGE = 2;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public void run()
    {
        spec.commandLine().usage(System.out);
    }

    public static void main(final String[] args)
    {
        configureLogging(args);
        System.exit(execute(args));
    }

    /**
     * Runs a command line and returns its exit code (tests call this in-process).
     */
    public static int execute(final String... args)
    {
        return commandLine().execute(args);
    }

    /**
     * @return the {@code mrd} command line with mrd's error handling: one line per failure, exit 1; exit 2 for
     * a wrong command line.
     */
    public static CommandLine commandLine()
    {
        return new CommandLine(new Mrd())
            .setOverwrittenOptionsAllowed(true)
            .setCaseInsensitiveEnumValuesAllowed(true)
            .setExecutionExceptionHandler((ex, cl, parseResult) ->
            {
                if (ex instanceof MrdException mrd)
                {
                    cl.getErr().println("mrd " + cl.getCommandName() + ": " + mrd.oneLine());
                }
                else
                {
                    cl.getErr().println("mrd " + cl.getCommandName() + ": unexpected " + ex);
                    ex.printStackTrace(cl.getErr());
                }
                return EXIT_FAILURE;
            })
            .setParameterExceptionHandler((ex, strings) ->
            {
                final CommandLine cl = ex.getCommandLine();
                cl.getErr().println("mrd " + cl.getCommandName() + ": " + ex.getMessage() +
                    " (see 'mrd " + (cl.getCommandName().equals("mrd") ? "" : cl.getCommandName() + " ") + "--help')");
                return EXIT_USAGE;
            });
    }

    /**
     * Chooses the log level before any logger exists: daemons log at INFO (or {@code --log-level}); every
     * other command logs only warnings, so its output is only what it was asked for.
     */
    static void configureLogging(final String[] args)
    {
        if (null != System.getProperty("mrd.log.level"))
        {
            return;
        }
        final int at = Arrays.asList(args).indexOf("--log-level");
        final boolean daemon = args.length > 0 && "start".equals(args[0]);
        String level = daemon ? "INFO" : "WARN";
        if (at >= 0 && at + 1 < args.length)
        {
            level = args[at + 1];
        }
        else
        {
            for (final String arg : args)
            {
                if (arg.startsWith("--log-level="))
                {
                    level = arg.substring("--log-level=".length());
                }
            }
        }
        System.setProperty("mrd.log.level", level.toUpperCase(java.util.Locale.ROOT));
    }

    static final class Version implements CommandLine.IVersionProvider
    {
        public String[] getVersion()
        {
            final String version = Mrd.class.getPackage().getImplementationVersion();
            return new String[] {"mrd " + (null == version ? "development build" : version) +
                " (control-file layout " + io.mrd.layout.HeaderDescriptor.LAYOUT_VERSION + ")"};
        }
    }
}
