package io.mrd.primary.provider;

import io.mrd.layout.sys.Posix;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * Per-page counting against a model: after any sequence of overlapping locks and unlocks, the pages the kernel
 * has locked ({@code VmLck}) are exactly those some live range covers.
 */
final class PageLocksTest
{
    private static final int PAGES = 32;

    /** A range in bytes relative to the mapping, possibly unaligned. */
    record Range(long offset, long length)
    {
    }

    @Property(tries = 60)
    void lockedPagesAreThoseSomeLiveRangeCovers(@ForAll("operations") final List<Range> ranges,
        @ForAll("unlockOrder") final List<Integer> order)
    {
        final long page = PageLocks.PAGE_SIZE;
        final MemorySegment memory = Posix.map(PAGES * page, Posix.PROT_READ | Posix.PROT_WRITE,
            Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
        final long before = SoftRegistrarTest.vmLck();
        final PageLocks locks = new PageLocks();
        final int[] model = new int[PAGES];
        final List<Range> live = new ArrayList<>();
        try
        {
            for (final Range r : ranges)
            {
                assertEquals(0, locks.lock(memory.address() + r.offset(), r.length()));
                live.add(r);
                count(model, r, 1);
                check(locks, model, before);
            }
            for (final int pick : order)
            {
                if (live.isEmpty())
                {
                    break;
                }
                final Range r = live.remove(pick % live.size());
                assertEquals(0, locks.unlock(memory.address() + r.offset(), r.length()));
                count(model, r, -1);
                check(locks, model, before);
            }
            for (final Range r : live)
            {
                locks.unlock(memory.address() + r.offset(), r.length());
            }
            live.clear();
            assertEquals(before, SoftRegistrarTest.vmLck());
        }
        finally
        {
            for (final Range r : live)
            {
                locks.unlock(memory.address() + r.offset(), r.length());
            }
            Posix.munmapQuietly(memory.address(), memory.byteSize());
        }
    }

    @Provide
    Arbitrary<List<Range>> operations()
    {
        final long size = PAGES * PageLocks.PAGE_SIZE;
        final Arbitrary<Range> range = Combinators.combine(
            Arbitraries.longs().between(0, size - 1),
            Arbitraries.longs().between(1, 8 * PageLocks.PAGE_SIZE))
            .as((offset, length) -> new Range(offset, Math.min(length, size - offset)));
        return range.list().ofMinSize(1).ofMaxSize(12);
    }

    @Provide
    Arbitrary<List<Integer>> unlockOrder()
    {
        return Arbitraries.integers().between(0, 1000).list().ofMinSize(0).ofMaxSize(12);
    }

    private static void count(final int[] model, final Range r, final int delta)
    {
        final long page = PageLocks.PAGE_SIZE;
        for (long p = r.offset() / page; p <= (r.offset() + r.length() - 1) / page; p++)
        {
            model[(int)p] += delta;
        }
    }

    private static void check(final PageLocks locks, final int[] model, final long before)
    {
        long expected = 0;
        for (final int c : model)
        {
            expected += c > 0 ? PageLocks.PAGE_SIZE : 0;
        }
        assertEquals(expected, locks.lockedBytes(), "pages counted");
        assertEquals(before + expected, SoftRegistrarTest.vmLck(), "pages the kernel has locked");
    }
}
