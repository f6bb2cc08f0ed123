package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;

/**
 * Memory a secondary brought in from outside the daemon's lists (a memfd or a hugetlbfs file), registered by
 * {@link MrdClient#registerExternal} and mapped at the same address in the primary and in this process.
 *
 * @param address where it is mapped, inside the daemon's external window.
 * @param length  bytes mapped and registered.
 * @param lkey    the local key of its MR.
 * @param rkey    the remote key of its MR, {@link Access#NO_RKEY} without remote access.
 * @param access  the {@link Access} flags it was registered with.
 * @param segment the mapping in this process.
 */
public record ExternalMemory(long address, long length, int lkey, int rkey, int access, MemorySegment segment)
{
    public String toString()
    {
        return "ExternalMemory[" + Sizes.hex(address) + ", " + Sizes.hex(address + length) + ") lkey " +
            Sizes.hex(lkey & 0xFFFF_FFFFL) + " rkey " + Sizes.hex(rkey & 0xFFFF_FFFFL) + " access " +
            Access.describe(access);
    }
}
