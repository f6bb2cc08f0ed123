package io.mrd.layout.sys;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * Test helper: a process's mappings as {@code /proc/<pid>/maps} lists them, to check what the kernel
 * really mapped (address, permissions, file) without touching the memory.
 */
public final class ProcMaps
{
    /**
     * One line of {@code /proc/self/maps}.
     *
     * @param start first address.
     * @param end   end address, exclusive.
     * @param perms e.g. {@code r--s}.
     * @param path  the file, or "" for anonymous memory.
     */
    public record Mapping(long start, long end, String perms, String path)
    {
        public boolean contains(final long address)
        {
            return start <= address && address < end;
        }

        public boolean overlaps(final long from, final long to)
        {
            return start < to && from < end;
        }

        public String toString()
        {
            return Long.toHexString(start) + "-" + Long.toHexString(end) + " " + perms + " " + path;
        }
    }

    private ProcMaps()
    {
    }

    public static List<Mapping> read()
    {
        return read(Path.of("/proc/self/maps"));
    }

    /**
     * @return the mappings of another process, from {@code /proc/<pid>/maps}.
     */
    public static List<Mapping> read(final long pid)
    {
        return read(Path.of("/proc", Long.toString(pid), "maps"));
    }

    private static List<Mapping> read(final Path maps)
    {
        try
        {
            final List<Mapping> mappings = new ArrayList<>();
            for (final String line : Files.readAllLines(maps))
            {
                final String[] f = line.trim().split("\\s+", 6);
                final int dash = f[0].indexOf('-');
                mappings.add(new Mapping(
                    Long.parseUnsignedLong(f[0].substring(0, dash), 16),
                    Long.parseUnsignedLong(f[0].substring(dash + 1), 16),
                    f[1],
                    f.length > 5 ? f[5] : ""));
            }
            return mappings;
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot read " + maps + ": " + ex.getMessage(), ex);
        }
    }

    /**
     * @return the mapping that holds {@code address}, or null.
     */
    public static Mapping covering(final long address)
    {
        for (final Mapping m : read())
        {
            if (m.contains(address))
            {
                return m;
            }
        }
        return null;
    }

    /**
     * @return true when no mapping overlaps {@code [start, end)}.
     */
    public static boolean isFree(final long start, final long end)
    {
        for (final Mapping m : read())
        {
            if (m.start() < end && start < m.end())
            {
                return false;
            }
        }
        return true;
    }

    /**
     * @return every mapping of a file whose path ends with {@code suffix}.
     */
    public static List<Mapping> ofFile(final String suffix)
    {
        final List<Mapping> found = new ArrayList<>();
        for (final Mapping m : read())
        {
            if (m.path().endsWith(suffix))
            {
                found.add(m);
            }
        }
        return found;
    }
}
