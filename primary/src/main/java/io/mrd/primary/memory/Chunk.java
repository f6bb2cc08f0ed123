package io.mrd.primary.memory;

/**
 * A virtually contiguous run of allocated segments of one access inside one list (DPDK's
 * {@code rte_memseg_contig_walk} unit): what the MR engine registers as one MR, with that access.
 *
 * @param listIndex    the list the run lies in.
 * @param firstSegment index of the run's first segment in the list.
 * @param segmentCount segments in the run.
 * @param start        first address of the run.
 * @param end          first address past the run.
 * @param access       the {@link io.mrd.layout.Access} of every segment of the run.
 */
public record Chunk(int listIndex, int firstSegment, int segmentCount, long start, long end, int access)
{
    /**
     * @return bytes of the run.
     */
    public long length()
    {
        return end - start;
    }

    /**
     * @param address an address.
     * @return whether it lies in {@code [start, end)}.
     */
    public boolean contains(final long address)
    {
        return address >= start && address < end;
    }
}
