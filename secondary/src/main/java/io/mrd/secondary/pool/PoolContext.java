package io.mrd.secondary.pool;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;

/**
 * Every setting of a {@link BufferPool} with its default, checked by {@link #conclude()}, printed whole by
 * {@link #toString()}. The pool is a library object inside an application, so its settings come from the
 * code that makes it, not from the environment.
 * <ul>
 *   <li>{@code minClassSize}: the smallest size class, a power of two from {@value #MIN_CLASS_SIZE_FLOOR}
 *       bytes; default {@value #DEFAULT_MIN_CLASS_SIZE};</li>
 *   <li>{@code maxClassSize}: the largest size class, a power of two up to {@code slabSize}; default
 *       {@value #DEFAULT_MAX_CLASS_SIZE}. Larger requests get a registered allocation of their own;</li>
 *   <li>{@code slabSize}: the registered allocation a size class carves into buffers, a multiple of the
 *       daemon's {@value #SEGMENT_SIZE}-byte segment (the daemon rounds every allocation up to one); default
 *       {@value #DEFAULT_SLAB_SIZE};</li>
 *   <li>{@code threadCacheBuffers}: the most free buffers of one class a thread keeps for itself (0: no
 *       per-thread cache, every acquire and release takes the class's lock); default
 *       {@value #DEFAULT_THREAD_CACHE_BUFFERS};</li>
 *   <li>{@code threadCacheBytes}: the most bytes of one class a thread keeps, so that large classes keep few
 *       buffers (a thread keeps at least one of each class it uses); default {@value #DEFAULT_THREAD_CACHE_BYTES};</li>
 *   <li>{@code access}: the {@link Access} flags every slab is allocated and registered with:
 *       {@link Access#LOCAL} (no rkey) or remote flags; default {@link Access#LOCAL}.</li>
 * </ul>
 */
public final class PoolContext
{
    /** The daemon's allocation unit: a slab of another size wastes the rest of its last segment. */
    public static final long SEGMENT_SIZE = 2 * Sizes.MIB;
    /** A cache line: smaller buffers would share lines between owners. */
    public static final int MIN_CLASS_SIZE_FLOOR = 64;
    public static final int DEFAULT_MIN_CLASS_SIZE = 4096;
    public static final int DEFAULT_MAX_CLASS_SIZE = 1 << 20;
    public static final long DEFAULT_SLAB_SIZE = SEGMENT_SIZE;
    public static final int DEFAULT_THREAD_CACHE_BUFFERS = 64;
    public static final int DEFAULT_THREAD_CACHE_BYTES = 1 << 20;
    /** A slab's slot count is an int, and one allocation of more would hold memory that one class rarely needs. */
    public static final long MAX_SLAB_SIZE = 1L << 30;

    private int minClassSize = DEFAULT_MIN_CLASS_SIZE;
    private int maxClassSize = DEFAULT_MAX_CLASS_SIZE;
    private long slabSize = DEFAULT_SLAB_SIZE;
    private int threadCacheBuffers = DEFAULT_THREAD_CACHE_BUFFERS;
    private int threadCacheBytes = DEFAULT_THREAD_CACHE_BYTES;
    private int access = Access.LOCAL;
    private boolean concluded;

    /** @param bytes the smallest size class, a power of two. */
    public PoolContext minClassSize(final int bytes)
    {
        this.minClassSize = bytes;
        return this;
    }

    public int minClassSize()
    {
        return minClassSize;
    }

    /** @param bytes the largest size class, a power of two at most the slab size. */
    public PoolContext maxClassSize(final int bytes)
    {
        this.maxClassSize = bytes;
        return this;
    }

    public int maxClassSize()
    {
        return maxClassSize;
    }

    /** @param bytes the size of each registered allocation the pool carves, a multiple of 2 MiB. */
    public PoolContext slabSize(final long bytes)
    {
        this.slabSize = bytes;
        return this;
    }

    public long slabSize()
    {
        return slabSize;
    }

