package io.mrd.cli.reliability;

import io.mrd.layout.sys.ProcMaps;
import io.mrd.layout.sys.ProcMaps.Mapping;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * What the kernel says about another process, from {@code /proc/<pid>}: its open descriptors, its memory
 * ({@code VmRSS}, {@code VmLck}: pages pinned by mlock) and its mappings. The daemon's own counters are what it
 * claims; these are what it holds.
 */
final class Proc
{
    private Proc()
    {
    }

    /**
     * @return the number of open file descriptors of {@code pid}.
     */
    static long fdCount(final long pid)
    {
        try (Stream<Path> fds = Files.list(Path.of("/proc", Long.toString(pid), "fd")))
        {
            return fds.count();
        }
        catch (final IOException ex)
        {
            throw new AssertionError("cannot list the fds of pid " + pid + ": " + ex, ex);
        }
    }

    /**
     * @return where each open descriptor of {@code pid} points ({@code readlink /proc/<pid>/fd/N}).
     */
    static List<String> fdTargets(final long pid)
    {
        final List<String> targets = new ArrayList<>();
        try (Stream<Path> fds = Files.list(Path.of("/proc", Long.toString(pid), "fd")))
        {
            for (final Path fd : fds.toList())
            {
                try
                {
                    targets.add(Files.readSymbolicLink(fd).toString());
                }
                catch (final NoSuchFileException ex)
                {
                    // closed while we listed
                }
            }
            return targets;
        }
        catch (final IOException ex)
        {
            throw new AssertionError("cannot list the fds of pid " + pid + ": " + ex, ex);
        }
    }

    /**
     * @param field e.g. {@code VmRSS}, {@code VmLck}, {@code VmHWM}.
     * @return its value in KiB from {@code /proc/<pid>/status}.
     */
    static long statusKib(final long pid, final String field)
    {
        try
        {
            for (final String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status")))
            {
                if (line.startsWith(field + ":"))
                {
                    final String[] parts = line.substring(field.length() + 1).trim().split("\\s+");
                    return Long.parseLong(parts[0]);
                }
            }
            throw new AssertionError("no " + field + " in /proc/" + pid + "/status");
        }
        catch (final IOException ex)
        {
            throw new AssertionError("cannot read /proc/" + pid + "/status: " + ex, ex);
        }
    }

    /**
     * @return the mappings of {@code pid}.
     */
    static List<Mapping> maps(final long pid)
    {
        return ProcMaps.read(pid);
    }

    /**
     * @return the mappings of {@code pid} whose path contains {@code text}.
     */
    static List<Mapping> mapsContaining(final long pid, final String text)
    {
        return maps(pid).stream().filter(m -> m.path().contains(text)).toList();
    }
}
