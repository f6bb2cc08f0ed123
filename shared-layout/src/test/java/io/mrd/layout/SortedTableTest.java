package io.mrd.layout;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.Tuple;
import net.jqwik.api.constraints.IntRange;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;

import static io.mrd.layout.CacheEntryDescriptor.ENTRY_LENGTH;
import static io.mrd.layout.CacheEntryDescriptor.NO_LKEY;
import static io.mrd.layout.SortedTable.NOT_FOUND;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link SortedTable} against a {@link TreeMap} model, and its search over garbage (what a seqlock reader
 * may see mid-write).
 */
final class SortedTableTest
{
    /** Tables start at a non-zero offset so that an offset bug shows. */
    private static final int TABLE_OFFSET = 2 * ENTRY_LENGTH + 16;

    @Property(tries = 300)
    void agreesWithTheModel(@ForAll("ranges") final List<long[]> ranges, @ForAll final long seed)
    {
        final int capacity = ranges.size() + 1;
        final UnsafeBuffer buffer = table(capacity);
        final TreeMap<Long, long[]> model = new TreeMap<>();
        int len = SortedTable.clear(buffer, TABLE_OFFSET);

        final List<long[]> order = new ArrayList<>(ranges);
        Collections.shuffle(order, new Random(seed));
        for (final long[] r : order)
        {
            len = SortedTable.insert(buffer, TABLE_OFFSET, len, capacity, entry(r[0], r[1], (int)r[2], (int)r[3]));
            model.put(r[0], r);
            assertEquals(model.size() + 1, len);
            assertSorted(buffer, len);
        }

        final Random random = new Random(seed);
        final List<Long> probes = probes(ranges, random);
        for (final long address : probes)
        {
            assertAgrees(buffer, len, model, address);
        }

        // A start that lies inside an entry is not inserted again.
        for (final long[] r : ranges)
        {
            final long inside = r[0] + (r[1] - r[0]) / 2;
            final byte[] before = bytes(buffer, len);
            assertEquals(len, SortedTable.insert(buffer, TABLE_OFFSET, len, capacity, entry(inside, inside + 1, 7, 7)));
            assertEquals(len, SortedTable.insert(buffer, TABLE_OFFSET, len, capacity + 5, entry(r[0], r[1], 9, 9)));
            assertArrayEquals(before, bytes(buffer, len));
        }
    }

    @Property(tries = 300)
    void aFullTableRefusesAndStaysIntact(@ForAll("ranges") final List<long[]> ranges, @ForAll final long seed)
    {
        final Random random = new Random(seed);
        final List<long[]> order = new ArrayList<>(ranges);
        Collections.shuffle(order, random);
        final int capacity = 1 + random.nextInt(order.size());
        final UnsafeBuffer buffer = table(capacity);
        final TreeMap<Long, long[]> model = new TreeMap<>();
        int len = SortedTable.clear(buffer, TABLE_OFFSET);
        int i = 0;
        for (; i < capacity - 1; i++)
        {
            final long[] r = order.get(i);
            len = SortedTable.insert(buffer, TABLE_OFFSET, len, capacity, entry(r[0], r[1], (int)r[2], (int)r[3]));
            model.put(r[0], r);
        }
        assertEquals(capacity, len);

        final byte[] before = bytes(buffer, len);
        for (; i < order.size(); i++)
        {
            final long[] r = order.get(i);
            assertEquals(NOT_FOUND,
                SortedTable.insert(buffer, TABLE_OFFSET, len, capacity, entry(r[0], r[1], (int)r[2], (int)r[3])));
            assertArrayEquals(before, bytes(buffer, len));
        }
        for (final long address : probes(ranges, random))
        {
            assertAgrees(buffer, len, model, address);
        }
    }

