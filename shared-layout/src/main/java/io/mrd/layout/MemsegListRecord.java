package io.mrd.layout;

import org.agrona.MutableDirectBuffer;

import java.nio.charset.StandardCharsets;

import static io.mrd.layout.MemsegListDescriptor.*;

/**
 * Flyweight over one memory-segment list record ({@link MemsegListDescriptor}).
 */
public final class MemsegListRecord
{
    private MutableDirectBuffer buffer;
    private int offset;

    public MemsegListRecord wrap(final MutableDirectBuffer buffer, final int offset)
    {
        this.buffer = buffer;
        this.offset = offset;
        return this;
    }

    public long baseVa()
    {
        return buffer.getLong(offset + BASE_VA_OFFSET);
    }

    public MemsegListRecord baseVa(final long value)
    {
        buffer.putLong(offset + BASE_VA_OFFSET, value);
        return this;
    }

    public long pageSize()
    {
        return buffer.getLong(offset + PAGE_SIZE_OFFSET);
    }

    public MemsegListRecord pageSize(final long value)
    {
        buffer.putLong(offset + PAGE_SIZE_OFFSET, value);
        return this;
    }

    public int segmentCount()
    {
        return buffer.getInt(offset + SEGMENT_COUNT_OFFSET);
    }

    public MemsegListRecord segmentCount(final int value)
    {
        buffer.putInt(offset + SEGMENT_COUNT_OFFSET, value);
        return this;
    }

    public int flags()
    {
        return buffer.getInt(offset + FLAGS_OFFSET);
    }

    public MemsegListRecord flags(final int value)
    {
        buffer.putInt(offset + FLAGS_OFFSET, value);
        return this;
    }

    public int allocatedSegments()
    {
        return buffer.getInt(offset + ALLOCATED_OFFSET);
    }

    public MemsegListRecord allocatedSegments(final int value)
    {
        buffer.putInt(offset + ALLOCATED_OFFSET, value);
        return this;
    }

    public String backingPath()
    {
        final int length = Math.min(buffer.getInt(offset + PATH_LENGTH_OFFSET), PATH_MAX_LENGTH);
        final byte[] bytes = new byte[Math.max(length, 0)];
        buffer.getBytes(offset + PATH_OFFSET, bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /**
     * @throws MrdException EINVAL when the path does not fit.
     */
    public MemsegListRecord backingPath(final String value)
    {
        final byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > PATH_MAX_LENGTH)
        {
            throw new MrdException(ErrorCode.EINVAL, "backing file path '" + value + "' is longer than " +
                PATH_MAX_LENGTH + " bytes: choose a shorter --dir or --huge-dir");
        }
        buffer.putInt(offset + PATH_LENGTH_OFFSET, bytes.length);
        buffer.putBytes(offset + PATH_OFFSET, bytes);
        return this;
    }

    /**
     * @return the owner of segment {@code index}, {@link MemsegListDescriptor#OWNER_FREE} when free.
     */
    public int owner(final int index)
    {
        return buffer.getInt(segmentOffset(index) + SEGMENT_OWNER_OFFSET);
    }

    /**
     * @return the first segment index of the allocation segment {@code index} belongs to.
     */
    public int allocationFirst(final int index)
    {
        return buffer.getInt(segmentOffset(index) + SEGMENT_FIRST_OFFSET);
    }

    /**
     * @return the {@link Access} of the allocation segment {@code index} belongs to; 0 when free.
     */
    public int access(final int index)
    {
        return buffer.getInt(segmentOffset(index) + SEGMENT_ACCESS_OFFSET);
    }

    public MemsegListRecord segment(final int index, final int owner, final int allocationFirst, final int access)
    {
        final int at = segmentOffset(index);
        buffer.putInt(at + SEGMENT_FIRST_OFFSET, allocationFirst);
        buffer.putInt(at + SEGMENT_ACCESS_OFFSET, access);
        buffer.putInt(at + SEGMENT_OWNER_OFFSET, owner);
        return this;
    }

    private int segmentOffset(final int index)
    {
        return offset + SEGMENTS_OFFSET + index * SEGMENT_ENTRY_LENGTH;
    }
}
