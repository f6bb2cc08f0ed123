package io.mrd.primary.mr;

import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.locks.Lock;

/**
 * A successor's take-over of the MR table and global cache its predecessor left in the control file
 * (docs/adoption.md), once, at start, before anything is served.
 * <p>
 * <b>Locking.</b> Part of {@link MrShareCache}, which lends it the cache lock and its parts; it holds the lock
 * for the whole walk (nothing else runs yet, and the provider's adopt registers nothing), and lets the garbage
 * collector deregister what is not kept after releasing it, as everywhere in the engine.
 */
final class MrAdoption
{
    private static final Logger LOG = LoggerFactory.getLogger(MrAdoption.class);

    private final Lock lock;
    private final MrTable table;
    private final GlobalCacheWriter cache;
    private final Registrar registrar;
    private final DaemonCounters counters;
    private final MrCollector collector;

    MrAdoption(
        final Lock lock,
        final MrTable table,
        final GlobalCacheWriter cache,
        final Registrar registrar,
        final DaemonCounters counters,
        final MrCollector collector)
    {
        this.lock = lock;
        this.table = table;
        this.cache = cache;
        this.registrar = registrar;
        this.counters = counters;
        this.collector = collector;
    }

    /**
     * Takes over the MR table and global cache a predecessor left in the control file (adoption): each live
     * record's registration goes to the provider ({@link Registrar#adopt}: import by handle, or pin again), and
     * the global cache stays as it is, so that no secondary's lookup misses or flushes. A record not to keep
     * (DETACHED, external) is deregistered by the garbage collector after the lock is released, and then the
     * cache is rebuilt and devGen bumped, as for any MR taken away. Takes the cache lock; nothing is registered.
     *
     * @return the MRs adopted and kept.
     * @throws MrdException the provider's refusal of a record, naming it; the caller then starts afresh (closing
     *                      this engine deregisters what was adopted so far).
     */
    int adoptRecords()
    {
        int kept = 0;
        boolean dropped = false;
        lock.lock();
        try
        {
            if (cache.finishAbandonedWrite())
            {
                LOG.warn("the previous daemon died inside a write section: the global cache was rebuilt from the MR " +
                    "table and every local cache flushes");
            }
            final List<MrTable.Recorded> records = table.recorded();
            // The counters hold the predecessor's values (the same file): they are set to what the table holds,
            // before any detach below counts down, as publish and the collector keep them from then on.
            counters.set(MrdCounter.MRS_ACTIVE, records.stream().filter(MrTable.Recorded::active).count());
            counters.set(MrdCounter.BYTES_REGISTERED,
                records.stream().mapToLong(r -> r.registration().length()).sum());
            for (final MrTable.Recorded recorded : records)
            {
                final Registration registration = adoptRegistration(recorded);
                if (null == registration)
                {
                    continue;
                }
                // Only a detach changes what readers see: a record kept as it is needs no write section.
                if (recorded.active() && !recorded.keep())
                {
                    cache.write(() -> table.adopt(recorded, registration));
                }
                else
                {
                    table.adopt(recorded, registration);
                }
                kept += recorded.keep() ? 1 : 0;
                dropped |= !recorded.keep();
            }
            counters.set(MrdCounter.BYTES_PINNED, registrar.pinnedBytes());
            counters.set(MrdCounter.CACHE_ENTRIES, cache.entries());
            counters.set(MrdCounter.DEV_GEN, cache.devGen());
            if (dropped)
            {
                cache.write(cache::invalidate);
            }
        }
        finally
        {
            lock.unlock();
        }
        collector.garbageCollect();
        return kept;
    }

    /**
     * The provider's take-over of a record's registration. A DETACHED record's MR may be gone already: the
     * collector deregisters before it clears the record, and a predecessor killed between the two leaves the
     * record naming a handle the device no longer has (or has given to a newer MR, whose keys differ). Such a
     * record is cleared here, since its deregistration is done; a refused ACTIVE record is the caller's failure.
     *
     * @return the registration, or null when the record was dropped.
     */
    private Registration adoptRegistration(final MrTable.Recorded recorded)
    {
        try
        {
            return registrar.adopt(recorded.registration(), recorded.access());
        }
        catch (final MrdException ex)
        {
            if (recorded.active())
            {
                throw ex;
            }
            LOG.info("the predecessor's detached MR {} was deregistered before it died ({}): its record is cleared",
                recorded.slot(), ex.getMessage());
            counters.add(MrdCounter.BYTES_REGISTERED, -recorded.registration().length());
            cache.write(() -> table.clearRecord(recorded.slot()));
            return null;
        }
    }
}
