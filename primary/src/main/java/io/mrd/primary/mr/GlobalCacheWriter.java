package io.mrd.primary.mr;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrChunks;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrRecord;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.SeqLock;
import io.mrd.layout.SortedTable;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.journal.EventJournal;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one writer of the global MR cache, the mirror of {@link GlobalCacheReader}: the seqlock's write
 * sections, insertion of an MR's chunks, the rebuild from the MR table, the devGen bump that flushes every
 * local cache, and the lookup the daemon itself makes.
 * <p>
 * <b>Locking.</b> Everything here is called with the cache lock ({@link MrShareCache}) held, which makes this
 * the only writer. Every store a reader can see (cache entries and length, the overflow flag, devGen, MR
 * records) is made inside {@link #write}, the seqlock's write section, and nothing slow runs there: readers
 * spin for the whole section, so a registration never does (nothing is registered under the seqlock). The
 * lookup needs no seqlock read: with the cache lock held nothing can change.
 * <p>
 * When the cache cannot hold every chunk it sets the overflow flag, and readers (and {@link #lookup}) fall
 * back to scanning the MR table until a rebuild fits again.
 */
final class GlobalCacheWriter
{
    private static final Logger LOG = LoggerFactory.getLogger(GlobalCacheWriter.class);

    private final UnsafeBuffer buffer;
    private final ControlHeader header;
    private final ControlFileLayout layout;
    private final SeqLock seqLock;
    private final DaemonCounters counters;
    private final EventJournal journal;
    private final MrChunks chunks;
    private final MrRecord record = new MrRecord();
    private final MrEntry chunk = new MrEntry();
    private final int cacheOffset;
    private boolean writing;

    /** A writer that records no events (for tests and stress tests of the seqlock alone). */
    GlobalCacheWriter(final ControlFile controlFile, final DaemonCounters counters)
    {
        this(controlFile, counters, EventJournal.OFF);
    }

    GlobalCacheWriter(final ControlFile controlFile, final DaemonCounters counters, final EventJournal journal)
    {
        this.journal = journal;
        this.buffer = controlFile.buffer();
        this.header = controlFile.header();
        this.layout = controlFile.layout();
        this.seqLock = controlFile.seqLock();
        this.counters = counters;
        this.chunks = new MrChunks(controlFile);
        this.cacheOffset = layout.cacheOffset();
    }

    /**
     * Runs {@code change} as one write section: a reader sees every store it makes or none of them.
     */
    void write(final Runnable change)
    {
        seqLock.beginWrite();
        writing = true;
        try
        {
            change.run();
        }
        finally
        {
            writing = false;
            seqLock.endWrite();
        }
    }

    /**
     * The reference's {@code mlx5_mr_lookup_cache}: the global cache while it is complete, else the MR table.
     *
     * @return true and {@code out} filled when registered.
     */
    boolean lookup(final long address, final MrEntry out)
    {
        if (header.cacheOverflow())
        {
            return chunks.scan(address, out);
        }
        return SortedTable.find(buffer, cacheOffset, header.cacheLen(), address, out);
    }

    boolean overflowed()
    {
        return header.cacheOverflow();
    }

    /**
     * Write section: the cache holds nothing and has not overflowed.
     */
    void clear()
    {
        assert writing;
        header.cacheLen(SortedTable.clear(buffer, cacheOffset)).cacheOverflow(false);
    }

    /**
     * Write section: one entry into the cache (the reference's {@code mr_btree_insert}); a full cache sets the
     * overflow flag instead.
     */
    void insert(final MrEntry entry)
    {
        assert writing;
        final int len = SortedTable.insert(buffer, cacheOffset, header.cacheLen(), layout.cacheCapacity(), entry);
        if (len == SortedTable.NOT_FOUND)
        {
            if (!header.cacheOverflow())
            {
                journal.cacheOverflow(layout.cacheCapacity());
                header.cacheOverflow(true);
                counters.increment(MrdCounter.CACHE_OVERFLOWS);
                LOG.warn("global cache full ({} entries, --cache-capacity): lookups fall back to scanning the MR " +
                    "table until a rebuild fits", layout.cacheCapacity());
            }
            return;
        }
        header.cacheLen(len);
        counters.set(MrdCounter.CACHE_ENTRIES, len - 1);
    }

    /**
     * Write section: every chunk of MR {@code slot} into the cache (the reference's
     * {@code mlx5_mr_insert_cache}), until the cache overflows.
     */
    void insertMr(final int slot)
    {
        assert writing;
        for (int from = 0; from != Integer.MAX_VALUE && !header.cacheOverflow(); )
        {
            from = chunks.next(slot, from, chunk);
            if (chunk.end == 0)
            {
                break;
            }
            insert(chunk);
        }
    }

    /**
     * Write section: the cache rebuilt from every ACTIVE MR (the reference's {@code mlx5_mr_rebuild_cache}),
     * then devGen bumped so that every local cache flushes: what follows any change that takes an lkey away.
     */
    void invalidate()
    {
        rebuild();
        bumpDevGen();
    }

    /**
     * Write section: the cache rebuilt from every ACTIVE MR; the overflow flag is cleared first and stays set
     * only when they still do not fit.
     */
    void rebuild()
    {
        assert writing;
        clear();
        for (int slot = 0; slot < header.mrHighWater() && !header.cacheOverflow(); slot++)
        {
            if (record.wrap(buffer, layout.mrOffset(slot)).state() == MrDescriptor.STATE_ACTIVE)
            {
                insertMr(slot);
            }
        }
        counters.set(MrdCounter.CACHE_ENTRIES, header.cacheLen() - 1);
        counters.increment(MrdCounter.CACHE_REBUILDS);
        journal.cacheRebuilt(header.cacheLen() - 1, header.cacheOverflow());
    }

    /**
     * A daemon killed inside a write section leaves the seqlock odd (readers spin until they give up) and the cache
     * possibly torn: its successor ends that section itself, with the cache rebuilt from the MR table and devGen
     * bumped (every local cache flushes), so that no reader ever validates a torn cache. Nothing when the seqlock is
     * even.
     *
     * @return true when a write section was abandoned and is now ended.
     */
    boolean finishAbandonedWrite()
    {
        if ((seqLock.sequence() & 1) == 0)
        {
            return false;
        }
        writing = true;
        try
        {
            invalidate();
        }
        finally
        {
            writing = false;
            seqLock.endWrite();
        }
        return true;
    }

    /** @return the entries of the cache (its sentinel not counted). */
    long entries()
    {
        return header.cacheLen() - 1;
    }

    /** @return the devGen readers see now. */
    long devGen()
    {
        return header.devGen();
    }

    private void bumpDevGen()
    {
        assert writing;
        final long devGen = header.devGen() + 1;
        header.devGen(devGen);
        counters.set(MrdCounter.DEV_GEN, devGen);
    }
}
