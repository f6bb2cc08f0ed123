package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.util.Locale;

/**
 * Parses and prints byte sizes the way operators type them: {@code 64MiB},
 * {@code 2GiB}, {@code 4096}, {@code 512k}. Binary units only, since every size
 * mrd takes is a memory size.
 */
public final class Sizes
{
    public static final long KIB = 1024L;
    public static final long MIB = 1024L * KIB;
    public static final long GIB = 1024L * MIB;
    public static final long TIB = 1024L * GIB;

    private Sizes()
    {
    }

    /**
     * @param text a size such as {@code 64MiB}, {@code 2GiB}, {@code 2g}, {@code 4096}.
     * @return the size in bytes.
     * @throws MrdException EINVAL naming the text and the accepted forms.
     */
    public static long parse(final String text)
    {
        if (null == text || text.isBlank())
        {
            throw invalid(text);
        }
        final String s = text.trim().toLowerCase(Locale.ROOT);
        int i = 0;
        while (i < s.length() && Character.isDigit(s.charAt(i)))
        {
            i++;
        }
        if (0 == i)
        {
            throw invalid(text);
        }
        final long number;
        try
        {
            number = Long.parseLong(s.substring(0, i));
        }
        catch (final NumberFormatException ex)
        {
            throw invalid(text);
        }
        final long unit = switch (s.substring(i).trim())
        {
            case "", "b" -> 1L;
            case "k", "kb", "kib" -> KIB;
            case "m", "mb", "mib" -> MIB;
            case "g", "gb", "gib" -> GIB;
            case "t", "tb", "tib" -> TIB;
            default -> throw invalid(text);
        };
        if (number > Long.MAX_VALUE / unit)
        {
            throw new MrdException(ErrorCode.ERANGE, "size '" + text + "' does not fit in 64 bits");
        }
        return number * unit;
    }

    /**
     * @param bytes a size in bytes.
     * @return the size in the largest binary unit that divides it, e.g. {@code 64MiB}; else in bytes.
     */
    public static String format(final long bytes)
    {
        if (bytes != 0)
        {
            if (bytes % TIB == 0)
            {
                return (bytes / TIB) + "TiB";
            }
            if (bytes % GIB == 0)
            {
                return (bytes / GIB) + "GiB";
            }
            if (bytes % MIB == 0)
            {
                return (bytes / MIB) + "MiB";
            }
            if (bytes % KIB == 0)
            {
                return (bytes / KIB) + "KiB";
            }
        }
        return bytes + "B";
    }

    /**
     * @param bytes a size in bytes.
     * @return the size as people read it, with one decimal where needed: {@code 24.6MiB}, {@code 512KiB}.
     */
    public static String describe(final long bytes)
    {
        final String[] units = {"B", "KiB", "MiB", "GiB", "TiB"};
        double value = bytes;
        int unit = 0;
        while (Math.abs(value) >= 1024 && unit < units.length - 1)
        {
            value /= 1024;
            unit++;
        }
        return value == Math.rint(value) ? (long)value + units[unit] :
            String.format(java.util.Locale.ROOT, "%.1f%s", value, units[unit]);
    }

    /**
     * @param value an address or length.
     * @return it as {@code 0x…} hex, the form every mrd tool prints addresses in.
     */
    public static String hex(final long value)
    {
        return "0x" + Long.toHexString(value);
    }

    /**
     * @param text {@code 0x…} hex or decimal, never negative.
     * @return the value.
     * @throws MrdException EINVAL naming the text.
     */
    public static long parseAddress(final String text)
    {
        if (null != text && text.strip().startsWith("-"))
        {
            throw new MrdException(ErrorCode.EINVAL, "address '" + text + "' is negative: write it as hex " +
                "(0x100000000000) or decimal");
        }
        try
        {
            final String s = text.trim().toLowerCase(Locale.ROOT);
            return s.startsWith("0x") ? Long.parseUnsignedLong(s.substring(2), 16) : Long.parseLong(s);
        }
        catch (final RuntimeException ex)
        {
            throw new MrdException(ErrorCode.EINVAL,
                "address '" + text + "' is not a number: write it as hex (0x100000000000) or decimal");
        }
    }

    public static long alignUp(final long value, final long alignment)
    {
        return (value + alignment - 1) & -alignment;
    }

    public static long alignDown(final long value, final long alignment)
    {
        return value & -alignment;
    }

    private static MrdException invalid(final String text)
    {
        return new MrdException(ErrorCode.EINVAL,
            "size '" + text + "' is not a size: write a number with an optional binary unit, e.g. 64MiB, 2GiB, 4096");
    }
}
