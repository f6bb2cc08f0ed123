package io.mrd.secondary.pool;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.secondary.MrdClient;

import java.util.ArrayList;
import java.util.List;
import java.util.StringJoiner;

/**
 * A pool of registered buffers smaller than the daemon's 2 MiB allocations: size classes by doubling from
 * {@link PoolContext#minClassSize()} to {@link PoolContext#maxClassSize()}, each carving slabs of
 * {@link PoolContext#slabSize()} from a {@link SlabSource} (a client's {@link MrdClient#allocateRegistered}:
 * the slab's keys come in the reply), so every {@link PooledBuffer} carries its slab's lkey and rkey and never
 * needs a lookup. A request above the largest class gets a registered allocation of its own, given back to
 * the daemon when it is released.
 * <pre>{@code
 * try (BufferPool pool = BufferPool.open(client, new PoolContext().access(Access.REMOTE_WRITE)))
 * {
 *     PooledBuffer buffer = pool.acquire(8192);      // 8 KiB class
 *     post(buffer.address(), 8192, buffer.lkey());    // no lookup
 *     buffer.release();
 * }
 * }</pre>
 * <b>Threads.</b> Each thread keeps a magazine of free buffers per class ({@link ThreadCache}): the common
 * acquire and release touch only it (no lock, no atomic but the buffer's own state word). A miss takes a
 * batch from the class's shared free list under its lock; an empty list first takes back the magazines of
 * threads that died, then allocates a slab without holding any lock. A buffer may be released by any thread;
 * it joins that thread's magazine.
 * <p>
 * <b>Lifetime.</b> Slabs stay allocated until {@link #close()}, which gives them back to the daemon. Closing
 * a pool while buffers are still acquired fails (EBUSY, naming them) and leaves the pool open, since their
 * owners may still write to the memory; release them and close again. Close only after every other thread
 * stopped using the pool. If the process dies, the daemon frees the slabs with the client's other memory.
 */
public final class BufferPool implements AutoCloseable
{
    private static final int NAMED_IN_ERRORS = 4;

    private final PoolContext context;
    private final SlabSource source;
    /** The source's check of its daemon, made by every acquire and every buffer's keys. */
    final DaemonLiveness liveness;
    private final SizeClass[] classes;
    private final int[] magazineCapacities;
    private final int minShift;
    private final ThreadLocal<ThreadCache> caches = ThreadLocal.withInitial(this::newCache);
    /** Guards slabs, threadCaches, nextSlabId and the change to closed; never held while allocating or freeing. */
    private final Object lock = new Object();
    private final List<Slab> slabs = new ArrayList<>();
    private final List<ThreadCache> threadCaches = new ArrayList<>();
    private long nextSlabId;
    private volatile boolean closed;

    private BufferPool(final SlabSource source, final PoolContext context)
    {
        this.context = context;
        this.source = source;
        this.liveness = source.liveness();
        this.minShift = Integer.numberOfTrailingZeros(context.minClassSize());
        classes = new SizeClass[context.classCount()];
        magazineCapacities = new int[classes.length];
        for (int i = 0; i < classes.length; i++)
        {
            final int capacity = context.minClassSize() << i;
            magazineCapacities[i] = context.magazineCapacity(capacity);
            classes[i] = new SizeClass(i, capacity, magazineCapacities[i]);
        }
    }

    /**
     * @return a pool of {@code client}'s registered memory; it allocates nothing until the first acquire.
     */
    public static BufferPool open(final MrdClient client, final PoolContext context)
    {
        return open(SlabSource.of(client), context);
    }

    /**
     * @return a pool of the memory {@code source} gives.
     * @throws MrdException EINVAL naming a wrong setting.
     */
    public static BufferPool open(final SlabSource source, final PoolContext context)
    {
        return new BufferPool(source, context.conclude());
    }

