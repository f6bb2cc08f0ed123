package io.mrd.layout;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.status.CountersReader;

import static io.mrd.layout.HeaderDescriptor.*;
import static org.agrona.BitUtil.CACHE_LINE_LENGTH;

/**
 * Where each section of the control file lies. The primary computes it from
 * its capacities ({@link #compute}) and writes it into the header; every reader
 * takes it from the header ({@link #read}) and never from its own constants, so
 * that capacities can differ between daemons without a layout change.
 * <pre>
 *  +------------------------+ 0
 *  | Header (4 lines)       |
 *  +------------------------+ countersMetadataOffset
 *  | Counters metadata      |  Agrona CountersManager
 *  +------------------------+ countersValuesOffset
 *  | Counters values        |
 *  +------------------------+ memsegListsOffset
 *  | Memseg lists           |  listCount records of memsegListRecordLength
 *  +------------------------+ mrTableOffset
 *  | MR table               |  mrCapacity records of 64 bytes
 *  +------------------------+ mrBitmapOffset
 *  | MR bitmaps             |  mrCapacity slots of mrBitmapLength bytes
 *  +------------------------+ deviceTableOffset
 *  | Device table           |  MAX_DEVICES records of 64 bytes (DeviceDescriptor)
 *  +------------------------+ mrKeyTableOffset
 *  | MR key table           |  mrCapacity rows of MAX_DEVICES entries of 16 bytes
 *  +------------------------+ cacheOffset
 *  | Global cache           |  cacheCapacity entries of 32 bytes
 *  +------------------------+ clientTableOffset
 *  | Client table           |  clientCapacity records of 64 bytes
 *  +------------------------+ histogramsOffset
 *  | Histograms             |  HdrHistogram encodings (HistogramsDescriptor)
 *  +------------------------+ errorLogOffset
 *  | Error log              |  Agrona DistinctErrorLog
 *  +------------------------+ fileLength
 * </pre>
 * Every section starts on a 64-byte boundary.
 */
public final class ControlFileLayout
{
    /** Counters the daemon can hold. */
    public static final int MAX_COUNTERS = 64;
    /** Most segments one list may have (a 2 TiB list of 2 MiB segments); keeps every record length an int. */
    public static final int MAX_SEGMENTS_PER_LIST = 1 << 20;
    /** Bytes of the error log. */
    public static final int ERROR_LOG_LENGTH = 64 * 1024;
    /** Bytes of the histograms section: the worst-case encoding of every histogram the daemon keeps fits. */
    public static final int HISTOGRAMS_LENGTH = 512 * 1024;

    private final int countersMetadataOffset;
    private final int countersMetadataLength;
    private final int countersValuesOffset;
    private final int countersValuesLength;
    private final int memsegListsOffset;
    private final int memsegListCount;
    private final int memsegListRecordLength;
    private final int segmentsPerList;
    private final int mrTableOffset;
    private final int mrCapacity;
    private final int mrBitmapOffset;
    private final int mrBitmapLength;
    private final int deviceTableOffset;
    private final int mrKeyTableOffset;
    private final int cacheOffset;
    private final int cacheCapacity;
    private final int clientTableOffset;
    private final int clientCapacity;
    private final int histogramsOffset;
    private final int histogramsLength;
    private final int errorLogOffset;
    private final int errorLogLength;
    private final long fileLength;

    @SuppressWarnings("checkstyle:ParameterNumber")
    private ControlFileLayout(
        final int countersMetadataOffset,
        final int countersMetadataLength,
        final int countersValuesOffset,
        final int countersValuesLength,
        final int memsegListsOffset,
        final int memsegListCount,
        final int memsegListRecordLength,
        final int segmentsPerList,
        final int mrTableOffset,
        final int mrCapacity,
        final int mrBitmapOffset,
        final int mrBitmapLength,
        final int deviceTableOffset,
        final int mrKeyTableOffset,
        final int cacheOffset,
        final int cacheCapacity,
        final int clientTableOffset,
        final int clientCapacity,
        final int histogramsOffset,
        final int histogramsLength,
        final int errorLogOffset,
        final int errorLogLength,
        final long fileLength)
    {
        this.countersMetadataOffset = countersMetadataOffset;
        this.countersMetadataLength = countersMetadataLength;
        this.countersValuesOffset = countersValuesOffset;
        this.countersValuesLength = countersValuesLength;
        this.memsegListsOffset = memsegListsOffset;
        this.memsegListCount = memsegListCount;
        this.memsegListRecordLength = memsegListRecordLength;
        this.segmentsPerList = segmentsPerList;
        this.mrTableOffset = mrTableOffset;
        this.mrCapacity = mrCapacity;
        this.mrBitmapOffset = mrBitmapOffset;
        this.mrBitmapLength = mrBitmapLength;
        this.deviceTableOffset = deviceTableOffset;
        this.mrKeyTableOffset = mrKeyTableOffset;
        this.cacheOffset = cacheOffset;
        this.cacheCapacity = cacheCapacity;
        this.clientTableOffset = clientTableOffset;
        this.clientCapacity = clientCapacity;
        this.histogramsOffset = histogramsOffset;
        this.histogramsLength = histogramsLength;
        this.errorLogOffset = errorLogOffset;
        this.errorLogLength = errorLogLength;
        this.fileLength = fileLength;
    }

