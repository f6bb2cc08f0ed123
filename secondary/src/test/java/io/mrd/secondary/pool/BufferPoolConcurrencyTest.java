package io.mrd.secondary.pool;

import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Acquire/release storms from 4 threads of their own, handing a share of their buffers to each other so that
 * buffers are released by other threads than their acquirers. Each thread writes its id and a counter into
 * the buffer's first and last word and checks them before the release: two owners of overlapping memory would
 * see each other's writes. At the end every buffer is accounted for: none acquired, and each slot is either in
 * a magazine or a shared list (a second round acquires the pool's whole memory without a new slab).
 */
class BufferPoolConcurrencyTest
{
    private static final int THREADS = 4;
    private static final int ROUNDS = 20_000;
    private static final int[] SIZES = {64, 1000, 4096, 20_000, 65_536};

    @Test
    void stormsKeepBuffersApartAndLoseNone() throws Exception
    {
        final FakeSlabSource source = new FakeSlabSource();
        final BufferPool pool = BufferPool.open(source, new PoolContext().minClassSize(64).maxClassSize(65_536)
            .threadCacheBuffers(16).threadCacheBytes(1 << 18));
        final ConcurrentLinkedQueue<Held> handOff = new ConcurrentLinkedQueue<>();
        final ConcurrentHashMap<Long, PooledBuffer> owners = new ConcurrentHashMap<>();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final CyclicBarrier start = new CyclicBarrier(THREADS);
        final AtomicLongArray acquired = new AtomicLongArray(THREADS);
        final List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < THREADS; t++)
        {
            final int id = t;
            final Thread thread = new Thread(() ->
            {
                try
                {
                    final SplittableRandom random = new SplittableRandom(id);
                    final List<Held> held = new ArrayList<>();
                    start.await();
                    for (int round = 0; round < ROUNDS; round++)
                    {
                        if (held.size() < 32 && random.nextInt(3) != 0)
                        {
                            final PooledBuffer buffer = pool.acquire(SIZES[random.nextInt(SIZES.length)]);
                            if (null != owners.putIfAbsent(buffer.address(), buffer))
                            {
                                throw new AssertionError(buffer + " is live twice: " + owners.get(buffer.address()));
                            }
                            held.add(stamp(buffer, id, round));
                            acquired.incrementAndGet(id);
                        }
                        else if (!held.isEmpty())
                        {
                            final Held one = held.remove(random.nextInt(held.size()));
                            if (random.nextInt(4) == 0)
                            {
                                handOff.add(one);
                            }
                            else
                            {
                                release(one, owners);
                            }
                        }
                        final Held other = random.nextInt(4) == 0 ? handOff.poll() : null;
                        if (null != other)
                        {
                            release(other, owners);
                        }
                    }
                    held.forEach(one -> release(one, owners));
                }
                catch (final Throwable ex)
                {
                    failure.compareAndSet(null, ex);
                }
            }, "storm-" + t);
            threads.add(thread);
            thread.start();
        }
        for (final Thread thread : threads)
        {
            thread.join();
        }
        assertNull(failure.get(), () -> "a storm thread failed: " + failure.get());
        for (Held one; null != (one = handOff.poll()); )
        {
            release(one, owners);
        }
        assertEquals(0, pool.acquiredBuffers(), "no buffer left acquired");
        for (int t = 0; t < THREADS; t++)
        {
            assertTrue(acquired.get(t) > ROUNDS / 3, "thread " + t + " worked: " + acquired.get(t));
        }

        // every slot came back: this thread can take every buffer of every slab without a new one
        final int slabs = pool.slabs().size();
        final List<PooledBuffer> all = new ArrayList<>();
        for (final int size : SIZES)
        {
            final long total = pool.slotsOfClass(pool.classCapacity(size));
            assertTrue(total > 0, "the storm used class " + size);
            for (long taken = 0; taken < total; taken++)
            {
                all.add(pool.acquire(size));
            }
        }
        assertEquals(slabs, pool.slabs().size(), "every buffer was found again, no slab added");
        final TreeMap<Long, PooledBuffer> byAddress = new TreeMap<>();
        for (final PooledBuffer buffer : all)
        {
            BufferPoolProperties.assertNoOverlap(byAddress, buffer);
            byAddress.put(buffer.address(), buffer);
        }
        all.forEach(PooledBuffer::release);
        pool.close();
        assertEquals(List.of(), source.live());
    }

    /** A buffer and the word its owner stamped into its first and (inverted) last 8 bytes. */
    private record Held(PooledBuffer buffer, long word)
    {
    }

    private static Held stamp(final PooledBuffer buffer, final int thread, final int round)
    {
        final long word = ((long)thread << 32) | round;
        final MemorySegment segment = buffer.segment();
        segment.set(ValueLayout.JAVA_LONG_UNALIGNED, 0, word);
        segment.set(ValueLayout.JAVA_LONG_UNALIGNED, buffer.capacity() - 8, ~word);
        return new Held(buffer, word);
    }

    /** Checks that nobody else wrote the buffer while it was held, then releases it. */
    private static void release(final Held held, final ConcurrentHashMap<Long, PooledBuffer> owners)
    {
        final MemorySegment segment = held.buffer().segment();
        final long first = segment.get(ValueLayout.JAVA_LONG_UNALIGNED, 0);
        final long last = segment.get(ValueLayout.JAVA_LONG_UNALIGNED, held.buffer().capacity() - 8);
        if (first != held.word() || last != ~held.word())
        {
            throw new AssertionError(held.buffer() + " was written by another owner: stamped " +
                Long.toHexString(held.word()) + ", found " + Long.toHexString(first) + " / " + Long.toHexString(~last));
        }
        owners.remove(held.buffer().address(), held.buffer());
        held.buffer().release();
    }
}
