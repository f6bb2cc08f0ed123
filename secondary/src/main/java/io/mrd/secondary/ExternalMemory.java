package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;

/**
 * Memory a secondary brought in from outside the daemon's lists (a sealable memfd, which the daemon seals
 * against resizing), registered by {@link MrdClient#registerExternal} and mapped at the same address in the
 * primary and in this process. Its keys are those of the one MR that holds it, kept and checked as every
 * registered memory's ({@link RegisteredMemory}: once the daemon is lost, {@link #lkey()} and {@link #rkey()}
 * throw {@link DaemonDeadException}).
 */
public final class ExternalMemory
{
    private final RegisteredMemory registered;

    /**
     * @param registered the mapping in this process and the keys and access of its MR.
     */
    ExternalMemory(final RegisteredMemory registered)
    {
        this.registered = registered;
    }

    /** @return where it is mapped, inside the daemon's external window. */
    public long address()
    {
        return registered.segment().address();
    }

    /** @return bytes mapped and registered. */
    public long length()
    {
        return registered.segment().byteSize();
    }

    /**
     * @return the local key of its MR on device 0.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws io.mrd.layout.MrdException EINVAL when it is not placed on device 0.
     */
    public int lkey()
    {
        return registered.lkey();
    }

    /**
     * @return the remote key of its MR on device 0, {@link Access#NO_RKEY} without remote access.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws io.mrd.layout.MrdException EINVAL when it is not placed on device 0.
     */
    public int rkey()
    {
        return registered.rkey();
    }

    /**
     * @param device a device number, 0 to {@link #deviceCount()} - 1.
     * @return its MR's keys on that device, packed as {@link KeyPair#pack}.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws io.mrd.layout.MrdException EINVAL for a device the daemon does not have, or one the memory is not
     *                                     placed on ({@link Access#onDevices}).
     */
    public long keys(final int device)
    {
        return registered.keys(device);
    }

    /** @return the daemon's devices, whether or not the memory is placed on each. */
    public int deviceCount()
    {
        return registered.deviceCount();
    }

    /** @return the {@link Access} flags it was registered with. */
    public int access()
    {
        return registered.access();
    }

    /** @return the mapping in this process. */
    public MemorySegment segment()
    {
        return registered.segment();
    }

    public String toString()
    {
        return "ExternalMemory[" + Sizes.hex(address()) + ", " + Sizes.hex(address() + length()) + ") " + registered;
    }
}
