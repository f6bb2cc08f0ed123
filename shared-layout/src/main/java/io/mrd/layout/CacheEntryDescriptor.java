package io.mrd.layout;

import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;

/**
 * One entry of a sorted lookup table: the global cache in the control file
 * and every secondary's bottom-half cache use this same entry, so that one
 * search ({@link SortedTable}) serves both.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                         Start Address                         |  0
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                    End Address (exclusive)                    |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                             Lkey                              | 16
 *  +---------------------------------------------------------------+
 *  |                     Rkey (0 without remote access)            | 20
 *  +---------------------------------------------------------------+
 *  |                   MR Index (in the MR table)                  | 24
 *  +---------------------------------------------------------------+
 *  |                    Access (of the MR, Access)                 | 28
 *  +---------------------------------------------------------------+
 * </pre>
 * An entry holds both keys and the access, so that a lookup answers all three
 * from one read of the table. Entries are 32 bytes, so every 64-bit field of
 * every entry is 8-byte aligned. Entry 0 of every table is the sentinel
 * {@code {0, 0, -1, 0, -1, 0}}: the search never needs a bounds check below,
 * since every address is {@code >= 0}.
 */
public final class CacheEntryDescriptor
{
    /** Offset of the first address of the chunk. */
    public static final int START_OFFSET = 0;
    /** Offset of the end of the chunk. */
    public static final int END_OFFSET = START_OFFSET + SIZE_OF_LONG;
    /** Offset of the lkey. */
    public static final int LKEY_OFFSET = END_OFFSET + SIZE_OF_LONG;
    /** Offset of the rkey ({@link Access#NO_RKEY} when the MR has no remote access). */
    public static final int RKEY_OFFSET = LKEY_OFFSET + SIZE_OF_INT;
    /** Offset of the MR table index. */
    public static final int MR_OFFSET = RKEY_OFFSET + SIZE_OF_INT;
    /** Offset of the MR's access flags ({@link Access}). */
    public static final int ACCESS_OFFSET = MR_OFFSET + SIZE_OF_INT;
    /** Length of one entry. */
    public static final int ENTRY_LENGTH = ACCESS_OFFSET + SIZE_OF_INT;

    /** The lkey of "no entry", as {@code UINT32_MAX} in the reference. */
    public static final int NO_LKEY = -1;

    private CacheEntryDescriptor()
    {
    }
}
