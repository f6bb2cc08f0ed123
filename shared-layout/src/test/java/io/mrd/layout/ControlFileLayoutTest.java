package io.mrd.layout;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import static io.mrd.layout.HeaderDescriptor.*;
import static org.agrona.BitUtil.CACHE_LINE_LENGTH;
import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The control file's geometry: sections in order, cache-line aligned and disjoint; header fields aligned,
 * disjoint and on the cache line the design puts them on; record lengths the other process relies on.
 */
final class ControlFileLayoutTest
{
    /** {lists, segments per list, MRs, cache entries, clients}. */
    private static final int[][] CAPACITIES =
    {
        {4, 256, 4096, 1_048_576, 256},
        {1, 1, 1, 2, 1},
        {1, 7, 3, 3, 1},
        {2, 9, 5, 17, 3},
        {3, 65, 13, 1000, 7},
        {8, 512, 16384, 4_000_000, 1024},
        {64, 65536, 1, 2, 1},
    };

    @Test
    void sectionsAreOrderedAlignedAndDisjointForEveryCapacitySet()
    {
        for (final int[] c : CAPACITIES)
        {
            assertSectionsSound(ControlFileLayout.compute(c[0], c[1], c[2], c[3], c[4]), c);
        }
    }

    @Property(tries = 500)
    void sectionsAreSoundForRandomCapacities(
        @ForAll @IntRange(min = 1, max = 64) final int lists,
        @ForAll @IntRange(min = 1, max = 65536) final int segments,
        @ForAll @IntRange(min = 1, max = 65536) final int mrs,
        @ForAll @IntRange(min = 2, max = 4_000_000) final int cache,
        @ForAll @IntRange(min = 1, max = 4096) final int clients)
    {
        final int[] c = {lists, segments, mrs, cache, clients};
        final ControlFileLayout layout = ControlFileLayout.compute(lists, segments, mrs, cache, clients);
        assertSectionsSound(layout, c);
        assertRoundTrip(layout);
    }

    @Test
    void roundTripsThroughTheHeader()
    {
        for (final int[] c : CAPACITIES)
        {
            assertRoundTrip(ControlFileLayout.compute(c[0], c[1], c[2], c[3], c[4]));
        }
    }

    @Test
    void refusesAFileOverTwoGibNamingWhatToLower()
    {
        final int cache = 100_000_000;
        final MrdException ex = assertThrows(MrdException.class,
            () -> ControlFileLayout.compute(4, 256, 4096, cache, 256));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().contains("--cache-capacity (" + cache + ")"), ex.getMessage());
        assertTrue(ex.getMessage().contains("--max-mrs (4096)"), ex.getMessage());
        assertTrue(ex.getMessage().contains("2 GiB"), ex.getMessage());

