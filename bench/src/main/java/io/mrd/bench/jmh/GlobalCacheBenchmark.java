package io.mrd.bench.jmh;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrEntry;
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
 * The global-cache search a secondary does on a local miss: {@link GlobalCacheReader#lookup} (seqlock read,
 * halving search, validate) over a real control file of {@code entries} chunks, mapped read-only. The C
 * reference does the same seqlock read and search over the same kind of file mapping.
 */
@State(Scope.Thread)
public class GlobalCacheBenchmark
{
    @Param({"4096", "65536", "1048576"})
    public int entries;

    private GlobalCacheFixture fixture;
    private GlobalCacheReader reader;
    private final MrEntry entry = new MrEntry();
    private long[] addresses;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp()
    {
        fixture = GlobalCacheFixture.create(entries);
        reader = new GlobalCacheReader(fixture.secondary());
        addresses = AddressPattern.uniform(entries);
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        fixture.close();
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void global(final Blackhole blackhole)
    {
        final GlobalCacheReader reader = this.reader;
        final MrEntry entry = this.entry;
        final long[] addresses = this.addresses;
        int i = cursor;
        for (int n = 0; n < Batch.SIZE; n++)
        {
            blackhole.consume(reader.lookup(addresses[i], entry) ? entry.lkey : CacheEntryDescriptor.NO_LKEY);
            i = (i + 1) & Batch.MASK;
        }
        cursor = i;
    }
}
