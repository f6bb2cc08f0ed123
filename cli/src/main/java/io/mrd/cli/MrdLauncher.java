package io.mrd.cli;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Builds the command line of another {@code mrd} process: this JVM's binary, its JVM flags (the ones
 * scripts/jvm-flags and scripts/daemon-jvm-flags gave it) and class path, and {@link Mrd} as the main class. Used by {@code mrd start} for
 * the background daemon and by {@code mrd demo} for its workers.
 */
final class MrdLauncher
{
    private MrdLauncher()
    {
    }

    /**
     * @param detach run the process in a session of its own (setsid), so it outlives a closed terminal.
     * @param args   the {@code mrd} arguments.
     */
    static List<String> command(final boolean detach, final List<String> args)
    {
        final List<String> command = new ArrayList<>();
        if (detach && Files.isExecutable(Path.of("/usr/bin/setsid")))
        {
            command.add("/usr/bin/setsid");
        }
        command.add(ProcessHandle.current().info().command()
            .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(Mrd.class.getName());
        command.addAll(args);
        return command;
    }
}
