package io.mrd.secondary;

import io.mrd.layout.Access;

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
     * @return the lkey of its MR, for the local SGE of any buffer inside it.
     * @throws DaemonDeadException once the daemon is lost.
     */
    public int lkey()
    {
        liveness.requireAlive();
        return lkey;
    }

    /**
     * @return the rkey of its MR, {@link Access#NO_RKEY} without remote access.
     * @throws DaemonDeadException once the daemon is lost.
     */
    public int rkey()
    {
        liveness.requireAlive();
        return rkey;
    }

    /**
     * @return both keys packed as {@link KeyPair#pack}, as {@link MrCache#keyPair} returns them.
     * @throws DaemonDeadException once the daemon is lost.
     */
    public long keyPair()
    {
        liveness.requireAlive();
        return KeyPair.pack(lkey, rkey);
    }

    /**
     * @param device a device number, 0 to {@link #deviceCount()} - 1.
     * @return its MR's keys on that device, packed as {@link KeyPair#pack}: what a queue pair of that device
     * posts with.
     * @throws DaemonDeadException once the daemon is lost.
     * @throws IndexOutOfBoundsException for a device the daemon does not register on.
     */
    public long keys(final int device)
    {
        liveness.requireAlive();
        return keyPairs[device];
    }

    /** @return the devices its MR is registered on: the daemon's. */
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
