package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The primary's MR engine: creates memory regions the way the reference's {@code mlx5_mr_create_primary}
 * does ({@link #createMr}; its steps are {@link MrCreation}'s), takes freed memory out of them as its
 * {@code mlx5_mr_mem_event_free_cb} does ({@link #onMemoryFree}, a listener of the memory manager) and
 * collects detached MRs. The MR records live in {@link MrTable}, the global cache and the seqlock's write side
 * in {@link GlobalCacheWriter}, the MRs over external memory in {@link ExternalMrs}.
 * <p>
 * <b>Locks</b>, each protecting one thing, always taken in this order (the reference's: memory hotplug lock,
 * then the MR cache lock):
 * <ol>
 *   <li>the memory lock, inside {@link MemoryManager}: the segments' state. Read side while a create re-checks
 *   its chunk and places a {@link io.mrd.primary.memory.SegmentHold} on the segments it will register
 *   ({@link MemoryManager#withChunk}); write side for allocation and for a memory free event, so that the
 *   segments and the MRs covering them change together;</li>
 *   <li>{@link #cacheLock}: the MR table, the global cache and {@link InFlightRanges}, one writer at a time.
 *   Held only to look again (step 5: a concurrent request may have created the MR), to choose and mark the
 *   range (step 6) and to publish (step 8): never across a registration;</li>
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
 * lock, having left the memory lock; {@link #close} waits for the ranges in flight the same way. The holder
 * of what they wait for needs only the cache lock (to publish, or to remove its mark) and the holds' leaf lock,
 * never the memory lock, so no cycle can form: locks are only ever taken memory → cache → seqlock (and the
 * holds' lock, which takes nothing, under any of them), and no lock is held while waiting.
 * <p>
 * Nothing is deregistered or unmapped while any of these is held: {@link #garbageCollect()} takes the
 * detached MRs off the free list under the cache lock and deregisters them after releasing it, as the
 * reference does because a free inside the lock could re-enter the memory event callback.
 */
public final class MrEngine implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MrEngine.class);

    private final MemoryManager memory;
    private final Registrar registrar;
    private final DaemonCounters counters;
    private final DistinctErrorLog errorLog;
    private final EventJournal journal;
    /** How long {@link #close} waits for registrations in flight to be undone before it goes on. */
    static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

    private final Lock cacheLock = new ReentrantLock();
    private final Condition collectionsDone = cacheLock.newCondition();
    private final InFlightRanges inFlight = new InFlightRanges(cacheLock);
    /** Detached MRs taken off the list by some thread and not yet deregistered (guarded by the cache lock). */
    private int collectionsInFlight;
    private final MrTable table;
    private final GlobalCacheWriter cache;
    private final ExternalMrs externals;
    private final MrCreation creation;
    /** Set once, by {@link #close}. */
    private volatile boolean closed;

    /**
     * Starts with an empty MR table and global cache, and registers for the memory manager's free events.
     *
     * @param extendToContiguousChunk {@code --mr-ext-memseg}: register the whole virtually contiguous chunk
     *                                around an address, else one segment.
     */
    public MrEngine(
        final ControlFile controlFile,
        final MemoryManager memory,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final boolean extendToContiguousChunk)
    {
        this(controlFile, memory, registrar, counters, errorLog, extendToContiguousChunk, EventJournal.OFF);
    }

    /**
     * @param journal where MRs created, detached and deregistered and memory free events are recorded.
     */
    public MrEngine(
        final ControlFile controlFile,
        final MemoryManager memory,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final boolean extendToContiguousChunk,
        final EventJournal journal)
    {
        this.journal = journal;
        this.memory = memory;
        this.registrar = registrar;
        this.counters = counters;
        this.errorLog = errorLog;
        this.table = new MrTable(controlFile, counters, journal);
        this.cache = new GlobalCacheWriter(controlFile, counters, journal);
        this.externals = new ExternalMrs(this, cacheLock, inFlight, table, cache, registrar, counters);
        this.creation = new MrCreation(this, memory, registrar, errorLog, cacheLock, inFlight, table, cache,
            extendToContiguousChunk);
        cache.write(() ->
        {
            cache.clear();
            table.clear();
        });
        memory.addEventListener(this::onMemoryFree);
    }

    /**
     * Returns the entry covering {@code address}, registering the memory around it first when no MR covers it
     * (DESIGN §5).
     *
     * @param owner the client that asked (recorded in the MR, for dumps).
     * @return a new entry: the chunk containing {@code address} and its lkey.
     * @throws MrdException ENXIO when the address is not in allocated managed memory, ENOMEM when the MR
     *                      table is full or the provider's pin limit is reached, or the provider's error.
     */
    public MrEntry createMr(final long address, final int owner)
    {
        counters.increment(MrdCounter.CREATE_REQUESTS);
        try
        {
            return create(address, owner);
        }
        catch (final MrdException ex)
        {
            counters.increment(switch (ex.code())
            {
                case ENOMEM -> MrdCounter.CREATE_ERRORS_ENOMEM;
                case ENXIO -> MrdCounter.CREATE_ERRORS_ENXIO;
                case EINVAL -> MrdCounter.CREATE_ERRORS_EINVAL;
                default -> MrdCounter.CREATE_ERRORS_OTHER;
            });
            throw ex;
        }
    }

    /**
     * Step 1 of {@code mlx5_mr_create_primary} and the lookup that answers most creates; the other steps are
     * {@link MrCreation}'s.
     */
    private MrEntry create(final long address, final int owner)
    {
        // Step 1: release detached MRs, outside every lock.
        garbageCollect();
        checkOpen(address);

        // Secondaries that missed on one buffer at once all ask for it; the later requests find the MR the first
        // one created. Answer them before taking a record: with the MR table full, take() would fail them with
        // ENOMEM although their MR exists (step 5 closes the race for the ones in flight). This also answers
        // addresses in external memory, which no memory-segment list holds.
        final MrEntry existing = new MrEntry();
        if (lookup(address, existing))
        {
            return existing;
        }
        return creation.create(address, owner);
    }

    /**
     * Step 8: the MR's record and its chunks in the global cache, in one write section (for {@link MrCreation}
     * and {@link ExternalMrs}). Caller holds the cache lock.
     */
    void publish(
        final int slot, final Registration registration, final MrTable.Coverage coverage, final int flags,
        final int owner, final int access)
    {
        cache.write(() ->
        {
            journal.mrCreated(owner, slot, registration, flags);
            table.publish(slot, registration, coverage, flags, owner, access);
            cache.insertMr(slot);
            // Inside the write section: a reader that sees the MR also sees it counted (mrd check relies on it).
            counters.increment(MrdCounter.MRS_CREATED);
            counters.increment(MrdCounter.MRS_ACTIVE);
            counters.add(MrdCounter.BYTES_REGISTERED, registration.length());
            counters.set(MrdCounter.BYTES_PINNED, registrar.pinnedBytes());
        });
    }

    /**
     * The reference's {@code mlx5_mr_mem_event_free_cb}, called by the memory manager with its write lock held:
     * clear the freed segments' bits in every MR covering them, detach MRs left with none, and when any bit
     * went, rebuild the global cache and bump devGen so that every local cache flushes. The detached MRs are
     * deregistered by whoever freed, once the memory lock is released.
     */
    private void onMemoryFree(final List<FreedRange> ranges)
    {
        final long startNs = System.nanoTime();
        cacheLock.lock();
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
            cacheLock.unlock();
            counters.histograms().memoryEventHandled(startNs);
        }
    }

    /**
     * Registers external memory as one MR with no segment list.
     *
     * @param access the {@link Access} its owner asked for; local write is added.
     * @throws MrdException EINVAL naming unknown access bits.
     * @see ExternalMrs#register
     */
    public MrEntry registerExternal(final long address, final long length, final int owner, final int access)
    {
        return externals.register(address, length, owner, Access.granted(access, "REG_EXTERNAL"));
    }

    /** Deregisters the external MR that starts at {@code address} ({@link ExternalMrs#deregister}). */
    public void deregisterExternal(final long address, final int owner)
    {
        externals.deregister(address, owner);
    }

    /** @return the start addresses of the ACTIVE external MRs {@code owner} has (to reclaim a gone client's). */
    public List<Long> externalsOwnedBy(final int owner)
    {
        return externals.ownedBy(owner);
    }

    /** Allocates memory for local access only ({@link Access#LOCAL}). @see #allocate(long, int, int) */
    public Allocation allocate(final long length, final int owner)
    {
        return allocate(length, owner, Access.LOCAL);
    }

    /**
     * Allocates memory for a client (no MR is created: that happens on the first lookup that misses, with the
     * access chosen here).
     *
     * @see MemoryManager#allocate(long, int, int)
     */
    public Allocation allocate(final long length, final int owner, final int access)
    {
        final Allocation allocation = memory.allocate(length, owner, access);
        counters.increment(MrdCounter.ALLOCS);
        counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
        return allocation;
    }

    /**
     * The check of an ALLOC with registration, made before allocating: the reply carries one MR's keys, so the
     * allocation must fit one MR.
     *
     * @throws MrdException EINVAL when {@code length}, in whole segments, is longer than the provider registers
     *                      in one MR, naming the limit and what to do instead.
     */
    public void checkRegistersInOneMr(final long length)
    {
        final long segmentSize = memory.segmentSize();
        final long max = creation.maxRegisteredLength();
        // A length that is not positive is the allocation's to refuse.
        if (length > 0 && (length - 1) / segmentSize >= max / segmentSize)
        {
            throw new MrdException(ErrorCode.EINVAL, "ALLOC with registration of " + Sizes.format(length) +
                ": provider " + registrar.name() + " registers at most " + Sizes.format(max) + " in one MR " +
                "(max_mr_size " + registrar.maxRegionLength() + " bytes, in whole segments of " +
                Sizes.format(segmentSize) + "), and " +
                "the reply carries one MR's keys: allocate without registration (lookups then register it piece " +
                "by piece) or allocate at most " + Sizes.format(max) + " at a time");
        }
    }

    /**
     * Frees memory the owner allocated (DESIGN §4): the memory manager runs the memory free event
     * ({@link #onMemoryFree}) under its write lock, then the detached MRs are deregistered and the pages
     * released with no lock held.
     *
     * @see MemoryManager#free(long, long, int)
     */
    public FreedRange freeMemory(final long address, final long length, final int owner)
    {
        final FreedRange range = memory.free(address, length, owner);
        releaseFreed(List.of(range));
        counters.increment(MrdCounter.FREES);
        return range;
    }

    /**
     * Frees everything a client owned (it disconnected or died): its allocations and its external MRs.
     *
     * @return the ranges freed.
     */
    public List<FreedRange> reclaim(final int owner)
    {
        final List<FreedRange> ranges = memory.freeAllOwnedBy(owner);
        for (final long external : externalsOwnedBy(owner))
        {
            try
            {
                deregisterExternal(external, MemsegListDescriptor.OWNER_DAEMON);
            }
            catch (final MrdException ex)
            {
                // The client's own DEREG_EXTERNAL, still in flight on a worker when its connection closed, may
                // have taken it since the list was made. Throwing here would leave the ranges freed above
                // unreleased (their segments withheld from allocation for good).
                if (ex.code() != ErrorCode.ENOENT)
                {
                    throw ex;
                }
            }
        }
        releaseFreed(ranges);
        return ranges;
    }

    /** The end of every memory free: its detached MRs deregistered before its pages are unmapped, no lock held. */
    private void releaseFreed(final List<FreedRange> ranges)
    {
        collectAndAwait();
        ranges.forEach(memory::release);
        counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
    }

    /**
     * Deregisters every detached MR (the reference's {@code mlx5_mr_garbage_collect}). Takes them off the free
     * list under the cache lock and releases them after unlocking: a deregistration can be slow and must not
     * hold up lookups or creates.
     */
    public void garbageCollect()
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
            // Under the cache lock, like the counting in publish: a GC racing a registration must not leave a
            // stale value.
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

    /**
     * Looks an address up the way a secondary would, under the cache lock (for the daemon's own use and tests).
     *
     * @return true and {@code out} filled when registered.
     */
    public boolean lookup(final long address, final MrEntry out)
    {
        cacheLock.lock();
        try
        {
            return cache.lookup(address, out);
        }
        finally
        {
            cacheLock.unlock();
        }
    }

    /** Releases every MR (graceful shutdown): all are detached, the cache emptied, then all deregistered. */
    public void close()
    {
        cacheLock.lock();
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
            cacheLock.unlock();
        }
        garbageCollect();
        awaitRegistrationsInFlight();
        LOG.info("released all MRs: {} pinned bytes left", registrar.pinnedBytes());
    }

    /**
     * @return what the provider is asked for memory of {@code access}: that access and relaxed ordering, which
     * the reference asks for too and a device that does not know it ignores.
     */
    static int registrationAccess(final int access)
    {
        return access | Access.RELAXED_ORDERING;
    }

    /**
     * Waits (the cache lock released meanwhile) for the registrations that were in flight at close: each finds
     * the engine closed at its step 8 and deregisters what it registered, so that the provider and the memory
     * can be closed next with nothing pinned. Bounded, so that a provider that never returns cannot hang
     * shutdown; what it still holds is then named in the log.
     */
    private void awaitRegistrationsInFlight()
    {
        cacheLock.lock();
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
            cacheLock.unlock();
        }
    }

    /**
     * Undoes a registration that finished after {@link #close} had begun (close detached every MR the table held,
     * and this one was not among them): deregisters it and releases its record, with no lock held.
     *
     * @param what the memory, for the caller's error ("[start, end) for address").
     * @return the ENODEV to throw: nothing was registered.
     */
    MrdException undoAfterClose(final Registration registration, final int slot, final String what)
    {
        try
        {
            registrar.deregister(registration);
        }
        catch (final RuntimeException ex)
        {
            errorLog.record(ex);
            LOG.error("deregistration of {}, registered while the daemon closed, failed", what, ex);
        }
        table.release(slot);
        return new MrdException(ErrorCode.ENODEV, "the daemon shut down while registering " + what +
            ": it is not registered");
    }

    /** @return where this engine records what it changes (the server records its clients there too). */
    public EventJournal journal()
    {
        return journal;
    }

    /** @return true once {@link #close} has begun (set under the cache lock). */
    boolean isClosed()
    {
        return closed;
    }

    void checkOpen(final long address)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.ENODEV, "the daemon is shutting down: no MR is created for " +
                Sizes.hex(address));
        }
    }

    MrdException notManaged(final long address)
    {
        return new MrdException(ErrorCode.ENXIO, "address " + Sizes.hex(address) +
            " is not in memory allocated from mrd (lists span [" + Sizes.hex(memory.list(0).baseVa()) + ", " +
            Sizes.hex(memory.endVirtaddr()) + ")): allocate buffers with MrdClient.allocate or register them with " +
            "MrdClient.registerExternal");
    }
}
