package io.mrd.layout.journal;

import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;
import static org.agrona.BitUtil.SIZE_OF_SHORT;

/**
 * One event in a journal file ({@link JournalFileDescriptor}): 64 bytes, one cache line, little-endian. What
 * the fields after {@code Client} mean depends on the type ({@link JournalEventType} says).
 * <p>
 * <b>Commit.</b> The writer stores every field, then the commit word with an ordered store: the file's lap in
 * its high half, {@link #checksum} of the lap and the other seven words in its low half. A reader takes a record
 * only when the commit word holds the file's lap and the checksum of what it reads: a record torn by a crash
 * (commit word not yet stored, or stored over fields that did not all reach memory), and a record left from an
 * older lap of the file, are where the journal ends, never an event. The daemon issues no fsync: the file is
 * mapped shared, so what it stored survives {@code kill -9} in the page cache (not a power loss).
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                Checksum (low half of the commit word)         |  0
 *  +---------------------------------------------------------------+
 *  |                   Lap (high half; written last)               |  4
 *  +---------------------------------------------------------------+
 *  |                     Record Length (64)                        |  8
 *  +-------------------------------+-------------------------------+
 *  |             Type              |             Flags             | 12
 *  +-------------------------------+-------------------------------+
 *  |                        Time (epoch ns)                        | 16
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   Client (0: the daemon)                      | 24
 *  +---------------------------------------------------------------+
 *  |               Arg (MR slot, pid: see the type)                | 28
 *  +---------------------------------------------------------------+
 *  |                           Address                             | 32
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                       Length (bytes)                          | 40
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                            Lkey                               | 48
 *  +---------------------------------------------------------------+
 *  |                            Rkey                               | 52
 *  +---------------------------------------------------------------+
 *  |               Value (devGen, epoch, uid: see the type)        | 56
 *  |                                                               |
 *  +---------------------------------------------------------------+
 * </pre>
 */
public final class JournalRecordDescriptor
{
    /** Bytes of one record. */
    public static final int RECORD_LENGTH = 64;

    /** Offset of the commit word: {@code lap << 32 | checksum}, stored last. */
    public static final int COMMIT_OFFSET = 0;
    /** Offset of the record's length ({@link #RECORD_LENGTH}; a reader refuses another). */
    public static final int LENGTH_OFFSET = COMMIT_OFFSET + SIZE_OF_LONG;
    /** Offset of the {@link JournalEventType} code. */
    public static final int TYPE_OFFSET = LENGTH_OFFSET + SIZE_OF_INT;
    /** Offset of the type's flags (MR flags, access, error code). */
    public static final int FLAGS_OFFSET = TYPE_OFFSET + SIZE_OF_SHORT;
    /** Offset of the time of the event, epoch nanoseconds. */
    public static final int TIME_OFFSET = FLAGS_OFFSET + SIZE_OF_SHORT;
    /** Offset of the client the event is about, 0 for the daemon. */
    public static final int CLIENT_OFFSET = TIME_OFFSET + SIZE_OF_LONG;
    /** Offset of the type's int argument. */
    public static final int ARG_OFFSET = CLIENT_OFFSET + SIZE_OF_INT;
    /** Offset of the range's first address. */
    public static final int ADDRESS_OFFSET = ARG_OFFSET + SIZE_OF_INT;
    /** Offset of the range's length. */
    public static final int RANGE_LENGTH_OFFSET = ADDRESS_OFFSET + SIZE_OF_LONG;
    /** Offset of the MR's lkey. */
    public static final int LKEY_OFFSET = RANGE_LENGTH_OFFSET + SIZE_OF_LONG;
    /** Offset of the MR's rkey. */
    public static final int RKEY_OFFSET = LKEY_OFFSET + SIZE_OF_INT;
    /** Offset of the type's long value. */
    public static final int VALUE_OFFSET = RKEY_OFFSET + SIZE_OF_INT;

    private JournalRecordDescriptor()
    {
    }

    /**
     * @param lap   the lap of the file the record is in.
     * @param words the seven words after the commit word, as {@code getLong} reads them at offsets 8, 16, … 56.
     * @return the commit word a complete record of {@code lap} holding {@code words} has.
     */
    public static long commitWord(
        final long lap, final long w8, final long w16, final long w24, final long w32, final long w40,
        final long w48, final long w56)
    {
        return lap << 32 | (checksum(lap, w8, w16, w24, w32, w40, w48, w56) & 0xFFFF_FFFFL);
    }

    /**
     * @return a 32-bit hash of the lap and the seven words (each word mixed in turn, so that a word left from an
     * older record, or a field stored in the wrong place, changes it).
     */
    public static int checksum(
        final long lap, final long w8, final long w16, final long w24, final long w32, final long w40,
        final long w48, final long w56)
    {
        long h = mix(0x9E37_79B9_7F4A_7C15L, lap);
        h = mix(h, w8);
        h = mix(h, w16);
        h = mix(h, w24);
        h = mix(h, w32);
        h = mix(h, w40);
        h = mix(h, w48);
        h = mix(h, w56);
        return (int)(h ^ h >>> 32);
    }

    private static long mix(final long h, final long word)
    {
        long x = (h ^ word) * 0xBF58_476D_1CE4_E5B9L;
        x ^= x >>> 31;
        x *= 0x94D0_49BB_1331_11EBL;
        return x ^ x >>> 29;
    }

    /**
     * @return the lap a commit word was written for (0: none yet).
     */
    public static long lapOf(final long commitWord)
    {
        return commitWord >>> 32;
    }
}
