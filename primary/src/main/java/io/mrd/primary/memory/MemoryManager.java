package io.mrd.primary.memory;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.function.Function;

import static io.mrd.layout.MemsegListDescriptor.OWNER_DAEMON;

/**
 * The daemon's memory: {@link MemoryConfig#listCount()} memory-segment lists placed
 * {@link #listStride(int, long)} apart from {@link MemoryConfig#baseVirtaddr()}, first-fit allocation of
 * contiguous runs of segments for clients, and the contiguity queries the MR engine builds MRs from
 * (DPDK's {@code rte_memseg_contig_walk}).
 * <p>
 * Lists are placed twice their own length apart ({@link ListPlacement}): a chunk never spans two backing files.
 * <p>
 * A successor daemon adopts its predecessor's lists ({@link MemoryConfig#adoptedListFds()}): the same files,
 * whose descriptors the descriptor holder kept, mapped at the same addresses, their allocations read back from
 * the control file's list records; nothing is truncated.
 * <p>
 * <b>Locking.</b> One {@link ReentrantReadWriteLock}, the memory lock, plays the part of DPDK's memory
 * hotplug lock, and only this class takes it: {@link #allocate}, {@link #free} and {@link #freeAllOwnedBy}
 * for writing; {@link #withChunk} for reading, around the contiguity query and whatever the caller does with
 * the answer (the MR engine re-checks its chunk and places a hold there). Lookups of geometry
 * ({@link #listOf}, {@link #list}) need no lock.
 * <p>
 * <b>Holds.</b> Work that must outlive the memory lock on pages that must stay mapped (a registration pinning
 * them: it can take seconds, and every allocation and free would wait behind a lock held that long) places a
 * {@link SegmentHold} on their segments under {@link #withChunk} and releases the lock. A free of a held segment
 * then waits for the hold to go with no lock held at all, the memory lock released, so that every other
 * allocation, free and registration goes on; then it starts again from its checks. The holds' own lock is a
 * leaf ({@link SegmentHolds}), so no lock order involves it.
 * <p>
 * <b>Freeing is three steps</b> ({@link FreedRange}), so that the MR engine drops its MRs over the range
 * before its pages go: {@link #free} (or {@link #freeAllOwnedBy}) takes the segments out of use and tells
 * every {@link MemoryEventListener} under the write lock, and the caller, once it has deregistered what the
 * event detached, calls {@link #release} to give their pages back with no lock held.
 */
public final class MemoryManager implements AutoCloseable
{
    /** First address past the 47-bit user address space of x86-64 and arm64 with 4-level page tables. */
    public static final long USER_VA_END = 1L << 47;

    private final ReentrantReadWriteLock memoryLock = new ReentrantReadWriteLock();
    /**
     * Orders {@link #release} (read side, many at once) against {@link #close} (write side): a release racing
     * a close would otherwise re-reserve unmapped address space or punch a hole through a file descriptor
     * number that has been closed and reused.
     */
    private final ReentrantReadWriteLock lifecycleLock = new ReentrantReadWriteLock();
    private final ListPlacement placement;
    private final long segmentSize;
    private final int segmentShift;
    private final long listLength;
    private final long capacity;
    private final Optional<Path> hugeDir;
    private final BackingFiles backing;
    private final MemsegList[] lists;
    private final List<MemoryEventListener> listeners = new CopyOnWriteArrayList<>();
    private final SegmentHolds holds;
    private volatile long allocatedBytes;
    private boolean closed;