    /**
     * @param size bytes wanted, at least 1.
     * @return a buffer of the smallest class that holds {@code size} (above the largest class: a registered
     *         allocation of its own, {@code size} bytes).
     * @throws MrdException EINVAL for a size under 1; EBADF once the pool is closed; {@link DaemonDeadException}
     *                      once the daemon is lost ({@link DaemonLiveness}); the daemon's status when a new slab
     *                      cannot be allocated (ENOMEM, ...).
     */
    public PooledBuffer acquire(final int size)
    {
        if (closed)
        {
            throw closedError("acquire");
        }
        liveness.requireAlive();
        if (size <= context.minClassSize())
        {
            if (size <= 0)
            {
                throw new MrdException(ErrorCode.EINVAL, "pool acquire of " + size + " bytes: ask for 1 or more");
            }
            return acquireOfClass(0);
        }
        if (size > context.maxClassSize())
        {
            return acquireDedicated(size);
        }
        return acquireOfClass(32 - Integer.numberOfLeadingZeros(size - 1) - minShift);
    }

    private PooledBuffer acquireOfClass(final int classIndex)
    {
        final ThreadCache cache = caches.get();
        BufferSlot slot = cache.pop(classIndex);
        if (null == slot)
        {
            slot = refill(classIndex, cache);
        }
        return slot.acquire();
    }

    private BufferSlot refill(final int classIndex, final ThreadCache cache)
    {
        final SizeClass sizeClass = classes[classIndex];
        while (true)
        {
            final BufferSlot slot = sizeClass.take(cache);
            if (null != slot)
            {
                return slot;
            }
            if (!reclaimDeadThreads())
            {
                // Two threads may both find the list empty and both add a slab: one slab more, never less.
                addSlab(classIndex);
            }
        }
    }

    private void addSlab(final int classIndex)
    {
        final SlabMemory memory = source.allocate(context.slabSize(), context.access());
        final Slab slab;
        synchronized (lock)
        {
            if (closed)
            {
                slab = null;
            }
            else
            {
                slab = new Slab(this, nextSlabId++, memory, classIndex, classes[classIndex].capacity);
                slabs.add(slab);
            }
        }
        if (null == slab)
        {
            source.free(memory);
            throw closedError("acquire");
        }
        classes[classIndex].putAll(slab.slots, 0, slab.slots.length);
    }

    private PooledBuffer acquireDedicated(final int size)
    {
        final long length = (size + PoolContext.SEGMENT_SIZE - 1) / PoolContext.SEGMENT_SIZE * PoolContext.SEGMENT_SIZE;
        final SlabMemory memory = source.allocate(length, context.access());
        final Slab slab;
        synchronized (lock)
        {
            slab = closed ? null : new Slab(this, nextSlabId++, memory, Slab.DEDICATED, size);
            if (null != slab)
            {
                slabs.add(slab);
            }
        }
        if (null == slab)
        {
            source.free(memory);
            throw closedError("acquire");
        }
        return slab.slots[0].acquire();
    }

    /** A handle's release succeeded: its slot is the pool's again. */
    void released(final BufferSlot slot)
    {
        final int classIndex = slot.slab.classIndex;
        if (Slab.DEDICATED == classIndex)
        {
            synchronized (lock)
            {
                slabs.remove(slot.slab);
            }
            source.free(slot.slab.memory);
            return;
        }
        final ThreadCache cache = caches.get();
        if (!cache.push(classIndex, slot))
        {
            classes[classIndex].flush(cache, slot);
        }
    }

    private ThreadCache newCache()
    {
        final ThreadCache cache = new ThreadCache(Thread.currentThread(), magazineCapacities);
        synchronized (lock)
        {
            threadCaches.add(cache);
        }
        return cache;
    }

    /**
     * Empties the magazines of threads that died into the shared lists.
     *
     * @return whether any buffer came back.
     */
    private boolean reclaimDeadThreads()
    {
        boolean any = false;
        synchronized (lock)
        {
            for (int i = threadCaches.size() - 1; i >= 0; i--)
            {
                final ThreadCache cache = threadCaches.get(i);
                if (cache.isOwnerDead())
                {
                    for (int c = 0; c < cache.classCount(); c++)
                    {
                        final int n = cache.count(c);
                        if (n > 0)
                        {
                            cache.drain(c, n, classes[c]);
                            any = true;
                        }
                    }
                    threadCaches.remove(i);
                }
            }
        }
        return any;
    }

