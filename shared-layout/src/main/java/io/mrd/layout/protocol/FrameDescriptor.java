package io.mrd.layout.protocol;

import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;
import static org.agrona.BitUtil.SIZE_OF_SHORT;

/**
 * One frame of the socket protocol between secondaries and the primary, little-endian:
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |          Frame Length (header included, 16..4096)             |  0
 *  +-------------------------------+-------------------------------+
 *  |          Type                 |            Flags              |  4
 *  +-------------------------------+-------------------------------+
 *  |                        Correlation Id                         |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                         Payload ...                           | 16
 *  +---------------------------------------------------------------+
 * </pre>
 * Every reply echoes its request's correlation id, so a connection may carry many requests at once (the
 * reference's IPC cannot: two same-named requests of one process fail with EEXIST). A reply's payload starts
 * with its status ({@link #STATUS_OFFSET}, an errno, 0 = success); its message, a text a person can act on,
 * ends the payload as a u16 length and UTF-8 bytes.
 */
public final class FrameDescriptor
{
    /** Offset of the frame length. */
    public static final int LENGTH_OFFSET = 0;
    /** Offset of the message type ({@link MessageType}). */
    public static final int TYPE_OFFSET = LENGTH_OFFSET + SIZE_OF_INT;
    /** Offset of the flags. */
    public static final int FLAGS_OFFSET = TYPE_OFFSET + SIZE_OF_SHORT;
    /** Offset of the correlation id. */
    public static final int CORRELATION_ID_OFFSET = FLAGS_OFFSET + SIZE_OF_SHORT;
    /** Length of the header. */
    public static final int HEADER_LENGTH = CORRELATION_ID_OFFSET + SIZE_OF_LONG;
    /** Offset of a reply's status, the first field of its payload. */
    public static final int STATUS_OFFSET = HEADER_LENGTH;

    /** Largest frame either side sends or accepts. */
    public static final int MAX_FRAME_LENGTH = 4096;
    /** Longest message text in a reply, in bytes. */
    public static final int MAX_MESSAGE_LENGTH = 1024;
    /** Longest name in HELLO, in bytes. */
    public static final int MAX_NAME_LENGTH = 32;

    /**
     * Flag: a file descriptor travels with this frame: after a REG_EXTERNAL request, as the one byte the
     * client sends when the daemon answers SEND_FD; with an IMPORT_PD reply, attached to the frame's own bytes.
     */
    public static final int FLAG_FD = 1;

    /**
     * Flag, on ALLOC only: on the request, register the memory in the same request; on a successful reply, the
     * memory is registered and the payload carries its lkey and rkey after the access. Any other frame with it
     * is refused. A flag rather than a new payload keeps every other ALLOC byte for byte as version 2 has it,
     * so no version bump: a daemon without it refuses the flag as unknown instead of ignoring it.
     */
    public static final int FLAG_REGISTER = 2;

    /**
     * Flag, on HELLO only: the client resumes after its daemon died and a successor adopted its state
     * (docs/adoption.md), and the payload carries, after the name, the id the predecessor gave it. The successor
     * admits it with that id when the id is one it adopted and the peer's pid and uid ({@code SO_PEERCRED}) are the
     * ones its predecessor recorded; a daemon without it refuses the flag as unknown.
     */
    public static final int FLAG_RESUME = 4;

    /**
     * Flag, on STOP only: hand over instead of stopping ({@code mrd restart}, docs/adoption.md): the daemon stops
     * accepting and exits without deregistering anything, its descriptor holder keeping the device and the memory
     * for the successor that adopts them.
     */
    public static final int FLAG_HANDOVER = 8;

    /**
     * Version of the protocol; HELLO carries it and the primary refuses another. Version 2 carries access: ALLOC's
     * {@code flags} became its access, REG_EXTERNAL gained one, and the replies to CREATE_MR, ALLOC and
     * REG_EXTERNAL carry the access (and the first and last the rkey). Version 3 names a device: IMPORT_PD
     * carries the device number, QUEUES the device of the queue.
     */
    public static final int PROTOCOL_VERSION = 3;

    private FrameDescriptor()
    {
    }
}
