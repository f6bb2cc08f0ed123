package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersManager;

import java.util.EnumMap;

/**
 * The daemon's {@link MrdCounter}s, allocated once at start in the control file's counters section, where
 * {@code mrd stat} and the metrics endpoint read them without asking the daemon.
 */
public final class DaemonCounters
{
    private final EnumMap<MrdCounter, AtomicCounter> counters = new EnumMap<>(MrdCounter.class);

    public DaemonCounters(final ControlFile ctl)
    {
        final CountersManager manager = new CountersManager(
            new UnsafeBuffer(ctl.buffer(), ctl.layout().countersMetadataOffset(), ctl.layout().countersMetadataLength()),
            new UnsafeBuffer(ctl.buffer(), ctl.layout().countersValuesOffset(), ctl.layout().countersValuesLength()));
        for (final MrdCounter counter : MrdCounter.values())
        {
            counters.put(counter, manager.newCounter(counter.label(), counter.typeId()));
        }
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
