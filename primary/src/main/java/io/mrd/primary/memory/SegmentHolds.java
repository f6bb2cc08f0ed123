package io.mrd.primary.memory;

import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The holds on segments ({@link SegmentHold}): a count per segment of every list, and the condition frees wait
 * on until the segments they free are no longer held.
 * <p>
 * <b>Locking.</b> One lock of its own, a leaf: nothing else is taken while it is held, so it may be taken under
 * the memory lock (to place a hold, or to see whether a free must wait) or the MR engine's cache lock. A free
 * waits on its condition with no other lock held ({@link #awaitReleased}); since it re-checks under this lock
 * before waiting, a release between the free's check under the memory lock and its wait is not missed.
 */
final class SegmentHolds
{
    private final Lock lock = new ReentrantLock();
    private final Condition released = lock.newCondition();
    /** Holds on each segment, by list then segment. Guarded by {@link #lock}. */
    private final int[][] counts;

    SegmentHolds(final int listCount, final int segmentsPerList)
    {
        this.counts = new int[listCount][segmentsPerList];
    }

    SegmentHold place(final int listIndex, final int firstSegment, final int segmentCount)
    {
        lock.lock();
        try
        {
            for (int s = firstSegment; s < firstSegment + segmentCount; s++)
            {
                counts[listIndex][s]++;
            }
        }
        finally
        {
            lock.unlock();
        }
        return new SegmentHold(this, listIndex, firstSegment, segmentCount);
    }

    void release(final SegmentHold hold)
    {
        lock.lock();
        try
        {
            for (int s = hold.firstSegment(); s < hold.firstSegment() + hold.segmentCount(); s++)
            {
                if (--counts[hold.listIndex()][s] < 0)
                {
                    throw new IllegalStateException(hold + " released more often than placed");
                }
            }
            released.signalAll();
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * @return true when any segment of the run is held.
     */
    boolean anyHeld(final SegmentRun run)
    {
        lock.lock();
        try
        {
            return anyHeldLocked(run);
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * Waits until no segment of the run is held. Call with no other lock held: the holder may need the memory
     * lock or the cache lock to finish.
     */
    void awaitReleased(final SegmentRun run)
    {
        lock.lock();
        try
        {
            while (anyHeldLocked(run))
            {
                released.awaitUninterruptibly();
            }
        }
        finally
        {
            lock.unlock();
        }
    }

    /** @return holds on all segments together (for tests and dumps). */
    int holdCount()
    {
        lock.lock();
        try
        {
            int total = 0;
            for (final int[] list : counts)
            {
                for (final int count : list)
                {
                    total += count;
                }
            }
            return total;
        }
        finally
        {
            lock.unlock();
        }
    }

    private boolean anyHeldLocked(final SegmentRun run)
    {
        for (int s = run.firstSegment(); s < run.firstSegment() + run.segmentCount(); s++)
        {
            if (counts[run.listIndex()][s] > 0)
            {
                return true;
            }
        }
        return false;
    }
}
