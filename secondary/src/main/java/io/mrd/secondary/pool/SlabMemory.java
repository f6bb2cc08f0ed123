package io.mrd.secondary.pool;

import io.mrd.secondary.KeyPair;

import java.lang.foreign.MemorySegment;

/**
 * A registered allocation a {@link SlabSource} gave: the memory and the keys of the one MR that holds all of
 * it, on each of the daemon's devices, valid until the source frees it.
 *
 * @param segment  the memory.
 * @param lkey     the lkey of its MR on device 0.
 * @param rkey     the rkey of its MR on device 0, {@link io.mrd.layout.Access#NO_RKEY} without remote access.
 * @param keyPairs its keys on every device, by device number, packed as {@link KeyPair#pack} (device 0's
 *                 included).
 */
public record SlabMemory(MemorySegment segment, int lkey, int rkey, long[] keyPairs)
{
    public SlabMemory
    {
        keyPairs = keyPairs.clone();
    }

    /**
     * Memory of one device.
     */
    public SlabMemory(final MemorySegment segment, final int lkey, final int rkey)
    {
        this(segment, lkey, rkey, new long[] {KeyPair.pack(lkey, rkey)});
    }

    /**
     * @return its keys on device {@code device}, packed as {@link KeyPair#pack}.
     * @throws IndexOutOfBoundsException for a device the memory is not registered on.
     */
    public long keys(final int device)
    {
        return keyPairs[device];
    }
}
