package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * {@link MrCache} against {@link FakeSource}: a model of what the global levels hold, random lookups, frees
 * and devGen changes; then the reference's top-half and bottom-half behaviour case by case.
 */
final class MrCacheTest
{
    private static final long BASE = 0x1000_0000_0000L;
    private static final long UNIT = 4096;

    @Property(tries = 200)
    void agreesWithTheModel(
        @ForAll @IntRange(min = 1, max = 600) final int rangeCount,
        @ForAll @IntRange(min = 1, max = 3000) final int operations,
        @ForAll final long seed)
    {
        final Random random = new Random(seed);
        final FakeSource source = new FakeSource();
        final List<long[]> ranges = new ArrayList<>();
        long at = BASE;
        for (int i = 0; i < rangeCount; i++)
        {
            at += random.nextInt(3) * UNIT; // a gap of 0 makes neighbours: buffers can straddle them
            final long end = at + (1 + random.nextInt(4)) * UNIT;
            // Every third range is local-only: no rkey.
            final long[] range = {at, end, 0x100 + i, i % 3 == 0 ? 0 : 0x7700_0000 + i};
            ranges.add(range);
            if (random.nextBoolean())
            {
                source.global.put(range[0], range);
            }
            else
            {
                source.registrable.put(range[0], range);
            }
            at = end;
        }
        final MrCache cache = new MrCache(source);
        // A few hot ranges, as a queue reuses a few buffers: exercises the top half.
        final int[] hot = random.ints(4, 0, rangeCount).toArray();

        long lookups = 0;
        for (int op = 0; op < operations; op++)
        {
            final int kind = random.nextInt(100);
            if (kind < 3)
            {
                source.bumpDevGen();
                continue;
            }
            if (kind < 6)
            {
                source.free(ranges.get(random.nextInt(rangeCount))[0]);
                continue;
            }
            final long[] range = ranges.get(kind < 50 ? hot[random.nextInt(hot.length)] : random.nextInt(rangeCount));
            final long size = range[1] - range[0];
            final long address;
            final long length;
            if (kind < 85)
            {
                address = range[0] + (long)(random.nextDouble() * size);
                length = (long)(random.nextDouble() * (range[1] - address + 1));
            }
            else if (kind < 93)
            {
                address = range[1] - 1 - random.nextInt(64);
                length = range[1] - address + 1 + random.nextInt(4096);
            }
            else
            {
                address = random.nextBoolean() ? range[0] - 1 : BASE - 1 - random.nextInt(1 << 20);
                length = 1;
            }
            lookups++;
            assertLookup(cache, source, address, length);
        }
        // Every lookup past the MRU slot is answered (or refused) by exactly one level below it.
        assertEquals(cache.mruMisses(), cache.topHits() + cache.bottomHits() + cache.globalHits() +
            cache.createRequests(), cache.toString());
        assertEquals(lookups - cache.mruMisses(), cache.mruHits(lookups));
        assertTrue(cache.mruHits(lookups) >= 0, cache.toString());
        assertEquals(source.creates, cache.createRequests());
    }

    private static void assertLookup(final MrCache cache, final FakeSource source, final long address, final long length)
    {
        long[] expected = FakeSource.find(source.global, address);
        if (null == expected)
        {
            expected = FakeSource.find(source.registrable, address);
        }
        // Half the lookups ask for both keys: the two calls share every level, and must agree.
        final boolean pair = (address & 1) == 0;
        try
        {
            final long keys = pair ? cache.keyPair(address, length) : cache.lkey(address, length);
            final int lkey = pair ? KeyPair.lkey(keys) : (int)keys;
            if (null == expected)
            {
                fail("lkey " + lkey + " for unregistered " + Long.toHexString(address));
            }
            assertTrue(address + length <= expected[1], "returned an lkey for a straddling buffer");
            assertEquals((int)expected[2], lkey, () -> "lkey of " + Long.toHexString(address));
            if (pair)
            {
                assertEquals(FakeSource.rkey(expected), KeyPair.rkey(keys), () -> "rkey of " + Long.toHexString(address));
            }
        }
        catch (final MrdException ex)
        {
            if (null == expected)
            {
                assertEquals(ErrorCode.ENXIO, ex.code(), ex.toString());
            }
            else
            {
                assertEquals(ErrorCode.EINVAL, ex.code(), ex.toString());
                assertTrue(address + length > expected[1], "refused a buffer inside one MR: " + ex);
            }
        }
    }

