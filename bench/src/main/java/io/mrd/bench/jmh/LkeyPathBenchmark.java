package io.mrd.bench.jmh;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.ControlFileSource;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.secondary.MrCache;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.Blackhole;

/**
 * The whole {@link MrCache#lkey(long, long)} path a datapath thread runs per buffer: liveness, {@code devGen}
 * check, top half, and on a top-half miss the bottom half and the FIFO replacement of a top-half slot.
 * Buffers are spread uniformly over {@code mrs} chunks: 4 stay in the top half (a pool in a few MRs); 64
 * miss the top half about 7 times in 8 and are found in the bottom half. The global cache (4,096 entries) is
 * only touched while warming up. The C reference runs the same two levels on the same addresses.
 */
@State(Scope.Thread)
public class LkeyPathBenchmark
{
    @Param({"4", "64"})
    public int mrs;

    private GlobalCacheFixture fixture;
    private MrCache cache;
    private long[] addresses;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp()
    {
        fixture = GlobalCacheFixture.create(4096);
        cache = new MrCache(new ControlFileSource(fixture.secondary()));
        addresses = AddressPattern.uniform(mrs);
        for (final long address : addresses)
        {
            cache.lkey(address, AddressPattern.BUFFER_LENGTH);
        }
        if (cache.globalHits() != mrs || cache.createRequests() != 0 || cache.flushes() != 0)
        {
            throw new IllegalStateException("warm-up did not fill the local caches with " + mrs + " MRs: " + cache);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        fixture.close();
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void lkey(final Blackhole blackhole)
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
