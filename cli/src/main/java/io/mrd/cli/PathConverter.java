package io.mrd.cli;

import picocli.CommandLine;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;

/**
 * Paths on the command line. An empty one is refused: {@code Path.of("")} is the current directory, so
 * {@code --dir ''} (an unset shell variable) would quietly start a daemon, or look for one, wherever the
 * command happens to run.
 */
public final class PathConverter implements CommandLine.ITypeConverter<Path>
{
    public Path convert(final String value)
    {
        if (value.isBlank())
        {
            throw new CommandLine.TypeConversionException("path '" + value + "' is empty, which would be the " +
                "current directory: give a path (write . for the current directory)");
        }
        try
        {
            return Path.of(value);
        }
        catch (final InvalidPathException ex)
        {
            throw new CommandLine.TypeConversionException("path '" + value + "' is not a path: " + ex.getReason());
        }
    }
}
