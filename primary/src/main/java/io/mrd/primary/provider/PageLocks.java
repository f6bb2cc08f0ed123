package io.mrd.primary.provider;

import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@code mlock}/{@code munlock} with a count per page, so that a page stays locked until the last registration
 * over it goes.
 * <p>
 * The kernel does not count mlocks: one {@code munlock} unlocks a page however many times it was locked. A NIC
 * registration holds a reference on each page instead, so two registrations sharing a page (adjacent unaligned
 * ranges, or one range registered twice) each keep it pinned. This class gives the soft provider the NIC's
 * behaviour: it counts, per page, the registrations covering it, and unlocks only pages whose count falls to 0.
 * <p>
 * Counts go up before {@code mlock} and come down, with the {@code munlock} of pages left at zero, under this
 * object's monitor. A page therefore cannot be unlocked between another registration counting it and locking it:
 * either the unlock happened first (and the new lock follows), or the count never reached zero.
 */
final class PageLocks
{
    static final long PAGE_SIZE = pageSize();
    /**
     * The most one {@code mlock} call locks. The kernel holds the process's {@code mmap_lock} for a whole call, and
     * the JVM's own memory operations (G1 committing or uncommitting heap inside a safepoint) wait for it with
     * every Java thread stopped, the heartbeat's among them: one {@code mlock} of 2 GiB of fresh tmpfs memory
     * stopped a G1 JVM's threads for 772 ms, as long as the call. Population first ({@link PagePopulator}) makes
     * the pin itself cheap (about 40 ms per GiB); steps of this size bound what is left for any range.
     */
    static final long MLOCK_STEP = 1L << 30;

    /**
     * A step function over page-aligned addresses: each key maps to the number of registrations covering the pages
     * from it up to the next key; no key below the first means 0. Only keys where the count changes are kept.
     */
    private final TreeMap<Long, Integer> depth = new TreeMap<>();

    /**
     * Locks the pages of {@code [address, address + length)}.
     *
     * @return 0, or mlock's errno; on failure every page this call locked that no other registration holds is
     * unlocked again.
     */
    int lock(final long address, final long length)
    {
        final long start = Sizes.alignDown(address, PAGE_SIZE);
        final long end = Sizes.alignUp(address + length, PAGE_SIZE);
        synchronized (this)
        {
            add(start, end, 1, null);
        }
        // mlock runs outside the monitor: it faults in what population left, the slow part when it does.
        int errno = 0;
        for (long from = start; from < end && 0 == errno; from += MLOCK_STEP)
        {
            errno = Posix.mlock(from, Math.min(MLOCK_STEP, end - from));
        }
        if (0 != errno)
        {
            // mlock may have locked part of the range before failing.
            unlockRange(start, end);
        }
        return errno;
    }

    /**
     * Drops one registration's hold on the pages of {@code [address, address + length)} and unlocks those no other
     * registration holds.
     *
     * @return 0, or the first errno munlock reported.
     */
    int unlock(final long address, final long length)
    {
        return unlockRange(Sizes.alignDown(address, PAGE_SIZE), Sizes.alignUp(address + length, PAGE_SIZE));
    }

    /**
     * @return pages counted by at least one registration, in bytes (for tests).
     */
    synchronized long lockedBytes()
    {
        long bytes = 0;
        Map.Entry<Long, Integer> previous = null;
        for (final Map.Entry<Long, Integer> e : depth.entrySet())
        {
            if (null != previous && previous.getValue() > 0)
            {
                bytes += e.getKey() - previous.getKey();
            }
            previous = e;
        }
        return bytes;
    }

    private synchronized int unlockRange(final long start, final long end)
    {
        final List<long[]> free = new ArrayList<>();
        add(start, end, -1, free);
        int firstErrno = 0;
        for (final long[] range : free)
        {
            final int errno = Posix.munlock(range[0], range[1] - range[0]);
            if (0 == firstErrno)
            {
                firstErrno = errno;
            }
        }
        return firstErrno;
    }

    /**
     * Adds {@code delta} to the count of every page in {@code [start, end)}; collects into {@code zeroed} the
     * ranges whose count fell to 0.
     */
    private void add(final long start, final long end, final int delta, final List<long[]> zeroed)
    {
        split(start);
        split(end);
        final Map<Long, Integer> inside = depth.subMap(start, true, end, false);
        for (final Map.Entry<Long, Integer> e : inside.entrySet())
        {
            final int count = e.getValue() + delta;
            if (count < 0)
            {
                throw new IllegalStateException("page count below zero at " + Sizes.hex(e.getKey()));
            }
            e.setValue(count);
            if (0 == count && null != zeroed)
            {
                final long from = e.getKey();
                final long to = depth.higherKey(from);
                final long[] last = zeroed.isEmpty() ? null : zeroed.getLast();
                if (null != last && last[1] == from)
                {
                    last[1] = to;
                }
                else
                {
                    zeroed.add(new long[]{from, to});
                }
            }
        }
        for (final Long key : new ArrayList<>(depth.subMap(start, true, end, true).keySet()))
        {
            final Map.Entry<Long, Integer> before = depth.lowerEntry(key);
            if (depth.get(key) == (null == before ? 0 : before.getValue()))
            {
                depth.remove(key);
            }
        }
    }

    private void split(final long at)
    {
        if (!depth.containsKey(at))
        {
            final Map.Entry<Long, Integer> before = depth.floorEntry(at);
            depth.put(at, null == before ? 0 : before.getValue());
        }
    }

    @SuppressWarnings("restricted")
    private static long pageSize()
    {
        final Linker linker = Linker.nativeLinker();
        try
        {
            return (int)linker.downcallHandle(linker.defaultLookup().find("getpagesize").orElseThrow(),
                FunctionDescriptor.of(ValueLayout.JAVA_INT)).invokeExact();
        }
        catch (final Throwable t)
        {
            throw new IllegalStateException("getpagesize binding", t);
        }
    }
}
