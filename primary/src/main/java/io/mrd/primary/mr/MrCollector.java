package io.mrd.primary.mr;

import io.mrd.layout.MrdCounter;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * The garbage collector of detached MRs (the reference's {@code mlx5_mr_garbage_collect}): the MRs a memory
 * free event, an external deregistration or the close detached wait on {@link MrTable}'s free list until one
 * of these deregisters them, and only then is their memory unmapped.
 * <p>
 * <b>Locking.</b> Part of {@link MrShareCache}, which makes it and lends it the cache lock; it calls nothing
 * back. The detached MRs are taken off the list and their records cleared under the cache lock, and
 * deregistered between, with no lock held: a deregistration can be slow and must not hold up lookups or
 * creates, and the reference never frees inside its lock because a free could re-enter the memory event
 * callback. A thread that must not unmap before every detached MR is gone ({@link #collectAndAwait}) waits on a
 * condition of the cache lock, so holding nothing, for the ones another thread took.
 */
final class MrCollector
{
    private static final Logger LOG = LoggerFactory.getLogger(MrCollector.class);

    private final Lock cacheLock;
    private final Condition collectionsDone;
    private final MrTable table;
    private final GlobalCacheWriter cache;
    private final Registrar registrar;
    private final DaemonCounters counters;
    private final DistinctErrorLog errorLog;
    private final EventJournal journal;
    /** Detached MRs taken off the list by some thread and not yet deregistered (guarded by the cache lock). */
    private int collectionsInFlight;

    MrCollector(
        final Lock cacheLock,
        final MrTable table,
        final GlobalCacheWriter cache,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final EventJournal journal)
    {
        this.cacheLock = cacheLock;
        this.collectionsDone = cacheLock.newCondition();
        this.table = table;
        this.cache = cache;
        this.registrar = registrar;
        this.counters = counters;
        this.errorLog = errorLog;
        this.journal = journal;
    }

    /**
     * Deregisters every detached MR (the reference's {@code mlx5_mr_garbage_collect}). Takes them off the free
     * list under the cache lock and releases them after unlocking: a deregistration can be slow and must not
     * hold up lookups or creates.
     */
    void garbageCollect()
    {
        final List<Integer> collect;
        cacheLock.lock();
        try
        {
            collect = table.takeDetached();
            collectionsInFlight += collect.size();
        }
        finally
        {
            cacheLock.unlock();
        }
        if (collect.isEmpty())
        {
            return;
        }
        for (final int slot : collect)
        {
            collect(slot);
        }
        counters.increment(MrdCounter.GC_RUNS);
    }

    private void collect(final int slot)
    {
        final Registration registration = table.registration(slot);
        try
        {
            registrar.deregister(registration);
        }
        catch (final RuntimeException | Error ex)
        {
            // An Error too: a collection that never ends would make every later free wait forever.
            errorLog.record(ex);
            LOG.error("deregistration of MR {} failed (its record is released anyway)", slot, ex);
        }
        cacheLock.lock();
        try
        {
            journal.mrDeregistered(table.owner(slot), slot, registration);
            table.forget(slot);
            // Under the cache lock, like the counting in MrShareCache.publish: a GC racing a registration must not
            // leave a stale value.
            counters.set(MrdCounter.BYTES_PINNED, registrar.pinnedBytes());
            counters.add(MrdCounter.BYTES_REGISTERED, -registration.length());
            cache.write(() -> table.clearRecord(slot));
            if (--collectionsInFlight == 0)
            {
                collectionsDone.signalAll();
            }
        }
        finally
        {
            cacheLock.unlock();
        }
        table.release(slot);
        counters.increment(MrdCounter.MRS_DEREGISTERED);
    }

    /**
     * Deregisters every detached MR and waits (the cache lock released) for those another thread took, so that
     * unmapping their memory next can never meet a NIC's DMA into memory no longer (or newly) mapped.
     */
    void collectAndAwait()
    {
        garbageCollect();
        cacheLock.lock();
        try
        {
            while (collectionsInFlight > 0)
            {
                collectionsDone.awaitUninterruptibly();
            }
        }
        finally
        {
            cacheLock.unlock();
        }
    }
}
