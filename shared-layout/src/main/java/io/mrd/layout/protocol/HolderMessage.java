package io.mrd.layout.protocol;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.MemorySegment;
import java.nio.ByteOrder;

import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;
import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;

/**
 * The messages between a daemon and its descriptor holder ({@code DIR/mrd-hold.sock}), little-endian, each one
 * fixed-length frame followed by {@code Count} one-byte messages that each carry one descriptor
 * ({@code SCM_RIGHTS}), in the order: the device's command file when {@link #FLAG_COMMAND_FD} is set, then each
 * memory list's backing file by list index:
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                 Magic ('MRDH', 0x4844524D)                    |  0
 *  +---------------------------------------------------------------+
 *  |                 Type (DEPOSIT 1, TAKE 2, HELD 3, RELEASE 4)   |  4
 *  +---------------------------------------------------------------+
 *  |                 Flags (COMMAND_FD 1)                          |  8
 *  +---------------------------------------------------------------+
 *  |                 Count of descriptors that follow              | 12
 *  +---------------------------------------------------------------+
 *  |                 Epoch of the daemon that deposited them       | 16
 *  |                                                               |
 *  +---------------------------------------------------------------+
 * </pre>
 * A daemon sends DEPOSIT (with its descriptors) on the connection it keeps open for its whole life; the holder
 * knows the daemon gone when that connection ends. A successor sends TAKE and gets HELD (the descriptors, the
 * epoch of the daemon that deposited them); its connection then stands for it as the deposit's did. RELEASE,
 * from whoever holds that connection, makes the holder close everything and exit.
 */
public final class HolderMessage
{
    public static final int MAGIC = 0x4844524D;

    public static final int DEPOSIT = 1;
    public static final int TAKE = 2;
    public static final int HELD = 3;
    public static final int RELEASE = 4;

    /** Flag: the first descriptor is the RDMA device's command file. */
    public static final int FLAG_COMMAND_FD = 1;

    public static final int MAGIC_OFFSET = 0;
    public static final int TYPE_OFFSET = MAGIC_OFFSET + SIZE_OF_INT;
    public static final int FLAGS_OFFSET = TYPE_OFFSET + SIZE_OF_INT;
    public static final int COUNT_OFFSET = FLAGS_OFFSET + SIZE_OF_INT;
    public static final int EPOCH_OFFSET = COUNT_OFFSET + SIZE_OF_INT;
    public static final int LENGTH = EPOCH_OFFSET + SIZE_OF_LONG;

    /** More descriptors than any daemon deposits (a command file and a list per 64 GiB of a 16 TiB maximum). */
    public static final int MAX_COUNT = 1024;

    /**
     * One decoded frame.
     *
     * @param type  {@link #DEPOSIT}, {@link #TAKE}, {@link #HELD} or {@link #RELEASE}.
     * @param flags {@link #FLAG_COMMAND_FD} or 0.
     * @param count descriptors that follow.
     * @param epoch the depositing daemon's epoch (0 in TAKE and RELEASE).
     */
    public record Frame(int type, int flags, int count, long epoch)
    {
        public boolean hasCommandFd()
        {
            return 0 != (flags & FLAG_COMMAND_FD);
        }
    }

    private HolderMessage()
    {
    }

    /**
     * Writes a frame into the first {@link #LENGTH} bytes of {@code target}.
     */
    public static void encode(final MemorySegment target, final Frame frame)
    {
        target.set(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), MAGIC_OFFSET, MAGIC);
        target.set(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), TYPE_OFFSET, frame.type());
        target.set(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), FLAGS_OFFSET, frame.flags());
        target.set(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), COUNT_OFFSET, frame.count());
        target.set(JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), EPOCH_OFFSET, frame.epoch());
    }

    /**
     * @return the frame in the first {@link #LENGTH} bytes of {@code source}.
     * @throws MrdException EPROTO for another magic, an unknown type or flag, or a count out of range.
     */
    public static Frame decode(final MemorySegment source)
    {
        final int magic = source.get(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), MAGIC_OFFSET);
        final int type = source.get(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), TYPE_OFFSET);
        final int flags = source.get(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), FLAGS_OFFSET);
        final int count = source.get(JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), COUNT_OFFSET);
        final long epoch = source.get(JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), EPOCH_OFFSET);
        if (MAGIC != magic)
        {
            throw new MrdException(ErrorCode.EPROTO, "not a descriptor holder's message (magic " +
                Integer.toHexString(magic) + "): only mrd daemons talk to " + "mrd-hold.sock");
        }
        if (type < DEPOSIT || type > RELEASE || 0 != (flags & ~FLAG_COMMAND_FD) || count < 0 || count > MAX_COUNT)
        {
            throw new MrdException(ErrorCode.EPROTO, "malformed descriptor holder message: type " + type +
                ", flags " + flags + ", count " + count + " (a daemon of another mrd version?)");
        }
        return new Frame(type, flags, count, epoch);
    }
}
