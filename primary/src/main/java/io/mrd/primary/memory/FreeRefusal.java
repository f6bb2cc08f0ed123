package io.mrd.primary.memory;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;

/**
 * The errors of a FREE a memory-segment list refuses, each naming the address, the segment and what is wrong
 * with it, as {@link AllocationRefusal} names what an allocation lacks.
 */
final class FreeRefusal
{
    private FreeRefusal()
    {
    }

    /**
     * Checks that {@code [address, address + length)} may be freed by {@code owner}: it starts on a segment
     * boundary, ends inside this list, and every segment is allocated and, unless the daemon frees, owned by
     * {@code owner}.
     *
     * @throws MrdException EINVAL or EPERM naming the address, the segment and what is wrong with it.
     */
    static void check(final MemsegList list, final long address, final long length, final int owner)
    {
        final long segmentSize = list.segmentSize();
        if (((address - list.baseVa()) & (segmentSize - 1)) != 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "cannot free " + Sizes.hex(address) +
                ": the address is not segment-aligned (segments are " + Sizes.format(segmentSize) +
                "; the segment holding it starts at " + Sizes.hex(Sizes.alignDown(address, segmentSize)) + ")");
        }
        if (length <= 0 || length > list.endVa() - address)
        {
            throw new MrdException(ErrorCode.EINVAL, "cannot free " + length + " bytes at " +
                Sizes.hex(address) + ": the length must be positive and the range must end inside list " +
                list.index() + " (which ends at " + Sizes.hex(list.endVa()) + ")");
        }
        final int first = list.segmentIndex(address);
        final int n = (int)((length + segmentSize - 1) / segmentSize);
        for (int i = first; i < first + n; i++)
        {
            if (!list.isAllocated(i))
            {
                throw new MrdException(ErrorCode.EINVAL, "cannot free " + Sizes.hex(address) + " (" +
                    Sizes.format(length) + "): segment " + i + " of list " + list.index() + " at " +
                    Sizes.hex(list.segmentAddress(i)) + " is not allocated");
            }
            if (owner != MemsegListDescriptor.OWNER_DAEMON && list.owner(i) != owner)
            {
                throw new MrdException(ErrorCode.EPERM, "cannot free " + Sizes.hex(address) + " (" +
                    Sizes.format(length) + ") for " + ownerName(owner) + ": segment " + i + " at " +
                    Sizes.hex(list.segmentAddress(i)) + " is owned by " + ownerName(list.owner(i)));
            }
        }
    }

    private static String ownerName(final int owner)
    {
        return owner == MemsegListDescriptor.OWNER_DAEMON ? "the daemon" : "client " + owner;
    }
}
