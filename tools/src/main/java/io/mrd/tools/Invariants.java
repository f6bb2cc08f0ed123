package io.mrd.tools;

import io.mrd.layout.Access;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.RemoteAccess;
import io.mrd.layout.sys.Sizes;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.locks.LockSupport;

/**
 * What must hold in every control file the primary publishes, checked from outside on a
 * {@link ControlFileSnapshot}: the MR-engine properties (global cache sorted, non-overlapping, every entry a
 * live chunk of exactly one ACTIVE MR with its keys and access, every chunk cached unless the overflow flag is
 * set, no segment live in two MRs, every live segment allocated and of its MR's access, an rkey exactly for
 * remote access, MR fields coherent), every MR's keys on every device ({@link DeviceInvariants}), the memory
 * lists' bookkeeping,
 * the counters that must agree with the tables, and unique client ids.
 * <p>
 * {@code mrd check} runs it on a live daemon; the reliability tests run that command between steps, and the
 * command tests call it directly. Each violation is one line naming the record, the values and the rule
 * broken, so that two snapshots showing the same fault give the same line.
 */
public final class Invariants
{
    /** Further snapshots that must show a violation before {@link #check(ControlFile)} reports it. */
    public static final int CONFIRMATIONS = 2;
    /** Pause between confirming snapshots: far longer than any window between two related stores. */
    public static final long CONFIRM_PAUSE_MS = 20;

    private Invariants()
    {
    }

    /**
     * Checks a control file that a daemon may be changing.
     * <p>
     * The MR table, the cache and the counters the engine sets are read consistently under the seqlock, and
     * the primary orders its stores so that no MR invariant can look broken to a reader (a freed segment stays
     * allocated in the lists until every MR has dropped it). The memory lists themselves are mirrored outside
     * the seqlock, segment by segment, by the memory manager: a snapshot taken in the middle of an allocation
     * can show its count and its segments disagree (measured: about 1 snapshot in 1,000 while one thread
     * allocates, registers and frees in a loop). So a violation found on one snapshot is reported only when
     * {@link #CONFIRMATIONS} later snapshots show the very same line: a transient state of a working primary is
     * gone by then, a real fault (or a corrupt copy) is not.
     *
     * @return the violations, one line each; empty when consistent.
     */
    public static List<String> check(final ControlFile ctl)
    {
        List<String> violations = check(ControlFileSnapshot.read(ctl));
        for (int i = 0; i < CONFIRMATIONS && !violations.isEmpty(); i++)
        {
            LockSupport.parkNanos(CONFIRM_PAUSE_MS * 1_000_000L);
            final Set<String> again = new HashSet<>(check(ControlFileSnapshot.read(ctl)));
            violations = violations.stream().filter(again::contains).toList();
        }
        return violations;
    }

    /**
     * Checks one snapshot.
     *
     * @return the violations, one line each, in the order memory lists, MRs, devices and keys, segments, cache,
     * counters, clients.
     */
    public static List<String> check(final ControlFileSnapshot snapshot)
    {
        final List<String> violations = new ArrayList<>();
        if (!snapshot.consistent())
        {
            violations.add("seqlock held for writing (seq " + snapshot.header().seq() + "): the primary died " +
                "inside a write or the file was copied during one, so the MR table and cache may be torn");
        }
        final long segmentSize = snapshot.header().segmentSize();
        if (segmentSize <= 0 || Long.bitCount(segmentSize) != 1)
        {
            violations.add("header: segment size " + segmentSize + " is not a positive power of two");
            return violations;
        }
        checkLists(snapshot, violations);
        checkMrs(snapshot, violations);
        DeviceInvariants.check(snapshot, violations);
        checkSegments(snapshot, violations);
        checkCache(snapshot, violations);
        checkCounters(snapshot, violations);
        checkClients(snapshot, violations);
        return violations;
    }

