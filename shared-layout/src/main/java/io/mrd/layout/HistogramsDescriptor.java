package io.mrd.layout;

import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;

/**
 * The histograms section of the control file: the daemon's {@link MrdHistogram}s, each as HdrHistogram's V2
 * encoding ({@code AbstractHistogram.encodeIntoByteBuffer}, the uncompressed form: zig-zag LEB128 counts with
 * runs of zeros folded) beside the exact sum of its values, so that {@code mrd stat} and the metrics read them
 * without asking the daemon.
 * <p>
 * Why encodings rewritten every heartbeat and not counts added in place: the daemon records into HdrHistogram's
 * lock-free interval histograms in its own heap, and only the heartbeat thread writes here, under the section's
 * own seqlock. Readers copy the section between two even, equal values of {@link #SEQ_OFFSET} and decode the
 * copy; a reader never writes, so the file stays mappable read-only. What a reader sees is at most one heartbeat
 * old.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |            Seq (seqlock of this section, odd mid-write)       |  0
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   Published Time (epoch ms)                   |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                         Entry Count                           | 16
 *  +---------------------------------------------------------------+
 *  |               Data Length (bytes of the entries)              | 20
 *  +---------------------------------------------------------------+
 *  |                       (pad to 32)                             | 24
 *  +===============================================================+
 *  |                Entries, each 8-byte aligned:                  | 32
 *  +---------------------------------------------------------------+
 *  |                  Histogram Id (MrdHistogram)                  | +0
 *  +---------------------------------------------------------------+
 *  |          Label (MessageType code by request type, else 0)     | +4
 *  +---------------------------------------------------------------+
 *  |                 Sum (of the values recorded)                  | +8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                 Encoded Length (bytes that follow)            |+16
 *  +---------------------------------------------------------------+
 *  |                          (pad)                                |+20
 *  +---------------------------------------------------------------+
 *  |            HdrHistogram V2 encoding (Encoded Length)          |+24
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 * </pre>
 */
public final class HistogramsDescriptor
{
    /** Offset of the section's seqlock counter. */
    public static final int SEQ_OFFSET = 0;
    /** Offset of the wall clock in ms when the daemon last wrote the section (0: never). */
    public static final int PUBLISHED_TIME_OFFSET = SEQ_OFFSET + SIZE_OF_LONG;
    /** Offset of the number of entries. */
    public static final int ENTRY_COUNT_OFFSET = PUBLISHED_TIME_OFFSET + SIZE_OF_LONG;
    /** Offset of the bytes the entries take from {@link #ENTRIES_OFFSET}. */
    public static final int DATA_LENGTH_OFFSET = ENTRY_COUNT_OFFSET + SIZE_OF_INT;
    /** Offset of the first entry. */
    public static final int ENTRIES_OFFSET = 32;

    /** Offset in an entry of its {@link MrdHistogram#id()}. */
    public static final int ENTRY_ID_OFFSET = 0;
    /** Offset in an entry of its label: the request type's code for {@link MrdHistogram#REQUEST_DURATION}. */
    public static final int ENTRY_LABEL_OFFSET = ENTRY_ID_OFFSET + SIZE_OF_INT;
    /** Offset in an entry of the exact sum of the values recorded (the encoding has counts only). */
    public static final int ENTRY_SUM_OFFSET = ENTRY_LABEL_OFFSET + SIZE_OF_INT;
    /** Offset in an entry of the length of its encoding. */
    public static final int ENTRY_ENCODED_LENGTH_OFFSET = ENTRY_SUM_OFFSET + SIZE_OF_LONG;
    /** Offset in an entry of the encoding. */
    public static final int ENTRY_ENCODED_OFFSET = ENTRY_ENCODED_LENGTH_OFFSET + 2 * SIZE_OF_INT;

    private HistogramsDescriptor()
    {
    }

    /**
     * @param encodedLength bytes of an entry's encoding.
     * @return bytes the whole entry takes, padded so that the next one is 8-byte aligned.
     */
    public static int entryLength(final int encodedLength)
    {
        return (ENTRY_ENCODED_OFFSET + encodedLength + SIZE_OF_LONG - 1) & -SIZE_OF_LONG;
    }
}