    @Test
    void mostRecentlyUsedThenLinearThenBottomHalf()
    {
        final FakeSource source = new FakeSource();
        for (int i = 0; i < 9; i++)
        {
            source.putGlobal(entryStart(i), entryStart(i) + UNIT, i + 1);
        }
        final MrCache cache = new MrCache(source);

        for (int i = 0; i < 8; i++)
        {
            assertEquals(i + 1, cache.lkey(entryStart(i), 64));
        }
        assertEquals(8, cache.globalHits());
        assertEquals(8, cache.bottomLength() - 1);

        assertEquals(8, cache.lkey(entryStart(7) + 100, 64)); // the MRU slot
        assertEquals(1, cache.lkey(entryStart(0), 64));       // linear scan
        assertEquals(1, cache.lkey(entryStart(0) + 8, 8));    // now the MRU
        assertEquals(1, cache.topHits(), "the linear hit; MRU hits are not counted");
        assertEquals(9, cache.mruMisses());
        assertEquals(2, cache.mruHits(11));
        assertEquals(8, source.globalLookups);

        // A ninth entry replaces the oldest slot (FIFO from slot 0), so entry 0 comes from the bottom half.
        assertEquals(9, cache.lkey(entryStart(8), 64));
        assertEquals(9, cache.globalHits());
        assertEquals(1, cache.lkey(entryStart(0), 64));
        assertEquals(1, cache.bottomHits());
        // ... which replaced slot 1: entry 1 too, and its refill replaced slot 2 (entry 2).
        assertEquals(2, cache.lkey(entryStart(1), 64));
        assertEquals(2, cache.bottomHits());
        final long topHits = cache.topHits();
        for (final int i : new int[] {3, 4, 5, 6, 7, 8, 0, 1})
        {
            assertEquals(i + 1, cache.lkey(entryStart(i), 64));
        }
        assertEquals(topHits + 8, cache.topHits(), "each moved the MRU: all linear hits");
        assertEquals(2, cache.bottomHits());
        assertEquals(3, cache.lkey(entryStart(2), 64));
        assertEquals(3, cache.bottomHits());
        assertEquals(9, source.globalLookups);
        assertEquals(0, cache.createRequests());
    }

    @Test
    void bottomHalfDoublesPast256()
    {
        final FakeSource source = new FakeSource();
        final int count = 700;
        for (int i = 0; i < count; i++)
        {
            source.putGlobal(entryStart(i), entryStart(i) + UNIT, i + 1);
        }
        final MrCache cache = new MrCache(source);
        assertEquals(MrCache.INITIAL_BOTTOM_CAPACITY, cache.bottomCapacity());
        for (int i = count - 1; i >= 0; i--) // descending: every insert shifts the table
        {
            assertEquals(i + 1, cache.lkey(entryStart(i), 1));
        }
        assertEquals(count + 1, cache.bottomLength());
        assertEquals(1024, cache.bottomCapacity());
        for (int i = 0; i < count; i++)
        {
            assertEquals(i + 1, cache.lkey(entryStart(i) + UNIT - 1, 1));
        }
        // The last eight of the first pass (entries 7..0) are in the top half; the rest come from the bottom.
        assertEquals(count, cache.globalHits());
        assertEquals(count, source.globalLookups);
        assertEquals(7, cache.topHits(), "entry 0 was the MRU: 1..7 by the linear scan");
        assertEquals(count - 8, cache.bottomHits());
    }

    @Test
    void devGenChangeFlushesBothLevels()
    {
        final FakeSource source = new FakeSource();
        source.putGlobal(BASE, BASE + UNIT, 7);
        source.putGlobal(BASE + UNIT, BASE + 2 * UNIT, 8);
        final MrCache cache = new MrCache(source);
        assertEquals(7, cache.lkey(BASE, 8));
        assertEquals(8, cache.lkey(BASE + UNIT, 8));
        assertEquals(0, cache.flushes());

        source.bumpDevGen();
        assertEquals(7, cache.lkey(BASE, 8));
        assertEquals(1, cache.flushes());
        assertEquals(3, cache.globalHits());
        assertEquals(2, cache.bottomLength());

        // A free event removes the entry: the next lookup must not answer from either local level.
        source.free(BASE);
        final MrdException ex = assertThrows(MrdException.class, () -> cache.lkey(BASE, 8));
        assertEquals(ErrorCode.ENXIO, ex.code());
        assertEquals(2, cache.flushes());
        assertEquals(source.devGen(), cache.devGen());
    }

