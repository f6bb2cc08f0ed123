package io.mrd.layout;

import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;
import static org.agrona.BitUtil.SIZE_OF_SHORT;

/**
 * One record of the MR table: a registration the primary made. Fields mirror
 * the reference's {@code struct mlx5_mr}: the range registered, the memory
 * segments it spans ({@code msBaseIdx}, {@code msBmpN}) and how many of them are
 * still live ({@code msN}), one bitmap bit per spanned segment; and what the NIC
 * lets its keys do: the access of the memory it covers ({@link Access}, the
 * owner's flags as granted, without optional flags such as relaxed ordering) and
 * the rkey, {@link Access#NO_RKEY} when that access has no remote flag.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |               State (FREE 0, ACTIVE 1, DETACHED 2)            |  0
 *  +---------------------------------------------------------------+
 *  |                            Lkey                               |  4
 *  +---------------------------------------------------------------+
 *  |                  Rkey (0 without remote access)               |  8
 *  +---------------------------------------------------------------+
 *  |                 Memseg List Index (-1 external)               | 12
 *  +---------------------------------------------------------------+
 *  |                         Start Address                         | 16
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   End Address (exclusive)                     | 24
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                          Ms Base Idx                          | 32
 *  +---------------------------------------------------------------+
 *  |                      Ms N (live segments)                     | 36
 *  +---------------------------------------------------------------+
 *  |                  Ms Bmp N (segments spanned)                  | 40
 *  +---------------------------------------------------------------+
 *  |     Flags (EXTERNAL 1)        |      Access (Access flags)    | 44
 *  +-------------------------------+-------------------------------+
 *  |                        Owner Client Id                        | 48
 *  +---------------------------------------------------------------+
 *  |            Bitmap Offset (from the start of the file)         | 52
 *  +---------------------------------------------------------------+
 *  |                     Created Time (epoch ms)                   | 56
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |   Device Handle (ibv_mr.handle; -1 without a device)          | 64
 *  +---------------------------------------------------------------+
 *  |                          (pad)                                | 68
 *  +---------------------------------------------------------------+
 * </pre>
 * The device handle is what {@code ibv_import_mr} takes: with it, a process holding the device's context
 * names the MR without registering anything (a successor daemon adopting its predecessor's MRs,
 * docs/adoption.md).
 */
public final class MrDescriptor
{
    public static final int STATE_FREE = 0;
    public static final int STATE_ACTIVE = 1;
    /** No live segment left; waits for garbage collection to deregister it. */
    public static final int STATE_DETACHED = 2;

    /** Flag: external memory, one chunk, no segment list. */
    public static final int FLAG_EXTERNAL = 1;

    /** Offset of the state. */
    public static final int STATE_OFFSET = 0;
    /** Offset of the local key. */
    public static final int LKEY_OFFSET = STATE_OFFSET + SIZE_OF_INT;
    /** Offset of the remote key. */
    public static final int RKEY_OFFSET = LKEY_OFFSET + SIZE_OF_INT;
    /** Offset of the index of the memseg list the MR lies in. */
    public static final int LIST_INDEX_OFFSET = RKEY_OFFSET + SIZE_OF_INT;
    /** Offset of the first registered address. */
    public static final int START_OFFSET = LIST_INDEX_OFFSET + SIZE_OF_INT;
    /** Offset of the end of the registered range. */
    public static final int END_OFFSET = START_OFFSET + SIZE_OF_LONG;
    /** Offset of the list index of the first spanned segment. */
    public static final int MS_BASE_IDX_OFFSET = END_OFFSET + SIZE_OF_LONG;
    /** Offset of the number of live segments. */
    public static final int MS_N_OFFSET = MS_BASE_IDX_OFFSET + SIZE_OF_INT;
    /** Offset of the number of segments spanned (bits in the bitmap). */
    public static final int MS_BMP_N_OFFSET = MS_N_OFFSET + SIZE_OF_INT;
    /** Offset of the flags, 16 bits. */
    public static final int FLAGS_OFFSET = MS_BMP_N_OFFSET + SIZE_OF_INT;
    /**
     * Offset of the access, 16 bits: the {@link Access} flags of the memory the MR covers, all of which fit
     * ({@link Access#KNOWN}).
     */
    public static final int ACCESS_OFFSET = FLAGS_OFFSET + SIZE_OF_SHORT;
    /** Offset of the client id that caused the MR (0 = daemon). */
    public static final int OWNER_OFFSET = ACCESS_OFFSET + SIZE_OF_SHORT;
    /** Offset of the offset of this MR's bitmap in the file. */
    public static final int BITMAP_OFFSET_OFFSET = OWNER_OFFSET + SIZE_OF_INT;
    /** Offset of the creation time. */
    public static final int CREATED_OFFSET = BITMAP_OFFSET_OFFSET + SIZE_OF_INT;

    /** Offset of the device's handle of the MR. */
    public static final int DEVICE_HANDLE_OFFSET = CREATED_OFFSET + SIZE_OF_LONG;

    /** Length of one MR record. */
    public static final int MR_RECORD_LENGTH = DEVICE_HANDLE_OFFSET + SIZE_OF_INT + SIZE_OF_INT;

    /** Device handle of an MR of a provider without a device ({@code soft}); handles of a device start at 0. */
    public static final int NO_DEVICE_HANDLE = -1;

    private MrDescriptor()
    {
    }

    /**
     * @param state a state value.
     * @return its name as tools print it.
     */
    public static String stateName(final int state)
    {
        return switch (state)
        {
            case STATE_FREE -> "FREE";
            case STATE_ACTIVE -> "ACTIVE";
            case STATE_DETACHED -> "DETACHED";
            default -> "UNKNOWN(" + state + ")";
        };
    }
}
