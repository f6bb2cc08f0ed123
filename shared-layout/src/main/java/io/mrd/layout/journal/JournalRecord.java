package io.mrd.layout.journal;

import org.agrona.concurrent.AtomicBuffer;

import static io.mrd.layout.journal.JournalRecordDescriptor.*;

/**
 * Flyweight over one journal record ({@link JournalRecordDescriptor}): the daemon's writer stores the fields and
 * then {@link #commit}s; a reader takes the record only when {@link #isCommitted} for the lap it reads.
 */
public final class JournalRecord
{
    private AtomicBuffer buffer;
    private int offset;

    public JournalRecord wrap(final AtomicBuffer buffer, final int offset)
    {
        this.buffer = buffer;
        this.offset = offset;
        return this;
    }

    public int offset()
    {
        return offset;
    }

    /** @return the commit word, read with acquire semantics: the fields read after it are the committed ones. */
    public long commitWord()
    {
        return buffer.getLongVolatile(offset + COMMIT_OFFSET);
    }

    public int recordLength()
    {
        return buffer.getInt(offset + LENGTH_OFFSET);
    }

    public JournalRecord recordLength(final int value)
    {
        buffer.putInt(offset + LENGTH_OFFSET, value);
        return this;
    }

    /** @return the {@link JournalEventType} code, unsigned. */
    public int type()
    {
        return buffer.getShort(offset + TYPE_OFFSET) & 0xFFFF;
    }

    public JournalRecord type(final int code)
    {
        buffer.putShort(offset + TYPE_OFFSET, (short)code);
        return this;
    }

    /** @return the type's flags, unsigned. */
    public int flags()
    {
        return buffer.getShort(offset + FLAGS_OFFSET) & 0xFFFF;
    }

    public JournalRecord flags(final int value)
    {
        buffer.putShort(offset + FLAGS_OFFSET, (short)value);
        return this;
    }

    public long timeNs()
    {
        return buffer.getLong(offset + TIME_OFFSET);
    }

    public JournalRecord timeNs(final long value)
    {
        buffer.putLong(offset + TIME_OFFSET, value);
        return this;
    }

    public int client()
    {
        return buffer.getInt(offset + CLIENT_OFFSET);
    }

    public JournalRecord client(final int value)
    {
        buffer.putInt(offset + CLIENT_OFFSET, value);
        return this;
    }

    public int arg()
    {
        return buffer.getInt(offset + ARG_OFFSET);
    }

    public JournalRecord arg(final int value)
    {
        buffer.putInt(offset + ARG_OFFSET, value);
        return this;
    }

    public long address()
    {
        return buffer.getLong(offset + ADDRESS_OFFSET);
    }

    public JournalRecord address(final long value)
    {
        buffer.putLong(offset + ADDRESS_OFFSET, value);
        return this;
    }

    public long rangeLength()
    {
        return buffer.getLong(offset + RANGE_LENGTH_OFFSET);
    }

    public JournalRecord rangeLength(final long value)
    {
        buffer.putLong(offset + RANGE_LENGTH_OFFSET, value);
        return this;
    }

    public int lkey()
    {
        return buffer.getInt(offset + LKEY_OFFSET);
    }

    public JournalRecord lkey(final int value)
    {
        buffer.putInt(offset + LKEY_OFFSET, value);
        return this;
    }

    public int rkey()
    {
        return buffer.getInt(offset + RKEY_OFFSET);
    }

    public JournalRecord rkey(final int value)
    {
        buffer.putInt(offset + RKEY_OFFSET, value);
        return this;
    }

    public long value()
    {
        return buffer.getLong(offset + VALUE_OFFSET);
    }

    public JournalRecord value(final long value)
    {
        buffer.putLong(offset + VALUE_OFFSET, value);
        return this;
    }

    /**
     * Stores the commit word for {@code lap} with an ordered store, after every field: its checksum is of what
     * the mapping now holds, read back as a reader will read it.
     */
    public void commit(final long lap)
    {
        buffer.putLongOrdered(offset + COMMIT_OFFSET, commitWordOf(lap));
    }

    /**
     * @return whether the record is a complete one of {@code lap}: its commit word holds the lap and the checksum
     * of the fields as read now, and its length is {@link JournalRecordDescriptor#RECORD_LENGTH}. A torn record,
     * or one left from an older lap of the file, is not.
     */
    public boolean isCommitted(final long lap)
    {
        final long commit = commitWord();
        return lapOf(commit) == lap &&
            commit == commitWordOf(lap) &&
            recordLength() == RECORD_LENGTH;
    }

    /**
     * @return the record as an event of {@code lap}, the {@code sequence}th of its file.
     */
    public JournalEvent toEvent(final long lap, final int sequence)
    {
        final int code = type();
        return new JournalEvent(lap, sequence, JournalEventType.of(code), code, flags(), timeNs(), client(), arg(),
            address(), rangeLength(), lkey(), rkey(), value());
    }

    /** @return the commit word of {@code lap} for the seven words the record holds now. */
    private long commitWordOf(final long lap)
    {
        return JournalRecordDescriptor.commitWord(lap, word(8), word(16), word(24), word(32), word(40), word(48),
            word(56));
    }

    private long word(final int at)
    {
        return buffer.getLong(offset + at);
    }
}