    @Property(tries = 300)
    void searchStaysInBoundsOnGarbage(
        @ForAll @IntRange(min = 1, max = 4096) final int capacity,
        @ForAll final long seed)
    {
        final Random random = new Random(seed);
        final byte[] garbage = new byte[capacity * ENTRY_LENGTH];
        random.nextBytes(garbage);
        // Exactly the table's bytes: UnsafeBuffer's bounds checks turn any stray read into an exception.
        final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(garbage.length));
        buffer.putBytes(0, garbage);
        if (random.nextBoolean())
        {
            // Partly sorted garbage: a torn insert shifts entries while the reader searches.
            long start = 0;
            for (int i = 0; i < capacity; i++)
            {
                if (random.nextInt(4) != 0)
                {
                    start += random.nextInt(1 << 20);
                    buffer.putLong(i * ENTRY_LENGTH, start);
                }
            }
        }
        final int len = 1 + random.nextInt(capacity);
        for (int i = 0; i < 64; i++)
        {
            final long address = i < 4 ? new long[]{0, -1, Long.MAX_VALUE, Long.MIN_VALUE}[i] : random.nextLong();
            final int index = SortedTable.search(buffer, 0, len, address);
            assertTrue(index >= 0 && index < len, "index " + index + " outside [0, " + len + ")");
            final int found = SortedTable.lookup(buffer, 0, len, address);
            assertTrue(found == NOT_FOUND || found == index);
        }
    }

    @Test
    void emptyTableFindsNothing()
    {
        final UnsafeBuffer buffer = table(4);
        final int len = SortedTable.clear(buffer, TABLE_OFFSET);
        assertEquals(1, len);
        assertEquals(0L, SortedTable.start(buffer, TABLE_OFFSET, 0));
        assertEquals(0L, SortedTable.end(buffer, TABLE_OFFSET, 0));
        assertEquals(NO_LKEY, SortedTable.lkey(buffer, TABLE_OFFSET, 0));
        assertEquals(Access.NO_RKEY, SortedTable.rkey(buffer, TABLE_OFFSET, 0));
        assertEquals(-1, SortedTable.mr(buffer, TABLE_OFFSET, 0));
        for (final long address : new long[]{0, 1, 4096, Long.MAX_VALUE})
        {
            assertEquals(NOT_FOUND, SortedTable.lookup(buffer, TABLE_OFFSET, len, address));
        }
    }

    @Test
    void adjacentRangesSplitAtTheBoundary()
    {
        final UnsafeBuffer buffer = table(4);
        int len = SortedTable.clear(buffer, TABLE_OFFSET);
        len = SortedTable.insert(buffer, TABLE_OFFSET, len, 4, entry(0x2000, 0x3000, 22, 2));
        len = SortedTable.insert(buffer, TABLE_OFFSET, len, 4, entry(0x1000, 0x2000, 11, 1));
        len = SortedTable.insert(buffer, TABLE_OFFSET, len, 4, entry(0x3000, 0x4000, 33, 3));
        assertEquals(4, len);
        assertEquals(11, lkeyAt(buffer, len, 0x1fff));
        assertEquals(22, lkeyAt(buffer, len, 0x2000));
        assertEquals(22, lkeyAt(buffer, len, 0x2fff));
        assertEquals(33, lkeyAt(buffer, len, 0x3000));
        assertEquals(NOT_FOUND, SortedTable.lookup(buffer, TABLE_OFFSET, len, 0x4000));
        assertEquals(NOT_FOUND, SortedTable.lookup(buffer, TABLE_OFFSET, len, 0xfff));
        assertEquals(NOT_FOUND, SortedTable.insert(buffer, TABLE_OFFSET, len, 4, entry(0x5000, 0x6000, 44, 4)));
        assertEquals(len, SortedTable.insert(buffer, TABLE_OFFSET, len, 4, entry(0x2800, 0x6000, 44, 4)));
    }

    @Provide
    Arbitrary<List<long[]>> ranges()
    {
        // Gap before each range (0: adjacent to the previous one) and its length; small and large steps.
        final Arbitrary<Long> gap = Arbitraries.frequencyOf(
            weighted(3, Arbitraries.longs().between(0, 0)),
            weighted(4, Arbitraries.longs().between(1, 64)),
            weighted(3, Arbitraries.longs().between(1, 1L << 36)));
        final Arbitrary<Long> length = Arbitraries.frequencyOf(
            weighted(4, Arbitraries.longs().between(1, 4)),
            weighted(6, Arbitraries.longs().between(1, 1L << 32)));
        return Combinators.combine(gap, length).as((g, l) -> new long[]{g, l})
            .list().ofMinSize(1).ofMaxSize(200)
            .map(SortedTableTest::place);
    }

    private static Tuple.Tuple2<Integer, Arbitrary<? extends Long>> weighted(
        final int weight, final Arbitrary<Long> arbitrary)
    {
        return Tuple.of(weight, arbitrary);
    }

    /**
     * @return {start, end, lkey, mr} ranges laid one after the other from address 1 up.
     */
    private static List<long[]> place(final List<long[]> gapsAndLengths)
    {
        final List<long[]> ranges = new ArrayList<>();
        long end = 1;
        int i = 0;
        for (final long[] gl : gapsAndLengths)
        {
            final long start = end + gl[0];
            end = start + gl[1];
            ranges.add(new long[]{start, end, 1000 + i, i});
            i++;
        }
        return ranges;
    }

    private static List<Long> probes(final List<long[]> ranges, final Random random)
    {
        final List<Long> probes = new ArrayList<>();
        probes.add(0L);
        probes.add(1L);
        probes.add(Long.MAX_VALUE);
        final long[] first = ranges.get(0);
        final long[] last = ranges.get(ranges.size() - 1);
        probes.add(first[0] - 1);
        probes.add(last[1]);
        probes.add(last[1] + 1 + random.nextInt(1 << 30));
        for (final long[] r : ranges)
        {
            probes.add(r[0]);
            probes.add(r[1] - 1);
            probes.add(r[1]);
            probes.add(r[0] - 1);
            probes.add(r[0] + (long)(random.nextDouble() * (r[1] - r[0])));
        }
        for (int i = 0; i < 64; i++)
        {
            probes.add(random.nextLong(last[1] + 2));
        }
        return probes;
    }

    private static void assertAgrees(
        final UnsafeBuffer buffer, final int len, final TreeMap<Long, long[]> model, final long address)
    {
        final Map.Entry<Long, long[]> floor = model.floorEntry(address);
        final long[] expected = null != floor && address < floor.getValue()[1] ? floor.getValue() : null;
        final int index = SortedTable.lookup(buffer, TABLE_OFFSET, len, address);
        if (null == expected)
        {
            assertEquals(NOT_FOUND, index, "address " + address + " lies in no range");
        }
        else
        {
            assertTrue(index > 0 && index < len, "address " + address + " not found");
            assertEquals(expected[0], SortedTable.start(buffer, TABLE_OFFSET, index), "address " + address);
            assertEquals(expected[1], SortedTable.end(buffer, TABLE_OFFSET, index), "address " + address);
            assertEquals((int)expected[2], SortedTable.lkey(buffer, TABLE_OFFSET, index), "address " + address);
            assertEquals((int)expected[3], SortedTable.mr(buffer, TABLE_OFFSET, index), "address " + address);
            final MrEntry found = new MrEntry();
            assertTrue(SortedTable.find(buffer, TABLE_OFFSET, len, address, found));
            assertEquals(entry(expected[0], expected[1], (int)expected[2], (int)expected[3]).toString(),
                found.toString(), "find copies every field of the entry holding " + address);
        }
    }

    /** An entry whose rkey and access differ from its lkey and MR index, so that a field copied wrong shows. */
    private static MrEntry entry(final long start, final long end, final int lkey, final int mr)
    {
        return new MrEntry().set(start, end, lkey, ~lkey, Access.LOCAL_WRITE | (mr & Access.REMOTE), mr);
    }

    private static void assertSorted(final UnsafeBuffer buffer, final int len)
    {
        assertEquals(0L, SortedTable.start(buffer, TABLE_OFFSET, 0));
        assertEquals(0L, SortedTable.end(buffer, TABLE_OFFSET, 0));
        assertEquals(NO_LKEY, SortedTable.lkey(buffer, TABLE_OFFSET, 0));
        for (int i = 1; i < len; i++)
        {
            final long start = SortedTable.start(buffer, TABLE_OFFSET, i);
            assertTrue(start < SortedTable.end(buffer, TABLE_OFFSET, i), "entry " + i + " is empty");
            assertTrue(SortedTable.end(buffer, TABLE_OFFSET, i - 1) <= start, "entry " + i + " out of order");
        }
    }

    private static int lkeyAt(final UnsafeBuffer buffer, final int len, final long address)
    {
        final int index = SortedTable.lookup(buffer, TABLE_OFFSET, len, address);
        assertTrue(index > 0, "no entry for " + Long.toHexString(address));
        return SortedTable.lkey(buffer, TABLE_OFFSET, index);
    }

    private static UnsafeBuffer table(final int capacity)
    {
        return new UnsafeBuffer(ByteBuffer.allocateDirect(TABLE_OFFSET + capacity * ENTRY_LENGTH));
    }

    private static byte[] bytes(final UnsafeBuffer buffer, final int len)
    {
        final byte[] bytes = new byte[TABLE_OFFSET + len * ENTRY_LENGTH];
        buffer.getBytes(0, bytes);
        return bytes;
    }
}
