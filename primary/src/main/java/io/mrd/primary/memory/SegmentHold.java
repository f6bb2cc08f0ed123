package io.mrd.primary.memory;

/**
 * A hold on a run of allocated segments, placed by {@link MemoryManager#hold} for as long as something outside
 * the memory lock works on their pages (the MR engine's registration pins them): a {@link MemoryManager#free}
 * or {@link MemoryManager#freeAllOwnedBy} of any held segment waits until every hold on it is released, so the
 * pages are never unmapped under the work. Release exactly once the work is done, on every way out.
 */
public final class SegmentHold
{
    private final SegmentHolds holds;
    private final int listIndex;
    private final int firstSegment;
    private final int segmentCount;
    private boolean released;

    SegmentHold(final SegmentHolds holds, final int listIndex, final int firstSegment, final int segmentCount)
    {
        this.holds = holds;
        this.listIndex = listIndex;
        this.firstSegment = firstSegment;
        this.segmentCount = segmentCount;
    }

    /** @return the list the held segments lie in. */
    public int listIndex()
    {
        return listIndex;
    }

    /** @return index of the first held segment in its list. */
    public int firstSegment()
    {
        return firstSegment;
    }

    /** @return segments held. */
    public int segmentCount()
    {
        return segmentCount;
    }

    /**
     * Releases the hold and wakes the frees waiting for it. Idempotent: a second call does nothing, so a
     * release in a {@code finally} after an earlier one cannot release another holder's count.
     */
    public void release()
    {
        synchronized (this)
        {
            if (released)
            {
                return;
            }
            released = true;
        }
        holds.release(this);
    }

    public String toString()
    {
        return "SegmentHold{list " + listIndex + " segments [" + firstSegment + ", " + (firstSegment + segmentCount) +
            ")" + (released ? " released" : "") + "}";
    }
}
