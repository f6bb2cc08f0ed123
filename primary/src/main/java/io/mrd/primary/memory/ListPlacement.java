package io.mrd.primary.memory;

import io.mrd.layout.sys.Sizes;

/**
 * Where the memory-segment lists lie: list {@code i} starts at {@code base + i * stride}, and the stride is twice
 * a list's length, with the gap left unreserved, so that two lists are never virtually contiguous and a chunk
 * (and the MR made from it) never spans two backing files. Immutable.
 *
 * @param base            first address of list 0 ({@code --base-virtaddr}).
 * @param segmentSize     bytes per segment.
 * @param segmentsPerList segments in each list.
 * @param listCount       number of lists.
 */
record ListPlacement(long base, long segmentSize, int segmentsPerList, int listCount)
{
    /**
     * @return the distance between the base addresses of two neighbouring lists.
     */
    static long stride(final int segmentsPerList, final long segmentSize)
    {
        return 2L * segmentsPerList * segmentSize;
    }

    long listLength()
    {
        return segmentsPerList * segmentSize;
    }

    long stride()
    {
        return stride(segmentsPerList, segmentSize);
    }

    long listBase(final int index)
    {
        return base + index * stride();
    }

    /**
     * @return the index of the list whose reservation holds {@code address}, or -1 (outside all lists, or in a gap
     * between them).
     */
    int indexOf(final long address)
    {
        final long offset = address - base;
        if (address < base || offset >= listCount * stride())
        {
            return -1;
        }
        final int index = (int)(offset / stride());
        return offset - index * stride() < listLength() ? index : -1;
    }

    /**
     * @return first address past the last list.
     */
    long end()
    {
        return listBase(listCount - 1) + listLength();
    }

    public String toString()
    {
        return listCount + " lists of " + Sizes.format(listLength()) + " from " + Sizes.hex(base) + " every " +
            Sizes.hex(stride()) + ", ending at " + Sizes.hex(end());
    }
}
