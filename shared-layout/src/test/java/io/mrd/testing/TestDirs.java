package io.mrd.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * Directories that tests create and remove, even when they fail.
 */
public final class TestDirs
{
    private TestDirs()
    {
    }

    /**
     * @return a new directory on tmpfs when the machine has a writable /dev/shm (where the daemon's files
     * normally live), else in the temp directory.
     */
    public static Path create(final String name)
    {
        try
        {
            final Path shm = Path.of("/dev/shm");
            return Files.isDirectory(shm) && Files.isWritable(shm) ?
                Files.createTempDirectory(shm, "mrd-test-" + name + "-") :
                Files.createTempDirectory("mrd-test-" + name + "-");
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * Removes {@code root} and everything below it; nothing when it is null or gone.
     */
    public static void deleteTree(final Path root)
    {
        if (null == root || !Files.exists(root))
        {
            return;
        }
        try (Stream<Path> paths = Files.walk(root))
        {
            for (final Path path : paths.sorted(Comparator.reverseOrder()).toList())
            {
                Files.deleteIfExists(path);
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }
}
