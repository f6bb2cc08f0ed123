package io.mrd.cli.reliability;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

/**
 * Commands from a test to a secondary process it started: one file per secondary, {@code <dir>/<name>.cmd},
 * holding the latest command ("quiesce 3", "resume 3", "exit"). The test replaces the file atomically; the
 * secondary polls it and acknowledges each new command on its output. A file because the children's stdin is
 * /dev/null (ChildJvm).
 */
final class Signals
{
    private final Path file;
    private String last = "";

    Signals(final Path dir, final String name)
    {
        this.file = dir.resolve(name + ".cmd");
    }

    /**
     * Test side: replaces the command.
     */
    static void send(final Path dir, final String name, final String command)
    {
        try
        {
            final Path tmp = dir.resolve(name + ".cmd.tmp");
            Files.writeString(tmp, command);
            Files.move(tmp, dir.resolve(name + ".cmd"), StandardCopyOption.ATOMIC_MOVE,
                StandardCopyOption.REPLACE_EXISTING);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * Secondary side.
     *
     * @return the command if it changed since the last call, else null.
     */
    String poll()
    {
        final String now;
        try
        {
            now = Files.readString(file).trim();
        }
        catch (final NoSuchFileException ex)
        {
            return null;
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        if (now.equals(last))
        {
            return null;
        }
        last = now;
        return now;
    }
}
