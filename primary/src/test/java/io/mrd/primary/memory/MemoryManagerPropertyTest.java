package io.mrd.primary.memory;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.testing.BaseAddresses;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;

import java.util.List;

import static io.mrd.primary.memory.MemoryFixture.SEGMENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * Random allocate/free sequences against a model that is nothing but an owner per segment and a first-fit
 * scan: the manager must agree with it after every step.
 */
class MemoryManagerPropertyTest
{
    private static final long BASE = BaseAddresses.next();
    private static final int LISTS = 2;
    private static final int SEGMENTS = 16;

    enum Kind
    {
        ALLOC, FREE, FREE_AS_OTHER, FREE_UNALLOCATED, FREE_ALL
    }

    record Op(Kind kind, int size, int owner, int pick, int span)
    {
    }

    @Provide
    Arbitrary<List<Op>> ops()
    {
        final Arbitrary<Op> op = Combinators.combine(
            Arbitraries.frequency(
                Tuple.of(10, Kind.ALLOC),
                Tuple.of(7, Kind.FREE),
                Tuple.of(1, Kind.FREE_AS_OTHER),
                Tuple.of(1, Kind.FREE_UNALLOCATED),
                Tuple.of(1, Kind.FREE_ALL)),
            Arbitraries.integers().between(1, 8),
            Arbitraries.integers().between(1, 3),
            Arbitraries.integers().between(0, 1 << 20),
            Arbitraries.integers().between(0, 1 << 20)).as(Op::new);
        return op.list().ofMinSize(1).ofMaxSize(60);
    }

    @Property(tries = 200)
    void managerAgreesWithAFirstFitModel(@ForAll("ops") final List<Op> ops)
    {
        final int[][] model = new int[LISTS][SEGMENTS];
        try (MemoryFixture f = new MemoryFixture(BASE, LISTS, SEGMENTS))
        {
            final MemoryManager m = f.manager;
            for (final Op op : ops)
            {
                switch (op.kind())
                {
                    case ALLOC -> allocate(m, model, op);
                    case FREE -> free(f, model, op);
                    case FREE_AS_OTHER -> freeAsOther(m, model, op);
                    case FREE_UNALLOCATED -> freeUnallocated(m, model, op);
                    case FREE_ALL ->
                    {
                        m.freeAllOwnedBy(op.owner()).forEach(m::release);
                        for (final int[] list : model)
                        {
                            for (int s = 0; s < SEGMENTS; s++)
                            {
                                list[s] = list[s] == op.owner() ? 0 : list[s];
                            }
                        }
                    }
                }
                assertAgrees(m, model, op);
            }
        }
    }

    private static void allocate(final MemoryManager m, final int[][] model, final Op op)
    {
        for (int l = 0; l < LISTS; l++)
        {
            final int first = firstFit(model[l], op.size());
            if (first >= 0)
            {
                final Allocation a = m.allocate(op.size() * SEGMENT, op.owner());
                assertEquals(new Allocation(l, first, op.size(), m.list(l).segmentAddress(first),
                    op.size() * SEGMENT, op.owner(), Access.LOCAL), a, "first fit for " + op);
                for (int s = first; s < first + op.size(); s++)
                {
                    model[l][s] = op.owner();
                }
                return;
            }
        }
        assertEquals(ErrorCode.ENOMEM,
            assertThrows(MrdException.class, () -> m.allocate(op.size() * SEGMENT, op.owner())).code());
    }

    private static void free(final MemoryFixture f, final int[][] model, final Op op)
    {
        final int[] at = pickSegment(model, op.pick(), true);
        if (null == at)
        {
            return;
        }
        final int[] list = model[at[0]];
        final int owner = list[at[1]];
        int runEnd = at[1];
        while (runEnd < SEGMENTS && list[runEnd] == owner)
        {
            runEnd++;
        }
        final int n = 1 + op.span() % (runEnd - at[1]);
        final FreedRange range = f.freeAndRelease(f.manager.list(at[0]).segmentAddress(at[1]), n * SEGMENT, owner);
        assertEquals(new FreedRange(at[0], at[1], n, f.manager.list(at[0]).segmentAddress(at[1]), n * SEGMENT), range);
        for (int s = at[1]; s < at[1] + n; s++)
        {
            list[s] = 0;
        }
    }

    private static void freeAsOther(final MemoryManager m, final int[][] model, final Op op)
    {
        final int[] at = pickSegment(model, op.pick(), true);
        if (null != at)
        {
            final int other = model[at[0]][at[1]] % 3 + 1;
            assertEquals(ErrorCode.EPERM, assertThrows(MrdException.class,
                () -> m.free(m.list(at[0]).segmentAddress(at[1]), SEGMENT, other)).code());
        }
    }

    private static void freeUnallocated(final MemoryManager m, final int[][] model, final Op op)
    {
        final int[] at = pickSegment(model, op.pick(), false);
        if (null != at)
        {
            assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class,
                () -> m.free(m.list(at[0]).segmentAddress(at[1]), SEGMENT, op.owner())).code());
        }
    }

    /**
     * @return {list, segment} of the pick-th allocated (or free) segment, or null when there is none.
     */
    private static int[] pickSegment(final int[][] model, final int pick, final boolean allocated)
    {
        int count = 0;
        for (final int[] list : model)
        {
            for (final int owner : list)
            {
                count += (owner != 0) == allocated ? 1 : 0;
            }
        }
        if (count == 0)
        {
            return null;
        }
        int k = pick % count;
        for (int l = 0; l < LISTS; l++)
        {
            for (int s = 0; s < SEGMENTS; s++)
            {
                if ((model[l][s] != 0) == allocated && k-- == 0)
                {
                    return new int[]{l, s};
                }
            }
        }
        throw new IllegalStateException("unreachable");
    }

    private static int firstFit(final int[] list, final int n)
    {
        for (int s = 0; s + n <= SEGMENTS; s++)
        {
            boolean fits = true;
            for (int i = s; i < s + n && fits; i++)
            {
                fits = list[i] == 0;
            }
            if (fits)
            {
                return s;
            }
        }
        return -1;
    }

    private static void assertAgrees(final MemoryManager m, final int[][] model, final Op after)
    {
        long allocated = 0;
        m.memoryLock().readLock().lock();
        try
        {
            for (int l = 0; l < LISTS; l++)
            {
                for (int s = 0; s < SEGMENTS; s++)
                {
                    assertEquals(model[l][s], m.list(l).owner(s),
                        "owner of list " + l + " segment " + s + " after " + after);
                    allocated += model[l][s] != 0 ? SEGMENT : 0;
                }
            }
        }
        finally
        {
            m.memoryLock().readLock().unlock();
        }
        assertEquals(allocated, m.bytesAllocated(), "bytes allocated after " + after);
    }
}
