package io.mrd.layout;

import static org.agrona.BitUtil.SIZE_OF_INT;

/**
 * The devices a daemon registers on, and every MR's keys on each (layout version 6, docs/multi-device.md).
 * Devices are numbered by their place in {@code --device}, device 0 first; the header says how many there are
 * ({@link HeaderDescriptor#DEVICE_COUNT_OFFSET}).
 * <p>
 * The <b>device table</b> has {@link #MAX_DEVICES} records of {@link #DEVICE_RECORD_LENGTH} bytes, of which the
 * first {@code deviceCount} are in use:
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |   Device Name (32 bytes ASCII, NUL padded)                    |  0
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 *  |   PD Handle (ibv_pd.handle)                                   | 32
 *  +---------------------------------------------------------------+
 *  |                          (pad to 64)                          | 36
 *  +---------------------------------------------------------------+
 * </pre>
 * The <b>MR key table</b> has one row per MR record ({@code mrCapacity} rows) of {@link #MAX_DEVICES} entries
 * of {@link #KEY_ENTRY_LENGTH} bytes; entry {@code d} of row {@code i} holds MR record {@code i}'s keys on
 * device {@code d}:
 * <pre>
 *  +---------------------------------------------------------------+
 *  |                            Lkey                               |  0
 *  +---------------------------------------------------------------+
 *  |                  Rkey (0 without remote access)               |  4
 *  +---------------------------------------------------------------+
 *  |   Device Handle (ibv_mr.handle; -1 without a device)          |  8
 *  +---------------------------------------------------------------+
 *  |                          (pad)                                | 12
 *  +---------------------------------------------------------------+
 * </pre>
 * A row is written in the same write section of the seqlock as its MR record, before the record is cached, so
 * that a reader that finds the MR through the global cache reads its keys of every device in the same read
 * section. Device 0's keys are also in the MR record and the global cache entry: the hit path of device 0 reads
 * nothing else, and a one-device daemon's file reads as before. The table always has {@link #MAX_DEVICES}
 * columns, so that its place does not depend on how many devices a daemon opens (the layout is computed before
 * the devices are): its pages for devices not in use are never touched.
 */
public final class DeviceDescriptor
{
    /** Devices one daemon registers on at most: an ML host's NICs, one per GPU pair. */
    public static final int MAX_DEVICES = 8;

    /** Offset of a device's name in its record. */
    public static final int NAME_OFFSET = 0;
    /** Bytes of a device's name, NUL padded. */
    public static final int NAME_LENGTH = 32;
    /** Offset of a device's PD handle in its record. */
    public static final int PD_HANDLE_OFFSET = NAME_OFFSET + NAME_LENGTH;
    /** Bytes of one device record. */
    public static final int DEVICE_RECORD_LENGTH = 64;
    /** Bytes of the device table. */
    public static final int DEVICE_TABLE_LENGTH = MAX_DEVICES * DEVICE_RECORD_LENGTH;

    /** Offset of the lkey in a key entry. */
    public static final int LKEY_OFFSET = 0;
    /** Offset of the rkey in a key entry. */
    public static final int RKEY_OFFSET = LKEY_OFFSET + SIZE_OF_INT;
    /** Offset of the device handle in a key entry. */
    public static final int DEVICE_HANDLE_OFFSET = RKEY_OFFSET + SIZE_OF_INT;
    /** Bytes of one key entry. */
    public static final int KEY_ENTRY_LENGTH = 16;
    /** Bytes of one MR's row of the key table. */
    public static final int KEY_ROW_LENGTH = MAX_DEVICES * KEY_ENTRY_LENGTH;

    private DeviceDescriptor()
    {
    }
}
