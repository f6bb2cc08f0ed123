package io.mrd.layout;

import io.mrd.layout.sys.Sizes;

/**
 * A mutable address→keys entry ({@link CacheEntryDescriptor}), filled by lookups so the hot path allocates
 * nothing.
 */
public final class MrEntry
{
    public long start;
    public long end;
    public int lkey = CacheEntryDescriptor.NO_LKEY;
    /** {@link Access#NO_RKEY} when the MR has no remote access. */
    public int rkey = Access.NO_RKEY;
    /** The MR's {@link Access} flags. */
    public int access;
    public int mr = -1;

    public MrEntry set(
        final long start, final long end, final int lkey, final int rkey, final int access, final int mr)
    {
        this.start = start;
        this.end = end;
        this.lkey = lkey;
        this.rkey = rkey;
        this.access = access;
        this.mr = mr;
        return this;
    }

    public MrEntry set(final MrEntry other)
    {
        return set(other.start, other.end, other.lkey, other.rkey, other.access, other.mr);
    }

    public MrEntry clear()
    {
        return set(0, 0, CacheEntryDescriptor.NO_LKEY, Access.NO_RKEY, 0, -1);
    }

    /**
     * @return true when {@code [address, address + length)} lies inside this entry ({@link WholeBuffer}).
     */
    public boolean containsRange(final long address, final long length)
    {
        return address >= start && address <= end && WholeBuffer.fits(address, length, end);
    }

    public String toString()
    {
        return "[" + Sizes.hex(start) + ", " + Sizes.hex(end) + ") lkey " + Sizes.hex(lkey & 0xFFFF_FFFFL) +
            " rkey " + Sizes.hex(rkey & 0xFFFF_FFFFL) + " access " + Access.describe(access) + " mr " + mr;
    }
}