    @Test
    void createOnGlobalMissThenTheEntryIsLocal()
    {
        final FakeSource source = new FakeSource();
        source.putRegistrable(BASE, BASE + 16 * UNIT, 0x55);
        final MrCache cache = new MrCache(source);
        assertEquals(0x55, cache.lkey(BASE + UNIT, 4096));
        assertEquals(1, cache.createRequests());
        assertEquals(0x55, cache.lkey(BASE + 2 * UNIT, 4096));
        assertEquals(1, cache.createRequests());
        assertEquals(1, source.creates);

        // Another queue's cache finds what the first created in the global cache.
        final MrCache other = new MrCache(source);
        assertEquals(0x55, other.lkey(BASE, 1));
        assertEquals(1, other.globalHits());
        assertEquals(0, other.createRequests());
    }

    @Test
    void straddlingBufferIsRefusedWithTheBoundary()
    {
        final FakeSource source = new FakeSource();
        source.putGlobal(BASE, BASE + UNIT, 1);
        source.putGlobal(BASE + UNIT, BASE + 2 * UNIT, 2);
        final MrCache cache = new MrCache(source);

        assertEquals(1, cache.lkey(BASE, UNIT));
        final MrdException fromTop = assertThrows(MrdException.class, () -> cache.lkey(BASE + UNIT - 8, 16));
        assertEquals(ErrorCode.EINVAL, fromTop.code());
        assertTrue(fromTop.getMessage().contains("straddles two MRs"), fromTop.getMessage());
        assertTrue(fromTop.getMessage().contains("0x100000001000"), fromTop.getMessage());

        final MrCache fresh = new MrCache(source);
        final MrdException fromGlobal = assertThrows(MrdException.class, () -> fresh.lkey(BASE + UNIT - 1, 2));
        assertEquals(ErrorCode.EINVAL, fromGlobal.code());
        assertEquals(1, fresh.globalHits());
        // The entry found is still cached: the part that fits gets its lkey without another global lookup.
        assertEquals(1, fresh.lkey(BASE + UNIT - 1, 1));
        assertEquals(1, fresh.globalHits());

        final MrdException negative = assertThrows(MrdException.class, () -> cache.lkey(BASE, -1));
        assertEquals(ErrorCode.EINVAL, negative.code());
        final MrdException huge = assertThrows(MrdException.class, () -> cache.lkey(BASE, Long.MAX_VALUE));
        assertEquals(ErrorCode.EINVAL, huge.code());
    }

    @Test
    void deadDaemonNeverYieldsAnLkey()
    {
        final FakeSource source = new FakeSource();
        source.putGlobal(BASE, BASE + UNIT, 1);
        final MrCache cache = new MrCache(source);
        assertEquals(1, cache.lkey(BASE, 8));

        source.markDead();
        final DaemonDeadException ex = assertThrows(DaemonDeadException.class, () -> cache.lkey(BASE, 8));
        assertEquals(ErrorCode.ECONNRESET, ex.code());
        assertTrue(ex.getMessage().contains("re-attach"), ex.getMessage());
    }

    @Test
    void invalidateOfALiveCacheOnlyFlushes()
    {
        final FakeSource source = new FakeSource();
        source.putGlobal(BASE, BASE + UNIT, 1);
        final MrCache cache = new MrCache(source);
        assertEquals(1, cache.lkey(BASE, 8));
        cache.invalidate();
        assertEquals(1, cache.lkey(BASE, 8));
        assertEquals(1, cache.flushes());
        assertEquals(2, cache.globalHits());
        assertEquals(1, cache.lkey(BASE + 8, 8));
        assertEquals(2, cache.mruMisses());
    }

    @Test
    void aCacheOfADeadDaemonIsRefused()
    {
        final FakeSource source = new FakeSource();
        source.putGlobal(BASE, BASE + UNIT, 1);
        source.markDead();
        assertThrows(DaemonDeadException.class, () -> new MrCache(source));
    }

