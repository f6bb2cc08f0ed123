package io.mrd.primary.memory;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;

/**
 * The ENOMEM errors of an allocation the memory cannot satisfy, each naming what was asked, what there is and
 * the setting to change.
 */
final class AllocationRefusal
{
    private AllocationRefusal()
    {
    }

    /**
     * @return the error for a length longer than one list: no run can span two.
     */
    static MrdException longerThanList(
        final long length, final MemsegList[] lists, final long segmentSize, final long capacity)
    {
        final long listLength = lists[0].segmentCount() * segmentSize;
        return new MrdException(ErrorCode.ENOMEM, "cannot allocate " + Sizes.format(length) +
            ": the largest possible allocation is one memory-segment list, " + Sizes.format(listLength) +
            " (" + lists[0].segmentCount() + " segments of " + Sizes.format(segmentSize) + "), of --max-memory " +
            Sizes.format(capacity) + " in " + lists.length + " lists; allocate at most " +
            Sizes.format(listLength) + " at a time or start the daemon with a larger --max-memory");
    }

    /**
     * Call with the memory lock held.
     *
     * @return the error for {@code n} segments that no list has free in one run, with the largest run there is.
     */
    static MrdException noFreeRun(
        final long length, final int n, final MemsegList[] lists, final long segmentSize, final long capacity)
    {
        int free = 0;
        int largest = 0;
        int releasing = 0;
        for (final MemsegList list : lists)
        {
            free += list.freeSegments();
            largest = Math.max(largest, list.largestFreeRun());
            releasing += list.segmentCount() - list.freeSegments() - list.allocatedSegments();
        }
        return new MrdException(ErrorCode.ENOMEM, "cannot allocate " + Sizes.format(length) + " (" + n +
            " segments of " + Sizes.format(segmentSize) + "): largest free run is " +
            Sizes.format(largest * segmentSize) + " (" + free + " of " + lists.length * lists[0].segmentCount() +
            " segments free" + (releasing > 0 ? ", " + releasing + " being released" : "") + ", --max-memory " +
            Sizes.format(capacity) + "); free memory or start the daemon with a larger --max-memory");
    }
}