    /**
     * Gives every slab back to the source (the daemon), unless buffers are still acquired. Idempotent. Call it
     * after every other thread stopped using the pool. Once the daemon is lost (or the client closed) it gives
     * nothing back and succeeds: the daemon's end frees the slabs, and the client's close unmaps them.
     *
     * @throws MrdException EBUSY naming the buffers still acquired: nothing was freed and the pool stays open;
     *                      the source's error of the first free that failed (the others were still tried).
     */
    public void close()
    {
        final List<Slab> toFree;
        synchronized (lock)
        {
            if (closed)
            {
                return;
            }
            final StringJoiner named = new StringJoiner(", ");
            long out = 0;
            for (final Slab slab : slabs)
            {
                for (final BufferSlot slot : slab.slots)
                {
                    if (slot.isAcquired() && out++ < NAMED_IN_ERRORS)
                    {
                        named.add(slot.describe());
                    }
                }
            }
            if (out > 0)
            {
                throw new MrdException(ErrorCode.EBUSY, "pool close: " + out + " buffer(s) still acquired (" + named +
                    (out > NAMED_IN_ERRORS ? ", ..." : "") + "): release them first; the pool stays open and " +
                    "keeps its memory");
            }
            closed = true;
            toFree = new ArrayList<>(slabs);
            slabs.clear();
            threadCaches.clear();
        }
        caches.remove();
        RuntimeException failure = null;
        for (final Slab slab : toFree)
        {
            if (!sourceIsLive())
            {
                break;
            }
            try
            {
                source.free(slab.memory);
            }
            catch (final RuntimeException ex)
            {
                if (null == failure && sourceIsLive())
                {
                    failure = ex;
                }
            }
        }
        if (null != failure)
        {
            throw failure;
        }
    }

    /** @return false once the source's daemon is lost or its client closed: then there is nothing to give back. */
    private boolean sourceIsLive()
    {
        try
        {
            liveness.requireAlive();
            return true;
        }
        catch (final MrdException ex)
        {
            return false;
        }
    }

    private MrdException closedError(final String what)
    {
        return new MrdException(ErrorCode.EBADF, "pool " + what + " after close: the pool gave its memory back; " +
            "open a new pool");
    }

    /** @return the settings, concluded. */
    public PoolContext context()
    {
        return context;
    }

    /** @return whether {@link #close()} succeeded. */
    public boolean isClosed()
    {
        return closed;
    }

    /** @return the slabs allocated now (each with its keys), in allocation order. */
    public List<SlabMemory> slabs()
    {
        synchronized (lock)
        {
            return slabs.stream().map(slab -> slab.memory).toList();
        }
    }

    /** @return bytes of slab memory allocated now. */
    public long allocatedBytes()
    {
        synchronized (lock)
        {
            return slabs.stream().mapToLong(slab -> slab.memory.segment().byteSize()).sum();
        }
    }

    /** @return buffers acquired and not released now (a scan of every slot: for tests and diagnostics). */
    public long acquiredBuffers()
    {
        synchronized (lock)
        {
            long out = 0;
            for (final Slab slab : slabs)
            {
                for (final BufferSlot slot : slab.slots)
                {
                    out += slot.isAcquired() ? 1 : 0;
                }
            }
            return out;
        }
    }

    /** @return buffers in the slabs of the class of {@code capacity} (for tests). */
    long slotsOfClass(final int capacity)
    {
        synchronized (lock)
        {
            return slabs.stream().filter(slab -> Slab.DEDICATED != slab.classIndex &&
                classes[slab.classIndex].capacity == capacity).mapToLong(slab -> slab.slots.length).sum();
        }
    }

    /** @return the capacity of the class {@code size} falls in, or {@code size} above the largest class. */
    public int classCapacity(final int size)
    {
        return size <= context.minClassSize() ? context.minClassSize() :
            size > context.maxClassSize() ? size : Integer.highestOneBit(size - 1) << 1;
    }

    public String toString()
    {
        synchronized (lock)
        {
            return "BufferPool[" + slabs.size() + " slabs, " + Sizes.describe(allocatedBytes()) + ", " +
                source + (closed ? ", closed" : "") + ", " + context + "]";
        }
    }
}
