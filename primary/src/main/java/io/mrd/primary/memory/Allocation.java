package io.mrd.primary.memory;

/**
 * A run of segments {@link MemoryManager#allocate} mapped for an owner: what the ALLOC reply carries.
 *
 * @param listIndex    the list the run lies in (runs never span lists).
 * @param firstSegment index of the run's first segment in the list.
 * @param segmentCount segments in the run.
 * @param address      first address of the run, the same in the primary and every secondary.
 * @param length       bytes of the run: the request rounded up to whole segments.
 * @param owner        the client id that owns the run, or
 *                     {@link io.mrd.layout.MemsegListDescriptor#OWNER_DAEMON}.
 * @param access       the {@link io.mrd.layout.Access} the owner chose for the run (local write included).
 */
public record Allocation(
    int listIndex, int firstSegment, int segmentCount, long address, long length, int owner, int access)
{
    /**
     * @return the first address past the run.
     */
    public long end()
    {
        return address + length;
    }
}
