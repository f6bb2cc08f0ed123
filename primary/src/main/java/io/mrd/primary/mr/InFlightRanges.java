package io.mrd.primary.mr;

import io.mrd.layout.sys.Sizes;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;

/**
 * The address ranges being registered right now, by a create between its steps 6 and 8 or by an external
 * registration, while no lock is held: what keeps two registrations from pinning one range at once now that
 * the cache lock is no longer held across a registration. A create whose address lies in one waits for it
 * ({@link #awaitNotContaining}) and then starts again, finding the MR the other made; a create next to one
 * stops its range short of it.
 * <p>
 * <b>Locking.</b> Guarded by the cache lock ({@link MrShareCache}), which every method expects held; waiters
 * wait on a condition of that lock, so they hold nothing while they wait. A range stays here until its
 * registration has been published or, failing that, undone (deregistered), so {@link #awaitEmpty} after a close
 * leaves nothing pinned that the MR table does not know of. There are never more ranges than threads
 * registering, so a list does.
 */
final class InFlightRanges
{
    private final Condition changed;
    /** {start, end} pairs. */
    private final List<long[]> ranges = new ArrayList<>();

    InFlightRanges(final Lock cacheLock)
    {
        this.changed = cacheLock.newCondition();
    }

    void add(final long start, final long end)
    {
        ranges.add(new long[]{start, end});
    }

    /** Removes the range (a no-op when it is not here) and wakes every waiter, which checks again. */
    void remove(final long start, final long end)
    {
        ranges.removeIf(r -> r[0] == start && r[1] == end);
        changed.signalAll();
    }

    boolean contains(final long address)
    {
        return overlaps(address, address + 1);
    }

    boolean overlaps(final long start, final long end)
    {
        for (final long[] r : ranges)
        {
            if (r[0] < end && start < r[1])
            {
                return true;
            }
        }
        return false;
    }

    /**
     * @return the highest end of a range at or below {@code address}, or {@code floor} when higher: where a
     * registration around {@code address} (which no range contains) may start.
     */
    long startAfter(final long address, final long floor)
    {
        long start = floor;
        for (final long[] r : ranges)
        {
            if (r[1] <= address)
            {
                start = Math.max(start, r[1]);
            }
        }
        return start;
    }

    /**
     * @return the lowest start of a range above {@code address}, or {@code ceiling} when lower: where a
     * registration around {@code address} (which no range contains) must end.
     */
    long endBefore(final long address, final long ceiling)
    {
        long end = ceiling;
        for (final long[] r : ranges)
        {
            if (r[0] > address)
            {
                end = Math.min(end, r[0]);
            }
        }
        return end;
    }

    /** Waits, the cache lock released meanwhile, until no range contains {@code address}. */
    void awaitNotContaining(final long address)
    {
        while (contains(address))
        {
            changed.awaitUninterruptibly();
        }
    }

    /**
     * Waits, the cache lock released meanwhile, until no registration is in flight, or the deadline.
     *
     * @return true when none is.
     */
    boolean awaitEmpty(final long timeoutNanos)
    {
        long remaining = timeoutNanos;
        while (!ranges.isEmpty() && remaining > 0)
        {
            try
            {
                remaining = changed.awaitNanos(remaining);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                return ranges.isEmpty();
            }
        }
        return ranges.isEmpty();
    }

    public String toString()
    {
        final StringBuilder sb = new StringBuilder();
        for (final long[] r : ranges)
        {
            sb.append(sb.isEmpty() ? "" : ", ").append('[').append(Sizes.hex(r[0])).append(", ")
                .append(Sizes.hex(r[1])).append(')');
        }
        return sb.toString();
    }
}
