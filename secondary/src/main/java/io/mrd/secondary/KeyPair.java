package io.mrd.secondary;

/**
 * The two keys of an MR packed in one {@code long}, as {@link MrCache#keyPair} returns them so that a lookup
 * of both allocates nothing: the lkey in the low 32 bits, the rkey in the high 32 bits. The rkey is
 * {@link io.mrd.layout.Access#NO_RKEY} when the memory has no remote access.
 */
public final class KeyPair
{
    private KeyPair()
    {
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
