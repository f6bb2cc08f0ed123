package io.mrd.layout;

import org.agrona.MutableDirectBuffer;

import java.nio.charset.StandardCharsets;

import static io.mrd.layout.ClientDescriptor.*;

/**
 * Flyweight over one client record ({@link ClientDescriptor}).
 */
public final class ClientRecord
{
    private MutableDirectBuffer buffer;
    private int offset;

    public ClientRecord wrap(final MutableDirectBuffer buffer, final int offset)
    {
        this.buffer = buffer;
        this.offset = offset;
        return this;
    }

    public int state()
    {
        return buffer.getInt(offset + STATE_OFFSET);
    }

    public ClientRecord state(final int value)
    {
        buffer.putInt(offset + STATE_OFFSET, value);
        return this;
    }

    public int id()
    {
        return buffer.getInt(offset + ID_OFFSET);
    }

    public ClientRecord id(final int value)
    {
        buffer.putInt(offset + ID_OFFSET, value);
        return this;
    }

    public long pid()
    {
        return buffer.getLong(offset + PID_OFFSET);
    }

    public ClientRecord pid(final long value)
    {
        buffer.putLong(offset + PID_OFFSET, value);
        return this;
    }

    public int uid()
    {
        return buffer.getInt(offset + UID_OFFSET);
    }

    public ClientRecord uid(final int value)
    {
        buffer.putInt(offset + UID_OFFSET, value);
        return this;
    }

    public int gid()
    {
        return buffer.getInt(offset + GID_OFFSET);
    }

    public ClientRecord gid(final int value)
    {
        buffer.putInt(offset + GID_OFFSET, value);
        return this;
    }

    public long connectedMs()
    {
        return buffer.getLong(offset + CONNECTED_OFFSET);
    }

    public ClientRecord connectedMs(final long value)
    {
        buffer.putLong(offset + CONNECTED_OFFSET, value);
        return this;
    }

    public String name()
    {
        final byte[] bytes = new byte[NAME_MAX_LENGTH];
        buffer.getBytes(offset + NAME_OFFSET, bytes);
        int length = 0;
        while (length < bytes.length && bytes[length] != 0)
        {
            length++;
        }
        return new String(bytes, 0, length, StandardCharsets.US_ASCII);
    }

    public ClientRecord name(final String value)
    {
        final byte[] bytes = value.getBytes(StandardCharsets.US_ASCII);
        buffer.setMemory(offset + NAME_OFFSET, NAME_MAX_LENGTH, (byte)0);
        buffer.putBytes(offset + NAME_OFFSET, bytes, 0, Math.min(bytes.length, NAME_MAX_LENGTH));
        return this;
    }
}
