package io.mrd.primary.memory;

/**
 * A run of segments that {@link MemoryManager#free} or {@link MemoryManager#freeAllOwnedBy} has taken out
 * of use but whose pages are still mapped: the range of one memory free event. Hand it to
 * {@link MemoryManager#release} once the MR engine has processed the event.
 * <p>
 * Freeing is three steps, so that the MR engine drops its MRs over the range before its pages go:
 * <ol>
 * <li>{@link MemoryManager#free} (or {@link MemoryManager#freeAllOwnedBy}) takes the segments out of use in the
 * bookkeeping, under the memory write lock, once no {@link SegmentHold} is on any of them, and returns this range.
 * From then on {@link MemoryManager#withChunk} no longer sees them, but they stay mapped and cannot be allocated
 * again;</li>
 * <li>still under the write lock, it tells every {@link MemoryEventListener} (DPDK's
 * {@code rte_mem_event_callback_register}): the MR engine clears the segments' bits in every MR covering them,
 * rebuilds the global cache and bumps devGen, so that no lkey for the range is handed out any more;</li>
 * <li>the caller, having deregistered what the event detached, calls {@link MemoryManager#release}, which punches
 * the range's pages out of the backing file (on hugetlbfs after unmapping it) with no lock held (giving pages
 * back can be slow and must not stall lookups or allocations), then makes the segments free for allocation.</li>
 * </ol>
 * Giving the pages back before the MR engine has cleared its bitmaps would leave registrations over memory that
 * is gone; allocating the segments again before the release would let its punch empty the new owner's memory,
 * which is why freed segments stay withheld until then.
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
