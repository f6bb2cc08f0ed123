package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.MrdException;

import java.lang.foreign.MemorySegment;

/**
 * Memory from {@link MrdClient#allocateRegistered}: the segment, mapped at the daemon's address, and the keys of
 * the one MR that holds all of it, so a datapath that keeps the buffer posts work requests without a lookup.
 * <p>
 * Contract: the keys are valid for as long as the memory stays allocated, that is until
 * {@link MrdClient#free(RegisteredMemory)} or the client's end, which is exactly how long mrd keeps the MR
 * registered. The MR stays active while any segment it covers is allocated: another client freeing memory in
 * the same chunk clears only that memory's segments from it (the local caches flush and may split its entries,
 * and a fresh lookup returns these same keys). Memory with remote access never shares an MR with another
 * allocation, so nothing but its own free detaches it. Once the daemon is lost (it died, stopped or restarted),
 * the keys follow the loss rule ({@link DaemonLiveness}): {@link #lkey()}, {@link #rkey()} and {@link #keyPair()}
 * throw {@link DaemonDeadException}. {@link ExternalMemory} keeps its keys in one too.
 */
public final class RegisteredMemory
{
    private final MemorySegment segment;
    private final int lkey;
    private final int rkey;
    /** Device 0's lkey when the memory is not placed on device 0: its keys there are {@link KeyPair#NOT_PLACED}. */
    private static final int NOT_PLACED_LKEY = KeyPair.lkey(KeyPair.NOT_PLACED);

    /** {@link KeyPair}s by device number; device 0's are {@link #lkey} and {@link #rkey}. */
    private final long[] keyPairs;
    private final int access;
    private final DaemonLiveness liveness;

    RegisteredMemory(
        final MemorySegment segment, final long[] keyPairs, final int access, final DaemonLiveness liveness)
    {
        this.segment = segment;
        this.lkey = KeyPair.lkey(keyPairs[0]);
        this.rkey = KeyPair.rkey(keyPairs[0]);
        this.keyPairs = keyPairs.clone();
        this.access = access;
        this.liveness = liveness;
    }

    /** @return the memory, {@code byteSize()} the length the daemon allocated. */
    public MemorySegment segment()
    {
        return segment;
    }

    /**
     * @return the lkey of its MR on device 0, for the local SGE of any buffer inside it.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws MrdException        EINVAL when the memory is not placed on device 0 ({@link #keys(int)} has the
     *                             others').
     */
    public int lkey()
    {
        liveness.requireAlive();
        if (NOT_PLACED_LKEY == lkey)
        {
            KeyPair.onDevice(keyPairs, 0);
        }
        return lkey;
    }

    /**
     * @return the rkey of its MR on device 0, {@link Access#NO_RKEY} without remote access.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws MrdException        EINVAL when the memory is not placed on device 0.
     */
    public int rkey()
    {
        liveness.requireAlive();
        if (NOT_PLACED_LKEY == lkey)
        {
            KeyPair.onDevice(keyPairs, 0);
        }
        return rkey;
    }

    /**
     * @return both keys on device 0 packed as {@link KeyPair#pack}, as {@link MrCache#keyPair} returns them.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws MrdException        EINVAL when the memory is not placed on device 0.
     */
    public long keyPair()
    {
        liveness.requireAlive();
        if (NOT_PLACED_LKEY == lkey)
        {
            KeyPair.onDevice(keyPairs, 0);
        }
        return KeyPair.pack(lkey, rkey);
    }

    /**
     * @param device a device number, 0 to {@link #deviceCount()} - 1.
     * @return its MR's keys on that device, packed as {@link KeyPair#pack}: what a queue pair of that device
     * posts with.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws MrdException EINVAL for a device the daemon does not have, or one the memory is not placed on
     *                      ({@link Access#onDevices}).
     */
    public long keys(final int device)
    {
        liveness.requireAlive();
        return KeyPair.onDevice(keyPairs, device);
    }

    /**
     * @return its keys on each of the daemon's devices, by device number, {@link KeyPair#NOT_PLACED} on those its
     * placement leaves out: a copy.
     * @throws DaemonDeadException once the daemon is lost.
     */
    public long[] keysByDevice()
    {
        liveness.requireAlive();
        return keyPairs.clone();
    }

    /** @return the daemon's devices, whether or not the memory is placed on each. */
    public int deviceCount()
    {
        return keyPairs.length;
    }

    /** @return the {@link Access} flags of its MR (local write included). */
    public int access()
    {
        return access;
    }

    @Override
    public String toString()
    {
        return "RegisteredMemory[" + segment + ", lkey 0x" + Integer.toHexString(lkey) + ", rkey 0x" +
            Integer.toHexString(rkey) + (keyPairs.length > 1 ? " (device 0 of " + keyPairs.length + ")" : "") + ", " +
            Access.describe(access) + "]";
    }
}
