package io.mrd.secondary.pool;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.UnpooledDirectByteBuf;
import io.netty.util.internal.CleanableDirectBuffer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * A Netty direct {@link ByteBuf} whose memory is a {@link PooledBuffer}: registered, with the keys of its
 * slab's MR. Reference-counted as every Netty buffer: the release that brings the count to 0 gives the memory
 * back to the pool. Growing past the pooled buffer's capacity moves the bytes to a buffer of a larger class
 * (the keys change with it: read them again after a write that may grow the buffer); growing within it
 * moves nothing.
 * <p>
 * Buffers come from {@link MrdByteBufAllocator} wrapped by Netty's leak detector, and slices and duplicates
 * are other objects again: {@link #of(ByteBuf)} finds the {@code MrdByteBuf} under any of them, and
 * {@link #address(ByteBuf)} the address of a derived buffer's readable bytes.
 * <pre>{@code
 * ByteBuf buf = allocator.directBuffer(4096);       // possibly a leak-aware wrapper
 * MrdByteBuf registered = MrdByteBuf.of(buf);
 * post(MrdByteBuf.address(buf), buf.readableBytes(), registered.lkey());
 * }</pre>
 */
public final class MrdByteBuf extends UnpooledDirectByteBuf
{
    private final BufferPool pool;
    private PooledBuffer memory;
    /** The memory capacity(int) moves to; set by allocateDirectBuffer, which only capacity(int) calls. */
    private PooledBuffer moving;

    MrdByteBuf(
        final MrdByteBufAllocator allocator,
        final BufferPool pool,
        final PooledBuffer memory,
        final int initialCapacity,
        final int maxCapacity)
    {
        super(allocator, view(memory, initialCapacity), maxCapacity);
        this.pool = pool;
        this.memory = memory;
        // the wrapping constructor takes the buffer as full of data; a new buffer is empty
        setIndex(0, 0);
    }

    private static ByteBuffer view(final PooledBuffer memory, final int capacity)
    {
        return memory.segment().asSlice(0, capacity).asByteBuffer();
    }

    /**
     * @return the {@code MrdByteBuf} under {@code buf} (itself, or under leak-aware wrappers, slices and
     *         duplicates).
     * @throws MrdException EINVAL naming the buffer when it is not one of {@link MrdByteBufAllocator}'s direct
     *                      buffers (a heap or composite buffer, another allocator's).
     */
    public static MrdByteBuf of(final ByteBuf buf)
    {
        for (ByteBuf b = buf; null != b; b = b.unwrap())
        {
            if (b instanceof MrdByteBuf registered)
            {
                return registered;
            }
        }
        throw new MrdException(ErrorCode.EINVAL, buf + " is not registered memory: only direct buffers of an " +
            "MrdByteBufAllocator have keys (heap and composite buffers do not): pass allocator.directBuffer(...) " +
            "of an MrdByteBufAllocator, or copy the bytes into one");
    }

    /**
     * @return the address of {@code buf}'s first readable byte, for any buffer {@link #of(ByteBuf)} accepts.
     */
    public static long address(final ByteBuf buf)
    {
        of(buf);
        return MemorySegment.ofBuffer(buf.nioBuffer(buf.readerIndex(), 0)).address();
    }

    /** @return the lkey of the memory's MR. */
    public int lkey()
    {
        return memory().lkey();
    }

    /** @return the rkey of the memory's MR, {@link io.mrd.layout.Access#NO_RKEY} for a pool without remote access. */
    public int rkey()
    {
        return memory().rkey();
    }

    /** @return both keys packed as {@link io.mrd.secondary.KeyPair#pack}. */
    public long keyPair()
    {
        return memory().keyPair();
    }

    /**
     * @return the memory's keys on device {@code device}, packed as {@link io.mrd.secondary.KeyPair#pack}.
     * @throws io.mrd.layout.MrdException EINVAL for a device the daemon does not have, or one the memory is not
     *                                     placed on.
     */
    public long keys(final int device)
    {
        return memory().keys(device);
    }

    /** @return the address of index 0. */
    public long address()
    {
        return memory().address();
    }

    /**
     * @return the pool's buffer under this one now; it changes when the buffer grows past it and is released
     *         with this buffer.
     */
    public PooledBuffer memory()
    {
        ensureAccessible();
        return memory;
    }

    @Override
    protected CleanableDirectBuffer allocateDirectBuffer(final int capacity)
    {
        final PooledBuffer next = capacity <= memory.capacity() ? memory : pool.acquire(Math.max(1, capacity));
        moving = next;
        final ByteBuffer view = view(next, capacity);
        return new CleanableDirectBuffer()
        {
            public ByteBuffer buffer()
            {
                return view;
            }

            public void clean()
            {
                // Netty cleans the view it replaces; the pool's buffer under it is released by capacity(int)
                // and deallocate(), which know whether the new view still uses it.
            }
        };
    }

    @Override
    public ByteBuf capacity(final int newCapacity)
    {
        final PooledBuffer old = memory;
        try
        {
            super.capacity(newCapacity);
            if (null != moving)
            {
                memory = moving;
            }
        }
        finally
        {
            final PooledBuffer next = moving;
            moving = null;
            if (null != next && next != old && next != memory)
            {
                next.release();
            }
        }
        if (old != memory)
        {
            old.release();
        }
        return this;
    }

    @Override
    protected void deallocate()
    {
        super.deallocate();
        final PooledBuffer released = memory;
        if (null != released)
        {
            memory = null;
            released.release();
        }
    }

    public String toString()
    {
        return "MrdByteBuf[" + super.toString() + ", " + memory + "]";
    }
}
