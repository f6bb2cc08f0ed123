package io.mrd.layout;

import org.agrona.concurrent.UnsafeBuffer;

/**
 * The one seqlock reader of the global MR cache: what a secondary, {@code mrd lookup} and {@code mrd check}
 * use to turn an address into its entry without asking the primary.
 * <p>
 * While the cache is complete it is a {@link SortedTable} search. When the primary could not fit every
 * chunk (overflow flag set), the reader falls back to the reference's slow path: scanning the MR table and
 * each MR's segment bitmap. Either way the read is validated by the {@link SeqLock} and retried on change;
 * every index is clamped so that torn data read during a concurrent write can never send the search out of
 * bounds or into an endless loop.
 * <p>
 * Not thread-safe (it owns scratch flyweights): one reader per thread.
 */
public final class GlobalCacheReader
{
    /** Spins a reader waits for a write in progress before it gives up and reports the primary stuck. */
    public static final int MAX_SPINS = 1 << 20;
    /** Validated-read attempts before giving up: a live primary never rewrites the table this often. */
    public static final int MAX_ATTEMPTS = 1 << 16;

    private final ControlFile controlFile;
    private final UnsafeBuffer buffer;
    private final ControlHeader header;
    private final SeqLock seqLock;
    private final ControlFileLayout layout;
    private final MrChunks chunks;
    private final MrEntry scratch = new MrEntry();
    private final int cacheOffset;
    private final int cacheCapacity;

    public GlobalCacheReader(final ControlFile controlFile)
    {
        this.controlFile = controlFile;
        this.buffer = controlFile.buffer();
        this.header = controlFile.header();
        this.seqLock = controlFile.seqLock();
        this.layout = controlFile.layout();
        this.cacheOffset = layout.cacheOffset();
        this.cacheCapacity = layout.cacheCapacity();
        this.chunks = new MrChunks(controlFile);
    }

    public ControlFile controlFile()
    {
        return controlFile;
    }

    /**
     * Looks {@code address} up.
     *
     * @param address the address.
     * @param out     filled with the entry when found.
     * @return true when found, false when the address is in no registered chunk.
     * @throws MrdException EBUSY when the primary held the write side for the whole wait (it may have died
     *                      inside it: the caller checks its heartbeat).
     */
    public boolean lookup(final long address, final MrEntry out)
    {
        for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++)
        {
            final long seq = seqLock.beginRead(MAX_SPINS);
            if (seq == SeqLock.WRITE_IN_PROGRESS)
            {
                break;
            }
            final boolean found = header.cacheOverflow() ? chunks.scan(address, scratch) : searchCache(address);
            if (seqLock.validate(seq))
            {
                if (found)
                {
                    out.set(scratch);
                }
                return found;
            }
        }
        throw stuck();
    }

    /**
     * Runs {@code action} on a consistent view: it is called again whenever a write intervened, so it must only
     * read and must collect into state it resets itself.
     *
     * @throws MrdException EBUSY as {@link #lookup}.
     */
    public void readConsistent(final Runnable action)
    {
        for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++)
        {
            final long seq = seqLock.beginRead(MAX_SPINS);
            if (seq == SeqLock.WRITE_IN_PROGRESS)
            {
                break;
            }
            action.run();
            if (seqLock.validate(seq))
            {
                return;
            }
        }
        throw stuck();
    }

    private boolean searchCache(final long address)
    {
        final int len = Math.max(1, Math.min(header.cacheLen(), cacheCapacity));
        final int index = SortedTable.lookup(buffer, cacheOffset, len, address);
        if (index == SortedTable.NOT_FOUND)
        {
            return false;
        }
        scratch.set(SortedTable.start(buffer, cacheOffset, index), SortedTable.end(buffer, cacheOffset, index),
            SortedTable.lkey(buffer, cacheOffset, index), SortedTable.mr(buffer, cacheOffset, index));
        return true;
    }

    private MrdException stuck()
    {
        return new MrdException(ErrorCode.EBUSY, "the primary (pid " + header.pid() +
            ") kept the MR table locked for writing: it may be stuck or dead; check 'mrd status'");
    }
}
