package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryLocks;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Memory free events (DESIGN §4): the freed segments leave every MR covering them, an MR left with none is
 * detached and then deregistered by the garbage collector with no lock held, devGen moves, and a client's
 * death or the daemon's shutdown releases everything.
 */
class MemoryEventTest
{
    private static final long BASE = BaseAddresses.next();
    private static final long SEG = EngineFixture.SEGMENT;
    private static final long DEADLINE_SECONDS = 30;

    @Test
    void freeingTheMiddleOfAnMrSplitsItsChunkAndFreeingTheRestCollectsIt()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            final Allocation a = f.engine.allocate(6 * SEG, 1);
            final MrEntry entry = f.engine.createMr(a.address() + 3 * SEG + 100, 1);
            assertEquals(a.address(), entry.start);
            assertEquals(a.end(), entry.end);
            final int slot = entry.mr;
            final int lkey = entry.lkey;
            assertEquals(6, f.activeMrs().getFirst().msN());
            assertEquals(6 * SEG, f.registrar.pinnedBytes());
            assertEquals(6 * SEG, f.counter(MrdCounter.BYTES_REGISTERED));

            // Free segments 2 and 3: their bits clear, msN drops, two chunks with one lkey, devGen + 1; the MR
            // stays registered (and pinned) over its whole range.
            final long devGen = f.devGen();
            f.engine.freeMemory(a.address() + 2 * SEG, 2 * SEG, 1);
            assertEquals(devGen + 1, f.devGen(), "one free event, one devGen");
            RecordedMr mr = f.activeMrs().getFirst();
            assertEquals(slot, mr.slot());
            assertEquals(4, mr.msN());
            assertEquals(6, mr.msBmpN());
            assertEquals(List.of(a.address(), a.address() + 2 * SEG, a.address() + 4 * SEG, a.end()),
                bounds(mr.chunks()));
            final List<MrEntry> cache = f.cacheEntries();
            assertEquals(List.of(a.address(), a.address() + 2 * SEG, a.address() + 4 * SEG, a.end()), bounds(cache));
            assertTrue(cache.stream().allMatch(e -> e.lkey == lkey && e.mr == slot), cache.toString());
            assertEquals(6 * SEG, f.registrar.pinnedBytes());
            assertNull(f.secondaryLookup(a.address() + 2 * SEG));
            assertNull(f.secondaryLookup(a.address() + 4 * SEG - 1));
            assertEquals(lkey, f.secondaryLookup(a.address() + 2 * SEG - 1));
            assertEquals(lkey, f.secondaryLookup(a.address() + 4 * SEG));
            f.checkInvariants();

            // The freed segments can be allocated and registered again, as a new MR.
            final Allocation again = f.engine.allocate(2 * SEG, 2);
            assertEquals(a.address() + 2 * SEG, again.address());
            final MrEntry second = f.engine.createMr(again.address(), 2);
            assertEquals(again.address(), second.start);
            assertEquals(again.end(), second.end);
            assertTrue(second.lkey != lkey);
            f.checkInvariants();
            f.engine.freeMemory(again.address(), again.length(), 2);
            f.checkInvariants();

