package io.mrd.cli.reliability;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrChunks;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrRecord;
import io.mrd.layout.SortedTable;
import io.mrd.layout.sys.Sizes;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Checks an lkey a secondary received against what the primary published in the control file, in one
 * consistent (seqlock-validated) read: the ACTIVE MR whose live chunk holds the address, found by scanning
 * the MR table itself (not the cache the lkey may have come from), must carry that lkey and hold the whole
 * buffer, and the global cache must agree with the table. Not thread-safe: one per thread.
 */
final class LkeyVerifier
{
    private final ControlHeader header;
    private final UnsafeBuffer buffer;
    private final ControlFileLayout layout;
    private final GlobalCacheReader reader;
    private final MrChunks chunks;
    private final MrEntry tableEntry = new MrEntry();
    private final MrEntry cacheEntry = new MrEntry();
    private boolean inTable;
    private boolean inCache;
    private boolean overflow;
    private int recordState;
    private int recordLkey;

    LkeyVerifier(final ControlFile ctl)
    {
        this.header = ctl.header();
        this.buffer = ctl.buffer();
        this.layout = ctl.layout();
        this.reader = new GlobalCacheReader(ctl);
        this.chunks = new MrChunks(ctl);
    }

    /**
     * @return the devGen now (acquire), to tell later whether a memory event intervened.
     */
    long devGen()
    {
        return header.devGen();
    }

    /**
     * @return null when {@code lkey} is the key of the ACTIVE MR holding all of {@code [address, address +
     * length)} and the global cache agrees; else what is wrong.
     */
    String check(final long address, final long length, final int lkey)
    {
        read(address);
        final String what = "lkey " + hexKey(lkey) + " for [" + Sizes.hex(address) + ", +" + length + ")";
        if (!inTable)
        {
            return what + ": no ACTIVE MR of the table holds the address";
        }
        if (recordState != MrDescriptor.STATE_ACTIVE || recordLkey != lkey || tableEntry.lkey != lkey)
        {
            return what + ": the MR table has " + tableEntry + " state " + MrDescriptor.stateName(recordState) +
                " record lkey " + hexKey(recordLkey);
        }
        if (!tableEntry.containsRange(address, length))
        {
            return what + ": the buffer is not inside the MR's chunk " + tableEntry;
        }
        if (!overflow && (!inCache || cacheEntry.lkey != lkey || cacheEntry.start != tableEntry.start ||
            cacheEntry.end != tableEntry.end))
        {
            return what + ": the MR table has " + tableEntry + " but the global cache has " +
                (inCache ? cacheEntry.toString() : "nothing");
        }
        return null;
    }

    /**
     * For a buffer the client refused as straddling two MRs.
     *
     * @return null when the table confirms it (the chunk holding the address ends inside the buffer); else why
     * the refusal was wrong.
     */
    String checkStraddles(final long address, final long length)
    {
        read(address);
        if (!inTable)
        {
            return "[" + Sizes.hex(address) + ", +" + length + ") was refused as straddling, but no MR holds its start";
        }
        if (tableEntry.containsRange(address, length))
        {
            return "[" + Sizes.hex(address) + ", +" + length + ") was refused as straddling two MRs, but " +
                tableEntry + " holds all of it";
        }
        return null;
    }

    private void read(final long address)
    {
        reader.readConsistent(() ->
        {
            inTable = chunks.scan(address, tableEntry);
            if (inTable)
            {
                final MrRecord record = chunks.record(tableEntry.mr);
                recordState = record.state();
                recordLkey = record.lkey();
            }
            overflow = header.cacheOverflow();
            final int len = Math.max(1, Math.min(header.cacheLen(), layout.cacheCapacity()));
            final int index = SortedTable.lookup(buffer, layout.cacheOffset(), len, address);
            inCache = index != SortedTable.NOT_FOUND;
            if (inCache)
            {
                cacheEntry.set(SortedTable.start(buffer, layout.cacheOffset(), index),
                    SortedTable.end(buffer, layout.cacheOffset(), index),
                    SortedTable.lkey(buffer, layout.cacheOffset(), index),
                    SortedTable.rkey(buffer, layout.cacheOffset(), index),
                    SortedTable.access(buffer, layout.cacheOffset(), index),
                    SortedTable.mr(buffer, layout.cacheOffset(), index));
            }
        });
    }

    static String hexKey(final int lkey)
    {
        return Sizes.hex(lkey & 0xFFFF_FFFFL);
    }
}
