package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.FileFailure;
import io.mrd.layout.MrdException;
import picocli.CommandLine;
import picocli.CommandLine.Command;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileSystemException;
import java.util.Arrays;
import java.util.Locale;

/**
 * The {@code mrd} command: one picocli class per subcommand.
 * <p>
 * Exit codes, for every subcommand: 0 success; 1 the operation failed or the daemon is not running; 2 the
 * command line (or an {@code MRD_*} variable) was wrong by itself. Either way stderr gets one line,
 * {@code mrd COMMAND: ERRNO: what was wrong, naming the value: what to do}, and no Java class name: a person
 * reads it, a script matches its errno.
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
        "  mrd restart --dir /tmp/mrd          a new daemon adopts the running one's registrations",
        "  mrd events --dir /tmp/mrd           what the daemon did (also after a crash)",
        "",
        "Exit codes: 0 success, 1 failure or not running, 2 bad command line (no command, an unknown option, " +
            "a wrong value), each failure with one line on stderr."
    },
    subcommands = {
        StartCommand.class,
        StopCommand.class,
        RestartCommand.class,
        StatusCommand.class,
        DumpCommand.class,
        StatCommand.class,
        CheckCommand.class,
        EventsCommand.class,
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

    /** The levels {@code --log-level} takes. */
    enum LogLevel
    {
        TRACE, DEBUG, INFO, WARN, ERROR
    }

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /**
     * {@code mrd} alone: a command line without a command is wrong, not a request for help.
     */
    public void run()
    {
        throw new CommandLine.ParameterException(spec.commandLine(), "no command given: give one of " +
            String.join(", ", spec.subcommands().keySet()));
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
                cl.getErr().println(prefix(cl) + oneLine(ex));
                if (!(ex instanceof MrdException || ex instanceof IOException || ex instanceof UncheckedIOException))
                {
                    // Not a failure mrd foresaw: a bug, which the stack trace locates.
                    ex.printStackTrace(cl.getErr());
                }
                return EXIT_FAILURE;
            })
            .setParameterExceptionHandler((ex, strings) ->
            {
                final CommandLine cl = ex.getCommandLine();
                final String name = cl.getCommandSpec().qualifiedName(" ");
                cl.getErr().println(prefix(cl) + ErrorCode.EINVAL.name() + ": " + singleLine(ex.getMessage()) +
                    " (see '" + name + " --help')");
                return EXIT_USAGE;
            });
    }

    /**
     * @return a wrong command line found by a command itself, after picocli parsed it (so it exits 2 as any
     * other): {@code ex}'s message without its code, which {@link #commandLine()}'s handler prints as EINVAL.
     */
    static CommandLine.ParameterException usage(final CommandLine.Model.CommandSpec spec, final MrdException ex)
    {
        return new CommandLine.ParameterException(spec.commandLine(), ex.getMessage(), ex);
    }

    private static String prefix(final CommandLine cl)
    {
        return cl.getCommandSpec().qualifiedName(" ") + ": ";
    }

    /**
     * @return {@code CODE: message} on one line, whatever failed.
     */
    private static String oneLine(final Exception ex)
    {
        return singleLine(switch (ex)
        {
            case MrdException mrd -> mrd.oneLine();
            case IOException io -> describe(io);
            case UncheckedIOException io -> describe(io.getCause());
            case InterruptedException ignored -> ErrorCode.EIO.name() + ": interrupted";
            default -> ErrorCode.EIO.name() + ": unexpected failure (a bug in mrd; please report the lines below): " +
                ex.getMessage();
        });
    }

    /**
     * @return the errno and what failed: a file-system exception's message is only its path.
     */
    private static String describe(final IOException ex)
    {
        final ErrorCode code = FileFailure.code(ex);
        return code.name() + ": " + (ex instanceof FileSystemException fs ?
            fs.getFile() + (null == fs.getOtherFile() ? "" : " -> " + fs.getOtherFile()) + ": " + code.text() :
            ex.getMessage());
    }

    private static String singleLine(final String text)
    {
        return String.valueOf(text).replaceAll("\\s*\\R\\s*", " ").strip();
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
        String given = at >= 0 && at + 1 < args.length ? args[at + 1] : null;
        for (final String arg : args)
        {
            if (arg.startsWith("--log-level="))
            {
                given = arg.substring("--log-level=".length());
            }
        }
        // A level that is none of these is refused by picocli when it parses the command line; until then the
        // logger must not be configured with it.
        for (final LogLevel known : LogLevel.values())
        {
            if (known.name().equalsIgnoreCase(given))
            {
                level = known.name();
            }
        }
        System.setProperty("mrd.log.level", level.toUpperCase(Locale.ROOT));
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
