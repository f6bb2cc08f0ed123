package io.mrd.primary.mr;

import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.Allocation;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;

import static io.mrd.layout.sys.Sizes.hex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A global cache of 16 entries (15 and the sentinel) and 100 MRs: the overflow flag goes up and every lookup,
 * a secondary's included, is still right through the slow path (the MR table scan); once enough memory is freed
 * for a rebuild to fit, the flag goes down and the fast path holds every chunk again.
 * <p>
 * Segments are 64 KiB here (the engine takes the size from the memory manager), so that 100 single-segment MRs
 * pin 6.4 MiB rather than 200 MiB.
 */
class CacheOverflowTest
{
    private static final long BASE = BaseAddresses.next();
    private static final long SEG = 64 * Sizes.KIB;
    private static final int MRS = 100;
    private static final int UNREGISTERED = 5;
    private static final int CACHE_CAPACITY = 16;

    @Test
    void lookupsStayRightThroughTheSlowPathAndTheFastPathComesBack()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).geometry(2, 64, SEG)
            .mrCapacity(128).cacheCapacity(CACHE_CAPACITY).extend(false)))
        {
            final List<Allocation> allocations = new ArrayList<>();
            for (int i = 0; i < MRS + UNREGISTERED; i++)
            {
                allocations.add(f.engine.allocate(SEG, 1 + i % 3));
            }
            final int[] lkeys = new int[MRS];
            for (int i = 0; i < MRS; i++)
            {
                final long address = allocations.get(i).address() + (i * 4096L) % SEG;
                final MrEntry entry = f.engine.createMr(address, 1);
                assertTrue(entry.containsRange(address, 1), entry + " for " + hex(address));
                lkeys[i] = entry.lkey;
                if (i < CACHE_CAPACITY - 1)
                {
                    assertFalse(f.overflow(), "overflow with " + (i + 1) + " entries in a cache of " + CACHE_CAPACITY);
                }
            }
            assertTrue(f.overflow(), "overflow flag after " + MRS + " MRs in a cache of " + CACHE_CAPACITY);
            assertTrue(f.secondaryView.header().cacheOverflow(), "the secondaries see the flag");
            assertTrue(f.counter(MrdCounter.CACHE_OVERFLOWS) >= 1, "CACHE_OVERFLOWS counter");
            assertEquals(MRS, f.activeMrs().size());
            assertFalse(f.rebuildIfOverflowed(), "a rebuild cannot fit " + MRS + " chunks");
            f.checkInvariants();

            for (int i = 0; i < MRS; i++)
            {
                final Allocation a = allocations.get(i);
                assertEquals(lkeys[i], f.secondaryLookup(a.address()), "slow path, MR " + i);
                assertEquals(lkeys[i], f.secondaryLookup(a.end() - 1), "slow path, MR " + i);
                assertEquals(lkeys[i], f.engineLookup(a.address() + SEG / 2), "engine slow path, MR " + i);
            }
            for (int i = MRS; i < MRS + UNREGISTERED; i++)
            {
                assertNull(f.secondaryLookup(allocations.get(i).address()), "unregistered allocated segment " + i);
            }

            // A create while overflowed: found by the scan, nothing new for an address registered already.
            final int registrations = f.registrar.registrations.get();
            assertEquals(lkeys[42], f.engine.createMr(allocations.get(42).address() + 8, 1).lkey);
            assertEquals(registrations, f.registrar.registrations.get(), "registered twice while overflowed");

            // Free all but 10: each free rebuilds, and the last rebuilds fit.
            final long devGen = f.devGen();
            for (int i = 10; i < MRS; i++)
            {
                final Allocation a = allocations.get(i);
                f.engine.freeMemory(a.address(), a.length(), a.owner());
            }
            assertTrue(f.devGen() >= devGen + (MRS - 10), "devGen grew on every free");
            assertFalse(f.overflow(), "the overflow flag is cleared once a rebuild fits\n" + f.describe());
            assertTrue(f.rebuildIfOverflowed());
            assertEquals(10, f.cacheEntries().size(), "the cache holds every chunk again\n" + f.describe());
            f.checkInvariants();
            for (int i = 0; i < MRS; i++)
            {
                final Allocation a = allocations.get(i);
                assertEquals(i < 10 ? Integer.valueOf(lkeys[i]) : null, f.secondaryLookup(a.address()),
                    "fast path, MR " + i);
            }
            for (int i = MRS; i < MRS + UNREGISTERED; i++)
            {
                assertNull(f.secondaryLookup(allocations.get(i).address()), "unregistered allocated segment " + i);
            }

            // And new MRs go into the cache again.
            final Allocation last = allocations.get(MRS);
            final int lkey = f.engine.createMr(last.address(), 2).lkey;
            assertFalse(f.overflow());
            assertEquals(11, f.cacheEntries().size());
            assertEquals(lkey, f.secondaryLookup(last.address()));
            f.checkInvariants();
        }
    }

    @Test
    void aRebuildThatCannotFitKeepsTheFlagAndLookupsRight()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).geometry(2, 64, SEG)
            .mrCapacity(128).cacheCapacity(CACHE_CAPACITY).extend(false)))
        {
            final List<Allocation> allocations = new ArrayList<>();
            final int[] lkeys = new int[40];
            for (int i = 0; i < 40; i++)
            {
                allocations.add(f.engine.allocate(SEG, 1));
                lkeys[i] = f.engine.createMr(allocations.get(i).address(), 1).lkey;
            }
            assertTrue(f.overflow());
            // A free event rebuilds, overflows again (30 chunks left), and must leave the flag set.
            for (int i = 0; i < 10; i++)
            {
                f.engine.freeMemory(allocations.get(i).address(), SEG, 1);
                assertTrue(f.overflow(), "flag after a rebuild that could not fit\n" + f.describe());
                f.checkInvariants();
            }
            for (int i = 0; i < 40; i++)
            {
                assertEquals(i < 10 ? null : Integer.valueOf(lkeys[i]), f.secondaryLookup(allocations.get(i).address()),
                    "MR " + i);
            }
        }
    }
}
