package io.mrd.layout;

import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;

/**
 * One record of the client table: a connected secondary, as the primary saw it
 * through {@code SO_PEERCRED}. Written by the primary only.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                 State (FREE 0, CONNECTED 1)                   |  0
 *  +---------------------------------------------------------------+
 *  |                          Client Id                            |  4
 *  +---------------------------------------------------------------+
 *  |                             Pid                               |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                             Uid                               | 16
 *  +---------------------------------------------------------------+
 *  |                             Gid                               | 20
 *  +---------------------------------------------------------------+
 *  |                   Connected Time (epoch ms)                   | 24
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                 Name (32 bytes ASCII, from HELLO)             | 32
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 * </pre>
 */
public final class ClientDescriptor
{
    public static final int STATE_FREE = 0;
    public static final int STATE_CONNECTED = 1;

    /** Offset of the state. */
    public static final int STATE_OFFSET = 0;
    /** Offset of the client id (1 and up; 0 is never a client). */
    public static final int ID_OFFSET = STATE_OFFSET + SIZE_OF_INT;
    /** Offset of the peer's pid. */
    public static final int PID_OFFSET = ID_OFFSET + SIZE_OF_INT;
    /** Offset of the peer's uid. */
    public static final int UID_OFFSET = PID_OFFSET + SIZE_OF_LONG;
    /** Offset of the peer's gid. */
    public static final int GID_OFFSET = UID_OFFSET + SIZE_OF_INT;
    /** Offset of the time the peer connected. */
    public static final int CONNECTED_OFFSET = GID_OFFSET + SIZE_OF_INT;
    /** Offset of the name the peer gave in HELLO. */
    public static final int NAME_OFFSET = CONNECTED_OFFSET + SIZE_OF_LONG;
    /** Bytes reserved for the name. */
    public static final int NAME_MAX_LENGTH = 32;
    /** Length of one client record. */
    public static final int CLIENT_RECORD_LENGTH = NAME_OFFSET + NAME_MAX_LENGTH;

    private ClientDescriptor()
    {
    }
}