    /**
     * Lays out a control file for the given capacities.
     *
     * @param memsegListCount number of memory-segment lists.
     * @param segmentsPerList segments in each list.
     * @param mrCapacity MR records.
     * @param cacheCapacity global cache entries, sentinel included.
     * @param clientCapacity client records.
     * @return the layout.
     * @throws MrdException EINVAL when the file would exceed 2 GiB (the largest buffer Agrona wraps).
     */
    public static ControlFileLayout compute(
        final int memsegListCount,
        final int segmentsPerList,
        final int mrCapacity,
        final int cacheCapacity,
        final int clientCapacity)
    {
        if (memsegListCount < 1 || segmentsPerList < 1 || mrCapacity < 1 || cacheCapacity < 2 || clientCapacity < 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "control file capacities must be positive (lists " +
                memsegListCount + ", segments " + segmentsPerList + ", MRs " + mrCapacity + ", cache " +
                cacheCapacity + ", clients " + clientCapacity + ")");
        }
        if (segmentsPerList > MAX_SEGMENTS_PER_LIST)
        {
            throw new MrdException(ErrorCode.EINVAL, "a memory-segment list of " + segmentsPerList +
                " segments is more than " + MAX_SEGMENTS_PER_LIST + ": lower --list-size");
        }
        final int valuesLength = MAX_COUNTERS * CountersReader.COUNTER_LENGTH;
        final int metadataLength = MAX_COUNTERS * CountersReader.METADATA_LENGTH;
        final int listRecordLength = MemsegListDescriptor.recordLength(segmentsPerList);
        final int bitmapLength = MemsegListDescriptor.align((segmentsPerList + 7) / 8);

        long offset = HEADER_LENGTH;
        final long metadataOffset = offset;
        offset += metadataLength;
        final long valuesOffset = offset;
        offset += valuesLength;
        final long listsOffset = offset;
        offset += (long)memsegListCount * listRecordLength;
        final long mrOffset = offset;
        offset = align(offset + (long)mrCapacity * MrDescriptor.MR_RECORD_LENGTH);
        final long bitmapOffset = offset;
        offset = align(offset + (long)mrCapacity * bitmapLength);
        final long deviceTableOffset = offset;
        offset += DeviceDescriptor.DEVICE_TABLE_LENGTH;
        final long keyTableOffset = offset;
        offset = align(offset + (long)mrCapacity * DeviceDescriptor.KEY_ROW_LENGTH);
        final long cacheOffset = offset;
        offset = align(offset + (long)cacheCapacity * CacheEntryDescriptor.ENTRY_LENGTH);
        final long clientOffset = offset;
        offset = align(offset + (long)clientCapacity * ClientDescriptor.CLIENT_RECORD_LENGTH);
        final long histogramsOffset = offset;
        offset += HISTOGRAMS_LENGTH;
        final long errorOffset = offset;
        offset += ERROR_LOG_LENGTH;

