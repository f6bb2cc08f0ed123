package io.mrd.cli.rdma;

import java.lang.foreign.MemorySegment;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The bytes {@link RdmaExchange} moves: every 8-byte word is a function of who wrote it, which message
 * (its sequence number) and where in the message it is, so a byte that arrives from the wrong message, the wrong
 * place or the wrong peer is counted wrong, and an untouched target is told from a written one.
 */
final class WordPattern
{
    private WordPattern()
    {
    }

    /**
     * @return word {@code index} of message {@code seq} from {@code writer}.
     */
    static long word(final long writer, final long seq, final long index)
    {
        long z = writer * 0x9E37_79B9_7F4A_7C15L + seq * 0xBF58_476D_1CE4_E5B9L + index * 0x94D0_49BB_1331_11EBL;
        z = (z ^ (z >>> 31)) * 0xBF58_476D_1CE4_E5B9L;
        return z ^ (z >>> 29);
    }

    /**
     * Writes {@code length} bytes (a multiple of 8) of message {@code seq}, words from {@code firstWord} on.
     */
    static void fill(
        final MemorySegment target, final long offset, final int length, final long writer, final long seq,
        final long firstWord)
    {
        for (int i = 0; i < length; i += 8)
        {
            target.set(JAVA_LONG, offset + i, word(writer, seq, firstWord + i / 8));
        }
    }

    /**
     * @return bytes among {@code length} (a multiple of 8) that differ from message {@code seq}.
     */
    static long wrongBytes(
        final MemorySegment source, final long offset, final int length, final long writer, final long seq,
        final long firstWord)
    {
        long wrong = 0;
        for (int i = 0; i < length; i += 8)
        {
            final long expected = word(writer, seq, firstWord + i / 8);
            final long actual = source.get(JAVA_LONG, offset + i);
            if (actual != expected)
            {
                final long diff = actual ^ expected;
                for (int b = 0; b < 8; b++)
                {
                    if (((diff >>> (b * 8)) & 0xFF) != 0)
                    {
                        wrong++;
                    }
                }
            }
        }
        return wrong;
    }
}
