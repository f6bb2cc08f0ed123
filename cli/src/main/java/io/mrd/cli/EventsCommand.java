package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.FileFailure;
import io.mrd.layout.MrdException;
import io.mrd.layout.journal.JournalEvent;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.tools.JournalReader;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.DateTimeException;
import java.time.Duration;
import java.time.Instant;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;

/**
 * {@code mrd events}: prints the daemon's event journal ({@code DIR/journal}), from its directory alone: the
 * daemon may be running, stopped or killed (the journal then ends at the last event it committed).
 */
@Command(
    name = "events",
    mixinStandardHelpOptions = true,
    description = {
        "Print the daemon's event journal: clients attached, refused and gone, ALLOC and FREE, MRs created, " +
            "detached and deregistered with their range and keys (on several devices, MR_DEVICE_KEYS after " +
            "MR_CREATED gives each further device's), memory free events with devGen, cache overflows " +
            "and rebuilds, daemon start and stop with its epoch; one line per event, oldest first.",
        "The journal is read from the run directory alone, so it works on a directory whose daemon was killed: " +
            "it shows what happened up to the last event the daemon committed. 'mrd start' keeps the journal of " +
            "the daemon before it in DIR/" + JournalFileDescriptor.PREVIOUS_DIRECTORY + " (--previous).",
        "Exit 0; 1 with a one-line reason when there is no journal or it cannot be read; 2 for a wrong command line."
    },
    footer = {"", "Examples:",
        "  mrd events --dir /tmp/mrd                       everything in the journal",
        "  mrd events --dir /tmp/mrd --since 10m --client 3  client 3's events of the last ten minutes",
        "  mrd events --dir /tmp/mrd --previous --json     the journal of the daemon before, as JSON lines",
        "  mrd events --dir /tmp/mrd --follow              new events as they happen, until Ctrl-C"})
public final class EventsCommand implements Callable<Integer>
{
    /** How often {@code --follow} looks for new events. */
    static final long FOLLOW_POLL_MS = 100;
    private static final String GIVE_A_RUN_DIRECTORY = "give the run directory of a daemon with --dir or MRD_DIR";

    @Mixin
    DirOption dirOption;

    @Option(names = "--previous", description = "Read the journal of the daemon before the current one (DIR/" +
        JournalFileDescriptor.PREVIOUS_DIRECTORY + "), which 'mrd start' kept.")
    boolean previous;

    @Option(names = "--journal", paramLabel = "PATH", converter = PathConverter.class,
        description = "Read the journal directory PATH instead (e.g. a copy of DIR/journal).")
    Path journal;

    @Option(names = "--follow", description = "Keep printing new events until interrupted (Ctrl-C) or the daemon stops.")
    boolean follow;

    @Option(names = "--since", paramLabel = "TIME",
        description = "Only events at or after TIME: an ISO-8601 instant (2026-12-01T12:00:00Z) or a duration " +
            "back from now (30s, 10m, 2h, 1d).")
    String since;

    @Option(names = "--client", paramLabel = "ID", description = "Only events about client ID (as mrd dump shows it).")
    Integer client;

    @Option(names = "--json", description = "One JSON object per line (stable keys, as mrd dump --json).")
    boolean json;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    public Integer call() throws InterruptedException
    {
        if (previous && null != journal)
        {
            throw new CommandLine.ParameterException(spec.commandLine(),
                "--previous and --journal name two journals: give one of them");
        }
        if (null != client && client <= 0)
        {
            throw new CommandLine.ParameterException(spec.commandLine(), "--client " + client +
                " is not a client id: give a positive id, as mrd dump shows it");
        }
        final long sinceNs = null == since ? Long.MIN_VALUE : parseSince(since);
        final Path dir = null != journal ? journal : runDirectory()
            .resolve(previous ? JournalFileDescriptor.PREVIOUS_DIRECTORY : JournalFileDescriptor.DIRECTORY);
        final PrintWriter out = spec.commandLine().getOut();
        final AtomicBoolean stopped = new AtomicBoolean();
        final Consumer<JournalEvent> print = event ->
        {
            if (event.type() == JournalEventType.DAEMON_STOPPED)
            {
                stopped.set(true);
            }
            if (event.timeNs() >= sinceNs && (null == client || event.client() == client))
            {
                out.println(json ? EventFormat.json(event) : EventFormat.text(event));
            }
        };
        // Ctrl-C is taken before the first line is printed, so that one that comes while the journal is being
        // read ends the follow as cleanly as a later one. It only sets the flag: an interrupt could close the
        // reader's file channels under it, and the follow loop sees the flag within one poll period.
        final AtomicBoolean interrupted = new AtomicBoolean();
        if (follow)
        {
            sun.misc.Signal.handle(new sun.misc.Signal("INT"), ignored -> interrupted.set(true));
        }
        try (JournalReader reader = JournalReader.open(dir))
        {
            reader.poll(print);
            out.flush();
            if (follow)
            {
                follow(reader, print, stopped, interrupted);
            }
        }
        return 0;
    }

