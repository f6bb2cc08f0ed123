package io.mrd.bench;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The JVM flags every mrd JVM needs, for the JVMs the benchmark starts (JMH forks, daemon, secondaries):
 * {@code -Dmrd.jvm.flags} as scripts/bench passes it (scripts/jvm-flags and scripts/daemon-jvm-flags joined by
 * spaces), else those two files under {@code -Dmrd.root}: the benchmark starts daemons too.
 */
public final class JvmFlags
{
    private JvmFlags()
    {
    }

    public static List<String> flags()
    {
        final String property = System.getProperty("mrd.jvm.flags");
        if (null != property && !property.isBlank())
        {
            return Arrays.stream(property.trim().split("\\s+")).toList();
        }
        final String root = System.getProperty("mrd.root");
        if (null == root)
        {
            throw new IllegalStateException("set -Dmrd.jvm.flags (scripts/jvm-flags and scripts/daemon-jvm-flags " +
                "joined by spaces) or " +
                "-Dmrd.root (the repository root); scripts/bench sets both");
        }
        final List<String> flags = new ArrayList<>();
        for (final String name : List.of("jvm-flags", "daemon-jvm-flags"))
        {
            final Path file = Path.of(root, "scripts", name);
            try
            {
                for (final String line : Files.readAllLines(file))
                {
                    final String flag = line.replaceFirst("#.*", "").strip();
                    if (!flag.isEmpty())
                    {
                        flags.add(flag);
                    }
                }
            }
            catch (final IOException ex)
            {
                throw new UncheckedIOException("cannot read " + file, ex);
            }
        }
        return flags;
    }

    /**
     * @return the command line that starts {@code mainClass} in a new JVM like this one (same java, same class
     * path), with the mrd flags and {@code extraFlags}.
     */
    public static List<String> javaCommand(final List<String> extraFlags, final String mainClass)
    {
        final List<String> command = new ArrayList<>();
        command.add(ProcessHandle.current().info().command().orElse(
            Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(flags());
        command.addAll(extraFlags);
        command.add("-cp");
        command.add(System.getProperty("java.class.path"));
        command.add(mainClass);
        return command;
    }
}