    private static void checkLists(final ControlFileSnapshot snapshot, final List<String> violations)
    {
        final List<ControlFileSnapshot.MemsegList> lists = snapshot.lists();
        for (final ControlFileSnapshot.MemsegList list : lists)
        {
            final String name = "memseg list " + list.index();
            int owned = 0;
            for (int s = 0; s < list.segmentCount(); s++)
            {
                if (!list.isAllocated(s))
                {
                    continue;
                }
                owned++;
                final int first = list.allocationFirst()[s];
                if (first < 0 || first > s)
                {
                    violations.add(name + " segment " + s + ": its allocation starts at segment " + first +
                        ", outside [0, " + s + "]");
                }
                else if (first < s && (list.owners()[s - 1] != list.owners()[s] || list.allocationFirst()[s - 1] != first))
                {
                    violations.add(name + " segment " + s + ": its allocation starts at segment " + first +
                        " (owner " + list.owners()[s] + ") but segment " + (s - 1) + " is not part of it (owner " +
                        list.owners()[s - 1] + ", allocation at " + list.allocationFirst()[s - 1] + ")");
                }
                else if (first < s && list.access()[s - 1] != list.access()[s])
                {
                    violations.add(name + " segment " + s + ": access " + Access.describe(list.access()[s]) +
                        " but segment " + (s - 1) + " of the same allocation has " +
                        Access.describe(list.access()[s - 1]) + ": an allocation has one access");
                }
            }
            if (owned != list.allocatedSegments())
            {
                violations.add(name + ": allocatedSegments says " + list.allocatedSegments() + " but " + owned +
                    " segments have an owner");
            }
            if (list.index() > 0)
            {
                final ControlFileSnapshot.MemsegList previous = lists.get(list.index() - 1);
                if (previous.endVa() > list.baseVa())
                {
                    violations.add(name + " " + Format.range(list.baseVa(), list.endVa()) + " overlaps memseg list " +
                        previous.index() + " " + Format.range(previous.baseVa(), previous.endVa()));
                }
            }
        }
    }