        // Leave room for rounding the file up to a 2 MiB huge page: the mapping must stay below 2 GiB.
        if (offset > Integer.MAX_VALUE - (2 << 20))
        {
            throw new MrdException(ErrorCode.EINVAL, "control file would be " + offset +
                " bytes, over the 2 GiB limit: lower --cache-capacity (" + cacheCapacity + "), --max-mrs (" +
                mrCapacity + ") or the memory per list (" + segmentsPerList + " segments)");
        }
        return new ControlFileLayout(
            (int)metadataOffset, metadataLength, (int)valuesOffset, valuesLength,
            (int)listsOffset, memsegListCount, listRecordLength, segmentsPerList,
            (int)mrOffset, mrCapacity, (int)bitmapOffset, bitmapLength, (int)deviceTableOffset, (int)keyTableOffset,
            (int)cacheOffset, cacheCapacity, (int)clientOffset, clientCapacity,
            (int)histogramsOffset, HISTOGRAMS_LENGTH, (int)errorOffset, ERROR_LOG_LENGTH, offset);
    }

    /**
     * @param header a buffer over the control file whose layout version has been checked.
     * @return the layout the primary wrote into the header.
     */
    public static ControlFileLayout read(final DirectBuffer header)
    {
        return new ControlFileLayout(
            header.getInt(COUNTERS_METADATA_OFFSET_OFFSET),
            header.getInt(COUNTERS_METADATA_LENGTH_OFFSET),
            header.getInt(COUNTERS_VALUES_OFFSET_OFFSET),
            header.getInt(COUNTERS_VALUES_LENGTH_OFFSET),
            header.getInt(MEMSEG_LISTS_OFFSET_OFFSET),
            header.getInt(MEMSEG_LIST_COUNT_OFFSET),
            header.getInt(MEMSEG_LIST_RECORD_LENGTH_OFFSET),
            header.getInt(SEGMENTS_PER_LIST_OFFSET),
            header.getInt(MR_TABLE_OFFSET_OFFSET),
            header.getInt(MR_CAPACITY_OFFSET),
            header.getInt(MR_BITMAP_OFFSET_OFFSET),
            header.getInt(MR_BITMAP_LENGTH_OFFSET),
            header.getInt(DEVICE_TABLE_OFFSET_OFFSET),
            header.getInt(MR_KEY_TABLE_OFFSET_OFFSET),
            header.getInt(CACHE_OFFSET_OFFSET),
            header.getInt(CACHE_CAPACITY_OFFSET),
            header.getInt(CLIENT_TABLE_OFFSET_OFFSET),
            header.getInt(CLIENT_CAPACITY_OFFSET),
            header.getInt(HISTOGRAMS_OFFSET_OFFSET),
            header.getInt(HISTOGRAMS_LENGTH_OFFSET),
            header.getInt(ERROR_LOG_OFFSET_OFFSET),
            header.getInt(ERROR_LOG_LENGTH_OFFSET),
            header.getLong(FILE_LENGTH_OFFSET));
    }

    /**
     * Writes the geometry into the header (the primary does this before publishing the version).
     */
    public void writeTo(final org.agrona.MutableDirectBuffer header)
    {
        header.putInt(COUNTERS_METADATA_OFFSET_OFFSET, countersMetadataOffset);
        header.putInt(COUNTERS_METADATA_LENGTH_OFFSET, countersMetadataLength);
        header.putInt(COUNTERS_VALUES_OFFSET_OFFSET, countersValuesOffset);
        header.putInt(COUNTERS_VALUES_LENGTH_OFFSET, countersValuesLength);
        header.putInt(MEMSEG_LISTS_OFFSET_OFFSET, memsegListsOffset);
        header.putInt(MEMSEG_LIST_COUNT_OFFSET, memsegListCount);
        header.putInt(MEMSEG_LIST_RECORD_LENGTH_OFFSET, memsegListRecordLength);
        header.putInt(SEGMENTS_PER_LIST_OFFSET, segmentsPerList);
        header.putInt(MR_TABLE_OFFSET_OFFSET, mrTableOffset);
        header.putInt(MR_CAPACITY_OFFSET, mrCapacity);
        header.putInt(MR_BITMAP_OFFSET_OFFSET, mrBitmapOffset);
        header.putInt(MR_BITMAP_LENGTH_OFFSET, mrBitmapLength);
        header.putInt(DEVICE_TABLE_OFFSET_OFFSET, deviceTableOffset);
        header.putInt(MR_KEY_TABLE_OFFSET_OFFSET, mrKeyTableOffset);
        header.putInt(CACHE_OFFSET_OFFSET, cacheOffset);
        header.putInt(CACHE_CAPACITY_OFFSET, cacheCapacity);
        header.putInt(CLIENT_TABLE_OFFSET_OFFSET, clientTableOffset);
        header.putInt(CLIENT_CAPACITY_OFFSET, clientCapacity);
        header.putInt(HISTOGRAMS_OFFSET_OFFSET, histogramsOffset);
        header.putInt(HISTOGRAMS_LENGTH_OFFSET, histogramsLength);
        header.putInt(ERROR_LOG_OFFSET_OFFSET, errorLogOffset);
        header.putInt(ERROR_LOG_LENGTH_OFFSET, errorLogLength);
        header.putLong(FILE_LENGTH_OFFSET, fileLength);
    }

    private static long align(final long offset)
    {
        return (offset + CACHE_LINE_LENGTH - 1) & -CACHE_LINE_LENGTH;
    }

    public int countersMetadataOffset()
    {
        return countersMetadataOffset;
    }

    public int countersMetadataLength()
    {
        return countersMetadataLength;
    }

    public int countersValuesOffset()
    {
        return countersValuesOffset;
    }

    public int countersValuesLength()
    {
        return countersValuesLength;
    }

    public int memsegListsOffset()
    {
        return memsegListsOffset;
    }

    public int memsegListCount()
    {
        return memsegListCount;
    }

    public int memsegListRecordLength()
    {
        return memsegListRecordLength;
    }

    public int segmentsPerList()
    {
        return segmentsPerList;
    }

    /**
     * @return offset of list {@code index}'s record.
     */
    public int memsegListOffset(final int index)
    {
        return memsegListsOffset + index * memsegListRecordLength;
    }

    public int mrTableOffset()
    {
        return mrTableOffset;
    }

    public int mrCapacity()
    {
        return mrCapacity;
    }

    /**
     * @return offset of MR record {@code index}.
     */
    public int mrOffset(final int index)
    {
        return mrTableOffset + index * MrDescriptor.MR_RECORD_LENGTH;
    }

    public int mrBitmapOffset()
    {
        return mrBitmapOffset;
    }

    public int mrBitmapLength()
    {
        return mrBitmapLength;
    }

    /**
     * @return offset of MR {@code index}'s bitmap slot.
     */
    public int mrBitmapOffset(final int index)
    {
        return mrBitmapOffset + index * mrBitmapLength;
    }

    public int deviceTableOffset()
    {
        return deviceTableOffset;
    }

    /**
     * @return offset of device {@code device}'s record in the device table.
     */
    public int deviceOffset(final int device)
    {
        return deviceTableOffset + device * DeviceDescriptor.DEVICE_RECORD_LENGTH;
    }

    public int mrKeyTableOffset()
    {
        return mrKeyTableOffset;
    }

    /**
     * @return offset of MR record {@code index}'s keys on device {@code device}.
     */
    public int mrKeyOffset(final int index, final int device)
    {
        return mrKeyTableOffset + index * DeviceDescriptor.KEY_ROW_LENGTH + device * DeviceDescriptor.KEY_ENTRY_LENGTH;
    }

    public int cacheOffset()
    {
        return cacheOffset;
    }

    public int cacheCapacity()
    {
        return cacheCapacity;
    }

    public int clientTableOffset()
    {
        return clientTableOffset;
    }

    public int clientCapacity()
    {
        return clientCapacity;
    }

    /**
     * @return offset of client record {@code index}.
     */
    public int clientOffset(final int index)
    {
        return clientTableOffset + index * ClientDescriptor.CLIENT_RECORD_LENGTH;
    }

    public int histogramsOffset()
    {
        return histogramsOffset;
    }

    public int histogramsLength()
    {
        return histogramsLength;
    }

    public int errorLogOffset()
    {
        return errorLogOffset;
    }

    public int errorLogLength()
    {
        return errorLogLength;
    }

    public long fileLength()
    {
        return fileLength;
    }

    /**
     * @return every section as {offset, length} in bytes, in file order; {@link #SECTION_NAMES} names them.
     * The layout tests check with it that the sections start on cache lines, do not overlap and end the file,
     * and that a layout read back from a header has the same sections as the one that wrote it.
     */
    public long[][] sections()
    {
        return new long[][]
        {
            {0, HEADER_LENGTH},
            {countersMetadataOffset, countersMetadataLength},
            {countersValuesOffset, countersValuesLength},
            {memsegListsOffset, (long)memsegListCount * memsegListRecordLength},
            {mrTableOffset, (long)mrCapacity * MrDescriptor.MR_RECORD_LENGTH},
            {mrBitmapOffset, (long)mrCapacity * mrBitmapLength},
            {deviceTableOffset, DeviceDescriptor.DEVICE_TABLE_LENGTH},
            {mrKeyTableOffset, (long)mrCapacity * DeviceDescriptor.KEY_ROW_LENGTH},
            {cacheOffset, (long)cacheCapacity * CacheEntryDescriptor.ENTRY_LENGTH},
            {clientTableOffset, (long)clientCapacity * ClientDescriptor.CLIENT_RECORD_LENGTH},
            {histogramsOffset, histogramsLength},
            {errorLogOffset, errorLogLength},
        };
    }

    /** Names of {@link #sections()}, in the same order. */
    public static final String[] SECTION_NAMES =
    {
        "header", "counters metadata", "counters values", "memseg lists", "MR table", "MR bitmaps",
        "device table", "MR key table", "global cache", "client table", "histograms", "error log"
    };
}