            // Free the rest: at the deregistration the MR is DETACHED, out of the cache, and no lock is held.
            // The hook records rather than asserts: an AssertionError thrown inside the engine's garbage collection
            // would leave it half done and hide what the test is about.
            final List<String> seenAtDeregistration = new ArrayList<>();
            f.registrar.beforeDeregister = registration ->
            {
                if (registration.lkey() != lkey)
                {
                    return;
                }
                seenAtDeregistration.add(MrDescriptor.stateName(f.state(slot)));
                seenAtDeregistration.add("seqlock " + ((f.ctl.seqLock().sequence() & 1) != 0 ? "held" : "free"));
                seenAtDeregistration.add("memory lock " + (MemoryLocks.held(f.memory) ? "held" : "free"));
                seenAtDeregistration.add("cache " + (null == f.secondaryLookup(a.address()) ? "clear" : "holds it"));
                // Another thread can take the cache lock: the engine does not hold it across deregistration.
                final CompletableFuture<Boolean> other = CompletableFuture.supplyAsync(
                    () -> f.engine.lookup(a.address(), new MrEntry()));
                try
                {
                    other.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
                    seenAtDeregistration.add("cache lock free");
                }
                catch (final Exception ex)
                {
                    seenAtDeregistration.add("cache lock held: " + ex);
                }
            };
            final long deregistered = f.counter(MrdCounter.MRS_DEREGISTERED);
            f.engine.freeMemory(a.address(), 2 * SEG, 1);
            assertEquals(2, f.activeMrs().getFirst().msN(), "still ACTIVE with two segments");
            assertEquals(1, f.registrar.deregistrations.get(), "only the second MR is deregistered so far");
            final long devGenBefore = f.devGen();
            f.engine.freeMemory(a.address() + 4 * SEG, 2 * SEG, 1);
            assertEquals(devGenBefore + 1, f.devGen());
            assertEquals(List.of("DETACHED", "seqlock free", "memory lock free", "cache clear", "cache lock free"),
                seenAtDeregistration, "the engine while the provider deregisters the MR");
            assertEquals(MrDescriptor.STATE_FREE, f.state(slot), "collected");
            assertEquals(deregistered + 1, f.counter(MrdCounter.MRS_DEREGISTERED));
            assertEquals(0, f.registrar.pinnedBytes(), "pinned bytes drop by the MR's length");
            assertEquals(0, f.counter(MrdCounter.BYTES_PINNED));
            assertEquals(0, f.counter(MrdCounter.BYTES_REGISTERED));
            assertEquals(0, f.counter(MrdCounter.MRS_ACTIVE));
            assertTrue(f.cacheEntries().isEmpty());
            f.checkInvariants();
        }
    }

    @Test
    void aFreeReleasesItsPagesOnlyAfterAnotherThreadsCollectionOfItsMrIsDone() throws Exception
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            final Allocation a = f.engine.allocate(2 * SEG, 1);
            final int lkey = f.engine.createMr(a.address(), 1).lkey;
            final java.util.concurrent.CountDownLatch inDeregister = new java.util.concurrent.CountDownLatch(1);
            final java.util.concurrent.CountDownLatch letGo = new java.util.concurrent.CountDownLatch(1);
            final List<String> order = java.util.Collections.synchronizedList(new ArrayList<>());
            f.registrar.beforeDeregister = registration ->
            {
                if (registration.lkey() == lkey)
                {
                    inDeregister.countDown();
                    awaitQuietly(letGo);
                    order.add("deregistered");
                }
            };
            // After the engine's own listener detached the MR, and before the freeing thread collects it, a
            // second thread's garbage collection takes it and is slow to deregister it.
            final CompletableFuture<Void> otherCollection = new CompletableFuture<>();
            f.memory.addEventListener(ranges ->
            {
                if (!otherCollection.isDone())
                {
                    // Own threads, not the common pool: on two cores it has one thread, which the free holds.
                    Thread.ofPlatform().name("other-collection").start(() ->
                    {
                        f.engine.garbageCollect();
                        otherCollection.complete(null);
                    });
                    awaitQuietly(inDeregister);
                }
            });
            final CompletableFuture<FreedRange> free = new CompletableFuture<>();
            Thread.ofPlatform().name("freeing").start(() ->
            {
                final FreedRange range = f.engine.freeMemory(a.address(), a.length(), 1);
                order.add("free returned");
                free.complete(range);
            });
            assertTrue(inDeregister.await(30, TimeUnit.SECONDS), "the other thread reached the deregistration");
            // Without the wait in the free, it returns (its pages released) while the MR is still registered.
            assertThrows(java.util.concurrent.TimeoutException.class, () -> free.get(2, TimeUnit.SECONDS),
                "the free returned while another thread was still deregistering its MR: " + order);
            letGo.countDown();
            free.get(30, TimeUnit.SECONDS);
            otherCollection.get(30, TimeUnit.SECONDS);
            assertEquals(List.of("deregistered", "free returned"), order);
            f.checkInvariants();
        }
    }

    private static Throwable failureOf(final CompletableFuture<Void> request)
    {
        try
        {
            request.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
            return null;
        }
        catch (final Exception ex)
        {
            return ex;
        }
    }

    private static void awaitQuietly(final java.util.concurrent.CountDownLatch latch)
    {
        try
        {
            if (!latch.await(30, TimeUnit.SECONDS))
            {
                throw new IllegalStateException("latch not released within 30 s");
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(ex);
        }
    }

    @Test
    void freeingMemoryNoMrCoversInvalidatesNothing()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            final Allocation registered = f.engine.allocate(2 * SEG, 1);
            final Allocation gap = f.engine.allocate(SEG, 1);
            final Allocation other = f.engine.allocate(2 * SEG, 1);
            f.engine.freeMemory(gap.address(), gap.length(), 1);
            final int lkey = f.engine.createMr(registered.address(), 1).lkey;
            final long devGen = f.devGen();
            final long rebuilds = f.counter(MrdCounter.CACHE_REBUILDS);
            f.engine.freeMemory(other.address(), other.length(), 1);
            assertEquals(devGen, f.devGen(), "no MR lost a segment, no local cache needs flushing");
            assertEquals(rebuilds, f.counter(MrdCounter.CACHE_REBUILDS));
            assertEquals(lkey, f.secondaryLookup(registered.address()));
            f.checkInvariants();
        }
    }

    @Test
    void reclaimFreesOneOwnersMemoryAndExternalsOnly()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            // Owners 1 and 2 interleaved, so that owner 1's MR spans owner 2's segments too.
            final Allocation a1 = f.engine.allocate(2 * SEG, 1);
            final Allocation b1 = f.engine.allocate(2 * SEG, 2);
            final Allocation a2 = f.engine.allocate(SEG, 1);
            final Allocation gap = f.engine.allocate(SEG, 3);
            final Allocation b2 = f.engine.allocate(3 * SEG, 2);
            f.engine.freeMemory(gap.address(), gap.length(), 3);
            final MrEntry spanning = f.engine.createMr(a1.address(), 1);
            assertEquals(a1.address(), spanning.start);
            assertEquals(a2.end(), spanning.end);
            final MrEntry owned = f.engine.createMr(b2.address(), 2);
            final MemorySegment ext1 = f.mapExternal(Sizes.MIB);
            final MemorySegment ext2 = f.mapExternal(2 * Sizes.MIB);
            final MrEntry e1 = f.engine.registerExternal(ext1.address(), ext1.byteSize(), 1, Access.LOCAL);
            final MrEntry e2 = f.engine.registerExternal(ext2.address(), ext2.byteSize(), 2, Access.LOCAL);
            f.checkInvariants();
            assertEquals(5 * SEG + 3 * SEG + 3 * Sizes.MIB, f.registrar.pinnedBytes());

            final long devGen = f.devGen();
            final List<FreedRange> ranges = f.engine.reclaim(2);
            assertEquals(List.of(b1.address(), b2.address()), ranges.stream().map(FreedRange::address).toList());
            assertTrue(f.devGen() > devGen, "reclaim is an invalidating event");
            f.checkInvariants();
            assertEquals(List.of(spanning.lkey, e1.lkey), f.activeMrs().stream().map(RecordedMr::lkey).toList());
            assertEquals(spanning.lkey, f.secondaryLookup(a1.address()));
            assertEquals(spanning.lkey, f.secondaryLookup(a2.address()));
            assertNull(f.secondaryLookup(b1.address()), "owner 2's segments leave owner 1's MR");
            assertNull(f.secondaryLookup(b2.address()));
            assertNull(f.secondaryLookup(ext2.address()));
            assertEquals(e1.lkey, f.secondaryLookup(ext1.address() + 4096));
            assertTrue(f.engine.externalsOwnedBy(2).isEmpty());
            assertEquals(List.of(ext1.address()), f.engine.externalsOwnedBy(1));
            assertEquals(5 * SEG + Sizes.MIB, f.registrar.pinnedBytes(), "owner 2's MR and external unpinned");
            assertTrue(f.memory.list(0).isAllocated(f.memory.list(0).segmentIndex(a1.address())));
            assertFalse(f.memory.list(0).isAllocated(f.memory.list(0).segmentIndex(b1.address())));
            assertTrue(owned.lkey != spanning.lkey && e2.lkey != e1.lkey);

            assertTrue(f.engine.reclaim(2).isEmpty(), "nothing left to reclaim");
            f.checkInvariants();
            f.unmapExternal(ext2);
        }
    }

    /**
     * A client sends DEREG_EXTERNAL and dies: a worker deregisters the external memory while the connection's
     * close reclaims everything the client owned. The reclaim must still free and release the client's memory.
     */
    @Test
    void reclaimSurvivesAnExternalDeregisteredMeanwhile()
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE)))
        {
            final Allocation keep = f.engine.allocate(SEG, 1);
            final int kept = f.engine.createMr(keep.address(), 1).lkey;
            final Allocation dead = f.engine.allocate(2 * SEG, 2);
            f.engine.createMr(dead.address() + SEG, 2);
            final MemorySegment ext1 = f.mapExternal(Sizes.MIB);
            final MemorySegment ext2 = f.mapExternal(Sizes.MIB);
            final MrEntry e1 = f.engine.registerExternal(ext1.address(), ext1.byteSize(), 2, Access.LOCAL);
            f.engine.registerExternal(ext2.address(), ext2.byteSize(), 2, Access.LOCAL);

            // While reclaim deregisters the first external, the client's own request deregisters the second. The
            // request detaches it at once, then waits for reclaim's deregistration in flight before it unmaps
            // (MrCollector.collectAndAwait): reclaim goes on once the second is detached, the request ends after it.
            final List<CompletableFuture<Void>> worker = new ArrayList<>();
            f.registrar.beforeDeregister = registration ->
            {
                if (registration.lkey() == e1.lkey && worker.isEmpty())
                {
                    final CompletableFuture<Void> request = new CompletableFuture<>();
                    worker.add(request);
                    Thread.ofPlatform().name("dereg-external").start(() ->
                    {
                        try
                        {
                            f.engine.deregisterExternal(ext2.address(), 2);
                            request.complete(null);
                        }
                        catch (final Throwable t)
                        {
                            request.completeExceptionally(t);
                        }
                    });
                    io.mrd.testing.Wait.await("the client's request detached the second external",
                        java.time.Duration.ofSeconds(DEADLINE_SECONDS),
                        () -> request.isDone() || !f.engine.externalsOwnedBy(2).contains(ext2.address()));
                }
            };
            final List<FreedRange> ranges = f.engine.reclaim(2);
            assertEquals(1, worker.size(), "the worker's deregistration ran");
            assertNull(failureOf(worker.getFirst()), "the worker's deregistration failed");
            assertEquals(List.of(dead.address()), ranges.stream().map(FreedRange::address).toList());
            assertTrue(f.engine.externalsOwnedBy(2).isEmpty());
            assertEquals(SEG, f.registrar.pinnedBytes(), "only owner 1's MR is left\n" + f.describe());
            assertEquals(kept, f.secondaryLookup(keep.address()));
            f.checkInvariants();

            // The dead client's segments were released: they can be allocated again.
            final Allocation again = f.engine.allocate(2 * SEG, 3);
            assertEquals(dead.address(), again.address(), "the reclaimed segments are free again");
            f.checkInvariants();
        }
    }

    @Test
    void closeReleasesEveryMr()
    {
        final EngineFixture f = new EngineFixture(EngineOptions.at(BASE));
        try
        {
            final Allocation a = f.engine.allocate(3 * SEG, 1);
            final Allocation b = f.engine.allocate(SEG, 2);
            f.engine.createMr(a.address(), 1);
            f.engine.freeMemory(a.address() + SEG, SEG, 1);
            f.engine.createMr(b.address(), 2);
            final MemorySegment ext = f.mapExternal(Sizes.MIB);
            f.engine.registerExternal(ext.address(), ext.byteSize(), 1, Access.LOCAL);
            f.checkInvariants();
            assertTrue(f.registrar.pinnedBytes() > 0);

            final long devGen = f.devGen();
            f.engine.close();
            assertEquals(0, f.registrar.pinnedBytes(), "pinned bytes after close");
            assertEquals(0, f.counter(MrdCounter.BYTES_PINNED));
            assertEquals(1, f.ctl.header().cacheLen(), "only the sentinel is left");
            assertTrue(f.cacheEntries().isEmpty());
            assertTrue(f.mrs().isEmpty(), "every record FREE: " + f.describe());
            assertTrue(f.devGen() > devGen, "secondaries flush their caches");
            assertNull(f.secondaryLookup(a.address()));
            assertNull(f.secondaryLookup(ext.address()));
            assertEquals(f.registrar.registrations.get(), f.registrar.deregistrations.get());
            f.engine.close();
            assertEquals(0, f.registrar.pinnedBytes(), "a second close changes nothing");
        }
        finally
        {
            f.close();
        }
    }

    private static List<Long> bounds(final List<MrEntry> entries)
    {
        final List<Long> bounds = new ArrayList<>();
        for (final MrEntry e : entries)
        {
            bounds.add(e.start);
            bounds.add(e.end);
        }
        return bounds;
    }
}
