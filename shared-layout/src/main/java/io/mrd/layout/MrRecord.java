package io.mrd.layout;

import org.agrona.MutableDirectBuffer;

import static io.mrd.layout.MrDescriptor.*;

/**
 * Flyweight over one MR record and its bitmap ({@link MrDescriptor}).
 */
public final class MrRecord
{
    private MutableDirectBuffer buffer;
    private int offset;

    public MrRecord wrap(final MutableDirectBuffer buffer, final int offset)
    {
        this.buffer = buffer;
        this.offset = offset;
        return this;
    }

    public int offset()
    {
        return offset;
    }

    public int state()
    {
        return buffer.getInt(offset + STATE_OFFSET);
    }

    public MrRecord state(final int value)
    {
        buffer.putInt(offset + STATE_OFFSET, value);
        return this;
    }

    public int lkey()
    {
        return buffer.getInt(offset + LKEY_OFFSET);
    }

    public MrRecord lkey(final int value)
    {
        buffer.putInt(offset + LKEY_OFFSET, value);
        return this;
    }

    public int rkey()
    {
        return buffer.getInt(offset + RKEY_OFFSET);
    }

    public MrRecord rkey(final int value)
    {
        buffer.putInt(offset + RKEY_OFFSET, value);
        return this;
    }

    public int listIndex()
    {
        return buffer.getInt(offset + LIST_INDEX_OFFSET);
    }

    public MrRecord listIndex(final int value)
    {
        buffer.putInt(offset + LIST_INDEX_OFFSET, value);
        return this;
    }

    public long start()
    {
        return buffer.getLong(offset + START_OFFSET);
    }

    public MrRecord start(final long value)
    {
        buffer.putLong(offset + START_OFFSET, value);
        return this;
    }

    public long end()
    {
        return buffer.getLong(offset + END_OFFSET);
    }

    public MrRecord end(final long value)
    {
        buffer.putLong(offset + END_OFFSET, value);
        return this;
    }

    public int msBaseIdx()
    {
        return buffer.getInt(offset + MS_BASE_IDX_OFFSET);
    }

    public MrRecord msBaseIdx(final int value)
    {
        buffer.putInt(offset + MS_BASE_IDX_OFFSET, value);
        return this;
    }

    public int msN()
    {
        return buffer.getInt(offset + MS_N_OFFSET);
    }

    public MrRecord msN(final int value)
    {
        buffer.putInt(offset + MS_N_OFFSET, value);
        return this;
    }

    public int msBmpN()
    {
        return buffer.getInt(offset + MS_BMP_N_OFFSET);
    }

    public MrRecord msBmpN(final int value)
    {
        buffer.putInt(offset + MS_BMP_N_OFFSET, value);
        return this;
    }

    public int flags()
    {
        return buffer.getShort(offset + FLAGS_OFFSET) & 0xFFFF;
    }

    public MrRecord flags(final int value)
    {
        buffer.putShort(offset + FLAGS_OFFSET, (short)value);
        return this;
    }

    /**
     * @return the {@link Access} flags of the memory the MR covers.
     */
    public int access()
    {
        return buffer.getShort(offset + ACCESS_OFFSET) & 0xFFFF;
    }

    public MrRecord access(final int value)
    {
        buffer.putShort(offset + ACCESS_OFFSET, (short)value);
        return this;
    }

    public boolean isExternal()
    {
        return (flags() & FLAG_EXTERNAL) != 0;
    }

    public int owner()
    {
        return buffer.getInt(offset + OWNER_OFFSET);
    }

    public MrRecord owner(final int value)
    {
        buffer.putInt(offset + OWNER_OFFSET, value);
        return this;
    }

    public int bitmapOffset()
    {
        return buffer.getInt(offset + BITMAP_OFFSET_OFFSET);
    }

    public MrRecord bitmapOffset(final int value)
    {
        buffer.putInt(offset + BITMAP_OFFSET_OFFSET, value);
        return this;
    }

    public long createdMs()
    {
        return buffer.getLong(offset + CREATED_OFFSET);
    }

    public MrRecord createdMs(final long value)
    {
        buffer.putLong(offset + CREATED_OFFSET, value);
        return this;
    }

    /** @return the device's handle of the MR ({@code ibv_mr.handle}), {@link MrDescriptor#NO_DEVICE_HANDLE} if none. */
    public int deviceHandle()
    {
        return buffer.getInt(offset + DEVICE_HANDLE_OFFSET);
    }

    public MrRecord deviceHandle(final int value)
    {
        buffer.putInt(offset + DEVICE_HANDLE_OFFSET, value);
        return this;
    }

    /**
     * @return whether bit {@code index} (segment {@code msBaseIdx + index}) is set.
     */
    public boolean bit(final int index)
    {
        final int at = bitmapOffset() + (index >>> 3);
        return (buffer.getByte(at) & (1 << (index & 7))) != 0;
    }

    public MrRecord bit(final int index, final boolean value)
    {
        final int at = bitmapOffset() + (index >>> 3);
        final byte old = buffer.getByte(at);
        buffer.putByte(at, (byte)(value ? old | (1 << (index & 7)) : old & ~(1 << (index & 7))));
        return this;
    }

    /**
     * Clears the record and its bitmap of {@code bitmapLength} bytes.
     */
    public MrRecord clear(final int bitmapLength)
    {
        final int bitmap = bitmapOffset();
        buffer.setMemory(offset, MR_RECORD_LENGTH, (byte)0);
        if (bitmap > 0)
        {
            buffer.setMemory(bitmap, bitmapLength, (byte)0);
        }
        return this;
    }
}