        final MrdException mrs = assertThrows(MrdException.class,
            () -> ControlFileLayout.compute(1, 65536, 1 << 20, 2, 1));
        assertEquals(ErrorCode.EINVAL, mrs.code());
        assertTrue(mrs.getMessage().contains("--max-mrs (" + (1 << 20) + ")"), mrs.getMessage());
    }

    @Test
    void refusesCapacitiesBelowTheMinimum()
    {
        final int[][] bad = {{0, 1, 1, 2, 1}, {1, 0, 1, 2, 1}, {1, 1, 0, 2, 1}, {1, 1, 1, 1, 1}, {1, 1, 1, 2, 0},
            {-1, 1, 1, 2, 1}};
        for (final int[] c : bad)
        {
            final MrdException ex = assertThrows(MrdException.class,
                () -> ControlFileLayout.compute(c[0], c[1], c[2], c[3], c[4]));
            assertEquals(ErrorCode.EINVAL, ex.code());
        }
    }

    /**
     * {@code MemsegListDescriptor.recordLength} and the bitmap length are ints: a huge segments-per-list count
     * must be refused with EINVAL rather than wrap around into overlapping sections.
     */
    @Test
    void refusesSegmentCountsWhoseRecordWouldNotFit()
    {
        for (final int segments : new int[]{Integer.MAX_VALUE, Integer.MAX_VALUE - 7, 1 << 29, 268_435_424})
        {
            final MrdException ex = assertThrows(MrdException.class,
                () -> ControlFileLayout.compute(1, segments, 1, 2, 1), "segments " + segments);
            assertEquals(ErrorCode.EINVAL, ex.code());
        }
    }

    @Test
    void headerFieldsAreAlignedDisjointAndOnTheirLines()
    {
        final List<int[]> fields = headerFields();
        final Set<Integer> seen = new HashSet<>();
        for (final int[] f : fields)
        {
            final int offset = f[0];
            final int size = f[1];
            final int alignment = Math.min(size, SIZE_OF_LONG);
            assertEquals(0, offset % alignment, "header field at " + offset + " not aligned to " + alignment);
            assertTrue(offset + size <= HEADER_LENGTH, "header field at " + offset + " past the header");
            for (int b = offset; b < offset + size; b++)
            {
                assertTrue(seen.add(b), "header byte " + b + " used by two fields");
            }
        }

        for (final int offset : new int[]{SEQ_OFFSET, DEV_GEN_OFFSET, CACHE_LEN_OFFSET, CACHE_OVERFLOW_OFFSET,
            MR_HIGH_WATER_OFFSET})
        {
            assertTrue(offset >= CACHE_LINE_LENGTH && offset + SIZE_OF_INT <= 2 * CACHE_LINE_LENGTH,
                "hot field at " + offset + " is not on line 1");
        }
        assertEquals(CACHE_LINE_LENGTH, SEQ_OFFSET);
        assertTrue(DEV_GEN_OFFSET + SIZE_OF_LONG <= 2 * CACHE_LINE_LENGTH);
        for (final int[] f : fields)
        {
            final int offset = f[0];
            if (offset < CACHE_LINE_LENGTH)
            {
                assertTrue(offset + f[1] <= CACHE_LINE_LENGTH, "line-0 field at " + offset + " crosses line 1");
            }
            else if (offset >= 2 * CACHE_LINE_LENGTH && offset < PD_HANDLE_OFFSET)
            {
                assertTrue(offset + f[1] <= PD_HANDLE_OFFSET, "geometry field at " + offset + " crosses line 4");
            }
        }
        for (final int offset : new int[]{BASE_VIRTADDR_OFFSET, SEGMENT_SIZE_OFFSET, COUNTERS_METADATA_OFFSET_OFFSET,
            MEMSEG_LISTS_OFFSET_OFFSET, MR_TABLE_OFFSET_OFFSET, MR_BITMAP_OFFSET_OFFSET, CACHE_OFFSET_OFFSET,
            CLIENT_TABLE_OFFSET_OFFSET, ERROR_LOG_LENGTH_OFFSET, EXTERNAL_LENGTH_OFFSET, PROVIDER_NAME_OFFSET})
        {
            assertTrue(offset >= 2 * CACHE_LINE_LENGTH && offset < HEADER_LENGTH, "geometry at " + offset);
        }
        for (final int offset : new int[]{PD_HANDLE_OFFSET, DEVICE_COUNT_OFFSET, ADOPTED_EPOCH_OFFSET,
            DEVICE_NAME_OFFSET, DEVICE_TABLE_OFFSET_OFFSET, MR_KEY_TABLE_OFFSET_OFFSET})
        {
            assertTrue(offset >= 4 * CACHE_LINE_LENGTH && offset < HEADER_LENGTH, "device and lineage at " + offset);
        }
        assertEquals(320, HEADER_LENGTH);
        assertEquals(0x3144524D, MAGIC);
    }

    @Test
    void everyHeaderOffsetConstantIsCheckedHere() throws IllegalAccessException
    {
        final Set<Integer> listed = new HashSet<>();
        for (final int[] f : headerFields())
        {
            listed.add(f[0]);
        }
        for (final Field field : HeaderDescriptor.class.getDeclaredFields())
        {
            if (Modifier.isStatic(field.getModifiers()) && field.getName().endsWith("_OFFSET"))
            {
                assertTrue(listed.contains(field.getInt(null)),
                    field.getName() + " is not in headerFields(): add it with its size");
            }
        }
    }

    @Test
    void recordLengthsAreWhatTheOtherProcessAssumes()
    {
        assertEquals(72, MrDescriptor.MR_RECORD_LENGTH);
        assertEquals(32, CacheEntryDescriptor.ENTRY_LENGTH);
        assertEquals(12, MemsegListDescriptor.SEGMENT_ENTRY_LENGTH);
        assertEquals(64, ClientDescriptor.CLIENT_RECORD_LENGTH);
        assertEquals(64, DeviceDescriptor.DEVICE_RECORD_LENGTH);
        assertEquals(16, DeviceDescriptor.KEY_ENTRY_LENGTH);
        assertEquals(128, DeviceDescriptor.KEY_ROW_LENGTH);
        assertEquals(256, MemsegListDescriptor.SEGMENTS_OFFSET);
        for (final int segments : new int[]{1, 2, 7, 8, 9, 255, 256, 257, 4096, 65535})
        {
            final int length = MemsegListDescriptor.recordLength(segments);
            assertEquals(0, length % CACHE_LINE_LENGTH, "record length " + length + " for " + segments);
            assertTrue(length >= MemsegListDescriptor.SEGMENTS_OFFSET +
                segments * MemsegListDescriptor.SEGMENT_ENTRY_LENGTH);
            assertTrue(length < MemsegListDescriptor.SEGMENTS_OFFSET +
                segments * MemsegListDescriptor.SEGMENT_ENTRY_LENGTH + CACHE_LINE_LENGTH);
        }

        assertFieldsAligned("MR record", MrDescriptor.MR_RECORD_LENGTH,
            new int[][]{{MrDescriptor.STATE_OFFSET, 4}, {MrDescriptor.LKEY_OFFSET, 4}, {MrDescriptor.RKEY_OFFSET, 4},
                {MrDescriptor.LIST_INDEX_OFFSET, 4}, {MrDescriptor.START_OFFSET, 8}, {MrDescriptor.END_OFFSET, 8},
                {MrDescriptor.MS_BASE_IDX_OFFSET, 4}, {MrDescriptor.MS_N_OFFSET, 4},
                {MrDescriptor.MS_BMP_N_OFFSET, 4}, {MrDescriptor.FLAGS_OFFSET, 2}, {MrDescriptor.ACCESS_OFFSET, 2},
                {MrDescriptor.OWNER_OFFSET, 4},
                {MrDescriptor.BITMAP_OFFSET_OFFSET, 4}, {MrDescriptor.CREATED_OFFSET, 8},
                {MrDescriptor.DEVICE_HANDLE_OFFSET, 4}});
        assertFieldsAligned("cache entry", CacheEntryDescriptor.ENTRY_LENGTH,
            new int[][]{{CacheEntryDescriptor.START_OFFSET, 8}, {CacheEntryDescriptor.END_OFFSET, 8},
                {CacheEntryDescriptor.LKEY_OFFSET, 4}, {CacheEntryDescriptor.RKEY_OFFSET, 4},
                {CacheEntryDescriptor.MR_OFFSET, 4}, {CacheEntryDescriptor.ACCESS_OFFSET, 4}});
        assertFieldsAligned("segment entry", MemsegListDescriptor.SEGMENT_ENTRY_LENGTH,
            new int[][]{{MemsegListDescriptor.SEGMENT_OWNER_OFFSET, 4}, {MemsegListDescriptor.SEGMENT_FIRST_OFFSET, 4},
                {MemsegListDescriptor.SEGMENT_ACCESS_OFFSET, 4}});
        assertTrue(Access.KNOWN <= 0xFFFF, "the MR record's 16-bit access field holds every flag a client may ask");
        assertFieldsAligned("client record", ClientDescriptor.CLIENT_RECORD_LENGTH,
            new int[][]{{ClientDescriptor.STATE_OFFSET, 4}, {ClientDescriptor.ID_OFFSET, 4},
                {ClientDescriptor.PID_OFFSET, 8}, {ClientDescriptor.UID_OFFSET, 4}, {ClientDescriptor.GID_OFFSET, 4},
                {ClientDescriptor.CONNECTED_OFFSET, 8}, {ClientDescriptor.NAME_OFFSET, ClientDescriptor.NAME_MAX_LENGTH}});
        assertFieldsAligned("memseg list record", MemsegListDescriptor.SEGMENTS_OFFSET,
            new int[][]{{MemsegListDescriptor.BASE_VA_OFFSET, 8}, {MemsegListDescriptor.PAGE_SIZE_OFFSET, 8},
                {MemsegListDescriptor.SEGMENT_COUNT_OFFSET, 4}, {MemsegListDescriptor.FLAGS_OFFSET, 4},
                {MemsegListDescriptor.ALLOCATED_OFFSET, 4}, {MemsegListDescriptor.PATH_LENGTH_OFFSET, 4},
                {MemsegListDescriptor.PATH_OFFSET, MemsegListDescriptor.PATH_MAX_LENGTH}});
    }

    private static void assertFieldsAligned(final String what, final int recordLength, final int[][] fields)
    {
        final boolean[] used = new boolean[recordLength];
        for (final int[] f : fields)
        {
            final int alignment = Math.min(f[1], SIZE_OF_LONG);
            assertEquals(0, f[0] % alignment, what + " field at " + f[0] + " not aligned to " + alignment);
            for (int b = f[0]; b < f[0] + f[1]; b++)
            {
                assertTrue(b < recordLength, what + " field at " + f[0] + " runs past " + recordLength);
                assertTrue(!used[b], what + " byte " + b + " used by two fields");
                used[b] = true;
            }
        }
    }

    /**
     * @return {offset, size} of every header field.
     */
    private static List<int[]> headerFields()
    {
        final List<int[]> f = new ArrayList<>();
        f.add(new int[]{MAGIC_OFFSET, SIZE_OF_INT});
        f.add(new int[]{LAYOUT_VERSION_OFFSET, SIZE_OF_INT});
        f.add(new int[]{EPOCH_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{PID_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{START_TIME_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{HEARTBEAT_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{FILE_LENGTH_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{FLAGS_OFFSET, SIZE_OF_INT});
        f.add(new int[]{HEARTBEAT_INTERVAL_OFFSET, SIZE_OF_INT});
        f.add(new int[]{HEARTBEAT_STALE_LIMIT_OFFSET, SIZE_OF_INT});
        f.add(new int[]{SEQ_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{DEV_GEN_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{CACHE_LEN_OFFSET, SIZE_OF_INT});
        f.add(new int[]{CACHE_OVERFLOW_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MR_HIGH_WATER_OFFSET, SIZE_OF_INT});
        f.add(new int[]{BASE_VIRTADDR_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{SEGMENT_SIZE_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{COUNTERS_METADATA_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{COUNTERS_METADATA_LENGTH_OFFSET, SIZE_OF_INT});
        f.add(new int[]{COUNTERS_VALUES_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{COUNTERS_VALUES_LENGTH_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MEMSEG_LISTS_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MEMSEG_LIST_COUNT_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MEMSEG_LIST_RECORD_LENGTH_OFFSET, SIZE_OF_INT});
        f.add(new int[]{SEGMENTS_PER_LIST_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MR_TABLE_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MR_CAPACITY_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MR_BITMAP_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MR_BITMAP_LENGTH_OFFSET, SIZE_OF_INT});
        f.add(new int[]{CACHE_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{CACHE_CAPACITY_OFFSET, SIZE_OF_INT});
        f.add(new int[]{CLIENT_TABLE_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{CLIENT_CAPACITY_OFFSET, SIZE_OF_INT});
        f.add(new int[]{ERROR_LOG_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{ERROR_LOG_LENGTH_OFFSET, SIZE_OF_INT});
        f.add(new int[]{EXTERNAL_BASE_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{EXTERNAL_LENGTH_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{PROVIDER_NAME_OFFSET, PROVIDER_NAME_LENGTH});
        f.add(new int[]{HISTOGRAMS_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{HISTOGRAMS_LENGTH_OFFSET, SIZE_OF_INT});
        f.add(new int[]{PD_HANDLE_OFFSET, SIZE_OF_INT});
        f.add(new int[]{DEVICE_COUNT_OFFSET, SIZE_OF_INT});
        f.add(new int[]{ADOPTED_EPOCH_OFFSET, SIZE_OF_LONG});
        f.add(new int[]{DEVICE_NAME_OFFSET, DEVICE_NAME_LENGTH});
        f.add(new int[]{DEVICE_TABLE_OFFSET_OFFSET, SIZE_OF_INT});
        f.add(new int[]{MR_KEY_TABLE_OFFSET_OFFSET, SIZE_OF_INT});
        return f;
    }

    private static void assertSectionsSound(final ControlFileLayout layout, final int[] c)
    {
        final String what = "capacities " + Arrays.toString(c);
        final long[][] sections = layout.sections();
        assertEquals(ControlFileLayout.SECTION_NAMES.length, sections.length);
        assertEquals(0, sections[0][0], what);
        assertEquals(HEADER_LENGTH, sections[0][1], what);
        long previousEnd = 0;
        for (int i = 0; i < sections.length; i++)
        {
            final String name = what + " section " + ControlFileLayout.SECTION_NAMES[i];
            final long offset = sections[i][0];
            final long length = sections[i][1];
            assertTrue(length > 0, name + " is empty");
            assertEquals(0, offset % CACHE_LINE_LENGTH, name + " at " + offset + " not on a cache line");
            assertTrue(offset >= previousEnd, name + " at " + offset + " overlaps the previous, ending " +
                previousEnd);
            previousEnd = offset + length;
        }
        assertEquals(layout.fileLength(), previousEnd, what + ": the error log ends the file");
        assertTrue(layout.fileLength() <= Integer.MAX_VALUE, what);

        assertEquals(c[0], layout.memsegListCount(), what);
        assertEquals(c[1], layout.segmentsPerList(), what);
        assertEquals(c[2], layout.mrCapacity(), what);
        assertEquals(c[3], layout.cacheCapacity(), what);
        assertEquals(c[4], layout.clientCapacity(), what);
        assertEquals(0, layout.memsegListRecordLength() % CACHE_LINE_LENGTH, what);
        assertEquals(MemsegListDescriptor.recordLength(c[1]), layout.memsegListRecordLength(), what);
        assertTrue(layout.mrBitmapLength() * 8L >= c[1], what + ": one bitmap bit per segment");
        assertEquals(0, layout.mrBitmapLength() % CACHE_LINE_LENGTH, what);

        assertEquals(layout.memsegListsOffset(), layout.memsegListOffset(0), what);
        assertTrue(layout.memsegListOffset(c[0] - 1) + layout.memsegListRecordLength() <= layout.mrTableOffset(),
            what);
        assertTrue(layout.mrOffset(c[2] - 1) + MrDescriptor.MR_RECORD_LENGTH <= layout.mrBitmapOffset(), what);
        assertTrue(layout.mrBitmapOffset(c[2] - 1) + layout.mrBitmapLength() <= layout.cacheOffset(), what);
        assertTrue(layout.cacheOffset() + (long)c[3] * CacheEntryDescriptor.ENTRY_LENGTH <=
            layout.clientTableOffset(), what);
        assertTrue(layout.clientOffset(c[4] - 1) + ClientDescriptor.CLIENT_RECORD_LENGTH <= layout.errorLogOffset(),
            what);
        assertEquals(ControlFileLayout.ERROR_LOG_LENGTH, layout.errorLogLength(), what);
    }

    private static void assertRoundTrip(final ControlFileLayout layout)
    {
        final UnsafeBuffer header = new UnsafeBuffer(ByteBuffer.allocateDirect(HEADER_LENGTH));
        layout.writeTo(header);
        final ControlFileLayout read = ControlFileLayout.read(header);

        assertEquals(layout.countersMetadataOffset(), read.countersMetadataOffset());
        assertEquals(layout.countersMetadataLength(), read.countersMetadataLength());
        assertEquals(layout.countersValuesOffset(), read.countersValuesOffset());
        assertEquals(layout.countersValuesLength(), read.countersValuesLength());
        assertEquals(layout.memsegListsOffset(), read.memsegListsOffset());
        assertEquals(layout.memsegListCount(), read.memsegListCount());
        assertEquals(layout.memsegListRecordLength(), read.memsegListRecordLength());
        assertEquals(layout.segmentsPerList(), read.segmentsPerList());
        assertEquals(layout.mrTableOffset(), read.mrTableOffset());
        assertEquals(layout.mrCapacity(), read.mrCapacity());
        assertEquals(layout.mrBitmapOffset(), read.mrBitmapOffset());
        assertEquals(layout.mrBitmapLength(), read.mrBitmapLength());
        assertEquals(layout.cacheOffset(), read.cacheOffset());
        assertEquals(layout.cacheCapacity(), read.cacheCapacity());
        assertEquals(layout.clientTableOffset(), read.clientTableOffset());
        assertEquals(layout.clientCapacity(), read.clientCapacity());
        assertEquals(layout.errorLogOffset(), read.errorLogOffset());
        assertEquals(layout.errorLogLength(), read.errorLogLength());
        assertEquals(layout.fileLength(), read.fileLength());
        final long[][] expected = layout.sections();
        final long[][] actual = read.sections();
        for (int i = 0; i < expected.length; i++)
        {
            assertEquals(expected[i][0], actual[i][0]);
            assertEquals(expected[i][1], actual[i][1]);
        }
    }
}
