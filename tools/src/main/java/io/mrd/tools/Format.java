package io.mrd.tools;

import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.sys.Sizes;

import java.time.Duration;
import java.util.Locale;

/**
 * How the tools write what they read: address ranges, keys, sizes, counts, durations and owners. Every
 * {@code mrd} command and every {@link Invariants} line goes through it, so that a range printed by
 * {@code mrd dump} reads exactly as the same range in an {@code mrd check} violation, and a test can build the
 * text it expects with the same call.
 */
public final class Format
{
    private static final String[] UNITS = {"KiB", "MiB", "GiB", "TiB"};

    private Format()
    {
    }

    /**
     * @return the half-open range {@code [0x…, 0x…)}.
     */
    public static String range(final long start, final long end)
    {
        return "[" + Sizes.hex(start) + ", " + Sizes.hex(end) + ")";
    }

    /**
     * @return an lkey or rkey as unsigned hex ({@code 0x80000001}, never negative).
     */
    public static String key(final int key)
    {
        return Sizes.hex(key & 0xFFFF_FFFFL);
    }

    /**
     * @return the size exactly when it is a whole number of a binary unit ({@link Sizes#format}), else to one
     * decimal ({@code 1.5MiB}).
     */
    public static String size(final long bytes)
    {
        final String exact = Sizes.format(bytes);
        if (exact.endsWith("iB") || Math.abs(bytes) < Sizes.KIB)
        {
            return exact;
        }
        double value = bytes;
        int unit = -1;
        while (unit + 1 < UNITS.length && Math.abs(value) >= 1024)
        {
            value /= 1024;
            unit++;
        }
        return String.format(Locale.ROOT, "%.1f%s", value, UNITS[unit]);
    }

    /**
     * @return {@code "1 list"}, {@code "2 lists"}.
     */
    public static String plural(final long count, final String noun)
    {
        return count + " " + noun + (count == 1 ? "" : "s");
    }

    /**
     * @return {@code 1h02m03s}, {@code 2m03s} or {@code 3.4s}; a negative duration (a clock stepped back) is 0.
     */
    public static String duration(final long ms)
    {
        final Duration d = Duration.ofMillis(Math.max(0, ms));
        if (d.toHours() > 0)
        {
            return String.format("%dh%02dm%02ds", d.toHours(), d.toMinutesPart(), d.toSecondsPart());
        }
        if (d.toMinutes() > 0)
        {
            return String.format("%dm%02ds", d.toMinutes(), d.toSecondsPart());
        }
        return String.format("%d.%01ds", d.toSeconds(), d.toMillisPart() / 100);
    }

    /**
     * @return segment indices: {@code 4} for one segment, {@code 4-7} for four.
     */
    public static String segments(final int first, final int count)
    {
        return count == 1 ? String.valueOf(first) : first + "-" + (first + count - 1);
    }

    /**
     * @return who an owner id is: the daemon, or a client with its name and pid when it is connected.
     */
    public static String owner(final ControlFileSnapshot s, final int owner)
    {
        if (owner == MemsegListDescriptor.OWNER_DAEMON)
        {
            return "daemon";
        }
        if (owner == 0)
        {
            return "daemon (0)";
        }
        final ControlFileSnapshot.Client client = s.client(owner);
        return null == client ? "client " + owner :
            "client " + owner + " (" + (client.name().isEmpty() ? "" : client.name() + ", ") + "pid " + client.pid() + ")";
    }
}
