package io.mrd.bench.experiment;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrEntry;
import io.mrd.layout.SeqLock;
import io.mrd.layout.SortedTable;
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
 * Not part of the table: where the gap between {@link GlobalCacheReader#lookup} and the C seqlock search
 * comes from. The same control file searched three ways: through the reader ({@code reader}); the reader's
 * protocol written inline in the loop ({@code inline}: {@link SeqLock#tryBeginRead}, {@link SortedTable#lookup},
 * {@link SeqLock#validate}); and the search alone, no seqlock ({@code search}).
 * <pre>
 *   java @scripts/jvm-flags @scripts/daemon-jvm-flags -jar bench/target/mrd-bench.jar jmh --out /tmp/x --include GlobalInline
 * </pre>
 */
@State(Scope.Thread)
public class GlobalInlineBenchmark
{
    private static final int BATCH = 1024;
    private static final int MASK = AddressPattern.COUNT - 1;

    @Param({"65536"})
    public int entries;

    private GlobalCacheFixture fixture;
    private GlobalCacheReader reader;
    private final MrEntry entry = new MrEntry();
    private UnsafeBuffer buffer;
    private SeqLock seqLock;
    private int offset;
    private int length;
    private long[] addresses;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp()
    {
        fixture = GlobalCacheFixture.create(entries);
        reader = new GlobalCacheReader(fixture.secondary());
        buffer = fixture.secondary().buffer();
        seqLock = fixture.secondary().seqLock();
        offset = fixture.secondary().layout().cacheOffset();
        length = entries + 1;
        addresses = AddressPattern.uniform(entries);
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        fixture.close();
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void reader(final Blackhole blackhole)
    {
        int i = cursor;
        for (int n = 0; n < BATCH; n++)
        {
            blackhole.consume(reader.lookup(addresses[i], entry) ? entry.lkey : CacheEntryDescriptor.NO_LKEY);
            i = (i + 1) & MASK;
        }
        cursor = i;
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void inline(final Blackhole blackhole)
    {
        int i = cursor;
        for (int n = 0; n < BATCH; n++)
        {
            int lkey;
            while (true)
            {
                final long seq = seqLock.tryBeginRead();
                final int index = SortedTable.lookup(buffer, offset, length, addresses[i]);
                lkey = index == SortedTable.NOT_FOUND ? CacheEntryDescriptor.NO_LKEY :
                    SortedTable.lkey(buffer, offset, index);
                if (seq != SeqLock.WRITE_IN_PROGRESS && seqLock.validate(seq))
                {
                    break;
                }
            }
            blackhole.consume(lkey);
            i = (i + 1) & MASK;
        }
        cursor = i;
    }

    @Benchmark
    @OperationsPerInvocation(BATCH)
    public void search(final Blackhole blackhole)
    {
        int i = cursor;
        for (int n = 0; n < BATCH; n++)
        {
            final int index = SortedTable.lookup(buffer, offset, length, addresses[i]);
            blackhole.consume(index == SortedTable.NOT_FOUND ? CacheEntryDescriptor.NO_LKEY :
                SortedTable.lkey(buffer, offset, index));
            i = (i + 1) & MASK;
        }
        cursor = i;
    }
}