    @Test
    void slowPathChecksLivenessBeforeCreating()
    {
        final FakeSource source = new FakeSource();
        source.putGlobal(BASE, BASE + UNIT, 1);
        source.putRegistrable(BASE + UNIT, BASE + 2 * UNIT, 2);
        final MrCache cache = new MrCache(source);
        assertEquals(1, cache.lkey(BASE, 8));

        // The watchdog has not looked yet: local hits still answer, a create does not go out.
        source.heartbeatStale = true;
        assertEquals(1, cache.lkey(BASE, 8));
        assertThrows(DaemonDeadException.class, () -> cache.lkey(BASE + UNIT, 8));
        assertEquals(0, source.creates);
        assertThrows(DaemonDeadException.class, () -> cache.lkey(BASE, 8));
    }

    @Test
    void createReplyMustContainTheAddress()
    {
        final MrSource liar = new FakeSource()
        {
            @Override
            public void createMr(final long address, final long length, final io.mrd.layout.MrEntry out)
            {
                out.set(address + UNIT, address + 2 * UNIT, 9, Access.NO_RKEY, Access.LOCAL, -1);
            }
        };
        final MrCache cache = new MrCache(liar);
        assertEquals(ErrorCode.EPROTO, assertThrows(MrdException.class, () -> cache.lkey(BASE, 8)).code());
    }

    @Test
    void modelMapHelperFindsContainingRange()
    {
        final TreeMap<Long, long[]> map = new TreeMap<>();
        map.put(10L, new long[] {10, 20, 1});
        assertEquals(1, FakeSource.find(map, 19)[2]);
        assertEquals(null, FakeSource.find(map, 20));
        assertEquals(null, FakeSource.find(map, 9));
    }

    private static long entryStart(final int index)
    {
        return BASE + 2L * index * UNIT;
    }

    @Test
    void keyPairComesFromEveryLevelWithTheLkey()
    {
        final FakeSource source = new FakeSource();
        source.global.put(BASE, new long[] {BASE, BASE + UNIT, 0x11, 0x2211});
        source.registrable.put(BASE + UNIT, new long[] {BASE + UNIT, BASE + 2 * UNIT, 0x12, 0});
        final MrCache cache = new MrCache(source);

        assertEquals(KeyPair.pack(0x11, 0x2211), cache.keyPair(BASE, 8), "from the global cache");
        assertEquals(KeyPair.pack(0x12, Access.NO_RKEY), cache.keyPair(BASE + UNIT, 8), "from CREATE_MR");
        assertEquals(KeyPair.pack(0x11, 0x2211), cache.keyPair(BASE + 16, 8), "from the top half");
        assertEquals(0x11, cache.lkey(BASE + 16, 8));
        source.bumpDevGen();
        assertEquals(KeyPair.pack(0x12, Access.NO_RKEY), cache.keyPair(BASE + UNIT + 8, 8), "after a flush");
        assertEquals(0xFFFF_FFFFL, KeyPair.pack(-1, 0), "the lkey does not spill into the rkey");
        assertEquals(-1, KeyPair.rkey(KeyPair.pack(0, -1)));
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> cache.keyPair(BASE, 2 * UNIT)).code(),
            "a buffer straddling two MRs has no keys");
    }

    @Test
    void keyPairAllocatesNothing()
    {
        final FakeSource source = new FakeSource();
        for (int i = 0; i < 64; i++)
        {
            source.global.put(BASE + i * UNIT, new long[] {BASE + i * UNIT, BASE + (i + 1) * UNIT, 0x100 + i, 0x900 + i});
        }
        final MrCache cache = new MrCache(source);
        final com.sun.management.ThreadMXBean threads =
            (com.sun.management.ThreadMXBean)java.lang.management.ManagementFactory.getThreadMXBean();
        long sum = 0;
        // Warm up (fills every level, lets the JIT compile), then measure: top-half hits, top-half misses that
        // the bottom half answers, and lookups of both kinds.
        for (int round = 0; round < 2; round++)
        {
            final long before = threads.getCurrentThreadAllocatedBytes();
            for (int i = 0; i < 1_000_000; i++)
            {
                final long address = BASE + (i * 7L % 64) * UNIT + 64;
                sum += KeyPair.rkey(cache.keyPair(address, 64)) + cache.lkey(address, 64);
            }
            final long allocated = threads.getCurrentThreadAllocatedBytes() - before;
            if (round == 1)
            {
                assertTrue(allocated < 1024, "2e6 lookups allocated " + allocated + " bytes");
            }
        }
        assertTrue(sum != 0);
    }
}
