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
 *  |                   MR Index (in the MR table)                  | 20
 *  +---------------------------------------------------------------+
 * </pre>
 * Entry 0 of every table is the sentinel {@code {0, 0, -1, -1}}: the search
 * never needs a bounds check below, since every address is {@code >= 0}.
 */
public final class CacheEntryDescriptor
{
    /** Offset of the first address of the chunk. */
    public static final int START_OFFSET = 0;
    /** Offset of the end of the chunk. */
    public static final int END_OFFSET = START_OFFSET + SIZE_OF_LONG;
    /** Offset of the lkey. */
    public static final int LKEY_OFFSET = END_OFFSET + SIZE_OF_LONG;
    /** Offset of the MR table index. */
    public static final int MR_OFFSET = LKEY_OFFSET + SIZE_OF_INT;
    /** Length of one entry. */
    public static final int ENTRY_LENGTH = MR_OFFSET + SIZE_OF_INT;

    /** The lkey of "no entry", as {@code UINT32_MAX} in the reference. */
    public static final int NO_LKEY = -1;

    private CacheEntryDescriptor()
    {
    }
}
