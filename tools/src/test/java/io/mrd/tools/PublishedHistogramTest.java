package io.mrd.tools;

import io.mrd.layout.MrdHistogram;
import io.mrd.layout.protocol.MessageType;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

/**
 * Histogram entries as a daemon publishes them, decoded: in order, labelled by request type, unknown ones
 * skipped, nothing before the first heartbeat and nothing torn.
 */
final class PublishedHistogramTest
{
    @RegisterExtension
    final PublishedControlFile file = new PublishedControlFile();

    @Test
    void nothingIsPublishedBeforeTheFirstHeartbeat()
    {
        assertEquals(List.of(), PublishedHistogram.read(file.view()));
    }

    @Test
    void aSectionLeftMidWriteReadsAsNone()
    {
        file.publish(1_000, PublishedControlFile.Entry.of(MrdHistogram.REGISTRATION_SIZE, 0, 4096));
        file.tearHistograms();
        assertNull(PublishedHistogram.read(file.view()));
    }

    @Test
    void entriesDecodeInOrderWithTheirLabelAndSum()
    {
        final long[] createNs = {3_000, 3_000, 700_000, 2_000_000_000L};
        file.publish(1_000,
            PublishedControlFile.Entry.of(MrdHistogram.REQUEST_DURATION, MessageType.CREATE_MR.code(), createNs),
            PublishedControlFile.Entry.of(MrdHistogram.REGISTRATION_SIZE, 0, 1L << 21, 1L << 22));
        final List<PublishedHistogram> read = PublishedHistogram.read(file.view());

        assertEquals(2, read.size());
        final PublishedHistogram create = read.get(0);
        assertEquals(MrdHistogram.REQUEST_DURATION, create.kind());
        assertEquals("create_mr", create.label());
        assertEquals(2_000_706_000L, create.sum());
        final Histogram expected = PublishedControlFile.histogram(createNs);
        for (final double percentile : new double[]{50, 90, 99, 99.9, 100})
        {
            assertEquals(expected.getValueAtPercentile(percentile), create.histogram().getValueAtPercentile(percentile),
                "p" + percentile);
        }
        assertEquals(MrdHistogram.REGISTRATION_SIZE, read.get(1).kind());
        assertNull(read.get(1).label());
        assertEquals(3L << 21, read.get(1).sum());
    }

    @Test
    void entriesOfAnUnknownHistogramOrRequestTypeAreSkipped()
    {
        file.publish(1_000,
            new PublishedControlFile.Entry(MrdHistogram.REGISTRATION_SIZE, 0, 1, PublishedControlFile.histogram(1)),
            new PublishedControlFile.Entry(MrdHistogram.REQUEST_DURATION, 0x7FF0, 1,
                PublishedControlFile.histogram(1)));
        assertEquals(List.of(MrdHistogram.REGISTRATION_SIZE),
            PublishedHistogram.read(file.view()).stream().map(PublishedHistogram::kind).toList());
    }

    @Test
    void aValueOnABoundCountsUnderIt()
    {
        final PublishedHistogram published = new PublishedHistogram(MrdHistogram.REGISTRATION_SIZE, null,
            PublishedControlFile.histogram(4096, 4096, 8192, 1L << 30), 0);
        assertArrayEquals(new long[]{2, 1, 1}, published.bucketCounts(new long[]{4096, 8192}));
    }
}
