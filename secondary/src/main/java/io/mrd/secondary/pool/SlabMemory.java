package io.mrd.secondary.pool;

import io.mrd.secondary.KeyPair;

import java.lang.foreign.MemorySegment;

/**
 * A registered allocation a {@link SlabSource} gave: the memory and the keys of the one MR that holds all of
 * it, on each of the daemon's devices, valid until the source frees it.
 *
 * @param segment  the memory.
 * @param lkey     the lkey of its MR on device 0 ({@link #lkey()} refuses to give it for memory not placed there).
 * @param rkey     the rkey of its MR on device 0, {@link io.mrd.layout.Access#NO_RKEY} without remote access.
 * @param keyPairs its keys on every device, by device number, packed as {@link KeyPair#pack} (device 0's
 *                 included), {@link KeyPair#NOT_PLACED} on those its placement leaves out.
 */
public record SlabMemory(MemorySegment segment, int lkey, int rkey, long[] keyPairs)
{
    private static final int NOT_PLACED_LKEY = KeyPair.lkey(KeyPair.NOT_PLACED);

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
     * @return the lkey of its MR on device 0.
     * @throws io.mrd.layout.MrdException EINVAL when the memory is not placed on device 0.
     */
    public int lkey()
    {
        if (NOT_PLACED_LKEY == lkey)
        {
            KeyPair.onDevice(keyPairs, 0);
        }
        return lkey;
    }

    /**
     * @return the rkey of its MR on device 0.
     * @throws io.mrd.layout.MrdException EINVAL when the memory is not placed on device 0.
     */
    public int rkey()
    {
        if (NOT_PLACED_LKEY == lkey)
        {
            KeyPair.onDevice(keyPairs, 0);
        }
        return rkey;
    }

    /**
     * @return its keys on device {@code device}, packed as {@link KeyPair#pack}.
     * @throws io.mrd.layout.MrdException EINVAL for a device the daemon does not have, or one the memory is not
     *                                     placed on.
     */
    public long keys(final int device)
    {
        return KeyPair.onDevice(keyPairs, device);
    }
}
