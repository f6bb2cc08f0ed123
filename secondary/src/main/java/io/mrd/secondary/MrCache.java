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
import org.agrona.UnsafeApi;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.util.Arrays;

/**
 * A per-queue address→keys cache: the reference's {@code mlx5_mr_ctrl} (top half and bottom half) in front of
 * the global cache and the primary. Single-threaded like the reference's: give each queue (each thread) its
 * own, from {@link MrdClient#newCache()}.
 * <p>
 * {@link #lkey(long, long)} and {@link #keyPair(long, long)} do, in order:
 * <ol>
 *   <li>the generation check: {@code devGen} read (acquire) from its raw address in the control file, compared
 *       with the generation this cache holds; liveness is folded into that comparison (below), so the hit path
 *       makes no other check. A difference takes the slow path: check liveness, flush both levels (a memory
 *       free event may have removed or shrunk entries), adopt the new generation;</li>
 *   <li>top half: the most recently used entry, kept in three scalar fields, then the
 *       {@value #TOP_HALF_ENTRIES} entries linearly; a miss below replaces the oldest (FIFO), as the
 *       reference's {@code head};</li>
 *   <li>bottom half: a {@link SortedTable} off-heap, {@value #INITIAL_BOTTOM_CAPACITY} entries at first,
 *       doubled when full;</li>
 *   <li>global cache (seqlock search of the control file, no system call) → insert below;</li>
 *   <li>miss → check the daemon's heartbeat and epoch now, then {@code CREATE_MR}, insert the reply.</li>
 * </ol>
 * Then the whole buffer {@code [address, address + length)} must lie in the entry found: the reference checks
 * only the first byte and hands out an lkey that the NIC refuses for the rest of a buffer straddling two MRs.
 * Failures are exceptions with the code and message, never a silent {@code -1}.
 * <p>
 * <b>Liveness in the generation.</b> Once the daemon is known dead, stopped or restarted (or the client closed)
 * no lookup that starts afterwards returns a key; it throws {@link DaemonDeadException}. The protocol between a
 * cache and whoever learns of the death ({@link MrSource}; for a client, {@link DaemonWatch}):
 * <ul>
 *   <li>the source first makes the death visible to {@link MrSource#requireAliveAsLastSeen()} (a volatile
 *       store), then {@link #invalidate() invalidates} every cache it {@linkplain MrSource#track tracks}: a
 *       volatile store of {@link #NO_GENERATION} into the cache's generation, which no {@code devGen} equals;</li>
 *   <li>the cache takes a generation only in the slow path: {@code requireAliveAsLastSeen()}, then the volatile
 *       store of the {@code devGen} it read, then {@code requireAliveAsLastSeen()} again; when that second check
 *       fails it stores {@link #NO_GENERATION} back before it throws. A cache starts with {@link #NO_GENERATION} and is
 *       tracked before it adopts its first generation.</li>
 * </ul>
 * Why a death is never lost: volatile accesses are totally ordered (synchronization order, consistent with
 * each thread's program order). Take a cache's store of a generation {@code G} and the source's poison store
 * into that cache. If the poison comes later, the cache holds {@link #NO_GENERATION} from then on (only a
 * later slow path of its own thread stores again, and that one's checks see the death). If the poison came
 * first, then so did the source's death store, and the cache's second {@code requireAliveAsLastSeen()}, after its
 * own store, reads it, throws and re-poisons. A cache tracked only after the source took its list of caches
 * adopted no generation before that; its check after adopting one comes after the death store and fails. So
 * after the source's invalidation, and in any lookup that happens-after it, the generation check fails, the
 * slow path's first {@code requireAliveAsLastSeen()} throws, and no level is read. A lookup racing the death may
 * still return a key, as it could have returned it a moment earlier.
 * <p>
 * {@link #invalidate()} also points the cache's {@code devGen} address at a word of its own, so that a lookup
 * after the client closed (and unmapped the control file) throws instead of reading unmapped memory.
 * <p>
 * <b>Counters.</b> Lookups answered by the most recently used slot are not counted: a counter there would be a
 * load-increment-store on every hit, each waiting for the previous one. What is counted is everything else:
 * {@link #mruMisses()} (lookups that went past that slot, whatever answered them), and where those were
 * answered: {@link #topHits()} (the top half's linear scan), {@link #bottomHits()}, {@link #globalHits()},
 * {@link #createRequests()}; and {@link #flushes()}. MRU hits are derived from the caller's own count of
 * lookups: {@link #mruHits(long)}. Counters are plain fields: read them from the cache's thread or after it
 * stopped.
 * <p>
 * Every level holds both keys of an entry (the global cache's entries carry the rkey), so {@link #keyPair}
 * costs what {@link #lkey} costs. The hit path allocates nothing. The off-heap bottom half is released with
 * the cache by the garbage collector.
 */
