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
    /** Failed read attempts spent spinning before the reader starts yielding its core to the primary. */
    public static final int SPIN_ATTEMPTS = 1 << 10;
    /**
     * How long a reader keeps retrying before it gives up on a primary that holds the write side, or rewrites
     * the table, without pause. Writes take microseconds; only a primary that stopped inside one (it is dead, or
     * the machine stopped it) gets near this. The heartbeat decides between the two: the reader gives up after
     * this long only when the heartbeat is stale too, and after {@link #MAX_WAIT_NS} in any case.
     */
    public static final long STUCK_NS = 1_000_000_000L;
    /** The longest a reader waits, however fresh the heartbeat. */
    public static final long MAX_WAIT_NS = 10_000_000_000L;

    private final ControlFile controlFile;
    private final UnsafeBuffer buffer;
    private final ControlHeader header;
    private final SeqLock seqLock;
    private final ControlFileLayout layout;
    private final MrChunks chunks;
    private final MrEntry scratch = new MrEntry();
    private final DeviceTable devices;
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
        this.devices = new DeviceTable(buffer, layout);
    }

    public ControlFile controlFile()
    {
        return controlFile;
    }

    /** {@link #lookupOnce}: the complete cache holds the address, and no write intervened. */
    public static final int FOUND = 1;
    /** {@link #lookupOnce}: the complete cache does not hold the address, and no write intervened. */
    public static final int MISSED = 0;
    /**
     * {@link #lookupOnce}: no answer without waiting: a write was in progress or intervened, or the cache
     * overflowed (only the MR table scan can tell).
     */
    public static final int UNSETTLED = -1;

    /**
     * Looks {@code address} up.
     * <p>
     * The first attempt is the whole fast path (small enough for the JIT to inline into the caller); retries,
     * the wait for a write in progress and the overflowed slow path are out of line.
     *
     * @param address the address.
     * @param out     filled with the entry when found.
     * @return true when found, false when the address is in no registered chunk.
     * @throws MrdException EBUSY when the primary held the write side for longer than a live primary would
     *                      (see {@link #STUCK_NS}): it is dead or stuck; the caller checks its heartbeat.
     */
    public boolean lookup(final long address, final MrEntry out)
    {
        final int once = lookupOnce(address, out);
        return once == UNSETTLED ? lookupRetrying(address, out) : once == FOUND;
    }

    /**
     * One attempt at {@link #lookup} that never waits: for a caller that has a slower way to an answer and must
     * not spin (the daemon's event loop, which must not wait for its own writer).
     *
     * @param address the address.
     * @param out     filled with the entry when {@link #FOUND}, untouched otherwise.
     * @return {@link #FOUND}, {@link #MISSED} or {@link #UNSETTLED}.
     */
    public int lookupOnce(final long address, final MrEntry out)
    {
        final long seq = seqLock.tryBeginRead();
        if (seq == SeqLock.WRITE_IN_PROGRESS || header.cacheOverflow())
        {
            return UNSETTLED;
        }
        final int len = Math.max(1, Math.min(header.cacheLen(), cacheCapacity));
        final int index = SortedTable.lookup(buffer, cacheOffset, len, address);
        if (index == SortedTable.NOT_FOUND)
        {
            return seqLock.validate(seq) ? MISSED : UNSETTLED;
        }
        // Read into locals, not through SortedTable.find: out must stay untouched when validate fails, and the
        // fast path must stay small enough to inline.
        final long start = SortedTable.start(buffer, cacheOffset, index);
        final long end = SortedTable.end(buffer, cacheOffset, index);
        final int lkey = SortedTable.lkey(buffer, cacheOffset, index);
        final int rkey = SortedTable.rkey(buffer, cacheOffset, index);
        final int access = SortedTable.access(buffer, cacheOffset, index);
        final int mr = SortedTable.mr(buffer, cacheOffset, index);
        if (!seqLock.validate(seq))
        {
            return UNSETTLED;
        }
        out.set(start, end, lkey, rkey, access, mr);
        return FOUND;
    }

    /**
     * Looks {@code address} up with its keys on device {@code device} ({@link DeviceDescriptor}): the entry as
     * {@link #lookup} finds it, with the lkey and rkey of its MR's row in the MR key table, read in the same read
     * section. Device 0 is {@link #lookup} itself.
     *
     * @param device a device number below {@link DeviceTable#count()} (the caller checks it).
     * @return true when found, false when the address is in no registered chunk.
     * @throws MrdException EBUSY as {@link #lookup}.
     */
    public boolean lookup(final long address, final MrEntry out, final int device)
    {
        if (0 == device)
        {
            return lookup(address, out);
        }
        long firstFailureNs = 0;
        for (int attempt = 0; ; attempt++)
        {
            final long seq = seqLock.tryBeginRead();
            if (seq != SeqLock.WRITE_IN_PROGRESS)
            {
                final boolean found = header.cacheOverflow() ? chunks.scan(address, scratch) : searchCache(address);
                // Clamped: a torn entry must not send the read past the table.
                final int mr = Math.max(0, Math.min(scratch.mr, layout.mrCapacity() - 1));
                final int lkey = found ? devices.lkey(mr, device) : 0;
                final int rkey = found ? devices.rkey(mr, device) : 0;
                if (seqLock.validate(seq))
                {
                    if (found)
                    {
                        out.set(scratch.start, scratch.end, lkey, rkey, scratch.access, scratch.mr);
                    }
                    return found;
                }
            }
            firstFailureNs = backOff(attempt, firstFailureNs);
        }
    }

    private boolean lookupRetrying(final long address, final MrEntry out)
    {
        long firstFailureNs = 0;
        for (int attempt = 0; ; attempt++)
        {
            final long seq = seqLock.tryBeginRead();
            if (seq != SeqLock.WRITE_IN_PROGRESS)
            {
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
            firstFailureNs = backOff(attempt, firstFailureNs);
        }
    }

    /**
     * Runs {@code action} on a consistent view: it is called again whenever a write intervened, so it must only
     * read and must collect into state it resets itself.
     *
     * @throws MrdException EBUSY as {@link #lookup}.
     */
    public void readConsistent(final Runnable action)
    {
        long firstFailureNs = 0;
        for (int attempt = 0; ; attempt++)
        {
            final long seq = seqLock.tryBeginRead();
            if (seq != SeqLock.WRITE_IN_PROGRESS)
            {
                action.run();
                if (seqLock.validate(seq))
                {
                    return;
                }
            }
            firstFailureNs = backOff(attempt, firstFailureNs);
        }
    }

    /**
     * Waits before the next attempt: spins first (a write takes microseconds), then yields the core (on an
     * oversubscribed machine the primary may need it to finish its write), and gives up only when the primary
     * looks dead: no progress for {@link #STUCK_NS} with a stale heartbeat, or for {@link #MAX_WAIT_NS}.
     *
     * @return the time of the first failed attempt.
     */
    private long backOff(final int attempt, final long firstFailureNs)
    {
        if (attempt < SPIN_ATTEMPTS)
        {
            Thread.onSpinWait();
            return firstFailureNs;
        }
        Thread.yield();
        final long now = System.nanoTime();
        if (firstFailureNs == 0)
        {
            return now;
        }
        final long waited = now - firstFailureNs;
        if (waited > MAX_WAIT_NS || (waited > STUCK_NS && heartbeatStale()))
        {
            throw stuck(waited);
        }
        return firstFailureNs;
    }

    private boolean heartbeatStale()
    {
        return !Heartbeat.lookNow(header).isAlive();
    }

    private boolean searchCache(final long address)
    {
        final int len = Math.max(1, Math.min(header.cacheLen(), cacheCapacity));
        return SortedTable.find(buffer, cacheOffset, len, address, scratch);
    }

    private MrdException stuck(final long waitedNs)
    {
        return new MrdException(ErrorCode.EBUSY, "the primary (pid " + header.pid() + ") kept the MR table locked " +
            "for writing for " + waitedNs / 1_000_000 + " ms: it is stuck or dead; check 'mrd status'");
    }
}