    /** @param buffers the most free buffers of one class a thread keeps, 0 for no per-thread cache. */
    public PoolContext threadCacheBuffers(final int buffers)
    {
        this.threadCacheBuffers = buffers;
        return this;
    }

    public int threadCacheBuffers()
    {
        return threadCacheBuffers;
    }

    /** @param bytes the most bytes of one class a thread keeps (at least one buffer when caching is on). */
    public PoolContext threadCacheBytes(final int bytes)
    {
        this.threadCacheBytes = bytes;
        return this;
    }

    public int threadCacheBytes()
    {
        return threadCacheBytes;
    }

    /** @param flags {@link Access} flags of every slab, e.g. {@code Access.REMOTE_WRITE | Access.REMOTE_READ}. */
    public PoolContext access(final int flags)
    {
        this.access = flags;
        return this;
    }

    /** @return the flags as asked; the slabs' MRs have these plus {@link Access#LOCAL_WRITE}. */
    public int access()
    {
        return access;
    }

    /** @return the number of size classes, {@code minClassSize} to {@code maxClassSize} by doubling. */
    public int classCount()
    {
        return Integer.numberOfTrailingZeros(maxClassSize) - Integer.numberOfTrailingZeros(minClassSize) + 1;
    }

    /**
     * @return how many free buffers of a class of {@code capacity} bytes a thread keeps.
     */
    int magazineCapacity(final int capacity)
    {
        return 0 == threadCacheBuffers ? 0 : Math.max(1, Math.min(threadCacheBuffers, threadCacheBytes / capacity));
    }

    /**
     * Checks every value. Idempotent.
     *
     * @throws MrdException EINVAL naming the first wrong value and what it must be.
     */
    public PoolContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        powerOfTwo("minClassSize", minClassSize);
        powerOfTwo("maxClassSize", maxClassSize);
        if (minClassSize < MIN_CLASS_SIZE_FLOOR)
        {
            throw new MrdException(ErrorCode.EINVAL, "pool minClassSize " + minClassSize + " is under " +
                MIN_CLASS_SIZE_FLOOR + " bytes (a cache line): buffers would share cache lines");
        }
        if (maxClassSize < minClassSize)
        {
            throw new MrdException(ErrorCode.EINVAL, "pool maxClassSize " + maxClassSize + " is under minClassSize " +
                minClassSize + ": give a maxClassSize of at least " + minClassSize);
        }
        if (slabSize <= 0 || slabSize % SEGMENT_SIZE != 0 || slabSize > MAX_SLAB_SIZE)
        {
            throw new MrdException(ErrorCode.EINVAL, "pool slabSize " + slabSize + " must be a multiple of " +
                Sizes.format(SEGMENT_SIZE) + " (the daemon's segment) up to " + Sizes.format(MAX_SLAB_SIZE));
        }
        if (maxClassSize > slabSize)
        {
            throw new MrdException(ErrorCode.EINVAL, "pool maxClassSize " + Sizes.format(maxClassSize) +
                " is larger than slabSize " + Sizes.format(slabSize) + ": a slab must hold one buffer of each class");
        }
        if (threadCacheBuffers < 0 || threadCacheBytes < 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "pool threadCacheBuffers " + threadCacheBuffers +
                " and threadCacheBytes " + threadCacheBytes + " must not be negative (0 turns the thread cache off)");
        }
        access = Access.granted(access, "pool");
        concluded = true;
        return this;
    }

    private static void powerOfTwo(final String what, final int value)
    {
        if (value <= 0 || Integer.bitCount(value) != 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "pool " + what + " " + value + " is not a power of two: give " +
                "e.g. " + Integer.highestOneBit(Math.max(value, MIN_CLASS_SIZE_FLOOR)));
        }
    }

    public String toString()
    {
        return "PoolContext{minClassSize=" + minClassSize + ", maxClassSize=" + maxClassSize + ", slabSize=" +
            slabSize + ", threadCacheBuffers=" + threadCacheBuffers + ", threadCacheBytes=" + threadCacheBytes +
            ", access=" + Access.describe(access) + "}";
    }
}
