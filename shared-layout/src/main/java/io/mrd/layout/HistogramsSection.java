package io.mrd.layout;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.AtomicBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.List;

import static io.mrd.layout.HistogramsDescriptor.*;

/**
 * The one writer and reader of the histograms section ({@link HistogramsDescriptor}). The daemon's heartbeat
 * thread writes a whole new set of entries between {@link #beginWrite} and {@link #endWrite}; readers take a
 * consistent copy with {@link #read} and never write.
 */
public final class HistogramsSection
{
    /** Copies a reader attempts before it gives up on a section that keeps changing or was left mid-write. */
    public static final int READ_ATTEMPTS = 1000;

    /**
     * One entry as copied out of the section.
     *
     * @param id      its {@link MrdHistogram#id()}.
     * @param label   the request type's code, or 0.
     * @param sum     the exact sum of the values recorded.
     * @param encoded HdrHistogram's V2 encoding.
     */
    public record Entry(int id, int label, long sum, byte[] encoded)
    {
    }

    /**
     * A consistent copy of the section.
     *
     * @param publishedTimeMs when the daemon wrote it (0: not yet).
     * @param entries         in the order the daemon wrote them.
     */
    public record Copy(long publishedTimeMs, List<Entry> entries)
    {
    }

    private final AtomicBuffer buffer;
    private final SeqLock seqLock;
    private int entryCount;
    private int dataLength;

    /**
     * @param buffer the control file.
     * @param offset where the section starts ({@link ControlFileLayout#histogramsOffset()}).
     * @param length its length.
     */
    public HistogramsSection(final AtomicBuffer buffer, final int offset, final int length)
    {
        this.buffer = new UnsafeBuffer(buffer, offset, length);
        this.seqLock = new SeqLock(this.buffer, SEQ_OFFSET);
    }

    /**
     * @return bytes the entries may take.
     */
    public int capacity()
    {
        return buffer.capacity() - ENTRIES_OFFSET;
    }

    /**
     * Writer: starts a new set of entries. Only one thread of the daemon may write.
     */
    public void beginWrite()
    {
        seqLock.beginWrite();
        entryCount = 0;
        dataLength = 0;
    }

    /**
     * Writer: appends one entry.
     *
     * @param encoded holds the encoding in bytes {@code [0, encodedLength)}.
     * @throws IllegalStateException when the entry does not fit: the daemon sizes its histograms so that their
     *                               worst-case encodings fit ({@link ControlFileLayout#HISTOGRAMS_LENGTH}).
     */
    public void putEntry(final int id, final int label, final long sum, final DirectBuffer encoded,
        final int encodedLength)
    {
        final int entryLength = entryLength(encodedLength);
        if (dataLength + entryLength > capacity())
        {
            throw new IllegalStateException("histogram " + id + " of " + encodedLength + " bytes does not fit in " +
                "the histograms section (" + dataLength + " of " + capacity() + " bytes used)");
        }
        final int at = ENTRIES_OFFSET + dataLength;
        buffer.putInt(at + ENTRY_ID_OFFSET, id);
        buffer.putInt(at + ENTRY_LABEL_OFFSET, label);
        buffer.putLong(at + ENTRY_SUM_OFFSET, sum);
        buffer.putInt(at + ENTRY_ENCODED_LENGTH_OFFSET, encodedLength);
        buffer.putBytes(at + ENTRY_ENCODED_OFFSET, encoded, 0, encodedLength);
        dataLength += entryLength;
        entryCount++;
    }

    /**
     * Writer: publishes the entries appended since {@link #beginWrite}.
     */
    public void endWrite(final long publishedTimeMs)
    {
        buffer.putLong(PUBLISHED_TIME_OFFSET, publishedTimeMs);
        buffer.putInt(ENTRY_COUNT_OFFSET, entryCount);
        buffer.putInt(DATA_LENGTH_OFFSET, dataLength);
        seqLock.endWrite();
    }

    /**
     * Reader: a copy taken while no write was in progress.
     *
     * @return the copy, or null when {@link #READ_ATTEMPTS} copies all overlapped a write (a daemon killed
     * while writing leaves the section so for good).
     */
    public Copy read()
    {
        for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++)
        {
            final long seq = seqLock.tryBeginRead();
            if (seq == SeqLock.WRITE_IN_PROGRESS)
            {
                Thread.onSpinWait();
                continue;
            }
            final Copy copy = copy();
            if (seqLock.validate(seq) && null != copy)
            {
                return copy;
            }
        }
        return null;
    }

    /**
     * @return the entries, or null when the fields read are out of bounds (torn by a concurrent write).
     */
    private Copy copy()
    {
        final long publishedTimeMs = buffer.getLong(PUBLISHED_TIME_OFFSET);
        final int count = buffer.getInt(ENTRY_COUNT_OFFSET);
        final int length = buffer.getInt(DATA_LENGTH_OFFSET);
        if (count < 0 || length < 0 || length > capacity())
        {
            return null;
        }
        final List<Entry> entries = new ArrayList<>(count);
        int at = 0;
        for (int i = 0; i < count; i++)
        {
            if (at + ENTRY_ENCODED_OFFSET > length)
            {
                return null;
            }
            final int base = ENTRIES_OFFSET + at;
            final int encodedLength = buffer.getInt(base + ENTRY_ENCODED_LENGTH_OFFSET);
            if (encodedLength < 0 || at + entryLength(encodedLength) > length)
            {
                return null;
            }
            final byte[] encoded = new byte[encodedLength];
            buffer.getBytes(base + ENTRY_ENCODED_OFFSET, encoded);
            entries.add(new Entry(buffer.getInt(base + ENTRY_ID_OFFSET), buffer.getInt(base + ENTRY_LABEL_OFFSET),
                buffer.getLong(base + ENTRY_SUM_OFFSET), encoded));
            at += entryLength(encodedLength);
        }
        return new Copy(publishedTimeMs, entries);
    }
}
