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
 * A cache of one device of a daemon on {@value #DEVICES} devices (issue 23), as {@code client.newCache(device)}
 * makes it: its global level reads the global entry and the device's entry of the MR key table, and its two
 * levels keep that device's keys. {@code deviceMru}: every address in the MRU slot's chunk, as
 * {@link TopHalfBenchmark}'s {@code mru}. {@code deviceLkey}: the whole path over 64 MRs, as
 * {@link LkeyPathBenchmark}'s {@code lkey} with {@code mrs=64}. Device 0 and device 7 run the same hit path, so
 * the C reference of either is DPDK's loop of the same rows (it keeps one cache per device); the set-up checks
 * that the keys handed out are the device's own.
 */
@State(Scope.Thread)
public class DeviceCacheBenchmark
{
    static final int DEVICES = 8;
    private static final int PATH_MRS = 64;

    @Param({"0", "7"})
    public int device;

    private GlobalCacheFixture fixture;
    private MrCache mruCache;
    private long[] mruAddresses;
    private MrCache pathCache;
    private long[] pathAddresses;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp()
    {
        fixture = GlobalCacheFixture.create(4096, DEVICES);
        mruCache = new MrCache(new ControlFileSource(fixture.secondary(), device));
        mruAddresses = AddressPattern.uniform(1);
        requireDeviceKey(mruCache, mruAddresses[0], 0);
        pathCache = new MrCache(new ControlFileSource(fixture.secondary(), device));
        pathAddresses = AddressPattern.uniform(PATH_MRS);
        for (int chunk = 0; chunk < PATH_MRS; chunk++)
        {
            requireDeviceKey(pathCache, AddressPattern.chunkStart(chunk), chunk);
        }
        for (final long address : pathAddresses)
        {
            pathCache.lkey(address, AddressPattern.BUFFER_LENGTH);
        }
        if (pathCache.globalHits() != PATH_MRS || pathCache.createRequests() != 0 || pathCache.flushes() != 0)
        {
            throw new IllegalStateException("warm-up did not fill the local caches with " + PATH_MRS + " MRs: " +
                pathCache);
        }
    }

    private void requireDeviceKey(final MrCache cache, final long address, final int chunk)
    {
        final int lkey = cache.lkey(address, AddressPattern.BUFFER_LENGTH);
        if (lkey != AddressPattern.lkey(chunk, device))
        {
            throw new IllegalStateException("device " + device + "'s cache gave lkey 0x" + Integer.toHexString(lkey) +
                " for chunk " + chunk + ", not the device's 0x" + Integer.toHexString(AddressPattern.lkey(chunk,
                device)));
        }
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        fixture.close();
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void deviceMru(final Blackhole blackhole)
    {
        cursor = run(mruCache, mruAddresses, cursor, blackhole);
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void deviceLkey(final Blackhole blackhole)
    {
        cursor = run(pathCache, pathAddresses, cursor, blackhole);
    }

    private static int run(final MrCache cache, final long[] addresses, final int from, final Blackhole blackhole)
    {
        int i = from;
        for (int n = 0; n < Batch.SIZE; n++)
        {
            blackhole.consume(cache.lkey(addresses[i], AddressPattern.BUFFER_LENGTH));
            i = (i + 1) & Batch.MASK;
        }
        return i;
    }
}
