package io.mrd.layout;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.charset.StandardCharsets;

/**
 * A fixed-length ASCII field of the control file, NUL padded: a name that does not fit is cut.
 */
final class AsciiField
{
    private AsciiField()
    {
    }

    static String get(final DirectBuffer buffer, final int at, final int length)
    {
        final byte[] bytes = new byte[length];
        buffer.getBytes(at, bytes);
        int end = 0;
        while (end < bytes.length && bytes[end] != 0)
        {
            end++;
        }
        return new String(bytes, 0, end, StandardCharsets.US_ASCII);
    }

    static void put(final MutableDirectBuffer buffer, final int at, final int length, final String value)
    {
        final byte[] bytes = value.getBytes(StandardCharsets.US_ASCII);
        buffer.setMemory(at, length, (byte)0);
        buffer.putBytes(at, bytes, 0, Math.min(bytes.length, length));
    }
}
