package io.mrd.bench.jmh;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.ControlFileSource;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.secondary.MrCache;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.Blackhole;

/**
 * Top-half hits of {@link MrCache#lkey(long, long)}: liveness read, {@code devGen} check, then the 8-entry
 * most-recently-used cache. {@code mru}: every address is in the chunk of the MRU slot. {@code other}: the 8
 * slots hold 8 chunks and each address is in another chunk than the one before, so every lookup misses the
 * MRU slot and scans. The C reference runs DPDK's {@code mlx5_mr_mb2mr} shape on the same addresses.
 */
@State(Scope.Thread)
public class TopHalfBenchmark
{
    @Param({"mru", "other"})
    public String slot;

    private GlobalCacheFixture fixture;
    private MrCache cache;
    private long[] addresses;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp()
    {
        fixture = GlobalCacheFixture.create(MrCache.TOP_HALF_ENTRIES);
        cache = new MrCache(new ControlFileSource(fixture.secondary()));
        for (int chunk = 0; chunk < MrCache.TOP_HALF_ENTRIES; chunk++)
        {
            cache.lkey(AddressPattern.chunkStart(chunk), AddressPattern.BUFFER_LENGTH);
        }
        addresses = "mru".equals(slot) ? AddressPattern.uniform(1) :
            AddressPattern.changingChunk(MrCache.TOP_HALF_ENTRIES);
        final long before = cache.bottomHits() + cache.globalHits();
        for (final long address : addresses)
        {
            cache.lkey(address, AddressPattern.BUFFER_LENGTH);
        }
        if (cache.bottomHits() + cache.globalHits() != before)
        {
            throw new IllegalStateException("top-half benchmark left the top half: " + cache);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        fixture.close();
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void tophalf(final Blackhole blackhole)
    {
        final long[] addresses = this.addresses;
        final MrCache cache = this.cache;
        int i = cursor;
        for (int n = 0; n < Batch.SIZE; n++)
        {
            blackhole.consume(cache.lkey(addresses[i], AddressPattern.BUFFER_LENGTH));
            i = (i + 1) & Batch.MASK;
        }
        cursor = i;
    }
}
