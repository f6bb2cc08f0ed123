package io.mrd.cli;

import io.mrd.cli.fixture.MrdRunner.Result;
import io.mrd.layout.ControlFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.Consumer;

import static io.mrd.cli.fixture.MrdRunner.mrd;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@code mrd check --file} on a copy of a daemon's control file with one fault planted in it: how the command
 * tests show that each invariant is checked. The copy goes into the daemon's run directory, removed with it.
 */
final class CorruptedCopies
{
    private CorruptedCopies()
    {
    }

    /**
     * Copies {@code dir}'s control file, lets {@code corrupt} change the copy, and checks the copy.
     */
    static Result checkCopy(final Path dir, final String name, final Consumer<FileChannel> corrupt) throws IOException
    {
        final Path copy = dir.resolve("copy-" + name + ".ctl");
        Files.copy(dir.resolve(ControlFile.FILE_NAME), copy);
        try (FileChannel file = FileChannel.open(copy, StandardOpenOption.READ, StandardOpenOption.WRITE))
        {
            corrupt.accept(file);
        }
        return mrd("check", "--file", copy.toString());
    }

    /**
     * Asserts that {@code mrd check} failed with a violation line starting with {@code violation}.
     */
    static void assertViolation(final Result run, final String violation)
    {
        assertEquals(1, run.exit(), run.both());
        assertTrue(run.out().startsWith("inconsistent: "), run.out());
        assertTrue(run.out().lines().anyMatch(line -> line.startsWith("  " + violation)),
            "expected a line starting with '" + violation + "' in:\n" + run.out());
    }

    static byte[] read(final FileChannel file, final long at, final int length)
    {
        try
        {
            final ByteBuffer buffer = ByteBuffer.allocate(length);
            file.read(buffer, at);
            return buffer.array();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    static void write(final FileChannel file, final long at, final byte[] bytes)
    {
        try
        {
            file.write(ByteBuffer.wrap(bytes), at);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    static int getInt(final FileChannel file, final long at)
    {
        return ByteBuffer.wrap(read(file, at, 4)).order(ByteOrder.nativeOrder()).getInt();
    }

    static void putInt(final FileChannel file, final long at, final int value)
    {
        write(file, at, ByteBuffer.allocate(4).order(ByteOrder.nativeOrder()).putInt(value).array());
    }
}
