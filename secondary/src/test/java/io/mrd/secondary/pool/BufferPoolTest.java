package io.mrd.secondary.pool;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.secondary.KeyPair;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class BufferPoolTest
{
    private final FakeSlabSource source = new FakeSlabSource();
    private BufferPool pool;

    @AfterEach
    void close()
    {
        if (null != pool && !pool.isClosed())
        {
            pool.close();
        }
        assertEquals(List.of(), source.live(), "every slab went back to the source");
    }

    private BufferPool open(final PoolContext context)
    {
        pool = BufferPool.open(source, context);
        return pool;
    }

    @Test
    void sizesFallInTheSmallestClassThatHoldsThem()
    {
        open(new PoolContext());
        final int[][] cases = {{1, 4096}, {4096, 4096}, {4097, 8192}, {65536, 65536}, {65537, 131072},
            {1 << 20, 1 << 20}};
        for (final int[] c : cases)
        {
            final PooledBuffer buffer = pool.acquire(c[0]);
            assertEquals(c[1], buffer.capacity(), "capacity for " + c[0]);
            assertEquals(c[1], pool.classCapacity(c[0]));
            buffer.release();
        }
        assertEquals(5, source.requested().size(), "one slab for each of the 5 classes used");
        source.requested().forEach(length -> assertEquals(PoolContext.DEFAULT_SLAB_SIZE, length));
    }

    @Test
    void buffersCarryTheirSlabsKeys()
    {
        open(new PoolContext().access(Access.REMOTE_WRITE));
        final PooledBuffer buffer = pool.acquire(100);
        final SlabMemory slab = pool.slabs().getFirst();
        assertEquals(slab.lkey(), buffer.lkey());
        assertEquals(slab.rkey(), buffer.rkey());
        assertEquals(slab.lkey() + 1, buffer.rkey(), "a remote pool's slabs have an rkey");
        assertEquals(KeyPair.pack(slab.lkey(), slab.rkey()), buffer.keyPair());
        assertTrue(buffer.address() >= slab.segment().address() &&
            buffer.address() + buffer.capacity() <= slab.segment().address() + slab.segment().byteSize());
        buffer.release();
    }

    @Test
    void aLocalPoolsBuffersHaveNoRkey()
    {
        open(new PoolContext());
        final PooledBuffer buffer = pool.acquire(4096);
        assertEquals(Access.NO_RKEY, buffer.rkey());
        buffer.release();
    }

    @Test
    void releasingTwiceThrowsNamingTheBuffer()
    {
        open(new PoolContext());
        final PooledBuffer buffer = pool.acquire(4096);
        final String address = Long.toHexString(buffer.address());
        buffer.release();
        final MrdException ex = assertThrows(MrdException.class, buffer::release);
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().contains("0x" + address) && ex.getMessage().contains("release after release"),
            ex.getMessage());
        assertTrue(buffer.isReleased());
    }

    @Test
    void aStaleHandleStaysReleasedWhenItsMemoryHasANewOwner()
    {
        open(new PoolContext());
        final PooledBuffer first = pool.acquire(4096);
        final long address = first.address();
        first.release();
        final PooledBuffer second = pool.acquire(4096);
        assertNotSame(first, second);
        assertEquals(address, second.address(), "the same memory: the thread cache is LIFO");
        assertThrows(MrdException.class, first::release, "the old handle cannot release the new owner's buffer");
        assertFalse(second.isReleased(), "the new owner's buffer is untouched");
        second.release();
    }

    @Test
    void everyAccessorAfterReleaseThrows()
    {
        open(new PoolContext());
        final PooledBuffer buffer = pool.acquire(4096);
        buffer.release();
        final List<Consumer<PooledBuffer>> accessors = List.of(PooledBuffer::address, PooledBuffer::capacity,
            PooledBuffer::lkey, PooledBuffer::rkey, PooledBuffer::keyPair, PooledBuffer::segment,
            PooledBuffer::byteBuffer, PooledBuffer::unsafeBuffer, b -> b.wrap(new UnsafeBuffer(0, 0)));
        for (final Consumer<PooledBuffer> accessor : accessors)
        {
            final MrdException ex = assertThrows(MrdException.class, () -> accessor.accept(buffer));
            assertTrue(ex.getMessage().contains("was released already"), ex.getMessage());
        }
    }

    @Test
    void theAgronaViewCoversTheBuffer()
    {
        open(new PoolContext());
        final PooledBuffer buffer = pool.acquire(8192);
        final UnsafeBuffer view = buffer.unsafeBuffer();
        assertEquals(buffer.address(), view.addressOffset());
        assertEquals(8192, view.capacity());
        view.putLong(8192 - 8, 0x1234_5678_9ABC_DEF0L);
        assertEquals(0x1234_5678_9ABC_DEF0L, buffer.segment().get(ValueLayout.JAVA_LONG_UNALIGNED, 8192 - 8),
            "the view writes the buffer's memory");
        final UnsafeBuffer reused = new UnsafeBuffer(0, 0);
        assertSame(reused, buffer.wrap(reused));
        assertEquals(0x1234_5678_9ABC_DEF0L, reused.getLong(8192 - 8));
        assertThrows(IndexOutOfBoundsException.class, () -> view.getByte(8192), "bounded by the capacity");
        buffer.release();
    }

    @Test
    void aRequestAboveTheLargestClassGetsAnAllocationOfItsOwnGivenBackAtRelease()
    {
        open(new PoolContext());
        final PooledBuffer big = pool.acquire((3 << 20) + 1);
        assertEquals((3 << 20) + 1, big.capacity());
        assertEquals(List.of(4L << 20), source.requested(), "rounded up to whole segments");
        assertEquals(pool.slabs().getFirst().lkey(), big.lkey());
        big.release();
        assertEquals(List.of(), source.live(), "freed at release");
        assertThrows(MrdException.class, big::release);
    }

    @Test
    void closeWithBuffersOutFailsAndKeepsThePoolOpen()
    {
        open(new PoolContext());
        final PooledBuffer out = pool.acquire(4096);
        final MrdException ex = assertThrows(MrdException.class, pool::close);
        assertEquals(ErrorCode.EBUSY, ex.code());
        assertTrue(ex.getMessage().contains("1 buffer(s) still acquired") &&
            ex.getMessage().contains(Long.toHexString(out.address())), ex.getMessage());
        assertFalse(pool.isClosed());
        assertEquals(1, source.live().size(), "nothing freed");
        out.segment().set(ValueLayout.JAVA_BYTE, 0, (byte)1);
        out.release();
        pool.close();
        assertEquals(List.of(), source.live());
        assertThrows(MrdException.class, () -> pool.acquire(4096), "acquire after close");
    }

    @Test
    void buffersOfADeadThreadAreReclaimedBeforeANewSlab() throws InterruptedException
    {
        open(new PoolContext().threadCacheBuffers(512).threadCacheBytes(1 << 30));
        final int perSlab = (int)(PoolContext.DEFAULT_SLAB_SIZE / 4096);
        final Thread worker = new Thread(() ->
        {
            final List<PooledBuffer> held = new ArrayList<>();
            for (int i = 0; i < perSlab; i++)
            {
                held.add(pool.acquire(4096));
            }
            held.forEach(PooledBuffer::release); // all into this thread's magazine
        });
        worker.start();
        worker.join();
        final List<PooledBuffer> mine = new ArrayList<>();
        for (int i = 0; i < perSlab; i++)
        {
            mine.add(pool.acquire(4096));
        }
        assertEquals(1, pool.slabs().size(), "the dead thread's magazine came back, no second slab");
        mine.forEach(PooledBuffer::release);
    }

    @Test
    void withoutAThreadCacheEveryBufferGoesThroughTheSharedList()
    {
        open(new PoolContext().threadCacheBuffers(0));
        final PooledBuffer a = pool.acquire(4096);
        final long address = a.address();
        a.release();
        final PooledBuffer b = pool.acquire(4096);
        assertEquals(address, b.address());
        b.release();
    }

    @Test
    void wrongSettingsAreRefusedByName()
    {
        assertRefused(new PoolContext().minClassSize(3000), "minClassSize 3000 is not a power of two");
        assertRefused(new PoolContext().minClassSize(32), "minClassSize 32 is under 64");
        assertRefused(new PoolContext().maxClassSize(2048), "maxClassSize 2048 is under minClassSize 4096");
        assertRefused(new PoolContext().slabSize(3 << 20), "slabSize 3145728 must be a multiple of 2MiB");
        assertRefused(new PoolContext().maxClassSize(4 << 20), "maxClassSize 4MiB is larger than slabSize 2MiB");
        assertRefused(new PoolContext().threadCacheBuffers(-1), "threadCacheBuffers -1");
        assertRefused(new PoolContext().access(1 << 16), "unknown bits 0x10000");
        assertEquals(0, source.requested().size());
    }

    @Test
    void aSizeUnderOneIsRefused()
    {
        open(new PoolContext());
        final MrdException ex = assertThrows(MrdException.class, () -> pool.acquire(0));
        assertTrue(ex.getMessage().contains("acquire of 0 bytes"), ex.getMessage());
    }

    private void assertRefused(final PoolContext context, final String message)
    {
        final MrdException ex = assertThrows(MrdException.class, () -> BufferPool.open(source, context));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().contains(message), ex.getMessage());
    }
}
