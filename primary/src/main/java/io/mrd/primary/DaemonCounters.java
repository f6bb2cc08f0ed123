package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.mrd.primary.histogram.DaemonHistograms;
import io.mrd.primary.histogram.Histograms;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersManager;

import java.util.EnumMap;

/**
 * The daemon's {@link MrdCounter}s, allocated once at start in the control file's counters section, and its
 * histograms ({@link DaemonHistograms}, published into the histograms section at every heartbeat), where
 * {@code mrd stat} and the metrics endpoint read them without asking the daemon.
 */
public final class DaemonCounters
{
    private final EnumMap<MrdCounter, AtomicCounter> counters = new EnumMap<>(MrdCounter.class);
    private final DaemonHistograms histograms;

    public DaemonCounters(final ControlFile ctl)
    {
        final CountersManager manager = new CountersManager(
            new UnsafeBuffer(ctl.buffer(), ctl.layout().countersMetadataOffset(), ctl.layout().countersMetadataLength()),
            new UnsafeBuffer(ctl.buffer(), ctl.layout().countersValuesOffset(), ctl.layout().countersValuesLength()));
        for (final MrdCounter counter : MrdCounter.values())
        {
            counters.put(counter, manager.newCounter(counter.label(), counter.typeId()));
        }
        histograms = new DaemonHistograms(ctl);
    }

    /**
     * @return where the hooks record durations and sizes; any thread, no lock.
     */
    public Histograms histograms()
    {
        return histograms;
    }

    /**
     * The heartbeat: samples the pinned bytes and writes every histogram into the control file.
     */
    public void publishHistograms(final long nowMs)
    {
        histograms.publish(counters.get(MrdCounter.BYTES_PINNED).get(), nowMs);
    }

    /**
     * @return the counter; increments and sets are atomic, so any thread may update it.
     */
    public AtomicCounter get(final MrdCounter counter)
    {
        return counters.get(counter);
    }

    public void increment(final MrdCounter counter)
    {
        counters.get(counter).increment();
    }

    public void add(final MrdCounter counter, final long delta)
    {
        counters.get(counter).getAndAdd(delta);
    }

    public void set(final MrdCounter counter, final long value)
    {
        counters.get(counter).setRelease(value);
    }
}
