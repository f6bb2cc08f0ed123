package io.mrd.bench.jmh;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.bench.report.ResultFile;
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

import java.util.concurrent.TimeUnit;

/**
 * Global-cache lookups (65,536 entries) while another thread plays the primary, rewriting one entry under the
 * seqlock {@code writesPerSecond} times a second ({@code beginWrite}, store the entry, {@code endWrite}),
 * paced by spinning on {@link System#nanoTime()} since sleeping cannot wake every 10 µs. {@code 0} runs the
 * same lookups with no writer: the ratio of the two is the cost of a concurrent writer to readers (retries
 * and the cache line of {@code seq} moving between cores).
 * <p>
 * The rate the writer reached is appended to {@code $mrd.bench.out/jmh-writer.tsv} when that property is set.
 */
@State(Scope.Benchmark)
public class GlobalWriterBenchmark
{
    /** Entries of the global cache. */
    public static final int ENTRIES = 65_536;

    @Param({"0", "100000"})
    public int writesPerSecond;

    private GlobalCacheFixture fixture;
    private Thread writer;
    private volatile boolean stop;
    private volatile long writes;
    private long startNanos;

    @Setup(Level.Trial)
    public void setUp()
    {
        fixture = GlobalCacheFixture.create(ENTRIES);
        stop = false;
        if (writesPerSecond > 0)
        {
            writer = new Thread(this::write, "bench-primary-writer");
            writer.setDaemon(true);
            startNanos = System.nanoTime();
            writer.start();
        }
    }

    private void write()
    {
        final long period = TimeUnit.SECONDS.toNanos(1) / writesPerSecond;
        final AddressPattern.SplitMix64 random = new AddressPattern.SplitMix64(AddressPattern.SEED ^ 1);
        long next = System.nanoTime();
        long count = 0;
        while (!stop)
        {
            next += period;
            while (System.nanoTime() < next)
            {
                Thread.onSpinWait();
            }
            fixture.rewrite((int)Long.remainderUnsigned(random.next(), ENTRIES));
            writes = ++count;
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException
    {
        stop = true;
        if (null != writer)
        {
            writer.join();
            final double seconds = (System.nanoTime() - startNanos) / 1e9;
            final double rate = writes / seconds;
            System.out.printf("%nwriter: %d writes in %.1f s = %.0f writes/s%n", writes, seconds, rate);
            ResultFile.appendIfConfigured("jmh-writer.tsv", "java", "globalwriter.rate", rate, "writes/s");
        }
        fixture.close();
    }

    /**
     * The reader's own state: one {@link GlobalCacheReader} per thread, as in a secondary.
     */
    @State(Scope.Thread)
    public static class Reader
    {
        private GlobalCacheReader reader;
        private final MrEntry entry = new MrEntry();
        private long[] addresses;
        private int cursor;

        @Setup(Level.Trial)
        public void setUp(final GlobalWriterBenchmark benchmark)
        {
            reader = new GlobalCacheReader(benchmark.fixture.secondary());
            addresses = AddressPattern.uniform(ENTRIES);
        }
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void globalwriter(final Reader state, final Blackhole blackhole)
    {
        final GlobalCacheReader reader = state.reader;
        final MrEntry entry = state.entry;
        final long[] addresses = state.addresses;
        int i = state.cursor;
        for (int n = 0; n < Batch.SIZE; n++)
        {
            blackhole.consume(reader.lookup(addresses[i], entry) ? entry.lkey : CacheEntryDescriptor.NO_LKEY);
            i = (i + 1) & Batch.MASK;
        }
        state.cursor = i;
    }
}
