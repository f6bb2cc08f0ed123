package io.mrd.layout;

import org.agrona.concurrent.AtomicBuffer;

import java.lang.invoke.VarHandle;

/**
 * The sequence lock that guards the MR table and the global cache in the
 * control file: the one writer (the primary) makes the counter odd, changes the
 * data, makes it even; readers (secondaries, tools) read the counter, read the
 * data, and retry when the counter was odd or has moved.
 * <p>
 * Why not a reader/writer lock as in the reference: a reader that takes a lock
 * in shared memory writes to it, and a secondary killed while holding it blocks
 * the primary forever. Seqlock readers never write shared memory, so a reader
 * that dies at any instruction affects no one, and the control file can be
 * mapped read-only in secondaries.
 * <p>
 * Ordering: the writer's odd store is followed by a store-store fence so it is
 * visible before any data store; the even store is a release so every data
 * store is visible before it. The reader's first load is an acquire, so no data
 * load moves above it; the load-load fence keeps data loads above the re-read.
 * Data read between {@link #tryBeginRead()} and a failed {@link #validate(long)}
 * may be torn: readers must treat it only as bounds-checked garbage.
 */
public final class SeqLock
{
    /** What {@link #tryBeginRead()} returns while a write is in progress. */
    public static final long WRITE_IN_PROGRESS = -1L;

    private final AtomicBuffer buffer;
    private final int offset;

    /**
     * @param buffer the buffer holding the counter.
     * @param offset offset of the 8-byte-aligned counter.
     */
    public SeqLock(final AtomicBuffer buffer, final int offset)
    {
        this.buffer = buffer;
        this.offset = offset;
    }

    /**
     * Writer: enter the critical section. Only one thread of one process may write.
     */
    public void beginWrite()
    {
        final long seq = buffer.getLong(offset);
        if ((seq & 1) != 0)
        {
            throw new IllegalStateException("seqlock already held for writing (seq " + seq + ")");
        }
        buffer.putLongOpaque(offset, seq + 1);
        VarHandle.storeStoreFence();
    }

    /**
     * Writer: leave the critical section, publishing every store made inside it.
     */
    public void endWrite()
    {
        final long seq = buffer.getLong(offset);
        buffer.putLongRelease(offset, seq + 1);
    }

    /**
     * Reader: start a read.
     *
     * @return the sequence to pass to {@link #validate(long)}, or {@link #WRITE_IN_PROGRESS}.
     */
    public long tryBeginRead()
    {
        final long seq = buffer.getLongAcquire(offset);
        return (seq & 1) == 0 ? seq : WRITE_IN_PROGRESS;
    }

    /**
     * Reader: finish a read.
     *
     * @param seq what {@link #tryBeginRead()} returned.
     * @return true when no write happened since, so everything read in between is consistent.
     */
    public boolean validate(final long seq)
    {
        VarHandle.loadLoadFence();
        return buffer.getLong(offset) == seq;
    }

    /**
     * @return the current value of the counter (for dumps and tests).
     */
    public long sequence()
    {
        return buffer.getLongVolatile(offset);
    }
}
