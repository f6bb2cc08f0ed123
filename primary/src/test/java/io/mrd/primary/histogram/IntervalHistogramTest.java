package io.mrd.primary.histogram;

import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The lock-free series: what several threads record while a reader drains is counted exactly once.
 */
final class IntervalHistogramTest
{
    private static final int WRITERS = 4;
    private static final int RECORDS_PER_WRITER = 1_000_000;

    @Test
    void writersAndADrainingReaderLoseNothing() throws Exception
    {
        final IntervalHistogram series = new IntervalHistogram(DaemonHistograms.HIGHEST_DURATION_NS);
        final CountDownLatch start = new CountDownLatch(1);
        final AtomicBoolean writing = new AtomicBoolean(true);
        final List<Thread> writers = new ArrayList<>();
        for (int w = 0; w < WRITERS; w++)
        {
            final long value = 1_000L * (w + 1);
            writers.add(Thread.ofPlatform().name("writer-" + w).start(() ->
            {
                awaitQuietly(start);
                for (int i = 0; i < RECORDS_PER_WRITER; i++)
                {
                    series.record(value);
                }
            }));
        }
        int drains = 0;
        start.countDown();
        final Thread watcher = Thread.ofPlatform().start(() ->
        {
            writers.forEach(IntervalHistogramTest::joinQuietly);
            writing.set(false);
        });
        while (writing.get())
        {
            series.drain();
            drains++;
        }
        watcher.join();
        series.drain();

        final Histogram total = series.total();
        assertEquals((long)WRITERS * RECORDS_PER_WRITER, total.getTotalCount(), "after " + drains + " drains");
        long sum = 0;
        for (int w = 0; w < WRITERS; w++)
        {
            final long value = 1_000L * (w + 1);
            assertEquals(RECORDS_PER_WRITER, total.getCountAtValue(value), "count of " + value);
            sum += value * RECORDS_PER_WRITER;
        }
        assertEquals(sum, series.totalSum(), "the sum is exact");
    }

    @Test
    void valuesOutOfRangeAreClampedButSummedExactly()
    {
        final IntervalHistogram series = new IntervalHistogram(1_000_000);
        series.record(-5);
        series.record(5_000_000);
        series.drain();
        assertEquals(2, series.total().getTotalCount());
        assertEquals(1, series.total().getCountAtValue(0));
        assertEquals(series.total().highestEquivalentValue(1_000_000), series.total().getMaxValue());
        assertEquals(5_000_000, series.totalSum(), "a negative value counts as 0, a large one in full");
    }

    private static void awaitQuietly(final CountDownLatch latch)
    {
        try
        {
            latch.await();
        }
        catch (final InterruptedException ex)
        {
            throw new IllegalStateException(ex);
        }
    }

    private static void joinQuietly(final Thread thread)
    {
        try
        {
            thread.join();
        }
        catch (final InterruptedException ex)
        {
            throw new IllegalStateException(ex);
        }
    }
}
