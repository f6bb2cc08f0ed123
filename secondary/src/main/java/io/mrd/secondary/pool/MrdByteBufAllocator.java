package io.mrd.secondary.pool;

import io.netty.buffer.AbstractByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledHeapByteBuf;

/**
 * A Netty {@link io.netty.buffer.ByteBufAllocator} whose direct buffers are {@link MrdByteBuf}s over a
 * {@link BufferPool}: set it as {@code ChannelOption.ALLOCATOR} and the pipeline's buffers are registered
 * memory whose keys a datapath takes from the buffer ({@link MrdByteBuf#of}). Direct buffers go through
 * {@link AbstractByteBufAllocator#toLeakAwareBuffer}, so Netty's {@link io.netty.util.ResourceLeakDetector}
 * tracks them at its configured level. Heap buffers are Netty's plain unpooled heap buffers: heap memory
 * cannot be registered.
 * <p>
 * Thread-safe, as the pool; the pool must outlive every buffer (close it after the channels).
 */
public final class MrdByteBufAllocator extends AbstractByteBufAllocator
{
    private final BufferPool pool;

    /**
     * @param pool where direct buffers come from; the allocator prefers direct buffers ({@code buffer()} is one).
     */
    public MrdByteBufAllocator(final BufferPool pool)
    {
        super(true);
        this.pool = pool;
    }

    /** @return the pool under the direct buffers. */
    public BufferPool pool()
    {
        return pool;
    }

    @Override
    protected ByteBuf newHeapBuffer(final int initialCapacity, final int maxCapacity)
    {
        return new UnpooledHeapByteBuf(this, initialCapacity, maxCapacity);
    }

    @Override
    protected ByteBuf newDirectBuffer(final int initialCapacity, final int maxCapacity)
    {
        final PooledBuffer memory = pool.acquire(Math.max(1, initialCapacity));
        final MrdByteBuf buf;
        try
        {
            buf = new MrdByteBuf(this, pool, memory, initialCapacity, maxCapacity);
        }
        catch (final RuntimeException ex)
        {
            memory.release();
            throw ex;
        }
        return toLeakAwareBuffer(buf);
    }

    @Override
    public boolean isDirectBufferPooled()
    {
        return true;
    }

    public String toString()
    {
        return "MrdByteBufAllocator[" + pool + "]";
    }
}
