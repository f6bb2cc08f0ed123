package io.mrd.primary.mr;

import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.provider.ProviderConfig;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static io.mrd.layout.sys.Sizes.hex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Eight threads ask for MRs over the same memory at once, as eight secondaries missing on the same buffers
 * would: every segment ends up live in exactly one MR, every thread gets the same lkey for the same segment,
 * and the provider registers exactly once per MR.
 */
class ConcurrentCreateTest
{
    private static final long BASE = BaseAddresses.next();
    private static final int THREADS = 8;
    private static final int ROUNDS = 6;
    private static final int ALLOCATIONS = 3;
    private static final int SEGMENTS_PER_ALLOCATION = 4;
    private static final long SEG = EngineFixture.SEGMENT;
    private static final long DEADLINE_SECONDS = 60;

    @ParameterizedTest(name = "--mr-ext-memseg {0}")
    @ValueSource(booleans = {true, false})
    void concurrentCreatesRegisterEverySegmentOnce(final boolean extend) throws Exception
    {
        // A little latency keeps each registration in flight long enough for the others to pile up behind it.
        final ProviderConfig provider = ProviderConfig.defaults().withLatencyNanos(200_000);
        final ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        try
        {
            for (int round = 0; round < ROUNDS; round++)
            {
                try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(extend)
                    .provider(provider)))
                {
                    runRound(f, pool, round, extend);
                }
            }
        }
        finally
        {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(DEADLINE_SECONDS, TimeUnit.SECONDS), "workers did not stop");
        }
    }

    private static void runRound(final EngineFixture f, final ExecutorService pool, final int round,
        final boolean extend) throws Exception
    {
        // Owners alternate, so that a chunk spans allocations of several clients. Rounds 0 and 2 put the
        // allocations back to back (one chunk), and round 2 registers the first one before the others exist, so
        // that the chunk's MR must leave its segments out; odd rounds separate them by freed segments (three
        // chunks).
        final List<Allocation> allocations = new ArrayList<>();
        final List<Allocation> gaps = new ArrayList<>();
        final boolean preRegistered = round % 4 == 2;
        for (int i = 0; i < ALLOCATIONS; i++)
        {
            allocations.add(f.engine.allocate(SEGMENTS_PER_ALLOCATION * SEG, 1 + i % 3));
            if (preRegistered && i == 0)
            {
                f.engine.createMr(allocations.getFirst().address(), 1);
            }
            if (round % 2 == 1)
            {
                gaps.add(f.engine.allocate(SEG, 3));
            }
        }
        for (final Allocation gap : gaps)
        {
            f.engine.freeMemory(gap.address(), gap.length(), gap.owner());
        }
        final List<Long> segments = segmentsOf(allocations);
        final int createsBefore = preRegistered ? 1 : 0;

        final Map<Long, Integer> agreed = createEverywhereAtOnce(f, pool, segments, THREADS, round, List.of());
        checkEverySegmentOnce(f, segments, agreed);
        assertEquals((long)THREADS * segments.size() + createsBefore, f.counter(MrdCounter.CREATE_REQUESTS));
        final int active = f.activeMrs().size();
        if (!extend)
        {
            assertEquals(segments.size(), active, "one MR per segment without --mr-ext-memseg");
        }
        else
        {
            assertEquals(round % 2 == 1 ? ALLOCATIONS : preRegistered ? 2 : 1, active,
                "one MR per chunk with --mr-ext-memseg (and one for the part registered before)\n" + f.describe());
        }
    }

    /**
     * Creates race allocations that grow the chunk and a free that shrinks it, so that chunks change between
     * the engine's first look and its re-check under the memory lock.
     */
    @ParameterizedTest(name = "--mr-ext-memseg {0}")
    @ValueSource(booleans = {true, false})
    void createsRacingAllocationsAndFreesRegisterEverySegmentOnce(final boolean extend) throws Exception
    {
        race(extend, Long.MAX_VALUE, 0);
    }

    /**
     * The same race with registrations ten times slower, injected in front of the provider where no engine lock
     * is held, and a provider that takes at most three segments: frees of held segments wait, creates of
     * overlapping ranges wait, the rest of each chunk is registered piece by piece.
     */
    @ParameterizedTest(name = "--mr-ext-memseg {0}")
    @ValueSource(booleans = {true, false})
    void slowSplitRegistrationsRacingAllocationsAndFreesRegisterEverySegmentOnce(final boolean extend)
        throws Exception
    {
        race(extend, 3 * SEG, 2_000_000);
    }

    private static void race(final boolean extend, final long maxRegionLength, final long injectedLatencyNanos)
        throws Exception
    {
        final ProviderConfig provider = ProviderConfig.defaults().withLatencyNanos(200_000);
        final ExecutorService pool = Executors.newFixedThreadPool(THREADS);
        try
        {
            for (int round = 0; round < ROUNDS; round++)
            {
                try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).extend(extend)
                    .provider(provider)))
                {
                    f.registrar.maxRegionLength = maxRegionLength;
                    f.registrar.beforeRegister = (address, length) -> LockSupport.parkNanos(injectedLatencyNanos);
                    final List<Allocation> allocations = new ArrayList<>();
                    final List<Runnable> disturbances;
                    if (round % 2 == 0)
                    {
                        // One chunk that grows at its end while a free takes two segments out of it.
                        for (int i = 0; i < ALLOCATIONS; i++)
                        {
                            allocations.add(f.engine.allocate(SEGMENTS_PER_ALLOCATION * SEG, 1 + i % 3));
                        }
                        final Allocation doomed = f.engine.allocate(2 * SEG, 2);
                        disturbances = List.of(
                            () ->
                            {
                                for (int i = 0; i < 4; i++)
                                {
                                    f.engine.allocate(SEG, 3);
                                }
                            },
                            () -> f.engine.freeMemory(doomed.address(), doomed.length(), doomed.owner()));
                    }
                    else
                    {
                        // Eight one-segment chunks, whose gaps first-fit allocations fill one by one while they
                        // are being registered, joining them.
                        final List<Allocation> gaps = new ArrayList<>();
                        for (int i = 0; i < 8; i++)
                        {
                            allocations.add(f.engine.allocate(SEG, 1 + i % 3));
                            gaps.add(f.engine.allocate(SEG, 3));
                        }
                        for (final Allocation gap : gaps)
                        {
                            f.engine.freeMemory(gap.address(), gap.length(), gap.owner());
                        }
                        disturbances = List.of(
                            () ->
                            {
                                for (int i = 0; i < 8; i++)
                                {
                                    f.engine.allocate(SEG, 3);
                                }
                            });
                    }
                    final List<Long> segments = segmentsOf(allocations);
                    final Map<Long, Integer> agreed =
                        createEverywhereAtOnce(f, pool, segments, THREADS - disturbances.size(), round, disturbances);
                    checkEverySegmentOnce(f, segments, agreed);

                    // The memory the disturbances allocated registers like any other.
                    for (int s = 0; s < f.options.segmentsPerList(); s++)
                    {
                        final long address = f.segmentAddress(0, s);
                        if (f.memory.list(0).isAllocated(s))
                        {
                            assertEquals(f.engine.createMr(address, 1).lkey, f.secondaryLookup(address));
                        }
                    }
                    f.checkInvariants();
                    for (final RecordedMr mr : f.activeMrs())
                    {
                        assertTrue(mr.length() <= maxRegionLength, "MR longer than the limit: " + mr);
                    }
                }
            }
        }
        finally
        {
            pool.shutdownNow();
            assertTrue(pool.awaitTermination(DEADLINE_SECONDS, TimeUnit.SECONDS), "workers did not stop");
        }
    }

    private static List<Long> segmentsOf(final List<Allocation> allocations)
    {
        final List<Long> segments = new ArrayList<>();
        for (final Allocation a : allocations)
        {
            for (int s = 0; s < a.segmentCount(); s++)
            {
                segments.add(a.address() + s * SEG);
            }
        }
        return segments;
    }

    /**
     * Starts {@code creators} threads that each create an MR for an address in every segment, in an order of
     * their own, together with the disturbances, all released at once by a barrier.
     *
     * @return the lkey every thread got for each segment (they must agree).
     */
    private static Map<Long, Integer> createEverywhereAtOnce(final EngineFixture f, final ExecutorService pool,
        final List<Long> segments, final int creators, final int round, final List<Runnable> disturbances)
        throws Exception
    {
        final CyclicBarrier start = new CyclicBarrier(creators + disturbances.size());
        final List<Future<?>> others = new ArrayList<>();
        for (final Runnable disturbance : disturbances)
        {
            others.add(pool.submit(() ->
            {
                start.await(DEADLINE_SECONDS, TimeUnit.SECONDS);
                disturbance.run();
                return null;
            }));
        }
        final List<Future<Map<Long, Integer>>> results = new ArrayList<>();
        for (int t = 0; t < creators; t++)
        {
            final long seed = 31L * round + t;
            results.add(pool.submit(() ->
            {
                final Random random = new Random(seed);
                final List<Long> order = new ArrayList<>(segments);
                Collections.shuffle(order, random);
                final Map<Long, Integer> lkeys = new HashMap<>();
                start.await(DEADLINE_SECONDS, TimeUnit.SECONDS);
                for (final long segment : order)
                {
                    final long address = segment + (random.nextLong(SEG) & ~7L);
                    final MrEntry entry = f.engine.createMr(address, 1);
                    assertTrue(entry.containsRange(address, 1), entry + " for " + hex(address));
                    lkeys.put(segment, entry.lkey);
                }
                return lkeys;
            }));
        }
        final Map<Long, Integer> agreed = new HashMap<>();
        for (final Future<Map<Long, Integer>> result : results)
        {
            final Map<Long, Integer> lkeys = result.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
            assertEquals(segments.size(), lkeys.size());
            for (final Map.Entry<Long, Integer> e : lkeys.entrySet())
            {
                final Integer previous = agreed.putIfAbsent(e.getKey(), e.getValue());
                if (null != previous)
                {
                    assertEquals(previous, e.getValue(), "two threads got different lkeys for segment " +
                        hex(e.getKey()) + "\n" + f.describe());
                }
            }
        }

        for (final Future<?> other : others)
        {
            other.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        }
        return agreed;
    }

    /**
     * Every segment is live in exactly one ACTIVE MR, with the lkey every thread got for it, found by a
     * secondary; the provider registered once per ACTIVE MR.
     */
    private static void checkEverySegmentOnce(final EngineFixture f, final List<Long> segments,
        final Map<Long, Integer> agreed)
    {
        f.checkInvariants();
        final List<RecordedMr> active = f.activeMrs();
        for (final long segment : segments)
        {
            int owners = 0;
            for (final RecordedMr mr : active)
            {
                for (final MrEntry chunk : mr.chunks())
                {
                    if (segment >= chunk.start && segment < chunk.end)
                    {
                        owners++;
                        assertEquals(agreed.get(segment), mr.lkey(), "lkey of segment " + hex(segment));
                    }
                }
            }
            assertEquals(1, owners, "segment " + hex(segment) + " is live in " + owners + " MRs\n" + f.describe());
            final Integer lkey = f.secondaryLookup(segment + SEG - 1);
            assertNotNull(lkey, "segment " + hex(segment) + " not found by a secondary");
            assertEquals(agreed.get(segment), lkey);
        }
        assertEquals(active.size(), f.registrar.registrations.get() - f.registrar.deregistrations.get(),
            "live registrations against ACTIVE MRs\n" + f.describe());
        assertEquals(active.size(), f.counter(MrdCounter.MRS_CREATED) - f.counter(MrdCounter.MRS_DEREGISTERED),
            "MRS_CREATED against ACTIVE MRs");
    }
}
