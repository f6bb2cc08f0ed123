package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;

/**
 * Memory a secondary brought in from outside the daemon's lists (a sealable memfd, which the daemon seals
 * against resizing), registered by {@link MrdClient#registerExternal} and mapped at the same address in the
 * primary and in this process. Its keys follow the loss rule ({@link DaemonLiveness}): once the daemon is lost,
 * {@link #lkey()} and {@link #rkey()} throw {@link DaemonDeadException}.
 */
public final class ExternalMemory
{
    private final long address;
    private final long length;
    private final int lkey;
    private final int rkey;
    private final int access;
    private final MemorySegment segment;
    private final DaemonLiveness liveness;

    /**
     * @param address  where it is mapped, inside the daemon's external window.
     * @param length   bytes mapped and registered.
     * @param lkey     the local key of its MR.
     * @param rkey     the remote key of its MR, {@link Access#NO_RKEY} without remote access.
     * @param access   the {@link Access} flags it was registered with.
     * @param segment  the mapping in this process.
     * @param liveness the client's check of its daemon.
     */
    ExternalMemory(
        final long address, final long length, final int lkey, final int rkey, final int access,
        final MemorySegment segment, final DaemonLiveness liveness)
    {
        this.address = address;
        this.length = length;
        this.lkey = lkey;
        this.rkey = rkey;
        this.access = access;
        this.segment = segment;
        this.liveness = liveness;
    }

    /** @return where it is mapped, inside the daemon's external window. */
    public long address()
    {
        return address;
    }

    /** @return bytes mapped and registered. */
    public long length()
    {
        return length;
    }

    /**
     * @return the local key of its MR.
     * @throws DaemonDeadException once the daemon is lost.
     */
    public int lkey()
    {
        liveness.requireAlive();
        return lkey;
    }

    /**
     * @return the remote key of its MR, {@link Access#NO_RKEY} without remote access.
     * @throws DaemonDeadException once the daemon is lost.
     */
    public int rkey()
    {
        liveness.requireAlive();
        return rkey;
    }

    /** @return the {@link Access} flags it was registered with. */
    public int access()
    {
        return access;
    }

    /** @return the mapping in this process. */
    public MemorySegment segment()
    {
        return segment;
    }

    public String toString()
    {
        return "ExternalMemory[" + Sizes.hex(address) + ", " + Sizes.hex(address + length) + ") lkey " +
            Sizes.hex(lkey & 0xFFFF_FFFFL) + " rkey " + Sizes.hex(rkey & 0xFFFF_FFFFL) + " access " +
            Access.describe(access);
    }
}
