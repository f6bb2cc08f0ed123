package io.mrd.layout;

import static org.agrona.BitUtil.CACHE_LINE_LENGTH;
import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;

/**
 * One memory-segment list: a reserved VA range cut into segments of the
 * header's segment size, backed by one file. Records follow each other in the
 * memseg-lists section; each is {@link #recordLength(int)} bytes.
 * <pre>
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                      Base Virtual Address                     |  0
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |          Backing Page Size (2 MiB hugetlbfs, 4 KiB tmpfs)     |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                        Segment Count                          | 16
 *  +---------------------------------------------------------------+
 *  |                            Flags                              | 20
 *  +---------------------------------------------------------------+
 *  |                     Allocated Segments                        | 24
 *  +---------------------------------------------------------------+
 *  |                     Backing Path Length                       | 28
 *  +---------------------------------------------------------------+
 *  |            Backing Path (224 bytes UTF-8, secondaries open it)|  32
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 *  |                  Segment 0: Owner Client Id                   | 256
 *  +---------------------------------------------------------------+
 *  |                  Segment 0: First Of Alloc                    | 260
 *  +---------------------------------------------------------------+
 *  |                  Segment 0: Access (Access flags)             | 264
 *  +---------------------------------------------------------------+
 *  |                  Segment 1: Owner Client Id                   | 268
 *  +---------------------------------------------------------------+
 *  |                              ...                              |
 *  +---------------------------------------------------------------+
 * </pre>
 * A segment with owner {@link #OWNER_FREE} is free. "First of alloc" is the
 * index of the first segment of the allocation the segment belongs to, so that
 * two adjacent allocations by one owner stay two ranges in a dump. "Access" is
 * the {@link Access} its owner asked for when allocating (plus local write),
 * one value per allocation: an MR covers segments of one access only, and has
 * that access.
 */
public final class MemsegListDescriptor
{
    /** Owner id of a free segment. */
    public static final int OWNER_FREE = 0;
    /** Owner id of memory the daemon allocated for itself (tests, tools). */
    public static final int OWNER_DAEMON = Integer.MAX_VALUE;

    /** Flag: the backing file is on hugetlbfs. */
    public static final int FLAG_HUGETLBFS = 1;

    /** Offset of the first address of the list's reservation. */
    public static final int BASE_VA_OFFSET = 0;
    /** Offset of the backing file's page size. */
    public static final int PAGE_SIZE_OFFSET = BASE_VA_OFFSET + SIZE_OF_LONG;
    /** Offset of the number of segments. */
    public static final int SEGMENT_COUNT_OFFSET = PAGE_SIZE_OFFSET + SIZE_OF_LONG;
    /** Offset of the flags. */
    public static final int FLAGS_OFFSET = SEGMENT_COUNT_OFFSET + SIZE_OF_INT;
    /** Offset of the number of allocated segments. */
    public static final int ALLOCATED_OFFSET = FLAGS_OFFSET + SIZE_OF_INT;
    /** Offset of the length in bytes of the backing path. */
    public static final int PATH_LENGTH_OFFSET = ALLOCATED_OFFSET + SIZE_OF_INT;
    /** Offset of the backing path. */
    public static final int PATH_OFFSET = PATH_LENGTH_OFFSET + SIZE_OF_INT;
    /** Bytes reserved for the backing path. */
    public static final int PATH_MAX_LENGTH = 224;
    /** Offset of the per-segment entries. */
    public static final int SEGMENTS_OFFSET = PATH_OFFSET + PATH_MAX_LENGTH;

    /** Offset of the owner inside a segment entry. */
    public static final int SEGMENT_OWNER_OFFSET = 0;
    /** Offset of the first segment index of the allocation inside a segment entry. */
    public static final int SEGMENT_FIRST_OFFSET = SEGMENT_OWNER_OFFSET + SIZE_OF_INT;
    /** Offset of the access of the allocation inside a segment entry (0 for a free segment). */
    public static final int SEGMENT_ACCESS_OFFSET = SEGMENT_FIRST_OFFSET + SIZE_OF_INT;
    /** Length of one segment entry. */
    public static final int SEGMENT_ENTRY_LENGTH = SEGMENT_ACCESS_OFFSET + SIZE_OF_INT;

    private MemsegListDescriptor()
    {
    }

    /**
     * @param segmentCount segments in the list.
     * @return bytes one list record takes, a whole number of cache lines.
     */
    public static int recordLength(final int segmentCount)
    {
        return align(SEGMENTS_OFFSET + segmentCount * SEGMENT_ENTRY_LENGTH);
    }

    static int align(final int length)
    {
        return (length + CACHE_LINE_LENGTH - 1) & -CACHE_LINE_LENGTH;
    }
}
