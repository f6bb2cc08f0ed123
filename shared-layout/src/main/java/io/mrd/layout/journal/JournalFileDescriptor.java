package io.mrd.layout.journal;

import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;

/**
 * One file of the daemon's event journal, {@code DIR/journal/N.journal}: a header, then fixed-length records
 * ({@link JournalRecordDescriptor}) from {@link #RECORDS_OFFSET} to the end of the file.
 * <p>
 * The journal is {@link #FILE_COUNT} files of one length, used in turn: file {@code (lap - 1) % FILE_COUNT} holds
 * lap {@code lap} (1, 2, 3, … since the daemon started). When a lap's file is full the writer starts the next
 * lap in the next file, overwriting the oldest: the journal stays bounded and keeps between
 * {@code FILE_COUNT - 1} and {@code FILE_COUNT} files of the newest events. A file restarted for a new lap is not
 * cleared: its old records carry the old lap in their commit word, so a reader stops at the first of them.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                         Magic 'MRDJ'                          |  0
 *  +---------------------------------------------------------------+
 *  |                        Layout Version                         |  4
 *  +---------------------------------------------------------------+
 *  |          Lap (written last, ordered, when a lap starts)       |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                     Daemon Epoch (as mrd.ctl)                 | 16
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                        File Length                            | 24
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                    Lap Start Time (epoch ns)                  | 32
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                     (pad to 64: records)                      | 40
 *  +---------------------------------------------------------------+
 * </pre>
 */
public final class JournalFileDescriptor
{
    /** 'MRDJ' little-endian. */
    public static final int MAGIC = 0x4A44524D;
    /** Bumped on any change of this layout or of {@link JournalRecordDescriptor}; readers refuse another. */
    public static final int LAYOUT_VERSION = 1;
    /** Files the journal rolls over. */
    public static final int FILE_COUNT = 4;
    /** Directory of the current journal in the run directory. */
    public static final String DIRECTORY = "journal";
    /** What the daemon renames {@link #DIRECTORY} to when it starts over an old one (one generation kept). */
    public static final String PREVIOUS_DIRECTORY = "journal.previous";

    /** Offset of the magic. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of the layout version. */
    public static final int LAYOUT_VERSION_OFFSET = MAGIC_OFFSET + SIZE_OF_INT;
    /** Offset of the lap this file holds; 0 while it holds none. */
    public static final int LAP_OFFSET = LAYOUT_VERSION_OFFSET + SIZE_OF_INT;
    /** Offset of the epoch of the daemon that wrote the file. */
    public static final int EPOCH_OFFSET = LAP_OFFSET + SIZE_OF_LONG;
    /** Offset of the file's length in bytes. */
    public static final int FILE_LENGTH_OFFSET = EPOCH_OFFSET + SIZE_OF_LONG;
    /** Offset of the time the lap started, epoch nanoseconds. */
    public static final int LAP_START_OFFSET = FILE_LENGTH_OFFSET + SIZE_OF_LONG;
    /** Where the records start. */
    public static final int RECORDS_OFFSET = 64;

    /** The smallest file: a header and a page of records. */
    public static final long MIN_FILE_LENGTH = 4096 + RECORDS_OFFSET;

    private JournalFileDescriptor()
    {
    }

    /**
     * @return the name of file {@code index} in the journal directory.
     */
    public static String fileName(final int index)
    {
        return index + ".journal";
    }

    /**
     * @return the file that holds {@code lap}.
     */
    public static int fileIndex(final long lap)
    {
        return (int)((lap - 1) % FILE_COUNT);
    }

    /**
     * @param journalSize the whole journal's bound ({@code --journal-size}).
     * @return the length of each file: an equal share, whole records after the header.
     */
    public static long fileLength(final long journalSize)
    {
        final long share = journalSize / FILE_COUNT - RECORDS_OFFSET;
        return RECORDS_OFFSET + share - share % JournalRecordDescriptor.RECORD_LENGTH;
    }
}
