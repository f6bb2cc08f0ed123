package io.mrd.bench.report;

import java.util.Locale;
import java.util.OptionalDouble;

/**
 * How the table writes its numbers: times in ns or µs to three significant figures or so, rates, ratios, and
 * the figures of a row against its reference ({@link Scale}) with their range over the rounds.
 */
final class Format
{
    static final String NONE = "—";
    static final String MISSING = "missing";

    private Format()
    {
    }

    /**
     * How a row's per-round figure against its reference reads, alone (the median) and as a range.
     */
    enum Scale
    {
        /** A ratio: {@code 1.05×}, range {@code 0.98–1.12×}. */
        TIMES
        {
            String value(final double v)
            {
                return ratio(v);
            }

            String range(final double min, final double max)
            {
                return String.format(Locale.ROOT, "%.2f–%.2f×", min, max);
            }
        },
        /** The row minus the reference, in µs: {@code C + 226 µs}, range {@code +180 to +300 µs}. */
        MARGIN_US
        {
            String value(final double v)
            {
                return String.format(Locale.ROOT, "C %s %s µs", v < 0 ? "−" : "+", micros(Math.abs(v)));
            }

            String range(final double min, final double max)
            {
                return signedMicros(min) + " to " + signedMicros(max) + " µs";
            }
        },
        /** A share in percent: {@code 0.080%}, range {@code 0.070–0.095%}. */
        PERCENT
        {
            String value(final double v)
            {
                return String.format(Locale.ROOT, "%.3f%%", v);
            }

            String range(final double min, final double max)
            {
                return String.format(Locale.ROOT, "%.3f–%.3f%%", min, max);
            }
        },

        /** Milliseconds, the row's own (its reference is shown beside it): {@code 412 ms}, {@code 380–455 ms}. */
        MS
        {
            String value(final double v)
            {
                return millis(v);
            }

            String range(final double min, final double max)
            {
                return String.format(Locale.ROOT, "%.0f–%.0f ms", min, max);
            }
        },
        /** Page faults per page, the row's own: {@code 1.004 per page}, {@code 1.002–1.010}. */
        PER_PAGE
        {
            String value(final double v)
            {
                return perPage(v);
            }

            String range(final double min, final double max)
            {
                return String.format(Locale.ROOT, "%.3f–%.3f", min, max);
            }
        },
        /** A count, the row's own: {@code 0}, {@code 0–2}. */
        COUNT
        {
            String value(final double v)
            {
                return String.format(Locale.ROOT, "%,.0f", v);
            }

            String range(final double min, final double max)
            {
                return String.format(Locale.ROOT, "%,.0f–%,.0f", min, max);
            }
        };

        abstract String value(double v);

        abstract String range(double min, double max);
    }

    static String count(final int n)
    {
        return String.format(Locale.ROOT, "%,d", n);
    }

    static String ratio(final double r)
    {
        return String.format(Locale.ROOT, "%.2f×", r);
    }

    static String ns(final double ns)
    {
        if (ns < 10)
        {
            return String.format(Locale.ROOT, "%.2f ns", ns);
        }
        return ns < 100 ? String.format(Locale.ROOT, "%.1f ns", ns) : String.format(Locale.ROOT, "%.0f ns", ns);
    }

    static String micros(final OptionalDouble us)
    {
        return us.isEmpty() ? "?" : micros(us.getAsDouble());
    }

    static String micros(final double us)
    {
        return us < 100 ? String.format(Locale.ROOT, "%.1f", us) : String.format(Locale.ROOT, "%.0f", us);
    }

    static String signedMicros(final double us)
    {
        return (us < 0 ? "−" : "+") + micros(Math.abs(us));
    }

    static String millis(final double ms)
    {
        return String.format(Locale.ROOT, "%,.0f ms", ms);
    }

    static String perPage(final double faults)
    {
        return String.format(Locale.ROOT, "%.3f per page", faults);
    }

    static String gbps(final double rate)
    {
        return String.format(Locale.ROOT, "%.2f GB/s", rate);
    }

    static String perSecond(final double rate)
    {
        return rate >= 1e6 ? String.format(Locale.ROOT, "%.1f M/s", rate / 1e6) :
            String.format(Locale.ROOT, "%.0f k/s", rate / 1e3);
    }
}
