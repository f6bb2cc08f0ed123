package io.mrd.layout;

import static org.agrona.BitUtil.CACHE_LINE_LENGTH;
import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;

/**
 * Header of the control file {@code mrd.ctl}: five cache lines at offset 0.
 * <p>
 * Line 0 says who wrote the file and whether it is alive; line 1 holds the
 * fields every lookup reads (the seqlock, {@code devGen}, the global cache's
 * length), alone on their line so that the heartbeat store every interval does
 * not invalidate the line lookups read; lines 2 and 3 hold the geometry, written once
 * before {@link #LAYOUT_VERSION_OFFSET} is published; line 4 names the device and the PD the MRs
 * belong to, and the daemon whose state this one adopted (docs/adoption.md), all written before
 * the publication too.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                         Magic 'MRD1'                          |  0
 *  +---------------------------------------------------------------+
 *  |              Layout Version (written last, release)           |  4
 *  +---------------------------------------------------------------+
 *  |                            Epoch                              |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                             Pid                               | 16
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                      Start Time (epoch ms)                    | 24
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |        Heartbeat (epoch ms, every interval; -1 = closed)      | 32
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                     Control File Length                       | 40
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                           Flags                               | 48
 *  +---------------------------------------------------------------+
 *  |                    Heartbeat Interval (ms)                    | 52
 *  +---------------------------------------------------------------+
 *  |          Heartbeat Stale Limit (ms; older means dead)         | 56
 *  +---------------------------------------------------------------+
 *  |                      (pad to line 1)                          | 60
 *  +===============================================================+
 *  |              Seq (seqlock of MR table + global cache)         | 64
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |         DevGen (bumped on every invalidating memory event)    | 72
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                  Global Cache Length (incl. sentinel)         | 80
 *  +---------------------------------------------------------------+
 *  |                    Global Cache Overflow                      | 84
 *  +---------------------------------------------------------------+
 *  |             MR High Water (records ever used, scan bound)     | 88
 *  +---------------------------------------------------------------+
 *  |                      (pad to line 2)                          | 92
 *  +===============================================================+
 *  |                      Base Virtual Address                     |128
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                     Segment Size (bytes)                      |136
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |  Counters Metadata Offset     |  Counters Metadata Length     |144
 *  +---------------------------------------------------------------+
 *  |  Counters Values Offset       |  Counters Values Length       |152
 *  +---------------------------------------------------------------+
 *  |  Memseg Lists Offset          |  Memseg List Count            |160
 *  +---------------------------------------------------------------+
 *  |  Memseg List Record Length    |  Segments Per List            |168
 *  +---------------------------------------------------------------+
 *  |  MR Table Offset              |  MR Capacity                  |176
 *  +---------------------------------------------------------------+
 *  |  MR Bitmap Offset             |  MR Bitmap Length Per MR      |184
 *  +---------------------------------------------------------------+
 *  |  Global Cache Offset          |  Global Cache Capacity        |192
 *  +---------------------------------------------------------------+
 *  |  Client Table Offset          |  Client Capacity              |200
 *  +---------------------------------------------------------------+
 *  |  Error Log Offset             |  Error Log Length             |208
 *  +---------------------------------------------------------------+
 *  |                   External Window Base Address                |216
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   External Window Length                      |224
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |               Provider Name (16 bytes ASCII, NUL padded)      |232
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 *  |  Histograms Offset            |  Histograms Length            |248
 *  +===============================================================+
 *  |        PD Handle (ibv_pd.handle; -1 without a device)         |256
 *  +---------------------------------------------------------------+
 *  |        Device Count (0 without a device)                      |260
 *  +---------------------------------------------------------------+
 *  |   Adopted Epoch (the predecessor's; 0: started afresh)        |264
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |   Device Name (32 bytes ASCII, NUL padded; empty without one) |272
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 *  |  Device Table Offset          |  MR Key Table Offset          |304
 *  +---------------------------------------------------------------+
 * </pre>
 * The PD handle and the device name are device 0's, as in the device table ({@link DeviceDescriptor}).
 */
public final class HeaderDescriptor
{
    /** 'M' 'R' 'D' '1' read as a little-endian int. */
    public static final int MAGIC = 0x3144524D;

    /**
     * Version of this layout. Bump it on every change to any section; readers refuse a version they do not
     * know. Version 2 added the heartbeat stale limit; version 3 the access of memory and MRs: per segment in
     * the memseg lists, in the MR records, and with the rkey in the global cache's entries; version 4 the
     * histograms section ({@link HistogramsDescriptor}); version 5 the device, the PD handle and the
     * adopted epoch in the header, and each MR's device handle; version 6 several devices: their count, the
     * device table and the MR key table ({@link DeviceDescriptor}).
     */
    public static final int LAYOUT_VERSION = 6;

