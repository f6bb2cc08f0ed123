package io.mrd.secondary.pool;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.secondary.KeyPair;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;

/**
 * A buffer from a {@link BufferPool}: registered memory of at least the size asked for, with the keys of the
 * MR that holds its whole slab, so a work request over it needs no lookup. Each {@link BufferPool#acquire}
 * returns a new handle; {@link #release()} gives the memory back, once.
 * <p>
 * <b>What release checking covers.</b> Every accessor and {@link #release()} compare the generation this
 * handle was acquired at with its slot's: releasing the handle again, or reading its address, keys or views
 * after the release, throws {@link MrdException} (EINVAL) naming the buffer, also once another caller owns the
 * same memory (its handle has another generation). Two threads releasing one handle at once: one succeeds,
 * the other throws. It cannot cover what the caller took out of the handle before the release: a raw address,
 * a {@link #segment()}, {@link #byteBuffer()} or {@link #unsafeBuffer()} view kept and used afterwards reaches
 * memory that is mapped and registered (the pool keeps its slabs until it closes), but may be another
 * caller's buffer by then. Views must not outlive the release. (A slot's generation is an int: a handle kept
 * over 2^31 reuses of its slot could pass the check again.)
 * <p>
 * A handle is safe to pass between threads with the usual happens-before (a queue, a lock); its memory is not
 * synchronised by the pool.
 */
public final class PooledBuffer
{
    private final BufferSlot slot;
    private final int generation;

    PooledBuffer(final BufferSlot slot, final int generation)
    {
        this.slot = slot;
        this.generation = generation;
    }

    /** @return the buffer's first byte's address (the daemon's address, the same in every process). */
    public long address()
    {
        check("address");
        return slot.address;
    }

    /** @return bytes usable: the size class, at least the size asked for. */
    public int capacity()
    {
        check("capacity");
        return slot.capacity;
    }

    /**
     * @return the lkey of the slab's MR, for the local SGE of any part of this buffer.
     * @throws io.mrd.secondary.DaemonDeadException once the daemon is lost ({@link DaemonLiveness}).
     */
    public int lkey()
    {
        check("lkey");
        slot.slab.pool.liveness.requireAlive();
        return slot.slab.memory.lkey();
    }

    /**
     * @return the rkey of the slab's MR, {@link io.mrd.layout.Access#NO_RKEY} for a pool without remote access.
     * @throws io.mrd.secondary.DaemonDeadException once the daemon is lost ({@link DaemonLiveness}).
     */
    public int rkey()
    {
        check("rkey");
        slot.slab.pool.liveness.requireAlive();
        return slot.slab.memory.rkey();
    }

    /**
     * @return both keys packed as {@link KeyPair#pack}.
     * @throws io.mrd.secondary.DaemonDeadException once the daemon is lost ({@link DaemonLiveness}).
     */
    public long keyPair()
    {
        check("keyPair");
        slot.slab.pool.liveness.requireAlive();
        final SlabMemory memory = slot.slab.memory;
        return KeyPair.pack(memory.lkey(), memory.rkey());
    }

    /**
     * @param device a device number of the daemon ({@code MrdClient.deviceCount()}).
     * @return the slab's keys on that device, packed as {@link KeyPair#pack}: what a queue pair of that device
     * posts with.
     * @throws io.mrd.secondary.DaemonDeadException once the daemon is lost ({@link DaemonLiveness}).
     * @throws io.mrd.layout.MrdException EINVAL for a device the daemon does not have, or one the memory is not
     *                                     placed on.
     */
    public long keys(final int device)
    {
        check("keys");
        slot.slab.pool.liveness.requireAlive();
        return slot.slab.memory.keys(device);
    }

    /** @return the buffer as a segment of {@link #capacity()} bytes; it must not be used after the release. */
    public MemorySegment segment()
    {
        check("segment");
        return slot.segment;
    }

    /** @return a new direct {@link ByteBuffer} over the buffer; it must not be used after the release. */
    public ByteBuffer byteBuffer()
    {
        check("byteBuffer");
        return slot.segment.asByteBuffer();
    }

    /**
     * An Agrona view for Aeron-style code: {@code wrap(address, capacity)}. The view reads and writes the
     * memory without any check of its own, so it must not outlive {@link #release()}: after the release it
     * reaches memory the pool may have given to someone else.
     *
     * @return a new {@link UnsafeBuffer} over the buffer.
     */
    public UnsafeBuffer unsafeBuffer()
    {
        check("unsafeBuffer");
        return new UnsafeBuffer(slot.address, slot.capacity);
    }

    /**
     * Points {@code view} at this buffer ({@link UnsafeBuffer#wrap(long, int)}), allocating nothing; the same
     * rule as {@link #unsafeBuffer()}: the view must not be used after {@link #release()}.
     *
     * @return {@code view}.
     */
    public MutableDirectBuffer wrap(final UnsafeBuffer view)
    {
        check("wrap");
        view.wrap(slot.address, slot.capacity);
        return view;
    }

    /** @return whether this handle was released (its slot may have a new owner since). */
    public boolean isReleased()
    {
        return slot.generation() != generation;
    }

    /**
     * Gives the buffer back to its pool: into this thread's cache, or the shared free list when that is full;
     * a buffer larger than the largest class goes back to the daemon. Any thread may release a buffer.
     *
     * @throws MrdException EINVAL naming the buffer when this handle was released already.
     */
    public void release()
    {
        if (!slot.release(generation))
        {
            throw released("release");
        }
        slot.slab.pool.released(slot);
    }

    private void check(final String what)
    {
        if (slot.generation() != generation)
        {
            throw released(what);
        }
    }

    private MrdException released(final String what)
    {
        return new MrdException(ErrorCode.EINVAL, slot.describe() + " acquired at generation " + generation +
            " was released already (slot generation now " + slot.generation() + "): " + what +
            " after release; acquire a new buffer, and release each handle once");
    }

    public String toString()
    {
        return "PooledBuffer[" + slot.describe() + ", generation " + generation +
            (isReleased() ? ", released" : "") + "]";
    }
}