public final class MrCache
{
    /** Entries of the top half, as the reference's {@code MLX5_MR_CACHE_N}. */
    public static final int TOP_HALF_ENTRIES = 8;
    /** Initial capacity of the bottom half, sentinel included, as the reference's {@code MLX5_MR_BTREE_CACHE_N}. */
    public static final int INITIAL_BOTTOM_CAPACITY = 256;
    /** The bottom half stops doubling here; entries found beyond it still fill the top half. */
    public static final int MAX_BOTTOM_CAPACITY = 1 << 20;
    /**
     * The generation of an invalidated cache: no {@code devGen} is this (the daemon counts up from 0), so the
     * next lookup takes the slow path.
     */
    public static final long NO_GENERATION = -1L;

    private static final int TOP_MASK = TOP_HALF_ENTRIES - 1;
    /** What the word an invalidated cache reads {@code devGen} from holds: neither a devGen nor NO_GENERATION. */
    private static final long DETACHED_DEV_GEN = -2L;
    private static final ByteBuffer DETACHED_WORD = BufferUtil.allocateDirectAligned(Long.BYTES, Long.BYTES);
    private static final long DETACHED_ADDRESS = BufferUtil.address(DETACHED_WORD);
    private static final VarHandle GENERATION;

    static
    {
        DETACHED_WORD.putLong(0, DETACHED_DEV_GEN);
        try
        {
            GENERATION = MethodHandles.lookup().findVarHandle(MrCache.class, "generation", long.class);
        }
        catch (final ReflectiveOperationException ex)
        {
            throw new ExceptionInInitializerError(ex);
        }
    }

    private final MrSource source;

    // The hit path reads these five fields and the devGen word, nothing else.
    /** Where devGen is read: the control file's header, or DETACHED_ADDRESS once invalidated. */
    private long devGenAddress;
    /** The devGen both levels belong to, or NO_GENERATION: written by other threads (volatile stores). */
    private long generation;
    private long mruStart;
    private long mruEnd;
    private long mruKeys;

    private final long[] topStart = new long[TOP_HALF_ENTRIES];
    private final long[] topEnd = new long[TOP_HALF_ENTRIES];
    private final long[] topKeys = new long[TOP_HALF_ENTRIES];
    private int head;
    private long devGen;

    private UnsafeBuffer bottom;
    private int bottomLength;
    private int bottomCapacity;

    private final MrEntry scratch = new MrEntry();

    private long mruMisses;
    private long topHits;
    private long bottomHits;
    private long globalHits;
    private long createRequests;
    private long flushes;

    /**
     * Takes the source's current {@code devGen} (and checks liveness after that, as every slow path does).
     *
     * @param source the global levels; {@link MrdClient#newCache()} passes the client's.
     * @throws DaemonDeadException when the source already knows the daemon dead.
     */
    public MrCache(final MrSource source)
    {
        this.source = source;
        this.bottomCapacity = INITIAL_BOTTOM_CAPACITY;
        this.bottom = newTable(bottomCapacity);
        this.bottomLength = SortedTable.clear(bottom, 0);
        this.devGenAddress = DETACHED_ADDRESS;
        GENERATION.setVolatile(this, NO_GENERATION);
        source.track(this);
        source.requireAliveAsLastSeen();
        adoptGeneration();
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
        if (UnsafeApi.getLongAcquire(null, devGenAddress) == generation)
        {
            final long end = mruEnd;
            if (address < end && address >= mruStart && WholeBuffer.fits(address, length, end))
            {
                return KeyPair.lkey(mruKeys);
            }
        }
        return KeyPair.lkey(lookup(address, length));
    }

    /**
     * Both keys of the MR holding the whole buffer, in one lookup that allocates nothing: what a work request
     * whose buffer a peer may also reach needs (the lkey for the local SGE, the rkey to hand to the peer).
     * Unpack with {@link KeyPair#lkey(long)} and {@link KeyPair#rkey(long)}; the rkey is
     * {@link Access#NO_RKEY} when the memory was allocated without remote access.
     *
     * @param address first byte of the buffer.
     * @param length  bytes of the buffer ({@code >= 0}); the whole buffer must lie in one MR.
     * @return the lkey and the rkey, packed as {@link KeyPair#pack}.
     * @throws DaemonDeadException as {@link #lkey(long, long)}.
     * @throws MrdException        as {@link #lkey(long, long)}.
     */
    public long keyPair(final long address, final long length)
    {
        if (UnsafeApi.getLongAcquire(null, devGenAddress) == generation)
        {
            final long end = mruEnd;
            if (address < end && address >= mruStart && WholeBuffer.fits(address, length, end))
            {
                return mruKeys;
            }
        }
        return lookup(address, length);
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
     * Makes the next lookup take the slow path, which checks liveness before it reads any level: what the
     * source calls once the daemon is known dead, from any thread, after making the death visible to
     * {@link MrSource#requireAliveAsLastSeen()} (see the class comment for why that order loses no death).
     * Harmless on a live cache: it flushes and re-reads {@code devGen}.
     */
    public void invalidate()
    {
        devGenAddress = DETACHED_ADDRESS;
        GENERATION.setVolatile(this, NO_GENERATION);
    }

    /**
     * Everything but an MRU hit: the generation check failed, or the MRU slot does not hold the address, or the
     * buffer does not fit it.
     *
     * @return the keys of the entry holding {@code [address, address + length)}, filled from below on a miss.
     */
    private long lookup(final long address, final long length)
    {
        if (UnsafeApi.getLongAcquire(null, devGenAddress) != (long)GENERATION.getVolatile(this))
        {
            refresh();
        }
        else if (address < mruEnd && address >= mruStart)
        {
            return whole(address, length, mruEnd, mruKeys);
        }
        mruMisses++;
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
                topHits++;
                useSlot(i);
                return whole(address, length, end, mruKeys);
            }
        }
        return lookupBottomHalf(address, length);
    }

