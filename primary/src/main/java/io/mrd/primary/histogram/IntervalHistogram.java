package io.mrd.primary.histogram;

import org.HdrHistogram.AtomicHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.WriterReaderPhaser;

import java.util.concurrent.atomic.AtomicLong;

/**
 * One series of values: recorded by any number of threads at once without a lock and without allocating,
 * drained now and then by one reader into a running total that it encodes.
 * <p>
 * Why this and not HdrHistogram's {@code Recorder}: Prometheus wants the exact sum of the values beside the
 * counts, and a sum kept beside a {@code Recorder} would fall into another interval than the count of the same
 * value whenever the reader swaps in between. Here the sum and the counts of an interval sit behind the same
 * {@link WriterReaderPhaser}, as in {@code Recorder}: a writer's critical section is two atomic increments of the
 * phaser around the record, and the reader swaps the active interval and waits for the writers still in the old
 * one ({@link WriterReaderPhaser#flipPhase()}) before reading it. Why {@link AtomicHistogram} and not
 * {@code SingleWriterRecorder}'s plain histogram: the event loop and every worker record into the same series;
 * why not {@code ConcurrentHistogram}: it resizes (allocates) on a value out of range, where a fixed range
 * clamps it ({@link #record}).
 */
public final class IntervalHistogram
{
    /** HdrHistogram's precision: values are told apart to 1% (two significant digits). */
    public static final int SIGNIFICANT_DIGITS = 2;

    private final long highestTrackableValue;
    private final WriterReaderPhaser phaser = new WriterReaderPhaser();
    private volatile Interval active;
    private Interval inactive;
    private final Histogram total;
    private long totalSum;

    /**
     * @param highestTrackableValue larger values are counted as this one (their sum stays exact).
     */
    public IntervalHistogram(final long highestTrackableValue)
    {
        this.highestTrackableValue = highestTrackableValue;
        this.active = new Interval(highestTrackableValue);
        this.inactive = new Interval(highestTrackableValue);
        this.total = new Histogram(1, highestTrackableValue, SIGNIFICANT_DIGITS);
    }

    /**
     * Any thread: counts one value; a negative one as 0.
     */
    public void record(final long value)
    {
        final long positive = Math.max(0, value);
        final long phase = phaser.writerCriticalSectionEnter();
        try
        {
            final Interval interval = active;
            interval.counts.recordValue(Math.min(positive, highestTrackableValue));
            interval.sum.getAndAdd(positive);
        }
        finally
        {
            phaser.writerCriticalSectionExit(phase);
        }
    }

    /**
     * The reader only: moves what was recorded since the last drain into the total.
     */
    public void drain()
    {
        final Interval drained = active;
        phaser.readerLock();
        try
        {
            active = inactive;
            phaser.flipPhase();
        }
        finally
        {
            phaser.readerUnlock();
        }
        // No writer is in drained any more: the flip waited for those that entered before the swap. An idle
        // series costs no scan of its counts.
        if (drained.counts.getTotalCount() != 0)
        {
            total.add(drained.counts);
            totalSum += drained.sum.get();
            drained.counts.reset();
            drained.sum.set(0);
        }
        inactive = drained;
    }

    /**
     * The reader only: everything drained so far.
     */
    public Histogram total()
    {
        return total;
    }

    /**
     * The reader only: the exact sum of the values drained so far.
     */
    public long totalSum()
    {
        return totalSum;
    }

    private static final class Interval
    {
        private final AtomicHistogram counts;
        private final AtomicLong sum = new AtomicLong();

        private Interval(final long highestTrackableValue)
        {
            counts = new AtomicHistogram(1, highestTrackableValue, SIGNIFICANT_DIGITS);
        }
    }
}
