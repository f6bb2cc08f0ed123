package io.mrd.secondary.verbs;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static io.mrd.secondary.verbs.IbvStructs.IBV_SGE;
import static io.mrd.secondary.verbs.IbvStructs.SGE_ADDR;
import static io.mrd.secondary.verbs.IbvStructs.SGE_LENGTH;
import static io.mrd.secondary.verbs.IbvStructs.SGE_LKEY;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A reusable scatter/gather list: native {@code struct ibv_sge}s that a post hands to the device as they are.
 * Fill it ({@link #clear()}, then {@link #add} per buffer: address, length and the lkey of the memory, e.g.
 * from {@code MrCache.lkey}) and post it; the device copies the list at post time, so it may be refilled as
 * soon as the post returns (the memory it points at must stay until the completion). Allocates nothing after
 * construction. One thread at a time.
 */
public final class SgeList
{
    private final MemorySegment sges;
    private final int capacity;
    private int count;

    /**
     * @param capacity SGEs it holds at most (a queue pair's {@code maxSendSge} / {@code maxRecvSge}).
     */
    public SgeList(final int capacity)
    {
        if (capacity < 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "an SgeList of " + capacity + " entries: give it at least 1");
        }
        this.capacity = capacity;
        this.sges = Arena.ofAuto().allocate(IBV_SGE.byteSize() * capacity, IBV_SGE.byteAlignment());
    }

    /**
     * Empties the list.
     */
    public SgeList clear()
    {
        count = 0;
        return this;
    }

    /**
     * Appends one buffer.
     *
     * @param length bytes, below 2 GiB ({@code ibv_sge.length} is 32 bits; the device limits it further).
     * @throws MrdException EINVAL when the list is full or the length negative.
     */
    public SgeList add(final long address, final int length, final int lkey)
    {
        if (count == capacity || length < 0)
        {
            throw new MrdException(ErrorCode.EINVAL, count == capacity ? "the SgeList holds " + capacity +
                " SGEs already: clear() it or make a larger one" : "SGE length " + length + " at " +
                Sizes.hex(address) + " is negative");
        }
        final long at = count * IBV_SGE.byteSize();
        sges.set(JAVA_LONG, at + SGE_ADDR, address);
        sges.set(JAVA_INT, at + SGE_LENGTH, length);
        sges.set(JAVA_INT, at + SGE_LKEY, lkey);
        count++;
        return this;
    }

    /**
     * @return SGEs in the list.
     */
    public int count()
    {
        return count;
    }

    public int capacity()
    {
        return capacity;
    }

    /**
     * @return the sum of the lengths: what a send of this list moves.
     */
    public long totalLength()
    {
        long total = 0;
        for (int i = 0; i < count; i++)
        {
            total += sges.get(JAVA_INT, i * IBV_SGE.byteSize() + SGE_LENGTH) & 0xFFFF_FFFFL;
        }
        return total;
    }

    /** The native array, its first {@link #count()} entries filled. */
    MemorySegment segment()
    {
        return sges;
    }
}
