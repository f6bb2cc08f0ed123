package io.mrd.cli;

import io.mrd.testing.ChildJvm;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Runs the {@code mrd} command as a real process (through {@link ChildJvm}), the way a user runs it.
 */
final class MrdProcess
{
    static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(90);

    private MrdProcess()
    {
    }

    /**
     * The result of one command.
     */
    record Result(int exitCode, String output)
    {
    }

    static Result run(final String... args)
    {
        return run(Map.of(), args);
    }

    static Result run(final Map<String, String> env, final String... args)
    {
        try (ChildJvm child = ChildJvm.start("mrd-" + args[0], Mrd.class.getName(), List.of(args), env, List.of()))
        {
            final int exit = child.awaitExit(COMMAND_TIMEOUT);
            return new Result(exit, child.output());
        }
    }

    /**
     * Starts a daemon in the foreground as a child process (for tests that kill it).
     */
    static ChildJvm startForeground(final Path dir, final String... extraArgs)
    {
        final List<String> args = new ArrayList<>(List.of("start", "--foreground", "--dir", dir.toString()));
        args.addAll(List.of(extraArgs));
        final ChildJvm child = ChildJvm.start("mrd-daemon", Mrd.class.getName(), args, Map.of(), List.of());
        child.awaitLine(line -> line.startsWith("mrd started:"), COMMAND_TIMEOUT);
        return child;
    }
}