    /**
     * The reference's {@code mlx5_mr_addr2mr_bh}: bottom half, then global cache, then the primary; whatever
     * is found replaces the oldest top-half entry and becomes the most recently used.
     */
    private long lookupBottomHalf(final long address, final long length)
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
        topKeys[slot] = KeyPair.pack(entry.lkey, entry.rkey);
        head = (slot + 1) & TOP_MASK;
        useSlot(slot);
        return whole(address, length, entry.end, mruKeys);
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
            source.requireAliveNow();
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

    /** Top-half slot {@code slot} becomes the most recently used: its entry is copied to the scalar fields. */
    private void useSlot(final int slot)
    {
        mruStart = topStart[slot];
        mruEnd = topEnd[slot];
        mruKeys = topKeys[slot];
    }

    /**
     * @return {@code keys} when {@code [address, address + length)} ends inside the entry ending at {@code end}
     * (the caller found {@code address} in it).
     */
    private static long whole(final long address, final long length, final long end, final long keys)
    {
        if (WholeBuffer.fits(address, length, end))
        {
            return keys;
        }
        throw WholeBuffer.straddles(address, length, end);
    }

    /**
     * The slow path's part of the liveness protocol (class comment): throws when the daemon is known gone, else
     * empties both levels, as the reference's {@code mlx5_mr_flush_local_cache}, and adopts the current
     * {@code devGen}.
     */
    private void refresh()
    {
        // Before anything is read through the source's devGen address: a closed client has unmapped it.
        source.requireAliveAsLastSeen();
        Arrays.fill(topStart, 0);
        Arrays.fill(topEnd, 0);
        Arrays.fill(topKeys, KeyPair.pack(CacheEntryDescriptor.NO_LKEY, Access.NO_RKEY));
        mruStart = 0;
        mruEnd = 0;
        mruKeys = topKeys[0];
        head = 0;
        bottomLength = SortedTable.clear(bottom, 0);
        flushes++;
        adoptGeneration();
    }

    /**
     * Stores the current {@code devGen} as this cache's generation, then checks liveness again: a death made
     * visible before this store is seen by that check, one made visible after it is followed by the source's
     * {@link #invalidate()}, which overwrites this store.
     */
    private void adoptGeneration()
    {
        final long address = source.devGenAddress();
        final long gen = UnsafeApi.getLongAcquire(null, address);
        devGenAddress = address;
        devGen = gen;
        GENERATION.setVolatile(this, gen);
        try
        {
            source.requireAliveAsLastSeen();
        }
        catch (final RuntimeException ex)
        {
            invalidate();
            throw ex;
        }
    }

    private static UnsafeBuffer newTable(final int capacity)
    {
        return new UnsafeBuffer(BufferUtil.allocateDirectAligned(capacity * CacheEntryDescriptor.ENTRY_LENGTH, 64));
    }

    /**
     * @return lookups that went past the most recently used slot (its entry did not hold the address, or the
     * generation check sent the lookup to the slow path), whatever then answered or refused them: the sum of
     * {@link #topHits()}, {@link #bottomHits()}, {@link #globalHits()} and {@link #createRequests()}, plus the
     * lookups the global levels failed (EBUSY, a dead daemon) before counting.
     */
    public long mruMisses()
    {
        return mruMisses;
    }

    /**
     * MRU hits are not counted (class comment); they are the lookups that did not miss it.
     *
     * @param lookups calls of {@link #lkey} and {@link #keyPair} the caller made on this cache.
     * @return lookups answered (or refused as straddling) by the most recently used slot:
     * {@code lookups - mruMisses()}.
     */
    public long mruHits(final long lookups)
    {
        return lookups - mruMisses;
    }

    /**
     * @return lookups answered by the top half's linear scan: a slot other than the most recently used one.
     * The MRU slot's hits are not counted, see {@link #mruHits(long)}.
     */
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

    /** @return {@code CREATE_MR} requests sent (global misses), answered or not. */
    public long createRequests()
    {
        return createRequests;
    }

    /** @return flushes of both levels: a {@code devGen} change (or an {@link #invalidate()} of a live cache). */
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

    /** @return the {@code devGen} the cache's content belongs to (the last one it adopted). */
    public long devGen()
    {
        return devGen;
    }

    public String toString()
    {
        return "MrCache[mruMisses " + mruMisses + ", topHits " + topHits + ", bottomHits " + bottomHits + ", globalHits " + globalHits +
            ", createRequests " + createRequests + ", flushes " + flushes + ", bottom " + bottomLength + "/" +
            bottomCapacity + "]";
    }
}
