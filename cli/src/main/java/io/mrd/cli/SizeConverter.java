package io.mrd.cli;

import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import picocli.CommandLine;

/**
 * Sizes on the command line: {@code 64MiB}, {@code 2GiB}, {@code 4096}.
 */
public final class SizeConverter implements CommandLine.ITypeConverter<Long>
{
    public Long convert(final String value)
    {
        try
        {
            return Sizes.parse(value);
        }
        catch (final MrdException ex)
        {
            throw new CommandLine.TypeConversionException(ex.getMessage());
        }
    }

    /**
     * Addresses on the command line: {@code 0x100000000000} or decimal, never negative.
     */
    public static final class Address implements CommandLine.ITypeConverter<Long>
    {
        public Long convert(final String value)
        {
            try
            {
                return Sizes.parseAddress(value);
            }
            catch (final MrdException ex)
            {
                throw new CommandLine.TypeConversionException(ex.getMessage());
            }
        }
    }
}
