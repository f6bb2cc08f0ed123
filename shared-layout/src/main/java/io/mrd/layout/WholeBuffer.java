package io.mrd.layout;

import io.mrd.layout.sys.Sizes;

/**
 * The whole-buffer rule: a key is handed out for a buffer only when the whole buffer lies in one MR.
 * <p>
 * The reference checks only a buffer's first byte and hands out an lkey that the NIC refuses for the rest of a
 * buffer straddling two MRs. Both the secondary's caches and the daemon's {@code CREATE_MR} apply this rule, so
 * a buffer is refused the same way whichever of them answers.
 */
public final class WholeBuffer
{
    private WholeBuffer()
    {
    }

    /**
     * @param address first byte of the buffer; the caller found it in an entry ending at {@code end}.
     * @param length  bytes of the buffer.
     * @param end     first byte past the entry.
     * @return true when {@code [address, address + length)} ends inside the entry.
     */
    public static boolean fits(final long address, final long length, final long end)
    {
        // Unsigned: a negative length is huge and fails, and address + length cannot overflow.
        return Long.compareUnsigned(length, end - address) <= 0;
    }

    /**
     * @return the error for a buffer at {@code address} that does not fit the entry ending at {@code end}: EINVAL
     * naming the buffer, where it must be split, or its negative length.
     */
    public static MrdException straddles(final long address, final long length, final long end)
    {
        if (length < 0)
        {
            return new MrdException(ErrorCode.EINVAL, "buffer at " + Sizes.hex(address) + " has a negative length " +
                length);
        }
        return new MrdException(ErrorCode.EINVAL, "buffer [" + Sizes.hex(address) + ", " +
            Sizes.hex(address + length) + ") straddles two MRs: the chunk holding its start ends at " +
            Sizes.hex(end) + "; split the buffer at " + Sizes.hex(end));
    }
}