    /**
     * Reserves every list's address range and creates its backing file.
     *
     * @param config the geometry, backing directories and control file.
     * @throws MrdException EINVAL naming the setting that is wrong, EEXIST when a list's range is already
     *                      mapped (another {@code --base-virtaddr} is needed), or the failing call's errno.
     */
    public MemoryManager(final MemoryConfig config)
    {
        this.segmentSize = config.segmentSize();
        this.placement = new ListPlacement(config.baseVirtaddr(), segmentSize, config.segmentsPerList(),
            config.listCount());
        this.hugeDir = config.hugeDir();
        this.backing = new BackingFiles(hugeDir, config.memDir());
        final long pageSize = backing.pageSize();
        config.validate(pageSize);

        this.segmentShift = Long.numberOfTrailingZeros(segmentSize);
        this.listLength = placement.listLength();
        this.capacity = config.capacity();
        this.lists = new MemsegList[config.listCount()];
        this.holds = new SegmentHolds(config.listCount(), config.segmentsPerList());

        backing.prepare();
        try
        {
            for (int i = 0; i < lists.length; i++)
            {
                lists[i] = new MemsegList(i, placement.listBase(i), segmentSize, config.segmentsPerList(),
                    backing.path(i), backing.isHugetlbfs(), pageSize,
                    config.control(), config.layout().memsegListOffset(i), config.adoptedListFd(i));
                allocatedBytes += (long)lists[i].allocatedSegments() << segmentShift;
            }
        }
        catch (final RuntimeException ex)
        {
            for (final MemsegList list : lists)
            {
                if (null != list)
                {
                    list.close();
                }
            }
            throw ex;
        }
    }

    /**
     * @param segmentsPerList segments in each list.
     * @param segmentSize     bytes per segment.
     * @return the distance between the base addresses of two neighbouring lists ({@link ListPlacement}).
     */
    public static long listStride(final int segmentsPerList, final long segmentSize)
    {
        return ListPlacement.stride(segmentsPerList, segmentSize);
    }

    /** Registers a listener for memory free events (DPDK's {@code rte_mem_event_callback_register}). */
    public void addEventListener(final MemoryEventListener listener)
    {
        listeners.add(listener);
    }

    /** The lock itself, for this package's tests, which hold it around {@link #contiguousChunk}. */
    ReentrantReadWriteLock memoryLock()
    {
        return memoryLock;
    }

    /** Allocates for local access only ({@link Access#LOCAL}). @see #allocate(long, int, int) */
    public Allocation allocate(final long length, final int owner)
    {
        return allocate(length, owner, Access.LOCAL);
    }

    /**
     * Allocates a virtually contiguous run of whole segments, first fit: the lowest list, then the lowest
     * index, that has a run of enough free segments. Runs never span lists. The run is mapped read-write and
     * shared in the daemon when this returns ({@link MemsegListMapping}); its pages are zero. Its segments
     * record {@code access}, which decides what MRs cover them ({@link #contiguousChunk}).
     *
     * @param length bytes wanted, rounded up to whole segments.
     * @param owner  the client id, or {@link MemsegListDescriptor#OWNER_DAEMON}; must be positive.
     * @param access the {@link Access} the owner asked for; local write is added.
     * @return the run.
     * @throws MrdException EINVAL for a length or owner that is not positive or unknown access bits; ENOMEM
     *                      when the length exceeds a list, when no run is free (the message gives the largest
     *                      free run and {@code --max-memory}), or when the backing file system has no pages left.
     */
    public Allocation allocate(final long length, final int owner, final int access)
    {
        checkOwner(owner);
        final int granted = Access.granted(access, "allocation");
        if (length <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "cannot allocate " + length +
                " bytes: the length must be positive");
        }
        if (length > listLength)
        {
            throw AllocationRefusal.longerThanList(length, lists, segmentSize, capacity);
        }
        final int n = (int)((length + segmentSize - 1) >>> segmentShift);

