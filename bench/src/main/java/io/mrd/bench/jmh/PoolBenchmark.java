package io.mrd.bench.jmh;

import io.mrd.bench.fixture.ClientLiveness;
import io.mrd.layout.Access;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.secondary.pool.BufferPool;
import io.mrd.secondary.pool.PoolContext;
import io.mrd.secondary.pool.PooledBuffer;
import io.mrd.secondary.pool.SlabMemory;
import io.mrd.secondary.pool.SlabSource;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.Blackhole;

import java.lang.foreign.Arena;

/**
 * {@link BufferPool} acquire + release beside Netty's {@code PooledByteBufAllocator.DEFAULT.directBuffer(size)
 * .release()} of the same sizes, from one thread and from two (a JMH group of 2, each thread its own
 * acquire/release pairs on the one shared pool), and the key of a pooled buffer ({@link PooledBuffer#lkey()},
 * the generation check included) beside the MrCache MRU hit ({@code tophalf.mru}).
 * <p>
 * The pool's slabs are native memory with made-up keys ({@link SlabSource} over an {@link Arena}): what is
 * timed is the pool's own work, which does not depend on who registered the slab, and no daemon is needed; the
 * liveness check every acquire and key makes is the client's own ({@link ClientLiveness}).
 * Both allocators warm up to steady state (their thread caches filled) before measurement.
 */
@State(Scope.Benchmark)
public class PoolBenchmark
{
    @Param({"4096", "65536", "1048576"})
    public int size;

    private Arena arena;
    private BufferPool pool;
    private PooledBuffer[] keyed;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp()
    {
        arena = Arena.ofShared();
        final int[] keys = {0x100};
        final DaemonLiveness liveness = ClientLiveness.untripped();
        pool = BufferPool.open(new SlabSource()
        {
            public SlabMemory allocate(final long length, final int access)
            {
                synchronized (keys)
                {
                    keys[0] += 2;
                    return new SlabMemory(arena.allocate(length, 4096), keys[0], keys[0] + 1);
                }
            }

            public void free(final SlabMemory memory)
            {
                // the arena frees everything at tear-down
            }

            public DaemonLiveness liveness()
            {
                return liveness;
            }
        }, new PoolContext().access(Access.REMOTE_WRITE));
        keyed = new PooledBuffer[8];
        for (int i = 0; i < keyed.length; i++)
        {
            keyed[i] = pool.acquire(size);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        for (final PooledBuffer buffer : keyed)
        {
            buffer.release();
        }
        pool.close();
        arena.close();
    }

    @Benchmark
    public void poolAcquireRelease(final Blackhole blackhole)
    {
        final PooledBuffer buffer = pool.acquire(size);
        blackhole.consume(buffer);
        buffer.release();
    }

    @Benchmark
    public void nettyAcquireRelease(final Blackhole blackhole)
    {
        final ByteBuf buffer = PooledByteBufAllocator.DEFAULT.directBuffer(size);
        blackhole.consume(buffer);
        buffer.release();
    }

    @Benchmark
    @Group("poolTwoThreads")
    @GroupThreads(2)
    public void poolTwoThreads(final Blackhole blackhole)
    {
        poolAcquireRelease(blackhole);
    }

    @Benchmark
    @Group("nettyTwoThreads")
    @GroupThreads(2)
    public void nettyTwoThreads(final Blackhole blackhole)
    {
        nettyAcquireRelease(blackhole);
    }

    /** The key of a kept pooled buffer, 8 buffers in turn (the loop cannot hoist the load). */
    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void poolKey(final Blackhole blackhole)
    {
        final PooledBuffer[] buffers = keyed;
        int i = cursor;
        for (int n = 0; n < Batch.SIZE; n++)
        {
            blackhole.consume(buffers[i].lkey());
            i = (i + 1) & 7;
        }
        cursor = i;
    }
}
