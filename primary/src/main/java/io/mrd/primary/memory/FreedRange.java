package io.mrd.primary.memory;

/**
 * A run of segments that {@link MemoryManager#free} or {@link MemoryManager#freeAllOwnedBy} has taken out
 * of use but whose pages are still mapped: the range of one memory free event. Hand it to
 * {@link MemoryManager#release} once the MR engine has processed the event.
 *
 * @param listIndex    the list the run lies in.
 * @param firstSegment index of the run's first segment in the list.
 * @param segmentCount segments in the run.
 * @param address      first address of the run.
 * @param length       bytes of the run.
 */
public record FreedRange(int listIndex, int firstSegment, int segmentCount, long address, long length)
{
    /**
     * @return the first address past the run.
     */
    public long end()
    {
        return address + length;
    }
}
