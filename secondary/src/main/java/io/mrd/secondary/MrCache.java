package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.SortedTable;
import io.mrd.layout.WholeBuffer;
import io.mrd.layout.sys.Sizes;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * A per-queue address→keys cache: the reference's {@code mlx5_mr_ctrl} (top half and bottom half) in front of
 * the global cache and the primary. Single-threaded like the reference's: give each queue (each thread) its
 * own, from {@link MrdClient#newCache()}.
 * <p>
 * {@link #lkey(long, long)} and {@link #keyPair(long, long)} do, in order:
 * <ol>
 *   <li>liveness: one volatile read of what the client's watchdog and reader thread found; once the daemon is
 *       known dead, stopped or restarted every call throws {@link DaemonDeadException}, never an lkey;</li>
 *   <li>{@code devGen} (acquire) differs from the one this cache saw → flush both levels, since a memory free
 *       event may have removed or shrunk entries;</li>
 *   <li>top half: {@value #TOP_HALF_ENTRIES} entries, the most recently used first, then linear; a miss
 *       below replaces the oldest (FIFO), as the reference's {@code head};</li>
 *   <li>bottom half: a {@link SortedTable} off-heap, {@value #INITIAL_BOTTOM_CAPACITY} entries at first,
 *       doubled when full;</li>
 *   <li>global cache (seqlock search of the control file, no system call) → insert below;</li>
 *   <li>miss → check the daemon's heartbeat and epoch now, then {@code CREATE_MR}, insert the reply.</li>
 * </ol>
 * Then the whole buffer {@code [address, address + length)} must lie in the entry found: the reference checks
 * only the first byte and hands out an lkey that the NIC refuses for the rest of a buffer straddling two MRs.
 * Failures are exceptions with the code and message, never a silent {@code -1}.
 * <p>
 * Every level holds both keys of an entry (the global cache's entries carry the rkey), so {@link #keyPair}
 * costs what {@link #lkey} costs. The hit path allocates nothing. Counters are plain fields: read them from the cache's thread or after it
 * stopped. The off-heap bottom half is released with the cache by the garbage collector.
 */
public final class MrCache
{
    /** Entries of the top half, as the reference's {@code MLX5_MR_CACHE_N}. */
    public static final int TOP_HALF_ENTRIES = 8;
    /** Initial capacity of the bottom half, sentinel included, as the reference's {@code MLX5_MR_BTREE_CACHE_N}. */
    public static final int INITIAL_BOTTOM_CAPACITY = 256;
    /** The bottom half stops doubling here; entries found beyond it still fill the top half. */
    public static final int MAX_BOTTOM_CAPACITY = 1 << 20;

    private static final int TOP_MASK = TOP_HALF_ENTRIES - 1;

    private final MrSource source;
    private final long[] topStart = new long[TOP_HALF_ENTRIES];
    private final long[] topEnd = new long[TOP_HALF_ENTRIES];
    private final int[] topLkey = new int[TOP_HALF_ENTRIES];
    private final int[] topRkey = new int[TOP_HALF_ENTRIES];
    private int mru;
    private int head;
    private long devGen;

    private UnsafeBuffer bottom;
    private int bottomLength;
    private int bottomCapacity;

    private final MrEntry scratch = new MrEntry();

    private long topHits;
    private long bottomHits;
    private long globalHits;
    private long createRequests;
    private long flushes;

    /**
     * @param source the global levels; {@link MrdClient#newCache()} passes the client's.
     */
    public MrCache(final MrSource source)
    {
        this.source = source;
        this.bottomCapacity = INITIAL_BOTTOM_CAPACITY;
        this.bottom = newTable(bottomCapacity);
        this.bottomLength = SortedTable.clear(bottom, 0);
        this.devGen = source.devGen();
    }

    /**
     * @param segment a buffer inside memory from {@link MrdClient#allocate} or {@link MrdClient#registerExternal}.
     * @return the lkey of the MR holding the whole segment.
     * @see #lkey(long, long)
     */
    public int lkey(final MemorySegment segment)
    {
        return lkey(segment.address(), segment.byteSize());
    }

    /**
     * @param address first byte of the buffer.
     * @param length  bytes of the buffer ({@code >= 0}); the whole buffer must lie in one MR.
     * @return the lkey.
     * @throws DaemonDeadException when the daemon died, stopped or restarted.
     * @throws MrdException        EINVAL when the buffer straddles two MRs (or its length is negative), else the
     *                             primary's status and message when it could not register the address (ENXIO
     *                             outside managed memory, ENOMEM, ETIMEDOUT, ...).
     */
    public int lkey(final long address, final long length)
    {
        return topLkey[find(address, length)];
    }

    /**
     * Both keys of the MR holding the whole buffer, in one lookup that allocates nothing: what a work request
     * whose buffer a peer may also reach needs (the lkey for the local SGE, the rkey to hand to the peer).
     * Unpack with {@link KeyPair#lkey(long)} and {@link KeyPair#rkey(long)}; the rkey is
     * {@link io.mrd.layout.Access#NO_RKEY} when the memory was allocated without remote access.
     *
     * @param address first byte of the buffer.
     * @param length  bytes of the buffer ({@code >= 0}); the whole buffer must lie in one MR.
     * @return the lkey and the rkey, packed as {@link KeyPair#pack}.
     * @throws DaemonDeadException as {@link #lkey(long, long)}.
     * @throws MrdException        as {@link #lkey(long, long)}.
     */
    public long keyPair(final long address, final long length)
    {
        final int slot = find(address, length);
        return KeyPair.pack(topLkey[slot], topRkey[slot]);
    }

    /**
     * @param segment a buffer inside memory from {@link MrdClient#allocate} or {@link MrdClient#registerExternal}.
     * @return both keys of the MR holding the whole segment.
     * @see #keyPair(long, long)
     */
    public long keyPair(final MemorySegment segment)
    {
        return keyPair(segment.address(), segment.byteSize());
    }

    /**
     * @return the top-half slot holding the entry of {@code [address, address + length)}, filled from below
     * on a miss.
     */
    private int find(final long address, final long length)
    {
        source.ensureAlive();
        final long gen = source.devGen();
        if (gen != devGen)
        {
            flush(gen);
        }
        final int m = mru;
        final long end = topEnd[m];
        if (address < end && address >= topStart[m])
        {
            topHits++;
            return whole(address, length, end, m);
        }
        return lookupBelowMru(address, length);
    }

    private int lookupBelowMru(final long address, final long length)
    {
        // The reference's mlx5_mr_lookup_lkey: entries fill from slot 0 after a flush, so the first empty
        // slot ends the scan.
        for (int i = 0; i < TOP_HALF_ENTRIES; i++)
        {
            final long start = topStart[i];
            if (0 == start)
            {
                break;
            }
            final long end = topEnd[i];
            if (address >= start && address < end)
            {
                mru = i;
                topHits++;
                return whole(address, length, end, i);
            }
        }
        return lookupBottomHalf(address, length);
    }

    /**
     * The reference's {@code mlx5_mr_addr2mr_bh}: bottom half, then global cache, then the primary; whatever
     * is found replaces the oldest top-half entry and becomes the most recently used.
     */
    private int lookupBottomHalf(final long address, final long length)
    {
        final MrEntry entry = scratch;
        if (SortedTable.find(bottom, 0, bottomLength, address, entry))
        {
            bottomHits++;
        }
        else
        {
            lookupGlobal(address, length, entry);
        }
        final int slot = head;
        topStart[slot] = entry.start;
        topEnd[slot] = entry.end;
        topLkey[slot] = entry.lkey;
        topRkey[slot] = entry.rkey;
        mru = slot;
        head = (slot + 1) & TOP_MASK;
        return whole(address, length, entry.end, slot);
    }

    /**
     * The reference's {@code mr_lookup_caches}: global cache, else create; the entry goes into the bottom half.
     */
    private void lookupGlobal(final long address, final long length, final MrEntry entry)
    {
        if (source.lookupGlobal(address, entry))
        {
            globalHits++;
        }
        else
        {
            // The global cache may be from a daemon that died since the watchdog last looked: check the
            // heartbeat and epoch now, before asking it for anything.
            source.checkLiveness();
            createRequests++;
            source.createMr(address, length, entry);
            if (address < entry.start || address >= entry.end || entry.lkey == CacheEntryDescriptor.NO_LKEY)
            {
                throw new MrdException(ErrorCode.EPROTO, "CREATE_MR(" + Sizes.hex(address) +
                    ") was answered with " + entry + ", which does not contain the address");
            }
        }
        insertBottom(entry);
    }

    private void insertBottom(final MrEntry entry)
    {
        if (bottomLength == bottomCapacity && bottomCapacity < MAX_BOTTOM_CAPACITY)
        {
            final int capacity = bottomCapacity << 1;
            final UnsafeBuffer larger = newTable(capacity);
            larger.putBytes(0, bottom, 0, bottomLength * CacheEntryDescriptor.ENTRY_LENGTH);
            bottom = larger;
            bottomCapacity = capacity;
        }
        final int length = SortedTable.insert(bottom, 0, bottomLength, bottomCapacity, entry);
        if (length != SortedTable.NOT_FOUND)
        {
            bottomLength = length;
        }
    }

    /**
     * @return {@code slot} when {@code [address, address + length)} ends inside the entry ending at {@code end}
     * (the caller found {@code address} in it).
     */
    private static int whole(final long address, final long length, final long end, final int slot)
    {
        if (WholeBuffer.fits(address, length, end))
        {
            return slot;
        }
        throw WholeBuffer.straddles(address, length, end);
    }

    /**
     * Empties both levels, as the reference's {@code mlx5_mr_flush_local_cache}, and remembers {@code gen}.
     */
    void flush(final long gen)
    {
        Arrays.fill(topStart, 0);
        Arrays.fill(topEnd, 0);
        Arrays.fill(topLkey, CacheEntryDescriptor.NO_LKEY);
        Arrays.fill(topRkey, Access.NO_RKEY);
        mru = 0;
        head = 0;
        bottomLength = SortedTable.clear(bottom, 0);
        devGen = gen;
        flushes++;
    }

    private static UnsafeBuffer newTable(final int capacity)
    {
        return new UnsafeBuffer(BufferUtil.allocateDirectAligned(capacity * CacheEntryDescriptor.ENTRY_LENGTH, 64));
    }

    /** @return lookups answered by the top half (most recently used slot or the linear scan). */
    public long topHits()
    {
        return topHits;
    }

    /** @return lookups answered by the bottom half. */
    public long bottomHits()
    {
        return bottomHits;
    }

    /** @return lookups answered by the global cache in the control file. */
    public long globalHits()
    {
        return globalHits;
    }

    /** @return {@code CREATE_MR} requests sent (global misses). */
    public long createRequests()
    {
        return createRequests;
    }

    /** @return flushes of both levels on a {@code devGen} change. */
    public long flushes()
    {
        return flushes;
    }

    /** @return bottom-half entries in use, sentinel included. */
    public int bottomLength()
    {
        return bottomLength;
    }

    /** @return bottom-half capacity in entries. */
    public int bottomCapacity()
    {
        return bottomCapacity;
    }

    /** @return the {@code devGen} the cache's content belongs to. */
    public long devGen()
    {
        return devGen;
    }

    public String toString()
    {
        return "MrCache[topHits " + topHits + ", bottomHits " + bottomHits + ", globalHits " + globalHits +
            ", createRequests " + createRequests + ", flushes " + flushes + ", bottom " + bottomLength + "/" +
            bottomCapacity + "]";
    }
}
