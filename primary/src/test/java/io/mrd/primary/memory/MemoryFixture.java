package io.mrd.primary.memory;

import io.mrd.testing.TestDirs;
import io.mrd.layout.ControlFileLayout;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

import static io.mrd.layout.sys.Sizes.MIB;

/**
 * A memory manager over a heap control buffer and a fresh directory on tmpfs (where the daemon's backing
 * files live), removed again on close whatever the test did.
 */
final class MemoryFixture implements AutoCloseable
{
    static final long SEGMENT = 2 * MIB;

    final Path dir;
    final ControlFileLayout layout;
    final UnsafeBuffer control;
    final MemoryManager manager;

    MemoryFixture(final long base, final int lists, final int segmentsPerList)
    {
        this(base, lists, segmentsPerList, Optional.empty());
    }

    MemoryFixture(final long base, final int lists, final int segmentsPerList, final Optional<Path> hugeDir)
    {
        dir = TestDirs.create("mem");
        layout = ControlFileLayout.compute(lists, segmentsPerList, 16, 16, 4);
        control = new UnsafeBuffer(new byte[(int)layout.fileLength()]);
        try
        {
            manager = new MemoryManager(new MemoryConfig(
                base, SEGMENT, lists, segmentsPerList, dir.resolve("mem"), hugeDir, control, layout));
        }
        catch (final RuntimeException ex)
        {
            TestDirs.deleteTree(dir);
            throw ex;
        }
    }

    public void close()
    {
        try
        {
            manager.close();
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    /**
     * Frees and releases at once, as the daemon does when no MR covers the range.
     */
    FreedRange freeAndRelease(final long address, final long length, final int owner)
    {
        final FreedRange range = manager.free(address, length, owner);
        manager.release(range);
        return range;
    }

    /**
     * @return the resident kibibytes ({@code Rss}) of the mapping of /proc/self/smaps whose range holds
     *         {@code address}.
     */
    static long residentKib(final long address)
    {
        final String header = mapsLine(address);
        try
        {
            final List<String> lines = Files.readAllLines(Path.of("/proc/self/smaps"));
            final int at = lines.indexOf(header);
            for (int i = at + 1; at >= 0 && i < lines.size(); i++)
            {
                if (lines.get(i).startsWith("Rss:"))
                {
                    return Long.parseLong(lines.get(i).replaceAll("[^0-9]", ""));
                }
            }
            throw new AssertionError("no Rss line for the mapping '" + header + "' in /proc/self/smaps");
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * @return the line of /proc/self/maps whose range holds {@code address}, or null.
     */
    static String mapsLine(final long address)
    {
        try
        {
            final List<String> lines = Files.readAllLines(Path.of("/proc/self/maps"));
            for (final String line : lines)
            {
                final String range = line.substring(0, line.indexOf(' '));
                final int dash = range.indexOf('-');
                final long start = Long.parseUnsignedLong(range.substring(0, dash), 16);
                final long end = Long.parseUnsignedLong(range.substring(dash + 1), 16);
                if (Long.compareUnsigned(address, start) >= 0 && Long.compareUnsigned(address, end) < 0)
                {
                    return line;
                }
            }
            return null;
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }
}
