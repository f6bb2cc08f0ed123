package io.mrd.primary.server;

import java.util.function.Consumer;
import java.util.function.LongSupplier;

/**
 * Logs refused peers and requests, each once with its reason, but at most {@link #perSecond()} lines a second:
 * beyond that it counts, and the next line after the second is over says how many it left out. A peer that
 * connects in a loop cannot fill the disk through the log. Thread-safe.
 */
final class RefusalLog
{
    private final Consumer<String> sink;
    private final LongSupplier clockMs;
    private final int perSecond;
    private long windowStartMs;
    private int logged;
    private long suppressed;

    /**
     * @param sink      where lines go (the logger at WARN).
     * @param clockMs   milliseconds, monotonic.
     * @param perSecond lines logged per second before counting.
     */
    RefusalLog(final Consumer<String> sink, final LongSupplier clockMs, final int perSecond)
    {
        this.sink = sink;
        this.clockMs = clockMs;
        this.perSecond = perSecond;
        this.windowStartMs = clockMs.getAsLong();
    }

    int perSecond()
    {
        return perSecond;
    }

    synchronized void refused(final String line)
    {
        roll();
        if (logged < perSecond)
        {
            logged++;
            sink.accept(line);
        }
        else
        {
            suppressed++;
        }
    }

    /**
     * Writes the summary of a second that is over; called every second so the summary is not held back until
     * the next refusal.
     */
    synchronized void flush()
    {
        roll();
    }

    /**
     * Writes the summary of the current second now, at shutdown.
     */
    synchronized void close()
    {
        roll(true);
    }

    private void roll()
    {
        roll(false);
    }

    private void roll(final boolean force)
    {
        final long now = clockMs.getAsLong();
        if (force || now - windowStartMs >= 1000)
        {
            if (suppressed > 0)
            {
                sink.accept(suppressed + " more refused in the last second" + (force ? " (at shutdown)" : ""));
            }
            windowStartMs = now;
            logged = 0;
            suppressed = 0;
        }
    }
}
