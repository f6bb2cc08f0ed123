package io.mrd.secondary;

import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

/**
 * The two keys of an MR packed in one {@code long}, as {@link MrCache#keyPair} returns them so that a lookup
 * of both allocates nothing: the lkey in the low 32 bits, the rkey in the high 32 bits. The rkey is
 * {@link io.mrd.layout.Access#NO_RKEY} when the memory has no remote access.
 */
public final class KeyPair
{
    /**
     * What a holder of keys per device keeps for a device its memory is not placed on ({@link
     * io.mrd.layout.Access#onDevices}): the global cache's no-lkey for both keys, which no MR is given.
     */
    public static final long NOT_PLACED = pack(CacheEntryDescriptor.NO_LKEY, CacheEntryDescriptor.NO_LKEY);

    private KeyPair()
    {
    }

    /**
     * The keys of memory on one device, from its keys on every device of the daemon.
     *
     * @param pairs  the keys on each device, {@link #NOT_PLACED} where the memory is not registered.
     * @param device a device number of the daemon.
     * @return {@code pairs[device]}.
     * @throws MrdException EINVAL for a device the daemon does not have, or one the memory is not placed on.
     */
    public static long onDevice(final long[] pairs, final int device)
    {
        if (device < 0 || device >= pairs.length)
        {
            throw new MrdException(ErrorCode.EINVAL, "device " + device + " is not one of the daemon's " +
                pairs.length + (1 == pairs.length ? " device: name 0" : " devices: name one of 0 to " +
                (pairs.length - 1)));
        }
        final long pair = pairs[device];
        if (NOT_PLACED == pair)
        {
            throw new MrdException(ErrorCode.EINVAL, "the memory is not registered on device " + device + ": it " +
                "was allocated placed on other devices (Access.onDevices); post it on a queue pair of one of " +
                "those, or allocate it placed on device " + device + " too");
        }
        return pair;
    }

    /**
     * @return {@code lkey} and {@code rkey} packed.
     */
    public static long pack(final int lkey, final int rkey)
    {
        return ((long)rkey << 32) | (lkey & 0xFFFF_FFFFL);
    }

    /**
     * @return the lkey of a packed pair.
     */
    public static int lkey(final long pair)
    {
        return (int)pair;
    }

    /**
     * @return the rkey of a packed pair.
     */
    public static int rkey(final long pair)
    {
        return (int)(pair >>> 32);
    }
}
