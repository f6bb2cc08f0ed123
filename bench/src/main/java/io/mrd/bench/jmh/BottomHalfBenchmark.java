package io.mrd.bench.jmh;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.Tables;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.SortedTable;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

/**
 * The bottom-half search: {@link SortedTable#lookup} over an off-heap table of {@code entries} chunks (plus
 * the sentinel), random addresses in random chunks. The C reference is the reference's
 * {@code mr_btree_lookup} over a {@code malloc}'d array of the same 24-byte entries.
 */
@State(Scope.Thread)
public class BottomHalfBenchmark
{
    @Param({"256", "4096", "65536"})
    public int entries;

    private UnsafeBuffer table;
    private int length;
    private long[] addresses;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp()
    {
        table = Tables.offHeap(entries);
        length = entries + 1;
        addresses = AddressPattern.uniform(entries);
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void bottomhalf(final Blackhole blackhole)
    {
        final UnsafeBuffer table = this.table;
        final int length = this.length;
        final long[] addresses = this.addresses;
        int i = cursor;
        for (int n = 0; n < Batch.SIZE; n++)
        {
            final int index = SortedTable.lookup(table, 0, length, addresses[i]);
            blackhole.consume(index == SortedTable.NOT_FOUND ? CacheEntryDescriptor.NO_LKEY :
                SortedTable.lkey(table, 0, index));
            i = (i + 1) & Batch.MASK;
        }
        cursor = i;
    }
}