    private static void checkMrs(final ControlFileSnapshot snapshot, final List<String> violations)
    {
        final ControlFileLayout layout = snapshot.layout();
        final long segmentSize = snapshot.header().segmentSize();
        final int bitmapBits = layout.mrBitmapLength() * 8;
        final Map<Integer, Integer> byLkey = new HashMap<>();
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            final String name = "MR " + mr.index();
            if (mr.state() != MrDescriptor.STATE_ACTIVE && mr.state() != MrDescriptor.STATE_DETACHED)
            {
                violations.add(name + ": unknown state " + mr.state());
                continue;
            }
            if (mr.index() >= snapshot.header().mrHighWater())
            {
                violations.add(name + ": " + mr.stateName() + " at or beyond the high-water mark " +
                    snapshot.header().mrHighWater() + ", where readers never look");
            }
            // An MR not placed on device 0 has no key there (DeviceInvariants checks its record's zeros).
            final Integer other = Access.isOn(mr.access(), 0) ? byLkey.putIfAbsent(mr.lkey(), mr.index()) : null;
            if (null != other)
            {
                violations.add(name + ": lkey " + Format.key(mr.lkey()) + " is also the lkey of MR " + other);
            }
            if (mr.start() >= mr.end())
            {
                violations.add(name + ": start " + Sizes.hex(mr.start()) + " is not below end " + Sizes.hex(mr.end()));
            }
            checkAccess(name, mr, violations);
            if (mr.bitmapOffset() != layout.mrBitmapOffset(mr.index()))
            {
                violations.add(name + ": bitmap offset " + mr.bitmapOffset() + " is not its slot's " +
                    layout.mrBitmapOffset(mr.index()));
            }
            if (mr.external())
            {
                if (mr.listIndex() != -1)
                {
                    violations.add(name + ": external but its list index is " + mr.listIndex() +
                        " (external MRs have -1)");
                }
                continue;
            }
            if (mr.listIndex() < 0 || mr.listIndex() >= snapshot.lists().size())
            {
                violations.add(name + ": list index " + mr.listIndex() + " outside [0, " + snapshot.lists().size() +
                    ") and not external");
                continue;
            }
            final ControlFileSnapshot.MemsegList list = snapshot.lists().get(mr.listIndex());
            if (mr.msBmpN() < 1 || mr.msBmpN() > bitmapBits)
            {
                violations.add(name + ": msBmpN " + mr.msBmpN() + " outside [1, " + bitmapBits + "]");
            }
            else if (mr.msBaseIdx() < 0 || (long)mr.msBaseIdx() + mr.msBmpN() > list.segmentCount())
            {
                violations.add(name + ": msBmpN bits from msBaseIdx " + mr.msBaseIdx() + " (segments [" +
                    mr.msBaseIdx() + ", " + ((long)mr.msBaseIdx() + mr.msBmpN()) + ")) run outside list " +
                    list.index() + "'s " + list.segmentCount() + " segments");
            }
            else
            {
                final long start = list.segmentAddress(mr.msBaseIdx());
                final long end = start + mr.msBmpN() * segmentSize;
                if (mr.start() != start || mr.end() != end)
                {
                    violations.add(name + ": range " + Format.range(mr.start(), mr.end()) + " is not its msBmpN " +
                        mr.msBmpN() + " segments from msBaseIdx " + mr.msBaseIdx() + " " + Format.range(start, end));
                }
            }
            final int popcount = mr.bits().cardinality();
            if (mr.msN() != popcount)
            {
                violations.add(name + ": msN " + mr.msN() + " is not the popcount of its bitmap, " + popcount);
            }
            if (mr.strayBits() > 0)
            {
                violations.add(name + ": " + mr.strayBits() + " bitmap bits set at or beyond msBmpN " + mr.msBmpN());
            }
            if (mr.active() && mr.msN() <= 0)
            {
                violations.add(name + ": ACTIVE with msN " + mr.msN() + ": an MR without live segments is DETACHED");
            }
        }
    }

    /**
     * Access is the owner's choice plus local write, and remote access and an rkey come together: an rkey of
     * local-only memory is a key nobody should hold, a remote MR without one is unusable.
     */
    private static void checkAccess(final String name, final ControlFileSnapshot.Mr mr, final List<String> violations)
    {
        if ((mr.access() & ~(Access.KNOWN | Access.PLACEMENT)) != 0 || (mr.access() & Access.LOCAL_WRITE) == 0)
        {
            violations.add(name + ": access " + Access.describe(mr.access()) + " is not local-write plus remote " +
                "flags and a placement");
        }
        if (Access.isOn(mr.access(), 0) && !RemoteAccess.isRightRkey(mr.access(), mr.rkey()))
        {
            violations.add(name + ": rkey " + Format.key(mr.rkey()) + " with access " + Access.describe(mr.access()) +
                ": an MR has an rkey exactly when it has remote access");
        }
    }

    private static void checkSegments(final ControlFileSnapshot snapshot, final List<String> violations)
    {
        final List<ControlFileSnapshot.MemsegList> lists = snapshot.lists();
        final int[][] liveIn = new int[lists.size()][];
        for (int l = 0; l < lists.size(); l++)
        {
            liveIn[l] = new int[lists.get(l).segmentCount()];
            Arrays.fill(liveIn[l], -1);
        }
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            if (!mr.active() || mr.external() || mr.listIndex() < 0 || mr.listIndex() >= lists.size())
            {
                continue;
            }
            final ControlFileSnapshot.MemsegList list = lists.get(mr.listIndex());
            for (int b = mr.bits().nextSetBit(0); b >= 0; b = mr.bits().nextSetBit(b + 1))
            {
                final long segment = (long)mr.msBaseIdx() + b;
                if (segment < 0 || segment >= list.segmentCount())
                {
                    continue;
                }
                final int s = (int)segment;
                final String where = Sizes.hex(list.segmentAddress(s)) + " (list " + list.index() + " segment " + s + ")";
                final int previous = liveIn[list.index()][s];
                if (previous >= 0)
                {
                    violations.add("segment " + where + " is a live segment of two MRs: MR " + previous + " and MR " +
                        mr.index());
                }
                else
                {
                    liveIn[list.index()][s] = mr.index();
                }
                if (!list.isAllocated(s))
                {
                    violations.add("MR " + mr.index() + ": live segment " + where +
                        " is not allocated in its memseg list");
                }
                else if (list.access()[s] != mr.access())
                {
                    violations.add("MR " + mr.index() + " of access " + Access.describe(mr.access()) +
                        ": live segment " + where + " was allocated with access " +
                        Access.describe(list.access()[s]) + " (an MR covers memory of one access)");
                }
            }
        }

        // External MRs have no segments: they must not overlap any live chunk by address.
        final List<Ref> chunks = activeChunks(snapshot);
        Ref widest = null;
        for (final Ref ref : chunks)
        {
            if (null != widest && ref.chunk().start() < widest.chunk().end() &&
                (ref.mr().external() || widest.mr().external()))
            {
                violations.add("MR " + widest.mr().index() + " " + widest.chunk() + " and MR " + ref.mr().index() +
                    " " + ref.chunk() + " overlap (" + (ref.mr().external() ? "MR " + ref.mr().index() :
                    "MR " + widest.mr().index()) + " is external)");
            }
            if (null == widest || ref.chunk().end() > widest.chunk().end())
            {
                widest = ref;
            }
        }
    }

    private static void checkCache(final ControlFileSnapshot snapshot, final List<String> violations)
    {
        final ControlFileSnapshot.Cache cache = snapshot.cache();
        if (cache.len() < 1 || cache.len() > cache.capacity())
        {
            violations.add("global cache: len " + cache.len() + " outside [1, capacity " + cache.capacity() + "]");
        }
        final ControlFileSnapshot.CacheEntry sentinel = cache.sentinel();
        if (sentinel.start() != 0 || sentinel.end() != 0 || sentinel.lkey() != CacheEntryDescriptor.NO_LKEY)
        {
            violations.add("global cache: entry 0 (the sentinel) is {" + Sizes.hex(sentinel.start()) + ", " +
                Sizes.hex(sentinel.end()) + ", " + sentinel.lkey() + "} instead of {0, 0, -1}");
        }

        final List<Ref> chunks = activeChunks(snapshot);
        final long[] prefixMaxEnd = new long[chunks.size()];
        for (int k = 0; k < chunks.size(); k++)
        {
            prefixMaxEnd[k] = Math.max(k > 0 ? prefixMaxEnd[k - 1] : Long.MIN_VALUE, chunks.get(k).chunk().end());
        }
        final long[] starts = chunks.stream().mapToLong(r -> r.chunk().start()).toArray();

        ControlFileSnapshot.CacheEntry previous = null;
        final Set<ControlFileSnapshot.Chunk> cached = new HashSet<>();
        for (final ControlFileSnapshot.CacheEntry e : cache.entries())
        {
            final String name = "global cache entry " + e.index() + " " + e.range();
            cached.add(new ControlFileSnapshot.Chunk(e.start(), e.end()));
            if (e.start() >= e.end())
            {
                violations.add(name + " is empty");
            }
            if (null != previous)
            {
                if (e.start() < previous.start())
                {
                    violations.add("global cache not sorted: entry " + e.index() + " " + e.range() +
                        " starts below entry " + previous.index() + " " + previous.range());
                }
                else if (e.start() < previous.end())
                {
                    violations.add("global cache entries overlap: entry " + previous.index() + " " + previous.range() +
                        " and entry " + e.index() + " " + e.range());
                }
            }
            previous = e;

            // Chunks containing the entry: those starting at or below it whose end reaches its end.
            final List<Ref> containing = new ArrayList<>(1);
            int k = floorIndex(starts, e.start());
            while (k >= 0 && prefixMaxEnd[k] >= e.end())
            {
                final Ref ref = chunks.get(k);
                if (ref.chunk().contains(e.start(), e.end()))
                {
                    containing.add(ref);
                }
                k--;
            }
            if (containing.isEmpty())
            {
                violations.add(name + " lkey " + Format.key(e.lkey()) + " (MR " + e.mr() +
                    ") lies in no ACTIVE MR's live segments");
            }
            else if (containing.size() > 1)
            {
                violations.add(name + " lies in the live segments of " + containing.size() + " ACTIVE MRs: " +
                    containing.stream().map(r -> "MR " + r.mr().index()).toList());
            }
            else
            {
                final ControlFileSnapshot.Mr mr = containing.getFirst().mr();
                if (mr.lkey() != e.lkey())
                {
                    violations.add(name + " lkey mismatch: the entry has lkey " + Format.key(e.lkey()) + ", MR " +
                        mr.index() + " has " + Format.key(mr.lkey()));
                }
                if (mr.rkey() != e.rkey() || mr.access() != e.access())
                {
                    violations.add(name + " keys mismatch: the entry has rkey " + Format.key(e.rkey()) +
                        " access " + Access.describe(e.access()) + ", MR " + mr.index() + " has rkey " +
                        Format.key(mr.rkey()) + " access " + Access.describe(mr.access()));
                }
                if (mr.index() != e.mr())
                {
                    violations.add(name + " MR index mismatch: the entry names MR " + e.mr() +
                        ", the range is a live chunk of MR " + mr.index());
                }
            }
        }
        if (!cache.overflow())
        {
            for (final Ref ref : chunks)
            {
                if (!cached.contains(ref.chunk()))
                {
                    violations.add("global cache lacks chunk " + ref.chunk() + " of MR " + ref.mr().index() +
                        " lkey " + Format.key(ref.mr().lkey()) + " and its overflow flag is not set");
                }
            }
        }
    }

    private static void checkCounters(final ControlFileSnapshot snapshot, final List<String> violations)
    {
        final Map<MrdCounter, Long> counters = snapshot.counters();
        long activeBytes = 0;
        int active = 0;
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            if (mr.active())
            {
                active++;
                activeBytes += mr.length();
            }
        }
        // BYTES_PINNED equals the ACTIVE lengths only once detached MRs are collected; what is still registered
        // can never be less than what is ACTIVE.
        final Long registered = counters.get(MrdCounter.BYTES_REGISTERED);
        if (null != registered && registered < activeBytes)
        {
            violations.add("counter '" + MrdCounter.BYTES_REGISTERED.label() + "' is " + registered +
                ", less than the " + activeBytes + " bytes of the ACTIVE MRs");
        }
        final Long activeCounter = counters.get(MrdCounter.MRS_ACTIVE);
        if (null != activeCounter && activeCounter != active)
        {
            violations.add("counter '" + MrdCounter.MRS_ACTIVE.label() + "' is " + activeCounter + " but " + active +
                " MRs are ACTIVE");
        }
        final Long cacheEntries = counters.get(MrdCounter.CACHE_ENTRIES);
        final ControlFileSnapshot.Cache cache = snapshot.cache();
        if (null != cacheEntries && cache.len() >= 1 && cache.len() <= cache.capacity() &&
            cacheEntries != cache.entries().size())
        {
            violations.add("counter '" + MrdCounter.CACHE_ENTRIES.label() + "' is " + cacheEntries +
                " but the global cache holds " + cache.entries().size());
        }
        final Long devGen = counters.get(MrdCounter.DEV_GEN);
        if (null != devGen && devGen != snapshot.header().devGen())
        {
            violations.add("counter '" + MrdCounter.DEV_GEN.label() + "' is " + devGen + " but the header's devGen is " +
                snapshot.header().devGen());
        }
    }

    private static void checkClients(final ControlFileSnapshot snapshot, final List<String> violations)
    {
        final Map<Integer, Integer> byId = new HashMap<>();
        for (final ControlFileSnapshot.Client client : snapshot.clients())
        {
            if (client.id() <= 0)
            {
                violations.add("client record " + client.index() + ": id " + client.id() + " (ids start at 1)");
                continue;
            }
            final Integer other = byId.putIfAbsent(client.id(), client.index());
            if (null != other)
            {
                violations.add("client id " + client.id() + " is not unique: records " + other + " and " +
                    client.index());
            }
        }
    }

    /**
     * A live chunk and the MR it belongs to.
     */
    private record Ref(ControlFileSnapshot.Chunk chunk, ControlFileSnapshot.Mr mr)
    {
    }

    /**
     * @return the live chunks of every ACTIVE MR, by start address.
     */
    private static List<Ref> activeChunks(final ControlFileSnapshot snapshot)
    {
        final List<Ref> refs = new ArrayList<>();
        for (final ControlFileSnapshot.Mr mr : snapshot.mrs())
        {
            if (mr.active())
            {
                mr.chunks().forEach(chunk -> refs.add(new Ref(chunk, mr)));
            }
        }
        refs.sort(Comparator.comparingLong((Ref r) -> r.chunk().start()).thenComparingInt(r -> r.mr().index()));
        return refs;
    }

    /**
     * @return the last index whose value is at or below {@code key}, -1 when none.
     */
    private static int floorIndex(final long[] sorted, final long key)
    {
        int low = 0;
        int high = sorted.length - 1;
        int found = -1;
        while (low <= high)
        {
            final int mid = (low + high) >>> 1;
            if (sorted[mid] <= key)
            {
                found = mid;
                low = mid + 1;
            }
            else
            {
                high = mid - 1;
            }
        }
        return found;
    }
}
