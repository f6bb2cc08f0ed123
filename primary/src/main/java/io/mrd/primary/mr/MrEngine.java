package io.mrd.primary.mr;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrChunks;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrRecord;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.SeqLock;
import io.mrd.layout.SortedTable;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.Chunk;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.provider.Access;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The primary's MR engine: creates memory regions the way the reference's {@code mlx5_mr_create_primary}
 * does, keeps the MR table and the global cache in the control file, handles memory free events and
 * collects detached MRs.
 * <p>
 * Locks, always taken in this order (the reference's order: memory hotplug lock, then the cache lock):
 * <ol>
 *   <li>the memory lock ({@link MemoryManager#memoryLock()}): read side while a chunk is checked and
 *   registered, so its segments cannot be freed under the registration; write side for a memory free
 *   event, so the segments and the MRs covering them change together;</li>
 *   <li>{@link #cacheLock}: one writer of the MR table and the global cache at a time; held while
 *   registering, so N concurrent requests for one address create one MR (the later ones find it on their
 *   final lookup) and requests for overlapping ranges wait for the one in flight;</li>
 *   <li>the seqlock's write side, only around the stores that change what readers see: never around a
 *   registration (readers would spin for its whole duration).</li>
 * </ol>
 * Nothing is deregistered while any of these is held: {@link #garbageCollect()} takes the detached MRs off
 * the free list under the cache lock and deregisters them after releasing it, as the reference does
 * because a free inside the lock could re-enter the memory event callback.
 */
public final class MrEngine implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MrEngine.class);

    private final ControlFile controlFile;
    private final UnsafeBuffer buffer;
    private final ControlHeader header;
    private final ControlFileLayout layout;
    private final SeqLock seqLock;
    private final MemoryManager memory;
    private final Registrar registrar;
    private final DaemonCounters counters;
    private final DistinctErrorLog errorLog;
    private final boolean extendToContiguousChunk;
    private final long segmentSize;

    private final Lock cacheLock = new ReentrantLock();
    private final Lock slotLock = new ReentrantLock();
    /** Free MR record slots, lowest first so the table stays dense. Guarded by {@link #slotLock}. */
    private final BitSet usedSlots = new BitSet();
    /** Registration of each live slot (ACTIVE or DETACHED). Guarded by {@link #cacheLock}. */
    private final Registration[] registrations;
    /** Slots detached by memory events, waiting for {@link #garbageCollect()}. Guarded by {@link #cacheLock}. */
    private List<Integer> detached = new ArrayList<>();
    private final MrRecord record = new MrRecord();
    private final MrChunks chunks;
    private final MrEntry scratch = new MrEntry();
    private int highWater;
    private boolean closed;

    /**
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
        this.controlFile = controlFile;
        this.buffer = controlFile.buffer();
        this.header = controlFile.header();
        this.layout = controlFile.layout();
        this.seqLock = controlFile.seqLock();
        this.memory = memory;
        this.registrar = registrar;
        this.counters = counters;
        this.errorLog = errorLog;
        this.extendToContiguousChunk = extendToContiguousChunk;
        this.segmentSize = memory.segmentSize();
        this.registrations = new Registration[layout.mrCapacity()];
        this.chunks = new MrChunks(controlFile);
        seqLock.beginWrite();
        try
        {
            header.cacheLen(SortedTable.clear(buffer, layout.cacheOffset())).cacheOverflow(false).mrHighWater(0);
        }
        finally
        {
            seqLock.endWrite();
        }
    }

    public Registrar registrar()
    {
        return registrar;
    }

    public MemoryManager memory()
    {
        return memory;
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

    private MrEntry create(final long address, final int owner)
    {
        // Release detached MRs first, outside every lock (step 1).
        garbageCollect();

        if (closed)
        {
            throw new MrdException(ErrorCode.ENODEV, "the daemon is shutting down: no MR is created for " +
                Sizes.hex(address));
        }

        // Secondaries that missed on one buffer at once all ask for it; the later requests find the MR the first
        // one created. Answer them before taking a record: with the MR table full, takeSlot would fail them with
        // ENOMEM although their MR exists (step 5 below closes the race for the ones in flight). This also
        // answers addresses in external memory, which no memory-segment list holds.
        final MrEntry existing = new MrEntry();
        if (lookup(address, existing))
        {
            return existing;
        }

        // Step 2: the chunk around the address. The walk takes the memory lock itself; the chunk may change
        // before we use it, which step 4 detects.
        boolean singleSegment = !extendToContiguousChunk;
        Chunk chunk = findChunk(address, singleSegment);
        while (true)
        {

            // Step 3: the record and the bitmap are taken without the cache lock, as the reference allocates
            // them without its rwlock: allocation may be slow, lookups must not wait for it.
            final int slot = takeSlot(address);
            final BitSet bitmap = new BitSet(chunk.segmentCount());
            final Lock memoryRead = memory.memoryLock().readLock();
            memoryRead.lock();
            try
            {
                // Step 4: re-check under the memory lock. Segments may have been allocated or freed since the
                // walk; if the chunk changed, fall back to the single segment, which cannot change under us.
                final Chunk recheck = singleSegment ? memory.segmentOf(address) : memory.contiguousChunk(address);
                if (null == recheck)
                {
                    releaseSlot(slot);
                    throw notManaged(address);
                }
                if (recheck.start() != chunk.start() || recheck.end() != chunk.end())
                {
                    releaseSlot(slot);
                    singleSegment = true;
                    chunk = memory.segmentOf(address);
                    if (null == chunk)
                    {
                        throw notManaged(address);
                    }
                    continue;
                }
                cacheLock.lock();
                try
                {
                    return createLocked(address, owner, chunk, slot, bitmap);
                }
                finally
                {
                    cacheLock.unlock();
                }
            }
            finally
            {
                memoryRead.unlock();
            }
        }
    }

    private MrEntry createLocked(final long address, final int owner, final Chunk chunk, final int slot, final BitSet bitmap)
    {
        // Step 5: look again under the cache lock: a concurrent request may have created it meanwhile.
        final MrEntry entry = new MrEntry();
        if (lookupLocked(address, entry))
        {
            releaseSlot(slot);
            if (header.cacheOverflow())
            {
                return entry;
            }
            seqLock.beginWrite();
            try
            {
                insertCacheEntry(entry);
            }
            finally
            {
                seqLock.endWrite();
            }
            return entry;
        }

        // Step 6: exclude segments already registered by other MRs; trim to the first and last uncovered one.
        int first = -1;
        int last = -1;
        for (int n = 0; n < chunk.segmentCount(); n++)
        {
            if (!lookupLocked(chunk.start() + n * segmentSize, scratch))
            {
                if (first < 0)
                {
                    first = n;
                }
                last = n;
                bitmap.set(n);
            }
        }
        final long start = chunk.start() + first * segmentSize;
        final long end = chunk.start() + (last + 1) * segmentSize;

        // Step 7: register. The seqlock is not held, so readers go on; the memory read lock keeps the
        // segments alive and the cache lock keeps other writers out until the MR is in the table.
        final Registration registration;
        try
        {
            registration = registrar.register(start, end - start, Access.DEFAULT);
        }
        catch (final MrdException ex)
        {
            releaseSlot(slot);
            LOG.warn("registration of [{}, {}) for address {} failed: {}", Sizes.hex(start), Sizes.hex(end),
                Sizes.hex(address), ex.oneLine());
            throw ex;
        }
        catch (final RuntimeException ex)
        {
            releaseSlot(slot);
            errorLog.record(ex);
            throw new MrdException(ErrorCode.EIO, "provider " + registrar.name() + " failed registering [" +
                Sizes.hex(start) + ", " + Sizes.hex(end) + "): " + ex, ex);
        }

        // Step 8: publish the MR and its chunks.
        registrations[slot] = registration;
        publishLocked(slot, registration, chunk.listIndex(), chunk.firstSegment() + first,
            bitmap.get(first, last + 1), last - first + 1, 0, owner);
        LOG.debug("MR {} created for {}: [{}, {}) lkey {} msBaseIdx {} msN {} msBmpN {}", slot, Sizes.hex(address),
            Sizes.hex(start), Sizes.hex(end), Sizes.hex(registration.lkey() & 0xFFFF_FFFFL),
            chunk.firstSegment() + first, bitmap.cardinality(), last - first + 1);
        if (!lookupLocked(address, entry))
        {
            throw new IllegalStateException("MR " + slot + " created for " + Sizes.hex(address) + " but not found");
        }
        return entry;
    }

    /**
     * Registers external memory: one MR with no segment list (the reference's {@code mlx5_create_mr_ext}).
     *
     * @throws MrdException EINVAL for an empty or unaligned range, EEXIST when it overlaps a registered chunk.
     */
    public MrEntry registerExternal(final long address, final long length, final int owner)
    {
        if (length <= 0 || address <= 0 || address + length < address)
        {
            throw new MrdException(ErrorCode.EINVAL, "external range at " + Sizes.hex(address) + " of " + length +
                " bytes is empty or wraps");
        }
        garbageCollect();
        final int slot = takeSlot(address);
        cacheLock.lock();
        try
        {
            if (overlapsRegistered(address, address + length))
            {
                releaseSlot(slot);
                throw new MrdException(ErrorCode.EEXIST, "external range [" + Sizes.hex(address) + ", " +
                    Sizes.hex(address + length) + ") overlaps memory that is already registered");
            }
            final Registration registration;
            try
            {
                registration = registrar.register(address, length, Access.DEFAULT);
            }
            catch (final RuntimeException ex)
            {
                releaseSlot(slot);
                throw ex;
            }
            registrations[slot] = registration;
            final BitSet oneChunk = new BitSet(1);
            oneChunk.set(0);
            publishLocked(slot, registration, -1, 0, oneChunk, 1, MrDescriptor.FLAG_EXTERNAL, owner);
            counters.increment(MrdCounter.EXTERNAL_REGISTRATIONS);
            return new MrEntry().set(address, address + length, registration.lkey(), slot);
        }
        finally
        {
            cacheLock.unlock();
        }
    }

    /**
     * Deregisters the external MR that starts at {@code address}: a memory free event for that range.
     *
     * @param owner the client asking; only the owner (or the daemon, {@link MemsegListDescriptor#OWNER_DAEMON})
     *              may deregister.
     * @throws MrdException ENOENT when no external MR starts there, EPERM when another client owns it.
     */
    public void deregisterExternal(final long address, final int owner)
    {
        cacheLock.lock();
        try
        {
            int found = -1;
            for (int slot = 0; slot < highWater; slot++)
            {
                record.wrap(buffer, layout.mrOffset(slot));
                if (record.state() == MrDescriptor.STATE_ACTIVE && record.isExternal() && record.start() == address)
                {
                    found = slot;
                    break;
                }
            }
            if (found < 0)
            {
                throw new MrdException(ErrorCode.ENOENT, "no external memory is registered at " + Sizes.hex(address));
            }
            if (owner != MemsegListDescriptor.OWNER_DAEMON && record.owner() != owner)
            {
                throw new MrdException(ErrorCode.EPERM, "external memory at " + Sizes.hex(address) +
                    " belongs to client " + record.owner() + ", not " + owner);
            }
            seqLock.beginWrite();
            try
            {
                detachLocked(found);
                rebuildCacheLocked();
                bumpDevGen();
            }
            finally
            {
                seqLock.endWrite();
            }
            counters.increment(MrdCounter.MEMORY_EVENTS);
        }
        finally
        {
            cacheLock.unlock();
        }
        garbageCollect();
    }

    /**
     * @return the start addresses of the ACTIVE external MRs owned by {@code owner} (to reclaim a dead client's).
     */
    public List<Long> externalsOwnedBy(final int owner)
    {
        final List<Long> result = new ArrayList<>();
        cacheLock.lock();
        try
        {
            for (int slot = 0; slot < highWater; slot++)
            {
                record.wrap(buffer, layout.mrOffset(slot));
                if (record.state() == MrDescriptor.STATE_ACTIVE && record.isExternal() && record.owner() == owner)
                {
                    result.add(record.start());
                }
            }
        }
        finally
        {
            cacheLock.unlock();
        }
        return result;
    }

    /**
     * Allocates memory for a client (no MR is created: that happens on the first lookup that misses).
     *
     * @see MemoryManager#allocate(long, int)
     */
    public Allocation allocate(final long length, final int owner)
    {
        final Allocation allocation = memory.allocate(length, owner);
        counters.increment(MrdCounter.ALLOCS);
        counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
        return allocation;
    }

    /**
     * Frees memory the owner allocated, as a memory free event (DESIGN §4): segments and the MRs covering them
     * change together under the memory write lock; detached MRs are deregistered and the pages released after
     * every lock is dropped.
     */
    public FreedRange freeMemory(final long address, final long length, final int owner)
    {
        final FreedRange range;
        final Lock memoryWrite = memory.memoryLock().writeLock();
        memoryWrite.lock();
        try
        {
            range = memory.free(address, length, owner);
            onMemoryFreeLocked(List.of(range));
        }
        finally
        {
            memoryWrite.unlock();
        }
        garbageCollect();
        memory.release(range);
        counters.increment(MrdCounter.FREES);
        counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
        return range;
    }

    /**
     * Frees everything a client owned (it disconnected or died): its allocations and its external MRs.
     *
     * @return the ranges freed.
     */
    public List<FreedRange> reclaim(final int owner)
    {
        final List<FreedRange> ranges;
        final Lock memoryWrite = memory.memoryLock().writeLock();
        memoryWrite.lock();
        try
        {
            ranges = memory.freeAllOwnedBy(owner);
            if (!ranges.isEmpty())
            {
                onMemoryFreeLocked(ranges);
            }
        }
        finally
        {
            memoryWrite.unlock();
        }
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
        garbageCollect();
        ranges.forEach(memory::release);
        counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
        return ranges;
    }

    /**
     * The reference's {@code mlx5_mr_mem_event_free_cb}: clear the freed segments' bits in every MR covering
     * them, detach MRs left with none, rebuild the global cache and bump devGen so that every local cache
     * flushes. Caller holds the memory write lock.
     */
    private void onMemoryFreeLocked(final List<FreedRange> ranges)
    {
        cacheLock.lock();
        try
        {
            boolean rebuild = false;
            seqLock.beginWrite();
            try
            {
                for (int slot = 0; slot < highWater; slot++)
                {
                    record.wrap(buffer, layout.mrOffset(slot));
                    if (record.state() != MrDescriptor.STATE_ACTIVE || record.isExternal())
                    {
                        continue;
                    }
                    for (final FreedRange range : ranges)
                    {
                        if (record.listIndex() != range.listIndex())
                        {
                            continue;
                        }
                        for (int segment = range.firstSegment();
                            segment < range.firstSegment() + range.segmentCount(); segment++)
                        {
                            final int bit = segment - record.msBaseIdx();
                            if (bit >= 0 && bit < record.msBmpN() && record.bit(bit))
                            {
                                record.bit(bit, false);
                                record.msN(record.msN() - 1);
                                rebuild = true;
                            }
                        }
                    }
                    if (record.msN() == 0)
                    {
                        detachLocked(slot);
                    }
                }
                if (rebuild)
                {
                    rebuildCacheLocked();
                    bumpDevGen();
                }
            }
            finally
            {
                seqLock.endWrite();
            }
            counters.increment(MrdCounter.MEMORY_EVENTS);
        }
        finally
        {
            cacheLock.unlock();
        }
    }

    /**
     * Deregisters every detached MR. Takes them off the free list under the cache lock and releases them
     * after unlocking: a deregistration can be slow and must not hold up lookups or creates.
     */
    public void garbageCollect()
    {
        final List<Integer> collect;
        cacheLock.lock();
        try
        {
            if (detached.isEmpty())
            {
                return;
            }
            collect = detached;
            detached = new ArrayList<>();
        }
        finally
        {
            cacheLock.unlock();
        }
        for (final int slot : collect)
        {
            final Registration registration = registrations[slot];
            try
            {
                registrar.deregister(registration);
            }
            catch (final RuntimeException ex)
            {
                errorLog.record(ex);
                LOG.error("deregistration of MR {} failed (its record is released anyway)", slot, ex);
            }
            cacheLock.lock();
            try
            {
                registrations[slot] = null;
                // Under the cache lock, like registered(): a GC racing a registration must not leave a stale value.
                counters.set(MrdCounter.BYTES_PINNED, registrar.pinnedBytes());
                counters.add(MrdCounter.BYTES_REGISTERED, -registration.length());
                seqLock.beginWrite();
                try
                {
                    record.wrap(buffer, layout.mrOffset(slot));
                    record.bitmapOffset(layout.mrBitmapOffset(slot)).clear(layout.mrBitmapLength());
                }
                finally
                {
                    seqLock.endWrite();
                }
            }
            finally
            {
                cacheLock.unlock();
            }
            releaseSlot(slot);
            counters.increment(MrdCounter.MRS_DEREGISTERED);
        }
        counters.increment(MrdCounter.GC_RUNS);
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
            return lookupLocked(address, out);
        }
        finally
        {
            cacheLock.unlock();
        }
    }

    /**
     * @return the current devGen.
     */
    public long devGen()
    {
        return header.devGen();
    }

    /**
     * Tries to restore the fast path after an overflow: rebuilds the global cache if it is flagged.
     *
     * @return true when the cache now holds every chunk.
     */
    public boolean rebuildIfOverflowed()
    {
        cacheLock.lock();
        try
        {
            if (header.cacheOverflow())
            {
                seqLock.beginWrite();
                try
                {
                    rebuildCacheLocked();
                }
                finally
                {
                    seqLock.endWrite();
                }
            }
            return !header.cacheOverflow();
        }
        finally
        {
            cacheLock.unlock();
        }
    }

    /**
     * Releases every MR (graceful shutdown): all are detached, the cache emptied, then all deregistered.
     */
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
            seqLock.beginWrite();
            try
            {
                for (int slot = 0; slot < highWater; slot++)
                {
                    record.wrap(buffer, layout.mrOffset(slot));
                    if (record.state() == MrDescriptor.STATE_ACTIVE)
                    {
                        detachLocked(slot);
                    }
                }
                rebuildCacheLocked();
                bumpDevGen();
            }
            finally
            {
                seqLock.endWrite();
            }
        }
        finally
        {
            cacheLock.unlock();
        }
        garbageCollect();
        LOG.info("released all MRs: {} pinned bytes left", registrar.pinnedBytes());
    }

    /**
     * Step 8: writes the MR record and its bitmap, and inserts its chunks into the global cache, inside the
     * seqlock's write section. Caller holds the cache lock.
     *
     * @param liveBits the live segments, bit 0 being segment {@code msBaseIdx}.
     */
    @SuppressWarnings("checkstyle:ParameterNumber")
    private void publishLocked(
        final int slot,
        final Registration registration,
        final int listIndex,
        final int msBaseIdx,
        final BitSet liveBits,
        final int msBmpN,
        final int flags,
        final int owner)
    {
        seqLock.beginWrite();
        try
        {
            record.wrap(buffer, layout.mrOffset(slot));
            record.bitmapOffset(layout.mrBitmapOffset(slot)).clear(layout.mrBitmapLength());
            record.bitmapOffset(layout.mrBitmapOffset(slot))
                .lkey(registration.lkey())
                .rkey(registration.rkey())
                .listIndex(listIndex)
                .start(registration.address())
                .end(registration.address() + registration.length())
                .msBaseIdx(msBaseIdx)
                .msN(liveBits.cardinality())
                .msBmpN(msBmpN)
                .flags(flags)
                .owner(owner)
                .createdMs(System.currentTimeMillis());
            for (int n = liveBits.nextSetBit(0); n >= 0; n = liveBits.nextSetBit(n + 1))
            {
                record.bit(n, true);
            }
            record.state(MrDescriptor.STATE_ACTIVE);
            if (slot >= highWater)
            {
                highWater = slot + 1;
                header.mrHighWater(highWater);
            }
            insertMrChunks(slot);
            // Inside the write section: a reader that sees the MR also sees it counted (mrd check relies on it).
            registered(registration);
        }
        finally
        {
            seqLock.endWrite();
        }
    }

    private void registered(final Registration registration)
    {
        counters.increment(MrdCounter.MRS_CREATED);
        counters.increment(MrdCounter.MRS_ACTIVE);
        counters.add(MrdCounter.BYTES_REGISTERED, registration.length());
        counters.set(MrdCounter.BYTES_PINNED, registrar.pinnedBytes());
    }

    /**
     * Caller holds the cache lock and the seqlock's write side.
     */
    private void detachLocked(final int slot)
    {
        record.wrap(buffer, layout.mrOffset(slot)).state(MrDescriptor.STATE_DETACHED);
        detached.add(slot);
        counters.add(MrdCounter.MRS_ACTIVE, -1);
    }

    /**
     * The reference's {@code mlx5_mr_lookup_cache}: the global cache while it is complete, else the MR table.
     * Caller holds the cache lock (the data cannot change, so no seqlock read is needed).
     */
    private boolean lookupLocked(final long address, final MrEntry out)
    {
        if (header.cacheOverflow())
        {
            return chunks.scan(address, out);
        }
        final int index = SortedTable.lookup(buffer, layout.cacheOffset(), header.cacheLen(), address);
        if (index == SortedTable.NOT_FOUND)
        {
            return false;
        }
        out.set(SortedTable.start(buffer, layout.cacheOffset(), index), SortedTable.end(buffer, layout.cacheOffset(), index),
            SortedTable.lkey(buffer, layout.cacheOffset(), index), SortedTable.mr(buffer, layout.cacheOffset(), index));
        return true;
    }

    private boolean overlapsRegistered(final long start, final long end)
    {
        if (lookupLocked(start, scratch))
        {
            return true;
        }
        for (int slot = 0; slot < highWater; slot++)
        {
            record.wrap(buffer, layout.mrOffset(slot));
            if (record.state() == MrDescriptor.STATE_ACTIVE && record.start() < end && start < record.end())
            {
                for (int from = 0; from != Integer.MAX_VALUE; )
                {
                    from = chunks.next(slot, from, scratch);
                    if (scratch.end == 0)
                    {
                        break;
                    }
                    if (scratch.start < end && start < scratch.end)
                    {
                        return true;
                    }
                }
            }
        }
        return false;
    }

    /**
     * The reference's {@code mlx5_mr_insert_cache}: every chunk of the MR into the global cache. Caller holds
     * the cache lock and the seqlock's write side.
     */
    private void insertMrChunks(final int slot)
    {
        final MrEntry chunk = new MrEntry();
        for (int from = 0; from != Integer.MAX_VALUE && !header.cacheOverflow(); )
        {
            from = chunks.next(slot, from, chunk);
            if (chunk.end == 0)
            {
                break;
            }
            insertCacheEntry(chunk);
        }
    }

    private void insertCacheEntry(final MrEntry entry)
    {
        final int len = SortedTable.insert(buffer, layout.cacheOffset(), header.cacheLen(), layout.cacheCapacity(),
            entry.start, entry.end, entry.lkey, entry.mr);
        if (len == SortedTable.NOT_FOUND)
        {
            if (!header.cacheOverflow())
            {
                header.cacheOverflow(true);
                counters.increment(MrdCounter.CACHE_OVERFLOWS);
                LOG.warn("global cache full ({} entries, --cache-capacity): lookups fall back to scanning the MR " +
                    "table until a rebuild fits", layout.cacheCapacity());
            }
            return;
        }
        header.cacheLen(len);
        counters.set(MrdCounter.CACHE_ENTRIES, len - 1);
    }

    /**
     * The reference's {@code mlx5_mr_rebuild_cache}. Caller holds the cache lock and the seqlock's write side.
     */
    private void rebuildCacheLocked()
    {
        header.cacheLen(SortedTable.clear(buffer, layout.cacheOffset())).cacheOverflow(false);
        for (int slot = 0; slot < highWater && !header.cacheOverflow(); slot++)
        {
            record.wrap(buffer, layout.mrOffset(slot));
            if (record.state() == MrDescriptor.STATE_ACTIVE)
            {
                insertMrChunks(slot);
            }
        }
        counters.set(MrdCounter.CACHE_ENTRIES, header.cacheLen() - 1);
        counters.increment(MrdCounter.CACHE_REBUILDS);
    }

    private void bumpDevGen()
    {
        final long devGen = header.devGen() + 1;
        header.devGen(devGen);
        counters.set(MrdCounter.DEV_GEN, devGen);
    }

    private Chunk findChunk(final long address, final boolean singleSegment)
    {
        final Lock memoryRead = memory.memoryLock().readLock();
        memoryRead.lock();
        try
        {
            final Chunk chunk = singleSegment ? memory.segmentOf(address) : memory.contiguousChunk(address);
            if (null == chunk)
            {
                throw notManaged(address);
            }
            return chunk;
        }
        finally
        {
            memoryRead.unlock();
        }
    }

    private MrdException notManaged(final long address)
    {
        return new MrdException(ErrorCode.ENXIO, "address " + Sizes.hex(address) +
            " is not in memory allocated from mrd (lists span [" + Sizes.hex(memory.list(0).baseVa()) + ", " +
            Sizes.hex(memory.endVirtaddr()) + ")): allocate buffers with MrdClient.allocate or register them with " +
            "MrdClient.registerExternal");
    }

    private int takeSlot(final long address)
    {
        slotLock.lock();
        try
        {
            final int slot = usedSlots.nextClearBit(0);
            if (slot >= layout.mrCapacity())
            {
                throw new MrdException(ErrorCode.ENOMEM, "MR table full: " + layout.mrCapacity() +
                    " MRs (--max-mrs) exist, none left for " + Sizes.hex(address) +
                    ": free memory or start the daemon with a larger --max-mrs");
            }
            usedSlots.set(slot);
            return slot;
        }
        finally
        {
            slotLock.unlock();
        }
    }

    private void releaseSlot(final int slot)
    {
        slotLock.lock();
        try
        {
            usedSlots.clear(slot);
        }
        finally
        {
            slotLock.unlock();
        }
    }
}
