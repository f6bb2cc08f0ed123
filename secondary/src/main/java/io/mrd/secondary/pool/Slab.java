package io.mrd.secondary.pool;

import java.lang.foreign.MemorySegment;

/**
 * One registered allocation carved into buffers of one size class (or, for a request above the largest
 * class, holding one buffer of its own). Every buffer carries the slab's keys: the MR holds the whole slab.
 */
final class Slab
{
    /** The class index of a slab made for one buffer larger than the largest class. */
    static final int DEDICATED = -1;

    final BufferPool pool;
    final long id;
    final SlabMemory memory;
    final int classIndex;
    final BufferSlot[] slots;

    Slab(final BufferPool pool, final long id, final SlabMemory memory, final int classIndex, final int capacity)
    {
        this.pool = pool;
        this.id = id;
        this.memory = memory;
        this.classIndex = classIndex;
        final MemorySegment segment = memory.segment();
        final int count = DEDICATED == classIndex ? 1 : (int)(segment.byteSize() / capacity);
        slots = new BufferSlot[count];
        for (int i = 0; i < count; i++)
        {
            slots[i] = new BufferSlot(this, i, segment.asSlice((long)i * capacity, capacity));
        }
    }

    /** @return whether {@code [address, address + length)} lies in this slab. */
    boolean holds(final long address, final long length)
    {
        final long start = memory.segment().address();
        return address >= start && address + length <= start + memory.segment().byteSize();
    }

    public String toString()
    {
        return "slab #" + id + " [0x" + Long.toHexString(memory.segment().address()) + ", +" +
            memory.segment().byteSize() + ")";
    }
}
