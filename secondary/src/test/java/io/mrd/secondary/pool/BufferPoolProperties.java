package io.mrd.secondary.pool;

import io.mrd.layout.MrdException;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random acquire/release sequences across sizes against a reference model (the live buffers, by address): no
 * two live buffers overlap, each lies in a slab whose keys it carries and holds the size asked for, a release
 * takes exactly that buffer out of the live set, a second release throws, and close gives back every slab.
 */
class BufferPoolProperties
{
    /** A step: acquire of {@code size} bytes (size > 0), or release of the live buffer at {@code -size % live}. */
    @Property(tries = 200)
    void randomSequencesKeepBuffersApartAndKeyed(@ForAll("steps") final List<Integer> steps)
    {
        final FakeSlabSource source = new FakeSlabSource();
        final BufferPool pool = BufferPool.open(source, new PoolContext().minClassSize(1024).maxClassSize(1 << 19)
            .threadCacheBuffers(8).threadCacheBytes(1 << 16));
        final List<PooledBuffer> live = new ArrayList<>();
        final TreeMap<Long, PooledBuffer> byAddress = new TreeMap<>();
        final List<PooledBuffer> released = new ArrayList<>();
        for (final int step : steps)
        {
            if (step > 0)
            {
                final PooledBuffer buffer = pool.acquire(step);
                assertTrue(buffer.capacity() >= step, buffer + " holds " + step);
                assertInItsSlab(pool, buffer);
                assertNoOverlap(byAddress, buffer);
                live.add(buffer);
                byAddress.put(buffer.address(), buffer);
            }
            else if (!live.isEmpty())
            {
                final PooledBuffer buffer = live.remove(-step % live.size());
                assertEquals(buffer, byAddress.remove(buffer.address()));
                buffer.release();
                released.add(buffer);
                assertThrows(MrdException.class, buffer::release, "second release of " + buffer);
            }
            assertEquals(live.size(), pool.acquiredBuffers(), "the pool counts what the model holds");
        }
        released.forEach(buffer -> assertThrows(MrdException.class, buffer::address));
        live.forEach(PooledBuffer::release);
        pool.close();
        assertEquals(List.of(), source.live(), "close gave back every slab");
    }

    @Provide
    Arbitrary<List<Integer>> steps()
    {
        final Arbitrary<Integer> acquire = Arbitraries.frequencyOf(
            net.jqwik.api.Tuple.of(6, Arbitraries.integers().between(1, 1 << 13)),
            net.jqwik.api.Tuple.of(2, Arbitraries.integers().between(1 << 13, 1 << 19)),
            net.jqwik.api.Tuple.of(1, Arbitraries.integers().between((1 << 19) + 1, 3 << 20)));
        final Arbitrary<Integer> release = Arbitraries.integers().between(-1_000_000, 0);
        return Arbitraries.frequencyOf(net.jqwik.api.Tuple.of(3, acquire), net.jqwik.api.Tuple.of(2, release))
            .list().ofMinSize(1).ofMaxSize(300);
    }

    static void assertInItsSlab(final BufferPool pool, final PooledBuffer buffer)
    {
        final long start = buffer.address();
        final long end = start + buffer.capacity();
        final List<SlabMemory> holding = pool.slabs().stream().filter(slab -> slab.segment().address() <= start &&
            end <= slab.segment().address() + slab.segment().byteSize()).toList();
        assertEquals(1, holding.size(), buffer + " lies in exactly one slab of " + pool.slabs());
        assertEquals(holding.getFirst().lkey(), buffer.lkey(), buffer + " carries its slab's lkey");
        assertEquals(holding.getFirst().rkey(), buffer.rkey(), buffer + " carries its slab's rkey");
    }

    static void assertNoOverlap(final TreeMap<Long, PooledBuffer> byAddress, final PooledBuffer buffer)
    {
        final var below = byAddress.floorEntry(buffer.address());
        if (null != below)
        {
            assertTrue(below.getKey() + below.getValue().capacity() <= buffer.address(),
                buffer + " overlaps " + below.getValue());
        }
        final var above = byAddress.ceilingEntry(buffer.address());
        if (null != above)
        {
            assertTrue(buffer.address() + buffer.capacity() <= above.getKey(), buffer + " overlaps " + above.getValue());
        }
    }
}
