package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * An {@link MrSource} without a daemon: a global cache and a set of ranges the "primary" would register on
 * {@code CREATE_MR}, both as sorted maps; a {@code devGen} word off-heap; and a liveness switch for each check,
 * which invalidates the tracked caches as the client's watch does.
 */
class FakeSource implements MrSource
{
    /** start → {start, end, lkey}: what the global cache holds. */
    final TreeMap<Long, long[]> global = new TreeMap<>();
    /** start → {start, end, lkey}: what CREATE_MR registers (then it is in the global cache too). */
    final TreeMap<Long, long[]> registrable = new TreeMap<>();
    private final UnsafeBuffer devGenWord = new UnsafeBuffer(BufferUtil.allocateDirectAligned(Long.BYTES, Long.BYTES));
    private final List<MrCache> caches = new ArrayList<>();
    /** What the watchdog would have found: every call fails. */
    private volatile boolean knownDead;
    /** What only a fresh look at the heartbeat finds: the slow path fails. */
    boolean heartbeatStale;
    int globalLookups;
    int creates;

    void putGlobal(final long start, final long end, final int lkey)
    {
        global.put(start, new long[] {start, end, lkey});
    }

    void putRegistrable(final long start, final long end, final int lkey)
    {
        registrable.put(start, new long[] {start, end, lkey});
    }

    /**
     * What a memory free event does: the range leaves the global cache and devGen moves.
     */
    void free(final long start)
    {
        global.remove(start);
        registrable.remove(start);
        bumpDevGen();
    }

    void bumpDevGen()
    {
        devGenWord.putLongRelease(0, devGenWord.getLong(0) + 1);
    }

    long devGen()
    {
        return devGenWord.getLongVolatile(0);
    }

    /** What the watch does: the death first, then every tracked cache. */
    void markDead()
    {
        knownDead = true;
        caches.forEach(MrCache::invalidate);
    }

    public void requireAliveAsLastSeen()
    {
        if (knownDead)
        {
            throw new DaemonDeadException("daemon pid 42 in /fake died (heartbeat 5000 ms old): re-attach");
        }
    }

    public long devGenAddress()
    {
        return devGenWord.addressOffset();
    }

    public void track(final MrCache cache)
    {
        caches.add(cache);
    }

    public void requireAliveNow()
    {
        requireAliveAsLastSeen();
        if (heartbeatStale)
        {
            markDead();
            requireAliveAsLastSeen();
        }
    }

    public boolean lookupGlobal(final long address, final MrEntry out)
    {
        globalLookups++;
        final long[] entry = find(global, address);
        if (null == entry)
        {
            return false;
        }
        out.set(entry[0], entry[1], (int)entry[2], rkey(entry), Access.LOCAL, 1);
        return true;
    }

    public void createMr(final long address, final long length, final MrEntry out)
    {
        creates++;
        final long[] entry = find(registrable, address);
        if (null == entry)
        {
            throw new MrdException(ErrorCode.ENXIO, "address " + Sizes.hex(address) + " is outside managed memory");
        }
        global.put(entry[0], entry);
        out.set(entry[0], entry[1], (int)entry[2], rkey(entry), Access.LOCAL, -1);
    }

    /** The rkey of an entry {start, end, lkey[, rkey]}: its fourth element, else none. */
    static int rkey(final long[] entry)
    {
        return entry.length > 3 ? (int)entry[3] : Access.NO_RKEY;
    }

    static long[] find(final TreeMap<Long, long[]> map, final long address)
    {
        final Map.Entry<Long, long[]> floor = map.floorEntry(address);
        return null != floor && address < floor.getValue()[1] ? floor.getValue() : null;
    }
}
