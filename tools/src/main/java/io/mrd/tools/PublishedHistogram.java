package io.mrd.tools;

import io.mrd.layout.ControlFile;
import io.mrd.layout.HistogramsSection;
import io.mrd.layout.MrdHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * One histogram as the daemon last published it in the control file, decoded: what {@code mrd stat} and the
 * metrics read.
 *
 * @param kind      which histogram.
 * @param label     the request type ({@code create_mr}) of a {@link MrdHistogram#REQUEST_DURATION}, else null.
 * @param histogram its counts, in nanoseconds or bytes ({@link MrdHistogram#unit()}).
 * @param sum       the exact sum of the values, in the same unit.
 */
public record PublishedHistogram(MrdHistogram kind, String label, Histogram histogram, long sum)
{
    /**
     * @return every histogram the daemon published, in its order; an empty list before its first heartbeat;
     * null when no consistent copy could be read (the daemon died while writing).
     */
    public static List<PublishedHistogram> read(final ControlFile ctl)
    {
        final HistogramsSection.Copy copy = ctl.histograms().read();
        if (null == copy)
        {
            return null;
        }
        final List<PublishedHistogram> histograms = new ArrayList<>(copy.entries().size());
        for (final HistogramsSection.Entry entry : copy.entries())
        {
            final MrdHistogram kind = MrdHistogram.ofId(entry.id());
            if (null == kind || (kind.byRequestType() && null == kind.labelValue(entry.label())))
            {
                continue;
            }
            histograms.add(new PublishedHistogram(kind, kind.labelValue(entry.label()),
                decode(entry.encoded()), entry.sum()));
        }
        return histograms;
    }

    private static Histogram decode(final byte[] encoded)
    {
        try
        {
            return Histogram.decodeFromByteBuffer(ByteBuffer.wrap(encoded), 0);
        }
        catch (final RuntimeException ex)
        {
            throw new IllegalStateException("a histogram in the control file does not decode (" + encoded.length +
                " bytes): " + ex, ex);
        }
    }

    /**
     * Counts per Prometheus bucket. A value counts under the first bound at or above the lowest value HdrHistogram
     * keeps equal to it, so a value exactly on a bound counts under it and one within HdrHistogram's resolution
     * above it (1%: the daemon records with two significant digits) may too.
     *
     * @param bounds upper bounds in the histogram's unit, ascending.
     * @return {@code bounds.length + 1} counts, not cumulative: the last one is what lies above every bound.
     */
    public long[] bucketCounts(final long[] bounds)
    {
        final long[] counts = new long[bounds.length + 1];
        for (final HistogramIterationValue value : histogram.recordedValues())
        {
            final long lowest = histogram.lowestEquivalentValue(value.getValueIteratedTo());
            int bucket = 0;
            while (bucket < bounds.length && lowest > bounds[bucket])
            {
                bucket++;
            }
            counts[bucket] += value.getCountAtValueIteratedTo();
        }
        return counts;
    }
}
