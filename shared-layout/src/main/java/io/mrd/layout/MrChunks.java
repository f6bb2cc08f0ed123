package io.mrd.layout;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * Walks the chunks of an MR: the runs of its live segments, each one virtually contiguous range with the
 * MR's keys and access (the reference's {@code mr_find_next_chunk}). The primary walks them to fill the global cache;
 * readers walk them on the slow path when the cache overflowed.
 * <p>
 * Readers may walk a record a concurrent write is changing: every bound is clamped to the layout, so torn
 * data yields a wrong answer (discarded when the seqlock fails to validate), never an out-of-bounds read.
 */
public final class MrChunks
{
    private final UnsafeBuffer buffer;
    private final ControlFileLayout layout;
    private final ControlHeader header;
    private final MemsegListRecord listRecord = new MemsegListRecord();
    private final MrRecord mrRecord = new MrRecord();

    public MrChunks(final ControlFile controlFile)
    {
        this.buffer = controlFile.buffer();
        this.layout = controlFile.layout();
        this.header = controlFile.header();
    }

    /**
     * @return the flyweight wrapped at MR {@code index} (valid until the next call).
     */
    public MrRecord record(final int index)
    {
        return mrRecord.wrap(buffer, layout.mrOffset(index));
    }

    /**
     * Finds the next chunk of MR {@code mrIndex} at or after bit {@code from}.
     *
     * @param out filled with the chunk; {@code out.end == 0} when there is none.
     * @return the bit index to continue from; at least {@code from + 1}.
     */
    public int next(final int mrIndex, final int from, final MrEntry out)
    {
        out.clear();
        final MrRecord mr = record(mrIndex);
        if (mr.isExternal())
        {
            if (from == 0)
            {
                out.set(mr.start(), mr.end(), mr.lkey(), mr.rkey(), mr.access(), mrIndex);
            }
            return Integer.MAX_VALUE;
        }
        final int listIndex = mr.listIndex();
        final int maxBits = Math.min(mr.msBmpN(), layout.mrBitmapLength() * 8);
        final long segmentSize = header.segmentSize();
        final int bitmapOffset = mr.bitmapOffset();
        if (listIndex < 0 || listIndex >= layout.memsegListCount() || segmentSize <= 0 ||
            bitmapOffset < layout.mrBitmapOffset() || bitmapOffset > layout.mrBitmapOffset(layout.mrCapacity() - 1))
        {
            return Integer.MAX_VALUE;
        }
        final long firstSegmentVa = listRecord.wrap(buffer,
            layout.memsegListOffset(listIndex)).baseVa() + (long)mr.msBaseIdx() * segmentSize;
        int index = Math.max(from, 0);
        while (index < maxBits && !mr.bit(index))
        {
            index++;
        }
        if (index >= maxBits)
        {
            return Integer.MAX_VALUE;
        }
        final int first = index;
        while (index < maxBits && mr.bit(index))
        {
            index++;
        }
        out.set(firstSegmentVa + first * segmentSize, firstSegmentVa + index * segmentSize, mr.lkey(), mr.rkey(),
            mr.access(), mrIndex);
        return index;
    }

    /**
     * Finds the chunk of ACTIVE MR {@code mrIndex} that contains {@code address}.
     *
     * @return true and {@code out} filled when found.
     */
    public boolean find(final int mrIndex, final long address, final MrEntry out)
    {
        final MrRecord mr = record(mrIndex);
        if (mr.state() != MrDescriptor.STATE_ACTIVE || mr.msN() <= 0 || address < mr.start() || address >= mr.end())
        {
            return false;
        }
        for (int from = 0; from != Integer.MAX_VALUE; )
        {
            from = next(mrIndex, from, out);
            if (out.end == 0)
            {
                return false;
            }
            if (address >= out.start && address < out.end)
            {
                return true;
            }
        }
        return false;
    }

    /**
     * The reference's {@code mlx5_mr_lookup_list}: scans every MR record.
     *
     * @return true and {@code out} filled when some ACTIVE MR's live chunk contains {@code address}.
     */
    public boolean scan(final long address, final MrEntry out)
    {
        final int count = Math.min(header.mrHighWater(), layout.mrCapacity());
        for (int i = 0; i < count; i++)
        {
            if (find(i, address, out))
            {
                return true;
            }
        }
        return false;
    }
}
