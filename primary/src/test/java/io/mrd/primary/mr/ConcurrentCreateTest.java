package io.mrd.primary.mr;

import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.provider.ProviderConfig;
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
    private static final long BASE = EngineFixture.base(1);
    private static final int THREADS = 8;
    private static final int ROUNDS = 4;
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
                try (EngineFixture f = new EngineFixture(EngineFixture.Options.at(BASE).extend(extend)
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
        // Owners alternate, so that a chunk spans allocations of several clients. In even rounds the allocations
        // are back to back (one chunk); in odd rounds a freed segment separates them (three chunks).
        final List<Allocation> allocations = new ArrayList<>();
        final List<Allocation> gaps = new ArrayList<>();
        for (int i = 0; i < ALLOCATIONS; i++)
        {
            allocations.add(f.engine.allocate(SEGMENTS_PER_ALLOCATION * SEG, 1 + i % 3));
            if (round % 2 == 1)
            {
                gaps.add(f.engine.allocate(SEG, 3));
            }
        }
        for (final Allocation gap : gaps)
        {
            f.engine.freeMemory(gap.address(), gap.length(), gap.owner());
        }
        final List<Long> segments = new ArrayList<>();
        for (final Allocation a : allocations)
        {
            for (int s = 0; s < a.segmentCount(); s++)
            {
                segments.add(a.address() + s * SEG);
            }
        }

        final CyclicBarrier start = new CyclicBarrier(THREADS);
        final List<Future<Map<Long, Integer>>> results = new ArrayList<>();
        for (int t = 0; t < THREADS; t++)
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

        f.checkInvariants();
        final List<EngineFixture.Mr> active = f.activeMrs();
        for (final long segment : segments)
        {
            int owners = 0;
            for (final EngineFixture.Mr mr : active)
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
        assertEquals(active.size(), f.registrar.registrations.get(), "registrations against ACTIVE MRs\n" +
            f.describe());
        assertEquals(active.size(), f.counter(MrdCounter.MRS_CREATED), "MRS_CREATED against ACTIVE MRs");
        assertEquals((long)THREADS * segments.size(), f.counter(MrdCounter.CREATE_REQUESTS));
        if (!extend)
        {
            assertEquals(segments.size(), active.size(), "one MR per segment without --mr-ext-memseg");
        }
        else
        {
            assertEquals(round % 2 == 0 ? 1 : ALLOCATIONS, active.size(), "one MR per chunk with --mr-ext-memseg\n" +
                f.describe());
        }
    }
}