    /**
     * Polls the mapped files until SIGINT or the daemon's DAEMON_STOPPED; either ends the loop, so that the last
     * events are flushed and the command exits 0.
     */
    private void follow(final JournalReader reader, final Consumer<JournalEvent> print, final AtomicBoolean stopped,
        final AtomicBoolean interrupted) throws InterruptedException
    {
        final PrintWriter out = spec.commandLine().getOut();
        while (!interrupted.get() && !stopped.get())
        {
            if (reader.poll(print) > 0)
            {
                out.flush();
            }
            TimeUnit.MILLISECONDS.sleep(FOLLOW_POLL_MS);
        }
        reader.poll(print);
        out.flush();
    }

    /**
     * @return the run directory of {@code --dir}, checked: the journal reader alone would call a file or a
     * missing directory "no journal".
     */
    private Path runDirectory()
    {
        final Path runDir = dirOption.resolve();
        try
        {
            if (!Files.readAttributes(runDir, BasicFileAttributes.class).isDirectory())
            {
                throw FileFailure.of(ErrorCode.ENOTDIR, "cannot use run directory", runDir, GIVE_A_RUN_DIRECTORY);
            }
        }
        catch (final NoSuchFileException ex)
        {
            // stat says ENOENT, not ENOTDIR, when a part of the path is a file.
            for (Path part = runDir.toAbsolutePath().getParent(); null != part; part = part.getParent())
            {
                if (Files.exists(part))
                {
                    if (!Files.isDirectory(part))
                    {
                        throw FileFailure.of(ErrorCode.ENOTDIR, "cannot use run directory", runDir,
                            GIVE_A_RUN_DIRECTORY);
                    }
                    break;
                }
            }
            throw new MrdException(ErrorCode.ENOENT, "no run directory " + runDir + ": " + GIVE_A_RUN_DIRECTORY);
        }
        catch (final IOException ex)
        {
            throw FileFailure.of(ex, "cannot use run directory", runDir, GIVE_A_RUN_DIRECTORY);
        }
        return runDir;
    }

    private long parseSince(final String text)
    {
        final String value = text.trim().toLowerCase(Locale.ROOT);
        try
        {
            if (value.matches("\\d+[smhd]"))
            {
                final long amount = Long.parseLong(value.substring(0, value.length() - 1));
                final Duration back = switch (value.charAt(value.length() - 1))
                {
                    case 's' -> Duration.ofSeconds(amount);
                    case 'm' -> Duration.ofMinutes(amount);
                    case 'h' -> Duration.ofHours(amount);
                    default -> Duration.ofDays(amount);
                };
                return epochNanos(Instant.now().minus(back));
            }
            return epochNanos(Instant.parse(text.trim()));
        }
        catch (final DateTimeException | ArithmeticException | NumberFormatException ex)
        {
            throw Mrd.usage(spec, new MrdException(ErrorCode.EINVAL, "--since '" + text + "' is not a time: give " +
                "an ISO-8601 instant such as 2026-12-01T12:00:00Z or a duration back from now such as 10m"));
        }
    }

    /**
     * @return {@code instant} in epoch nanoseconds, the journal's clock; before 1677 every event is after it, after
     * 2262 none is.
     */
    private static long epochNanos(final Instant instant)
    {
        try
        {
            return Math.addExact(Math.multiplyExact(instant.getEpochSecond(), 1_000_000_000L), instant.getNano());
        }
        catch (final ArithmeticException ex)
        {
            return instant.getEpochSecond() < 0 ? Long.MIN_VALUE : Long.MAX_VALUE;
        }
    }
}
