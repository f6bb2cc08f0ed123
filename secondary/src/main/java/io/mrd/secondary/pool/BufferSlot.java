package io.mrd.secondary.pool;

import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One buffer's place in a slab and its state word. The generation counts the slot's acquires and releases:
 * even while the pool holds it, odd while a caller does. A {@link PooledBuffer} remembers the generation it
 * was acquired at, so a handle kept past its release is told apart from the slot's next owner's handle.
 * <p>
 * Only its holder changes the word: the thread that took the slot from a free list (acquire, a release-store:
 * nobody else can reach the slot then) or the one that releases the handle (a CAS, so that of two racing
 * releases exactly one succeeds).
 */
final class BufferSlot
{
    private static final VarHandle GENERATION;

    static
    {
        try
        {
            GENERATION = MethodHandles.lookup().findVarHandle(BufferSlot.class, "generation", int.class);
        }
        catch (final ReflectiveOperationException ex)
        {
            throw new ExceptionInInitializerError(ex);
        }
    }

    final Slab slab;
    final int index;
    final long address;
    final int capacity;
    final MemorySegment segment;
    @SuppressWarnings("unused") // through GENERATION
    private int generation;

    BufferSlot(final Slab slab, final int index, final MemorySegment segment)
    {
        this.slab = slab;
        this.index = index;
        this.address = segment.address();
        this.capacity = (int)segment.byteSize();
        this.segment = segment;
    }

    /** Makes the slot its taker's: only the thread that took it from a free list calls this. */
    PooledBuffer acquire()
    {
        final int next = (int)GENERATION.getAcquire(this) + 1;
        GENERATION.setRelease(this, next);
        return new PooledBuffer(this, next);
    }

    /** @return whether the handle of {@code acquired} was the slot's, and now the pool's. */
    boolean release(final int acquired)
    {
        return GENERATION.compareAndSet(this, acquired, acquired + 1);
    }

    int generation()
    {
        return (int)GENERATION.getAcquire(this);
    }

    /** @return whether a caller holds the slot. */
    boolean isAcquired()
    {
        return (generation() & 1) != 0;
    }

    /** @return the slot named for messages: address, capacity, slab and place. */
    String describe()
    {
        return "buffer 0x" + Long.toHexString(address) + " (" + Sizes.format(capacity) + ", slot " + index +
            " of " + slab + ")";
    }
}
