package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * What every change of an MR shares, and the lock over it: the reference's {@code struct mlx5_mr_share_cache}
 * (its {@code rwlock}, {@code cache}, {@code mr_list} and {@code mr_free_list}). It owns the cache lock, the MR
 * table ({@link MrTable}), the global cache's writer ({@link GlobalCacheWriter}), the ranges being registered
 * ({@link InFlightRanges}) and the closed flag, and does what needs them together: publish an MR (step 8 of
 * {@code mlx5_mr_create_primary}), undo one registered after close, the memory free event's part under the
 * lock ({@code mlx5_mr_mem_event_free_cb}), the garbage collection ({@code mlx5_mr_garbage_collect}, its
 * {@link MrCollector}'s) and the close. {@link MrEngine}, {@link MrCreation} and {@link ExternalMrs} call into
 * it; it calls nothing of theirs.
 * <p>
 * <b>Locks</b>, each protecting one thing, always taken in this order (the reference's: memory hotplug lock,
 * then the MR cache lock):
 * <ol>
 *   <li>the memory lock, inside {@link MemoryManager}: the segments' state. Read side while a create re-checks
 *   its chunk and places a {@link io.mrd.primary.memory.SegmentHold} on the segments it will register
 *   ({@link MemoryManager#withChunk}); write side for allocation and for a memory free event, so that the
 *   segments and the MRs covering them change together;</li>
 *   <li>{@link #lock}, the cache lock: the MR table, the global cache and {@link InFlightRanges}, one writer at a
 *   time. Held only to look again (step 5: a concurrent request may have created the MR), to choose and mark
 *   the range (step 6) and to publish (step 8): never across a registration;</li>
 *   <li>the seqlock's write side ({@link GlobalCacheWriter#write}), only around the stores that change what
 *   readers see.</li>
 * </ol>
 * A registration (step 7) runs with none of them held, so ALLOC, FREE of other memory, CREATE_MR of existing
 * MRs, lookups and registrations of other ranges go on while it runs. Two things stand in for the locks it no
 * longer holds: the hold on its segments (a FREE of any of them, or the reclaim of a dead client's memory, waits
 * until the registration has been published or undone, and only then takes them out of use, runs the free
 * event and unmaps: a FREE never unmaps memory being registered, and its event always finds the MR to clear),
 * and its range in {@link InFlightRanges} (a create for an address in it waits and starts again, finding the
 * MR: concurrent requests for one address still create one MR; a create next to it stops short of it).
 * <p>
 * <b>Waiting.</b> Every waiter holds nothing while it waits: a FREE waits for holds on the holds' own
 * condition after releasing the memory lock; a create waits for an in-flight range on a condition of the cache
 * lock ({@link #awaitNotInFlight}), having left the memory lock; {@link #close} waits for the ranges in flight
 * the same way. The holder of what they wait for needs only the cache lock (to publish, or to remove its mark)
 * and the holds' leaf lock, never the memory lock, so no cycle can form: locks are only ever taken memory →
 * cache → seqlock (and the holds' lock, which takes nothing, under any of them), and no lock is held while
 * waiting.
 * <p>
 * Nothing is deregistered or unmapped while any of these is held: {@link #garbageCollect()} takes the
 * detached MRs off the free list under the cache lock and deregisters them after releasing it, as the
 * reference does because a free inside the lock could re-enter the memory event callback.
 * <p>
 * The methods say which of three kinds they are: they take the cache lock themselves; the caller holds it
 * (asserted); or they need no lock (the record slots have {@link MrTable}'s own).
 */
final class MrShareCache
{
    private static final Logger LOG = LoggerFactory.getLogger(MrShareCache.class);

    /** How long {@link #close} waits for registrations in flight to be undone before it goes on. */
    static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

    private final ReentrantLock lock = new ReentrantLock();
    private final InFlightRanges inFlight = new InFlightRanges(lock);
    private final MrTable table;
    private final GlobalCacheWriter cache;
    private final Registrar registrar;
    private final DaemonCounters counters;
    private final DistinctErrorLog errorLog;
    private final EventJournal journal;
    private final MrCollector collector;
    /** Guarded by the cache lock. */
    private final MrEntry scratch = new MrEntry();
    /** Set once, by {@link #close}, under the cache lock; read without it by the checks before a create. */
    private volatile boolean closed;

    /**
     * @param adopting false to start with an empty MR table and global cache; true to keep the control file's for
     *                 {@link #adoptRecords}.
     */
    MrShareCache(
        final ControlFile controlFile,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final EventJournal journal,
        final boolean adopting)
    {
        this.registrar = registrar;
        this.counters = counters;
        this.errorLog = errorLog;
        this.journal = journal;
        this.table = new MrTable(controlFile, counters, journal);
        this.cache = new GlobalCacheWriter(controlFile, counters, journal);
        this.collector = new MrCollector(lock, table, cache, registrar, counters, errorLog, journal);
        if (adopting)
        {
            return;
        }
        cache.write(() ->
        {
            cache.clear();
            table.clear();
        });
    }

    /**
     * Takes over the MR table and global cache a predecessor left in the control file ({@link MrAdoption}).
     *
     * @return the MRs adopted and kept.
     * @throws MrdException the provider's refusal of an ACTIVE record, naming it; the caller then starts afresh.
     */
    int adoptRecords()
    {
        return new MrAdoption(lock, table, cache, registrar, counters, collector).adoptRecords();
    }

    /** Takes the cache lock, for a caller that needs several of the methods below at once. */
    void lock()
    {
        lock.lock();
    }

    void unlock()
    {
        lock.unlock();
    }

    /**
     * Either with the cache lock or without: under it, a close that comes after waits for whatever the caller
     * marks in flight next; without it, a cheap early refusal.
     *
     * @throws MrdException ENODEV once {@link #close} has begun.
     */
    void checkOpen(final long address)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.ENODEV, "the daemon is shutting down: no MR is created for " +
                Sizes.hex(address));
        }
    }

    // -------------------------------------------------------------------------------------------------------------
    // The record slots (no cache lock: MrTable's own, as the reference allocates its MR outside its rwlock).

    /** @see MrTable#take */
    int takeRecord(final long address)
    {
        return table.take(address);
    }

    void releaseRecord(final int slot)
    {
        table.release(slot);
    }

    // -------------------------------------------------------------------------------------------------------------
    // Lookups.

    /**
     * Looks an address up the way a secondary would. Takes the cache lock.
     *
     * @return true and {@code out} filled when registered.
     */
    boolean lookup(final long address, final MrEntry out)
    {
        lock.lock();
        try
        {
            return cache.lookup(address, out);
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * The reference's {@code mlx5_mr_lookup_cache} with the lock held, and as it does on a hit, the entry put
     * into the global cache again in case the table scan found it. Caller holds the cache lock.
     *
     * @return true and {@code out} filled when registered.
     */
    boolean lookAgain(final long address, final MrEntry out)
    {
        assert lock.isHeldByCurrentThread();
        if (!cache.lookup(address, out))
        {
            return false;
        }
        if (!cache.overflowed())
        {
            cache.write(() -> cache.insert(out));
        }
        return true;
    }

    /** @return true when an MR covers {@code address}. Caller holds the cache lock. */
    boolean isRegistered(final long address)
    {
        assert lock.isHeldByCurrentThread();
        return cache.lookup(address, scratch);
    }

    /** @return true when an MR's chunk overlaps {@code [start, end)}. Caller holds the cache lock. */
    boolean overlapsChunk(final long start, final long end)
    {
        assert lock.isHeldByCurrentThread();
        return table.overlapsChunk(start, end);
    }

    // -------------------------------------------------------------------------------------------------------------
    // Ranges in flight: marked under the cache lock, registered with none, unmarked under it again.

    /** Caller holds the cache lock. @see InFlightRanges#contains */
    boolean isInFlight(final long address)
    {
        assert lock.isHeldByCurrentThread();
        return inFlight.contains(address);
    }

    /** Caller holds the cache lock. @see InFlightRanges#overlaps */
    boolean overlapsInFlight(final long start, final long end)
    {
        assert lock.isHeldByCurrentThread();
        return inFlight.overlaps(start, end);
    }

    /** Caller holds the cache lock. @see InFlightRanges#startAfter */
    long inFlightStartAfter(final long address, final long floor)
    {
        assert lock.isHeldByCurrentThread();
        return inFlight.startAfter(address, floor);
    }

    /** Caller holds the cache lock. @see InFlightRanges#endBefore */
    long inFlightEndBefore(final long address, final long ceiling)
    {
        assert lock.isHeldByCurrentThread();
        return inFlight.endBefore(address, ceiling);
    }

    /** Caller holds the cache lock, and calls {@link #endInFlight} on every way out of the registration. */
    void markInFlight(final long start, final long end)
    {
        assert lock.isHeldByCurrentThread();
        inFlight.add(start, end);
    }

    /** Removes the mark and wakes its waiters. Takes the cache lock. */
    void endInFlight(final long start, final long end)
    {
        lock.lock();
        try
        {
            inFlight.remove(start, end);
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * Waits until no registration in flight holds the address, on the cache lock's condition (so holding
     * nothing meanwhile). Takes the cache lock; the caller holds no other.
     */
    void awaitNotInFlight(final long address)
    {
        lock.lock();
        try
        {
            inFlight.awaitNotContaining(address);
        }
        finally
        {
            lock.unlock();
        }
    }

    // -------------------------------------------------------------------------------------------------------------
    // Registration (step 7, no lock held) and publication (step 8, under the cache lock).

    /**
     * Step 7's call to the provider, with no lock held. It is asked for {@code access} and relaxed ordering,
     * which the reference asks for too and a device that does not know it ignores.
     */
    Registration register(final long start, final long length, final int access)
    {
        return registrar.register(start, length, access | Access.RELAXED_ORDERING);
    }

    /**
     * Step 8: under the cache lock, the MR's record and its chunks into the global cache in one write section,
     * and the entry covering {@code address} read back (the reference's "fill in output data"). Not when the
     * daemon closed while it was registered: close has detached every MR the table holds and this one is not
     * among them, so the caller undoes it ({@link #undoAfterClose}) before its in-flight mark goes, which close
     * waits for. Takes the cache lock.
     *
     * @return the entry covering {@code address}, or null when closed: nothing was published.
     */
    MrEntry publish(
        final long address, final int slot, final Registration registration, final MrTable.Coverage coverage,
        final int flags, final int owner, final int access)
    {
        lock.lock();
        try
        {
            if (closed)
            {
                return null;
            }
            cache.write(() ->
            {
                journal.mrCreated(owner, slot, registration, flags);
                table.publish(slot, registration, coverage, flags, owner, access);
                cache.insertMr(slot);
                // Inside the write section: a reader that sees the MR also sees it counted (mrd check relies on
                // it).
                counters.increment(MrdCounter.MRS_CREATED);
                counters.increment(MrdCounter.MRS_ACTIVE);
                counters.add(MrdCounter.BYTES_REGISTERED, registration.length());
                counters.set(MrdCounter.BYTES_PINNED, registrar.pinnedBytes());
            });
            final MrEntry entry = new MrEntry();
            if (!cache.lookup(address, entry))
            {
                throw new IllegalStateException("MR " + slot + " created for " + Sizes.hex(address) +
                    " but not found");
            }
            return entry;
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * Undoes a registration that {@link #publish} refused because {@link #close} had begun: deregisters it and
     * releases its record, with no lock held.
     *
     * @param what the memory, for the caller's error ("[start, end) for address").
     * @return the ENODEV to throw: nothing was registered.
     */
    MrdException undoAfterClose(final Registration registration, final int slot, final String what)
    {
        undo(registration, slot, what, "registered while the daemon closed");
        return new MrdException(ErrorCode.ENODEV, "the daemon shut down while registering " + what +
            ": it is not registered");
    }

    /**
     * Undoes a registration the provider refused to have published ({@link Registrar#beforePublish}): deregisters
     * it (on every device) and releases its record, with no lock held.
     *
     * @return {@code refusal}, to throw: nothing was registered.
     */
    MrdException undoRefused(final Registration registration, final int slot, final String what,
        final MrdException refusal)
    {
        undo(registration, slot, what, "refused before publishing (" + refusal.oneLine() + ")");
        return refusal;
    }

    private void undo(final Registration registration, final int slot, final String what, final String why)
    {
        try
        {
            registrar.deregister(registration);
        }
        catch (final RuntimeException ex)
        {
            errorLog.record(ex);
            LOG.error("deregistration of {}, {}, failed", what, why, ex);
        }
        table.release(slot);
    }

    // -------------------------------------------------------------------------------------------------------------
    // Taking MRs away: the memory free event, an external deregistration, the collection of what they detach.

    /**
     * The body of the reference's {@code mlx5_mr_mem_event_free_cb} ({@link MrEngine}'s listener calls it with
     * the memory write lock held): clear the freed segments' bits in every MR covering them, detach MRs left
     * with none, and when any bit went, rebuild the global cache and bump devGen so that every local cache
     * flushes. The detached MRs are deregistered by whoever freed, once the memory lock is released
     * ({@link #collectAndAwait}). Takes the cache lock.
     */
    void clearFreed(final List<FreedRange> ranges)
    {
        lock.lock();
        try
        {
            cache.write(() ->
            {
                if (table.clearSegments(ranges))
                {
                    cache.invalidate();
                }
            });
            ranges.forEach(range -> journal.memoryEvent(range.address(), range.length(), cache.devGen()));
            counters.increment(MrdCounter.MEMORY_EVENTS);
        }
        finally
        {
            lock.unlock();
        }
    }

    /** @return the slot of the external MR that starts at {@code address}, or -1. Caller holds the cache lock. */
    int findExternal(final long address)
    {
        assert lock.isHeldByCurrentThread();
        return table.findExternal(address);
    }

    /** @return the client MR {@code slot} belongs to. Caller holds the cache lock. */
    int ownerOf(final int slot)
    {
        assert lock.isHeldByCurrentThread();
        return table.owner(slot);
    }

    /**
     * The memory free event of an external MR: detached, the cache rebuilt and devGen bumped; it is deregistered
     * by the next {@link #collectAndAwait}. Caller holds the cache lock.
     *
     * @param requester the client that asked, for the journal.
     */
    void detachExternal(final int slot, final long address, final int requester)
    {
        assert lock.isHeldByCurrentThread();
        journal.externalDeregistered(requester, address);
        cache.write(() ->
        {
            table.detach(slot);
            cache.invalidate();
        });
        counters.increment(MrdCounter.MEMORY_EVENTS);
    }

    /** @return the start addresses of the ACTIVE external MRs owned by {@code owner}. Takes the cache lock. */
    List<Long> externalsOwnedBy(final int owner)
    {
        lock.lock();
        try
        {
            return table.externalsOwnedBy(owner);
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * Deregisters every detached MR (the reference's {@code mlx5_mr_garbage_collect}), with no lock held while
     * deregistering. Takes the cache lock, around the deregistrations.
     *
     * @see MrCollector#garbageCollect
     */
    void garbageCollect()
    {
        collector.garbageCollect();
    }

    /**
     * Deregisters every detached MR and waits for those another thread took, before the caller unmaps their
     * memory. Takes the cache lock; the caller holds none.
     *
     * @see MrCollector#collectAndAwait
     */
    void collectAndAwait()
    {
        collector.collectAndAwait();
    }

    // -------------------------------------------------------------------------------------------------------------
    // Close.

    /**
     * Releases every MR (graceful shutdown): all are detached and the cache emptied under the cache lock, then
     * all deregistered, then the registrations in flight waited for. Takes the cache lock.
     */
    void close()
    {
        lock.lock();
        try
        {
            if (closed)
            {
                return;
            }
            closed = true;
            cache.write(() ->
            {
                table.detachAll();
                cache.invalidate();
            });
        }
        finally
        {
            lock.unlock();
        }
        garbageCollect();
        awaitRegistrationsInFlight();
        LOG.info("released all MRs: {} pinned bytes left", registrar.pinnedBytes());
    }

    /**
     * Waits (the cache lock released meanwhile) for the registrations that were in flight at close: each finds
     * the cache closed at its step 8 and deregisters what it registered, so that the provider and the memory
     * can be closed next with nothing pinned. Bounded, so that a provider that never returns cannot hang
     * shutdown; what it still holds is then named in the log.
     */
    private void awaitRegistrationsInFlight()
    {
        lock.lock();
        try
        {
            if (!inFlight.awaitEmpty(CLOSE_WAIT_NANOS))
            {
                LOG.warn("registrations of {} still in flight {} s after close: their pins outlive the engine",
                    inFlight, TimeUnit.NANOSECONDS.toSeconds(CLOSE_WAIT_NANOS));
            }
        }
        finally
        {
            lock.unlock();
        }
    }
}
