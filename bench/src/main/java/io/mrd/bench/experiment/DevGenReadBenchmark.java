package io.mrd.bench.experiment;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.layout.HeaderDescriptor;
import org.agrona.concurrent.UnsafeBuffer;
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
 * Not part of the table (scripts/bench leaves this package out): what the {@code devGen} check costs a
 * top-half MRU hit in Java, to explain the gap to C. A bare MRU check over the same addresses as
 * {@code TopHalfBenchmark} ("mru"), preceded by reading {@code devGen} from a real control file with an
 * acquire load (what {@code MrCache} does), an opaque load, or not at all.
 * <pre>
 *   java @scripts/jvm-flags @scripts/daemon-jvm-flags -jar bench/target/mrd-bench.jar jmh --out /tmp/x --include DevGenRead
 * </pre>
 */
@State(Scope.Thread)
public class DevGenReadBenchmark
{
    private static final int BATCH = 1024;
    private static final int MASK = AddressPattern.COUNT - 1;

    @Param({"acquire", "opaque", "none"})
    public String read;

    private GlobalCacheFixture fixture;
    private UnsafeBuffer controlFile;
    private long[] addresses;
    private int cursor;
    private final long[] start = new long[8];
    private final long[] end = new long[8];
    private final int[] lkey = new int[8];
    private int mru;
    private long devGen;

    @Setup(Level.Trial)
    public void setUp()
    {
        fixture = GlobalCacheFixture.create(8);
        controlFile = fixture.secondary().buffer();
        devGen = controlFile.getLongAcquire(HeaderDescriptor.DEV_GEN_OFFSET);
        for (int chunk = 0; chunk < 8; chunk++)
        {
            start[chunk] = AddressPattern.chunkStart(chunk);
            end[chunk] = start[chunk] + AddressPattern.CHUNK;
            lkey[chunk] = AddressPattern.lkey(chunk);
        }
        addresses = AddressPattern.uniform(1);
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        fixture.close();
    }

    private int mruHit(final long address)
    {
        final int m = mru;
        return address >= start[m] && address < end[m] ? lkey[m] : -1;
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void mru(final Blackhole blackhole)
    {
        final long[] addresses = this.addresses;
        int i = cursor;
        switch (read)
        {
            case "acquire" ->
            {
                for (int n = 0; n < BATCH; n++)
                {
                    if (controlFile.getLongAcquire(HeaderDescriptor.DEV_GEN_OFFSET) != devGen)
                    {
                        throw new IllegalStateException("devGen moved");
                    }
                    blackhole.consume(mruHit(addresses[i]));
                    i = (i + 1) & MASK;
                }
            }
            case "opaque" ->
            {
                for (int n = 0; n < BATCH; n++)
                {
                    if (controlFile.getLongOpaque(HeaderDescriptor.DEV_GEN_OFFSET) != devGen)
                    {
                        throw new IllegalStateException("devGen moved");
                    }
                    blackhole.consume(mruHit(addresses[i]));
                    i = (i + 1) & MASK;
                }
            }
            default ->
            {
                for (int n = 0; n < BATCH; n++)
                {
                    blackhole.consume(mruHit(addresses[i]));
                    i = (i + 1) & MASK;
                }
            }
        }
        cursor = i;
    }
}