    /** Heartbeat value of a daemon that shut down cleanly. */
    public static final long HEARTBEAT_CLOSED = -1L;

    /** Flag: the control file lives on hugetlbfs. */
    public static final int FLAG_HUGEPAGE_BACKED = 1;

    /** Offset of the magic number. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of the layout version: 0 until the file is complete, then {@link #LAYOUT_VERSION}. */
    public static final int LAYOUT_VERSION_OFFSET = MAGIC_OFFSET + SIZE_OF_INT;
    /** Offset of the random 64-bit epoch of this daemon start. */
    public static final int EPOCH_OFFSET = LAYOUT_VERSION_OFFSET + SIZE_OF_INT;
    /** Offset of the daemon's pid. */
    public static final int PID_OFFSET = EPOCH_OFFSET + SIZE_OF_LONG;
    /** Offset of the daemon's start time in ms since the epoch. */
    public static final int START_TIME_OFFSET = PID_OFFSET + SIZE_OF_LONG;
    /** Offset of the heartbeat: the wall clock in ms, stored every heartbeat interval. */
    public static final int HEARTBEAT_OFFSET = START_TIME_OFFSET + SIZE_OF_LONG;
    /** Offset of the length of the whole control file. */
    public static final int FILE_LENGTH_OFFSET = HEARTBEAT_OFFSET + SIZE_OF_LONG;
    /** Offset of the flags ({@link #FLAG_HUGEPAGE_BACKED}). */
    public static final int FLAGS_OFFSET = FILE_LENGTH_OFFSET + SIZE_OF_LONG;
    /** Offset of the heartbeat interval in ms, so readers know what "stale" means. */
    public static final int HEARTBEAT_INTERVAL_OFFSET = FLAGS_OFFSET + SIZE_OF_INT;
    /** Offset of the heartbeat age in ms beyond which every reader counts the daemon dead ({@link Heartbeat}). */
    public static final int HEARTBEAT_STALE_LIMIT_OFFSET = HEARTBEAT_INTERVAL_OFFSET + SIZE_OF_INT;

    /** Offset of the seqlock counter guarding the MR table and the global cache. */
    public static final int SEQ_OFFSET = CACHE_LINE_LENGTH;
    /** Offset of devGen: local caches flush when it differs from the value they saw. */
    public static final int DEV_GEN_OFFSET = SEQ_OFFSET + SIZE_OF_LONG;
    /** Offset of the number of global cache entries in use, sentinel included. */
    public static final int CACHE_LEN_OFFSET = DEV_GEN_OFFSET + SIZE_OF_LONG;
    /** Offset of the overflow flag: 1 when the global cache could not hold every chunk. */
    public static final int CACHE_OVERFLOW_OFFSET = CACHE_LEN_OFFSET + SIZE_OF_INT;
    /** Offset of the number of MR records ever used: readers scan no further. */
    public static final int MR_HIGH_WATER_OFFSET = CACHE_OVERFLOW_OFFSET + SIZE_OF_INT;

