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
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.Chunk;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.BitSet;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

/**
 * The primary's MR engine: creates memory regions the way the reference's {@code mlx5_mr_create_primary}
 * does ({@link #createMr}, one method per step), takes freed memory out of them as its
 * {@code mlx5_mr_mem_event_free_cb} does ({@link #onMemoryFree}, a listener of the memory manager) and
 * collects detached MRs. The MR records live in {@link MrTable}, the global cache and the seqlock's write side
 * in {@link GlobalCacheWriter}, the MRs over external memory in {@link ExternalMrs}.
 * <p>
 * Locks, always taken in this order (the reference's order: memory hotplug lock, then the cache lock):
 * <ol>
 *   <li>the memory lock, inside {@link MemoryManager}: read side while a chunk is checked and registered
 *   ({@link MemoryManager#withChunk}), so its segments cannot be freed under the registration; write side
 *   for a memory free event, so the segments and the MRs covering them change together;</li>
 *   <li>{@link #cacheLock}: one writer of the MR table and the global cache at a time; held while
 *   registering, so N concurrent requests for one address create one MR (the later ones find it on their
 *   final lookup) and requests for overlapping ranges wait for the one in flight;</li>
 *   <li>the seqlock's write side ({@link GlobalCacheWriter#write}), only around the stores that change what
 *   readers see: never around a registration (readers would spin for its whole duration).</li>
 * </ol>
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
    private final boolean extendToContiguousChunk;
    private final long segmentSize;
    private final Lock cacheLock = new ReentrantLock();
    private final Condition collectionsDone = cacheLock.newCondition();
    /** Detached MRs taken off the list by some thread and not yet deregistered (guarded by the cache lock). */
    private int collectionsInFlight;
    private final MrTable table;
    private final GlobalCacheWriter cache;
    private final ExternalMrs externals;
    private final MrEntry scratch = new MrEntry();
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
        this.memory = memory;
        this.registrar = registrar;
        this.counters = counters;
        this.errorLog = errorLog;
        this.extendToContiguousChunk = extendToContiguousChunk;
        this.segmentSize = memory.segmentSize();
        this.table = new MrTable(controlFile, counters);
        this.cache = new GlobalCacheWriter(controlFile, counters);
        this.externals = new ExternalMrs(this, cacheLock, table, cache, registrar, counters);
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
     * Steps 1 to 3 of {@code mlx5_mr_create_primary}, and the retry with a single segment when step 4 finds
     * that the chunk changed.
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

        // Step 2: the chunk around the address. The walk takes the memory lock itself; the chunk may change
        // before we use it, which step 4 detects.
        boolean contiguous = extendToContiguousChunk;
        Chunk chunk = findChunk(address, contiguous);
        while (true)
        {
            // Step 3: the record is taken without the cache lock, as the reference allocates its MR without
            // its rwlock: allocation may be slow, lookups must not wait for it.
            final int slot = table.take(address);
            final Chunk walked = chunk;
            final MrEntry entry = memory.withChunk(address, contiguous,
                recheck -> createIfUnchanged(address, owner, walked, recheck, slot));
            if (null != entry)
            {
                return entry;
            }
            // The chunk changed: fall back to the single segment, which cannot change under us.
            contiguous = false;
            chunk = findChunk(address, false);
        }
    }

    /**
     * Step 4: re-check under the memory read lock. Segments may have been allocated or freed since the walk.
     *
     * @return the entry, or null when the chunk changed (the slot is released).
     */
    private MrEntry createIfUnchanged(
        final long address, final int owner, final Chunk walked, final Chunk recheck, final int slot)
    {
        if (null == recheck)
        {
            table.release(slot);
            throw notManaged(address);
        }
        // The access too: the address's segment may have been freed and allocated again with another access.
        if (recheck.start() != walked.start() || recheck.end() != walked.end() || recheck.access() != walked.access())
        {
            table.release(slot);
            return null;
        }
        cacheLock.lock();
        try
        {
            return createLocked(address, owner, walked, slot);
        }
        finally
        {
            cacheLock.unlock();
        }
    }

    /** Steps 5 to 8, under the memory read lock and the cache lock. */
    private MrEntry createLocked(final long address, final int owner, final Chunk chunk, final int slot)
    {
        // Step 5: look again under the cache lock: a concurrent request may have created it meanwhile.
        final MrEntry entry = new MrEntry();
        if (cache.lookup(address, entry))
        {
            table.release(slot);
            // As the reference: put the entry into the cache again, in case it was found by the table scan.
            if (!cache.overflowed())
            {
                cache.write(() -> cache.insert(entry));
            }
            return entry;
        }

        final MrTable.Coverage coverage = uncoveredSegments(chunk);
        final long start = chunk.start() + (coverage.msBaseIdx() - chunk.firstSegment()) * segmentSize;
        final long end = start + coverage.msBmpN() * segmentSize;
        final Registration registration = register(slot, address, start, end, chunk.access());
        publish(slot, registration, coverage, 0, owner, chunk.access());
        LOG.debug("MR {} created for {}: [{}, {}) lkey {} rkey {} access {} msBaseIdx {} msN {} msBmpN {}", slot,
            Sizes.hex(address), Sizes.hex(start), Sizes.hex(end), Sizes.hex(registration.lkey() & 0xFFFF_FFFFL),
            Sizes.hex(registration.rkey() & 0xFFFF_FFFFL), Access.describe(chunk.access()), coverage.msBaseIdx(),
            coverage.live().cardinality(), coverage.msBmpN());
        if (!cache.lookup(address, entry))
        {
            throw new IllegalStateException("MR " + slot + " created for " + Sizes.hex(address) + " but not found");
        }
        return entry;
    }

    /**
     * Step 6: exclude the chunk's segments already registered by other MRs; trim to the first and last
     * uncovered one. The address's own segment is uncovered (step 5 found no MR for it), so one is.
     */
    private MrTable.Coverage uncoveredSegments(final Chunk chunk)
    {
        final BitSet uncovered = new BitSet(chunk.segmentCount());
        int first = -1;
        int last = -1;
        for (int n = 0; n < chunk.segmentCount(); n++)
        {
            if (!cache.lookup(chunk.start() + n * segmentSize, scratch))
            {
                if (first < 0)
                {
                    first = n;
                }
                last = n;
                uncovered.set(n);
            }
        }
        return new MrTable.Coverage(chunk.listIndex(), chunk.firstSegment() + first, last - first + 1,
            uncovered.get(first, last + 1));
    }

    /**
     * Step 7: register, with the chunk's access: all its segments have that one ({@code MemsegList.chunkAround}),
     * so the MR grants no access their owners did not ask for. The seqlock is not held, so readers go on; the
     * memory read lock keeps the segments alive and the cache lock keeps other writers out until the MR is in
     * the table.
     */
    private Registration register(final int slot, final long address, final long start, final long end,
        final int access)
    {
        try
        {
            return registrar.register(start, end - start, registrationAccess(access));
        }
        catch (final MrdException ex)
        {
            table.release(slot);
            LOG.warn("registration of [{}, {}) for address {} failed: {}", Sizes.hex(start), Sizes.hex(end),
                Sizes.hex(address), ex.oneLine());
            throw ex;
        }
        catch (final RuntimeException ex)
        {
            table.release(slot);
            errorLog.record(ex);
            throw new MrdException(ErrorCode.EIO, "provider " + registrar.name() + " failed registering [" +
                Sizes.hex(start) + ", " + Sizes.hex(end) + "): " + ex, ex);
        }
    }

    /**
     * Step 8: the MR's record and its chunks in the global cache, in one write section (also for
     * {@link ExternalMrs}). Caller holds the cache lock.
     */
    void publish(
        final int slot, final Registration registration, final MrTable.Coverage coverage, final int flags,
        final int owner, final int access)
    {
        cache.write(() ->
        {
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
            counters.increment(MrdCounter.MEMORY_EVENTS);
        }
        finally
        {
            cacheLock.unlock();
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

    private void checkOpen(final long address)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.ENODEV, "the daemon is shutting down: no MR is created for " +
                Sizes.hex(address));
        }
    }

    /**
     * The chunk around {@code address} as the walk finds it; it may change once the memory lock is released.
     */
    private Chunk findChunk(final long address, final boolean contiguous)
    {
        final Chunk chunk = memory.withChunk(address, contiguous, Function.identity());
        if (null == chunk)
        {
            throw notManaged(address);
        }
        return chunk;
    }

    private MrdException notManaged(final long address)
    {
        return new MrdException(ErrorCode.ENXIO, "address " + Sizes.hex(address) +
            " is not in memory allocated from mrd (lists span [" + Sizes.hex(memory.list(0).baseVa()) + ", " +
            Sizes.hex(memory.endVirtaddr()) + ")): allocate buffers with MrdClient.allocate or register them with " +
            "MrdClient.registerExternal");
    }
}
