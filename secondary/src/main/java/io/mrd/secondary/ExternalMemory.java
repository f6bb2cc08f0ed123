package io.mrd.secondary;

import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;

/**
 * Memory a secondary brought in from outside the daemon's lists (a sealable memfd, which the daemon seals
 * against resizing), registered by {@link MrdClient#registerExternal} and mapped at the same address in the
 * primary and in this process.
 *
 * @param address where it is mapped, inside the daemon's external window.
 * @param length  bytes mapped and registered.
 * @param lkey    the key of its MR.
 * @param segment the mapping in this process.
 */
public record ExternalMemory(long address, long length, int lkey, MemorySegment segment)
{
    public String toString()
    {
        return "ExternalMemory[" + Sizes.hex(address) + ", " + Sizes.hex(address + length) + ") lkey " +
            Sizes.hex(lkey & 0xFFFF_FFFFL);
    }
}