    /** Offset of the first byte of the first memory-segment list's reservation. */
    public static final int BASE_VIRTADDR_OFFSET = 2 * CACHE_LINE_LENGTH;
    /** Offset of the logical segment size (2 MiB). */
    public static final int SEGMENT_SIZE_OFFSET = BASE_VIRTADDR_OFFSET + SIZE_OF_LONG;
    /** Offset of the counters metadata section's offset. */
    public static final int COUNTERS_METADATA_OFFSET_OFFSET = SEGMENT_SIZE_OFFSET + SIZE_OF_LONG;
    /** Offset of the counters metadata section's length. */
    public static final int COUNTERS_METADATA_LENGTH_OFFSET = COUNTERS_METADATA_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the counters values section's offset. */
    public static final int COUNTERS_VALUES_OFFSET_OFFSET = COUNTERS_METADATA_LENGTH_OFFSET + SIZE_OF_INT;
    /** Offset of the counters values section's length. */
    public static final int COUNTERS_VALUES_LENGTH_OFFSET = COUNTERS_VALUES_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the memory-segment lists section's offset. */
    public static final int MEMSEG_LISTS_OFFSET_OFFSET = COUNTERS_VALUES_LENGTH_OFFSET + SIZE_OF_INT;
    /** Offset of the number of memory-segment lists. */
    public static final int MEMSEG_LIST_COUNT_OFFSET = MEMSEG_LISTS_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the length of one memory-segment list record. */
    public static final int MEMSEG_LIST_RECORD_LENGTH_OFFSET = MEMSEG_LIST_COUNT_OFFSET + SIZE_OF_INT;
    /** Offset of the number of segments in each list. */
    public static final int SEGMENTS_PER_LIST_OFFSET = MEMSEG_LIST_RECORD_LENGTH_OFFSET + SIZE_OF_INT;
    /** Offset of the MR table section's offset. */
    public static final int MR_TABLE_OFFSET_OFFSET = SEGMENTS_PER_LIST_OFFSET + SIZE_OF_INT;
    /** Offset of the MR table's capacity in records. */
    public static final int MR_CAPACITY_OFFSET = MR_TABLE_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the MR bitmap area's offset. */
    public static final int MR_BITMAP_OFFSET_OFFSET = MR_CAPACITY_OFFSET + SIZE_OF_INT;
    /** Offset of the bitmap bytes each MR record owns. */
    public static final int MR_BITMAP_LENGTH_OFFSET = MR_BITMAP_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the global cache section's offset. */
    public static final int CACHE_OFFSET_OFFSET = MR_BITMAP_LENGTH_OFFSET + SIZE_OF_INT;
    /** Offset of the global cache's capacity in entries, sentinel included. */
    public static final int CACHE_CAPACITY_OFFSET = CACHE_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the client table section's offset. */
    public static final int CLIENT_TABLE_OFFSET_OFFSET = CACHE_CAPACITY_OFFSET + SIZE_OF_INT;
    /** Offset of the client table's capacity in records. */
    public static final int CLIENT_CAPACITY_OFFSET = CLIENT_TABLE_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the error log section's offset. */
    public static final int ERROR_LOG_OFFSET_OFFSET = CLIENT_CAPACITY_OFFSET + SIZE_OF_INT;
    /** Offset of the error log section's length. */
    public static final int ERROR_LOG_LENGTH_OFFSET = ERROR_LOG_OFFSET_OFFSET + SIZE_OF_INT;
    /** Offset of the first address of the window where external memory is mapped. */
    public static final int EXTERNAL_BASE_OFFSET = ERROR_LOG_LENGTH_OFFSET + SIZE_OF_INT;
    /** Offset of the length of the external memory window. */
    public static final int EXTERNAL_LENGTH_OFFSET = EXTERNAL_BASE_OFFSET + SIZE_OF_LONG;
    /** Offset of the registration provider's name. */
    public static final int PROVIDER_NAME_OFFSET = EXTERNAL_LENGTH_OFFSET + SIZE_OF_LONG;
    /** Bytes reserved for the provider name. */
    public static final int PROVIDER_NAME_LENGTH = 16;
    /** Offset of the histograms section's offset. */
    public static final int HISTOGRAMS_OFFSET_OFFSET = PROVIDER_NAME_OFFSET + PROVIDER_NAME_LENGTH;
    /** Offset of the histograms section's length. */
    public static final int HISTOGRAMS_LENGTH_OFFSET = HISTOGRAMS_OFFSET_OFFSET + SIZE_OF_INT;

    /** Offset of the protection domain's handle ({@code ibv_pd.handle}, what {@code ibv_import_pd} takes). */
    public static final int PD_HANDLE_OFFSET = 4 * CACHE_LINE_LENGTH;
    /** Offset of the number of devices the daemon registers on ({@link DeviceDescriptor}); 0 without one. */
    public static final int DEVICE_COUNT_OFFSET = PD_HANDLE_OFFSET + SIZE_OF_INT;
    /** Offset of the epoch of the daemon whose state this one adopted; 0 when it started afresh. */
    public static final int ADOPTED_EPOCH_OFFSET = DEVICE_COUNT_OFFSET + SIZE_OF_INT;
    /** Offset of the RDMA device's name ({@code ibv_get_device_name}). */
    public static final int DEVICE_NAME_OFFSET = ADOPTED_EPOCH_OFFSET + SIZE_OF_LONG;
    /** Bytes reserved for the device name; longer names are cut. */
    public static final int DEVICE_NAME_LENGTH = 32;
    /** Offset of the device table's offset. */
    public static final int DEVICE_TABLE_OFFSET_OFFSET = DEVICE_NAME_OFFSET + DEVICE_NAME_LENGTH;
    /** Offset of the MR key table's offset. */
    public static final int MR_KEY_TABLE_OFFSET_OFFSET = DEVICE_TABLE_OFFSET_OFFSET + SIZE_OF_INT;
    /** PD handle of a daemon without a device ({@code --provider soft}); handles of a device start at 0. */
    public static final int NO_PD_HANDLE = -1;

    /** Length of the header: five cache lines. */
    public static final int HEADER_LENGTH = 5 * CACHE_LINE_LENGTH;

    private HeaderDescriptor()
    {
    }
}