        checkNoReadLockHeld("allocate");
        memoryLock.writeLock().lock();
        try
        {
            checkOpen();
            for (final MemsegList list : lists)
            {
                final int first = list.findFreeRun(n);
                if (first >= 0)
                {
                    final long bytes = (long)n << segmentShift;
                    BackingFiles.checkSpace(list, length, bytes);
                    backing.map(list, first, n, length);
                    listeners.forEach(l -> l.onAllocated(owner, list.segmentAddress(first), bytes, granted));
                    list.markAllocated(first, n, owner, granted);
                    allocatedBytes += bytes;
                    return new Allocation(list.index(), first, n, list.segmentAddress(first), bytes, owner, granted);
                }
            }
            throw AllocationRefusal.noFreeRun(length, n, lists, segmentSize, capacity);
        }
        finally
        {
            memoryLock.writeLock().unlock();
        }
    }

    /**
     * Steps 1 and 2 of freeing (see the class comment): takes {@code [address, address + length)} out of use
     * and tells the listeners. The caller must then call {@link #release} with the returned range.
     *
     * @param address first address: a segment boundary inside a list.
     * @param length  bytes, rounded up to whole segments; the range must lie inside one list.
     * @param owner   the client freeing; {@link MemsegListDescriptor#OWNER_DAEMON} may free any segment.
     * @return the range taken out of use, once no {@link SegmentHold} is on any of its segments (until then it
     *         waits, with no lock held).
     * @throws MrdException ENXIO when the address is outside managed memory; EINVAL when it is not on a segment
     *                      boundary, the length is not positive or runs past the list, or a segment is not
     *                      allocated; EPERM when a segment is owned by another client.
     */
    public FreedRange free(final long address, final long length, final int owner)
    {
        checkOwner(owner);
        checkNoReadLockHeld("free");
        while (true)
        {
            final SegmentRun run;
            memoryLock.writeLock().lock();
            try
            {
                checkOpen();
                final MemsegList list = listOf(address);
                if (null == list)
                {
                    throw new MrdException(ErrorCode.ENXIO, "cannot free " + Sizes.hex(address) +
                        ": the address is outside managed memory (" + placement + ")");
                }
                FreeRefusal.check(list, address, length, owner);
                run = new SegmentRun(list.index(), list.segmentIndex(address),
                    (int)((length + segmentSize - 1) >>> segmentShift));
                if (!holds.anyHeld(run))
                {
                    final FreedRange range = takeOutOfUse(run, owner);
                    notifyFree(List.of(range));
                    return range;
                }
            }
            finally
            {
                memoryLock.writeLock().unlock();
            }
            // A registration pins some of these segments: wait for it with no lock held (it takes the cache lock
            // to publish, and other requests go on meanwhile), then check again from the start, as another free
            // may have taken the segments meanwhile.
            holds.awaitReleased(run);
        }
    }

    /**
     * Steps 1 and 2 of freeing for a client that has gone: takes every segment it owns out of use and tells
     * the listeners, once, when there was any, and once no {@link SegmentHold} is on any of them (as {@link #free}
     * waits). Each returned range is a maximal run of its segments and goes to {@link #release} like the result
     * of {@link #free}.
     *
     * @param owner the dead client's id.
     * @return the ranges taken out of use, by list and address; empty when it owned nothing.
     */
    public List<FreedRange> freeAllOwnedBy(final int owner)
    {
        checkOwner(owner);
        checkNoReadLockHeld("freeAllOwnedBy");
        while (true)
        {
            final SegmentRun held;
            memoryLock.writeLock().lock();
            try
            {
                if (closed)
                {
                    return List.of();
                }
                final List<SegmentRun> runs = new ArrayList<>();
                for (final MemsegList list : lists)
                {
                    list.addRunsOwnedBy(owner, runs);
                }
                held = runs.stream().filter(holds::anyHeld).findFirst().orElse(null);
                if (null == held)
                {
                    final List<FreedRange> freed = runs.stream().map(r -> takeOutOfUse(r, owner)).toList();
                    if (!freed.isEmpty())
                    {
                        notifyFree(freed);
                    }
                    return freed;
                }
            }
            finally
            {
                memoryLock.writeLock().unlock();
            }
            // As free: all of the client's memory goes in one event, once no registration pins any of it.
            holds.awaitReleased(held);
        }
    }

    /**
     * Step 3 of freeing: gives the range's pages back to the system (on hugetlbfs after unmapping it back to
     * reserved address space), then makes its segments free for allocation. Call exactly once per
     * {@link FreedRange}, after {@link #free} returned it, and without holding the memory lock: the unmap and
     * the hole punch run with no lock held, so that slow page release never stalls lookups or allocations.
     * A no-op after {@link #close}.
     *
     * @param range what {@link #free} or {@link #freeAllOwnedBy} returned.
     * @throws MrdException when unmapping or punching fails; the segments then stay withheld from allocation.
     * @throws IllegalStateException when the range is not one being freed (released twice, or made up).
     */
    public void release(final FreedRange range)
    {
        checkNoReadLockHeld("release");
        lifecycleLock.readLock().lock();
        try
        {
            memoryLock.readLock().lock();
            try
            {
                // closed is set under the memory lock, and cannot become true while the lifecycle lock is held
                if (closed)
                {
                    return;
                }
                lists[range.listIndex()].checkReleasing(range);
            }
            finally
            {
                memoryLock.readLock().unlock();
            }
            final MemsegList list = lists[range.listIndex()];
            list.unmapAndPunch(range.firstSegment(), range.segmentCount());

            memoryLock.writeLock().lock();
            try
            {
                list.markFree(range.firstSegment(), range.segmentCount());
            }
            finally
            {
                memoryLock.writeLock().unlock();
            }
        }
        finally
        {
            lifecycleLock.readLock().unlock();
        }
    }

    /**
     * Runs {@code use} on the chunk around {@code address} with the memory lock held for reading: the chunk
     * stays true until {@code use} returns, since no allocation or free can run meanwhile (DPDK's
     * {@code rte_mcfg_mem_read_lock} around {@code rte_memseg_contig_walk}). {@code use} must not allocate or
     * free: a read lock cannot be upgraded, and both fail rather than deadlock.
     *
     * @param address    any address.
     * @param contiguous true for the maximal run of allocated segments around it ({@link #contiguousChunk}),
     *                   false for its one segment ({@link #segmentOf}).
     * @param use        given the chunk, or null when the address is not in an allocated segment.
     * @return what {@code use} returned.
     */
    public <T> T withChunk(final long address, final boolean contiguous, final Function<Chunk, T> use)
    {
        memoryLock.readLock().lock();
        try
        {
            return use.apply(contiguous ? contiguousChunk(address) : segmentOf(address));
        }
        finally
        {
            memoryLock.readLock().unlock();
        }
    }

    /**
     * Places a hold on {@code [firstSegment, firstSegment + segmentCount)} of the chunk's list: a free of any of
     * them waits until {@link SegmentHold#release}. Call inside {@link #withChunk}, on segments of its chunk
     * (allocated, and no free can run before the hold is in place). Release the hold on every way out.
     */
    public SegmentHold hold(final Chunk chunk, final int firstSegment, final int segmentCount)
    {
        assert holdsMemoryLock() && firstSegment >= chunk.firstSegment() && segmentCount > 0 &&
            firstSegment + segmentCount <= chunk.firstSegment() + chunk.segmentCount() : "hold outside " + chunk;
        return holds.place(chunk.listIndex(), firstSegment, segmentCount);
    }

    /** @return holds on all segments together: 0 when no registration is in flight. */
    public int holdCount()
    {
        return holds.holdCount();
    }

    /**
     * The maximal run of allocated segments (of any owners) around {@code address} within its list that may
     * share an MR: the virtually contiguous chunk the MR engine registers, as {@code rte_memseg_contig_walk}
     * finds it in DPDK, stopped at segments of other access ({@link MemsegList#chunkAround}). Chunks never
     * span lists. Call with the memory lock held (read or write) and keep holding it while using the answer:
     * it is only true while no allocation or free can run.
     *
     * @param address any address.
     * @return the chunk, or null when the address is not in an allocated segment.
     */
    Chunk contiguousChunk(final long address)
    {
        final Chunk single = segmentOf(address);
        return null == single ? null : lists[single.listIndex()].chunkAround(single.firstSegment());
    }

    /**
     * The single allocated segment holding {@code address} (the MR engine's fallback when the chunk changed
     * under it). Call with the memory lock held.
     *
     * @param address any address.
     * @return the segment as a one-segment chunk, or null when the address is not in an allocated segment.
     */
    Chunk segmentOf(final long address)
    {
        assert holdsMemoryLock() : "segmentOf needs the memory lock";
        final MemsegList list = listOf(address);
        if (null == list || closed)
        {
            return null;
        }
        final int segment = list.segmentIndex(address);
        return list.isAllocated(segment) ? list.chunkOf(segment, segment) : null;
    }

    /**
     * @param index a list index.
     * @return the list.
     */
    public MemsegList list(final int index)
    {
        return lists[index];
    }

    /** @return number of lists. */
    public int listCount()
    {
        return lists.length;
    }

    /**
     * @param address any address.
     * @return the list whose reservation holds it, or null (outside all lists, or in a gap between them).
     */
    public MemsegList listOf(final long address)
    {
        final int index = placement.indexOf(address);
        return index < 0 ? null : lists[index];
    }

    /** @return bytes in allocated segments (freed segments stop counting at {@link #free}). */
    public long bytesAllocated()
    {
        return allocatedBytes;
    }

    /** @return bytes all lists hold together: {@code --max-memory}. */
    public long capacity()
    {
        return capacity;
    }

    /** @return bytes per segment. */
    public long segmentSize()
    {
        return segmentSize;
    }

    /** @return first address of list 0. */
    public long baseVirtaddr()
    {
        return placement.base();
    }

    /**
     * @return first address past the last list, where the daemon may place its external-memory window
     * (leaving a gap keeps the window from being virtually contiguous with the last list).
     */
    public long endVirtaddr()
    {
        return placement.end();
    }

    /** @return the hugetlbfs directory the lists are backed from, or empty for tmpfs. */
    public Optional<Path> hugeDir()
    {
        return hugeDir;
    }

    /** Unmaps every list and deletes the backing files; waits for releases in flight. Idempotent. */
    public void close()
    {
        lifecycleLock.writeLock().lock();
        try
        {
            memoryLock.writeLock().lock();
            try
            {
                if (!closed)
                {
                    closed = true;
                    for (final MemsegList list : lists)
                    {
                        list.close();
                    }
                    allocatedBytes = 0;
                }
            }
            finally
            {
                memoryLock.writeLock().unlock();
            }
        }
        finally
        {
            lifecycleLock.writeLock().unlock();
        }
    }

    public String toString()
    {
        return "MemoryManager{" + placement + ", " +
            hugeDir.map(d -> "hugetlbfs " + d).orElse("tmpfs") + ", allocated " + Sizes.format(allocatedBytes) +
            " of " + Sizes.format(capacity) + "}";
    }

    private FreedRange takeOutOfUse(final SegmentRun run, final int owner)
    {
        final MemsegList list = lists[run.listIndex()];
        final long bytes = (long)run.segmentCount() << segmentShift;
        listeners.forEach(l -> l.onTakenOutOfUse(owner, list.segmentAddress(run.firstSegment()), bytes));
        list.markReleasing(run.firstSegment(), run.segmentCount());
        allocatedBytes -= bytes;
        return new FreedRange(list.index(), run.firstSegment(), run.segmentCount(),
            list.segmentAddress(run.firstSegment()), bytes);
    }

    /**
     * Under the write lock, as DPDK calls its memory event callbacks under the hotplug lock: the segments and
     * everything built on them change together.
     */
    private void notifyFree(final List<FreedRange> ranges)
    {
        listeners.forEach(listener -> listener.onFree(ranges));
    }

    private static void checkOwner(final int owner)
    {
        if (owner <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "owner " + owner + " is not a client id: ids are positive (" +
                OWNER_DAEMON + " for the daemon itself)");
        }
    }

    private void checkOpen()
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.ENODEV, "the daemon's memory has been released: it is shutting down");
        }
    }

    /**
     * A ReentrantReadWriteLock cannot be upgraded: taking the write lock while holding the read lock would
     * hang this thread forever, so fail loudly instead.
     */
    private void checkNoReadLockHeld(final String operation)
    {
        if (memoryLock.getReadHoldCount() > 0)
        {
            throw new IllegalStateException(operation + " called with the memory read lock held: it would deadlock");
        }
    }

    private boolean holdsMemoryLock()
    {
        return memoryLock.getReadHoldCount() > 0 || memoryLock.isWriteLockedByCurrentThread();
    }
}
