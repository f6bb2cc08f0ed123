package io.mrd.tools;

import io.mrd.layout.ClientDescriptor;
import io.mrd.layout.ClientRecord;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrRecord;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.SeqLock;
import io.mrd.layout.SortedTable;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * Everything a control file says, copied out in one consistent read: what {@code mrd dump} prints and
 * {@link Invariants} checks. Values only; no reference into the mapping survives {@link #read}.
 * <p>
 * The MR table, the bitmaps, the MR key table ({@link #devices}), the global cache and the counters the MR
 * engine sets inside the seqlock are
 * read under the {@link SeqLock} ({@link GlobalCacheReader#readConsistent}), so they describe one instant.
 * The memory-segment lists and the client table are written under other locks of the primary and are copied
 * in the same pass: they are at most one event apart from the rest.
 * <p>
 * Every length and index read from the file is clamped to the layout first, so that a torn read (discarded by
 * the seqlock anyway) or a corrupt copy yields odd values, never an exception or an out-of-bounds read.
 */
public record ControlFileSnapshot(
    Path path,
    long takenMs,
    boolean consistent,
    ControlFileLayout layout,
    Header header,
    List<MemsegList> lists,
    List<Mr> mrs,
    DeviceSnapshot devices,
    Cache cache,
    List<Client> clients,
    Map<MrdCounter, Long> counters)
{
    /** How long {@link #read} retries a seqlock read that a busy or dead writer keeps failing. */
    public static final long CONSISTENT_READ_TIMEOUT_MS = 1_000;

    /**
     * The header fields, as read: {@link #read} is the one place a tool copies them.
     *
     * @param device       device 0's name, empty without a device ({@link DeviceSnapshot} has every device).
     * @param pdHandle     device 0's PD handle, {@link HeaderDescriptor#NO_PD_HANDLE} without a device.
     * @param adoptedEpoch the epoch of the daemon whose state this one adopted, 0 when it started afresh.
     */
    public record Header(
        int layoutVersion,
        long pid,
        long epoch,
        long startTimeMs,
        long heartbeatMs,
        int heartbeatIntervalMs,
        int heartbeatStaleLimitMs,
        int flags,
        long seq,
        long devGen,
        long baseVirtaddr,
        long segmentSize,
        long externalBase,
        long externalLength,
        String provider,
        int mrHighWater,
        long fileLength,
        String device,
        int pdHandle,
        long adoptedEpoch)
    {
        public boolean hugepageBacked()
        {
            return (flags & HeaderDescriptor.FLAG_HUGEPAGE_BACKED) != 0;
        }

        public boolean closed()
        {
            return heartbeatMs == HeaderDescriptor.HEARTBEAT_CLOSED;
        }

        /**
         * @param atMs the wall clock when this was read.
         * @return the heartbeat as it was then: alive, closed or stale, its age and the daemon's published limit.
         */
        public Heartbeat.State heartbeatAt(final long atMs)
        {
            return Heartbeat.state(heartbeatMs, heartbeatStaleLimitMs, atMs);
        }

        /**
         * @return the header's fields now; consistent with the tables only when called inside
         * {@link GlobalCacheReader#readConsistent}, as {@link ControlFileSnapshot#read} does.
         */
        public static Header read(final ControlFile ctl)
        {
            final ControlHeader h = ctl.header();
            return new Header(h.layoutVersion(), h.pid(), h.epoch(), h.startTimeMs(), h.heartbeatMs(),
                h.heartbeatIntervalMs(), h.heartbeatStaleLimitMs(), h.flags(), ctl.seqLock().sequence(), h.devGen(),
                h.baseVirtaddr(), h.segmentSize(), h.externalBase(), h.externalLength(), h.providerName(),
                h.mrHighWater(), h.fileLength(), h.deviceName(), h.pdHandle(), h.adoptedEpoch());
        }
    }

    /**
     * One run of allocated segments of one allocation (same owner, same first segment), and its access.
     */
    public record Allocated(int firstSegment, int segmentCount, long start, long end, int owner, int access)
    {
    }

    /**
     * One memory-segment list; {@code owners[i]}, {@code allocationFirst[i]} and {@code access[i]} describe
     * segment {@code i}.
     */
    public record MemsegList(
        int index,
        long baseVa,
        long pageSize,
        long segmentSize,
        int segmentCount,
        int flags,
        int allocatedSegments,
        String backingPath,
        int[] owners,
        int[] allocationFirst,
        int[] access)
    {
        public long segmentAddress(final int segment)
        {
            return baseVa + segment * segmentSize;
        }

        public long endVa()
        {
            return segmentAddress(segmentCount);
        }

        public boolean isAllocated(final int segment)
        {
            return segment >= 0 && segment < segmentCount && owners[segment] != MemsegListDescriptor.OWNER_FREE;
        }

        /**
         * @return the index of the segment holding {@code address}, or -1 when it is outside this list.
         */
        public int segmentOf(final long address)
        {
            if (segmentSize <= 0 || address < baseVa || address >= endVa())
            {
                return -1;
            }
            return (int)((address - baseVa) / segmentSize);
        }

        public boolean hugetlbfs()
        {
            return (flags & MemsegListDescriptor.FLAG_HUGETLBFS) != 0;
        }

        /**
         * @return the allocated ranges, consecutive segments of one allocation merged into one range.
         */
        public List<Allocated> allocations()
        {
            final List<Allocated> result = new ArrayList<>();
            int i = 0;
            while (i < segmentCount)
            {
                if (owners[i] == MemsegListDescriptor.OWNER_FREE)
                {
                    i++;
                    continue;
                }
                final int first = i;
                final int owner = owners[i];
                final int allocation = allocationFirst[i];
                i++;
                while (i < segmentCount && owners[i] == owner && allocationFirst[i] == allocation)
                {
                    i++;
                }
                result.add(new Allocated(first, i - first, segmentAddress(first), segmentAddress(i), owner,
                    access[first]));
            }
            return result;
        }
    }

    /**
     * A virtually contiguous range of live segments of an MR (for external MRs, its whole range).
     */
    public record Chunk(long start, long end)
    {
        public boolean contains(final long startAddress, final long endAddress)
        {
            return startAddress >= start && endAddress <= end;
        }

        public String toString()
        {
            return Format.range(start, end);
        }
    }

    /**
     * One MR record that is not FREE, with its bitmap and live chunks.
     *
     * @param bits      bit {@code i} set when segment {@code msBaseIdx + i} is live (only the first
     *                  {@code min(msBmpN, bitmap capacity)} bits are read).
     * @param strayBits bits set in the MR's bitmap slot at or beyond {@code msBmpN}.
     * @param deviceHandle device 0's handle of the MR, {@link MrDescriptor#NO_DEVICE_HANDLE} without a device (the
     *                     keys and handles on every device are in {@link ControlFileSnapshot#devices}).
     */
    public record Mr(
        int index,
        int state,
        int lkey,
        int rkey,
        int access,
        int listIndex,
        long start,
        long end,
        int msBaseIdx,
        int msN,
        int msBmpN,
        int flags,
        int owner,
        int bitmapOffset,
        long createdMs,
        int deviceHandle,
        BitSet bits,
        int strayBits,
        List<Chunk> chunks)
    {
        public boolean external()
        {
            return (flags & MrDescriptor.FLAG_EXTERNAL) != 0;
        }

        public boolean active()
        {
            return state == MrDescriptor.STATE_ACTIVE;
        }

        public long length()
        {
            return end - start;
        }

        public String stateName()
        {
            return MrDescriptor.stateName(state);
        }
    }

    /**
     * One entry of the global cache; {@code index} is its position in the table (1 is the first after the
     * sentinel).
     */
    public record CacheEntry(int index, long start, long end, int lkey, int rkey, int access, int mr)
    {
        public String range()
        {
            return Format.range(start, end);
        }
    }

    /**
     * The global cache: {@code entries} are those in use after the sentinel, in table order.
     *
     * @param len the length the header gives, sentinel included (possibly out of range in a corrupt file).
     */
    public record Cache(int len, int capacity, boolean overflow, CacheEntry sentinel, List<CacheEntry> entries)
    {
    }

    /**
     * One client record that is not FREE.
     */
    public record Client(int index, int state, int id, long pid, int uid, int gid, long connectedMs, String name)
    {
    }

    /**
     * @return the heartbeat as it was when the snapshot was taken: alive, closed or stale, its age and the
     * daemon's published limit ({@link Heartbeat#state}).
     */
    public Heartbeat.State heartbeat()
    {
        return header.heartbeatAt(takenMs);
    }

    /**
     * @return the value of the counter, 0 when the daemon did not allocate it.
     */
    public long counter(final MrdCounter counter)
    {
        return counters.getOrDefault(counter, 0L);
    }

    /**
     * @return the MR in table slot {@code index}, or null when that slot is FREE.
     */
    public Mr mr(final int index)
    {
        for (final Mr mr : mrs)
        {
            if (mr.index() == index)
            {
                return mr;
            }
        }
        return null;
    }

    /**
     * @return the client with that id, or null.
     */
    public Client client(final int id)
    {
        for (final Client client : clients)
        {
            if (client.id() == id)
            {
                return client;
            }
        }
        return null;
    }

    /**
     * Reads the whole control file under the seqlock. When the seqlock stays odd (the primary died inside a
     * write, or the file is a copy taken during one) it reads without it and says so in {@link #consistent()}.
     *
     * @throws MrdException EBUSY when the primary is alive and kept rewriting the table for
     *                      {@link #CONSISTENT_READ_TIMEOUT_MS}.
     */
    public static ControlFileSnapshot read(final ControlFile ctl)
    {
        final GlobalCacheReader reader = new GlobalCacheReader(ctl);
        final ControlFileSnapshot[] result = new ControlFileSnapshot[1];
        // A dead primary (or a copy of its file) will never release an odd seqlock: one attempt is enough.
        final boolean alive = Heartbeat.lookNow(ctl.header()).isAlive();
        final long deadline = System.currentTimeMillis() + (alive ? CONSISTENT_READ_TIMEOUT_MS : 0);
        while (true)
        {
            try
            {
                reader.readConsistent(() -> result[0] = readOnce(ctl, true));
                return result[0];
            }
            catch (final MrdException ex)
            {
                if (ex.code() != ErrorCode.EBUSY)
                {
                    throw ex;
                }
                if (System.currentTimeMillis() > deadline)
                {
                    final ControlFileSnapshot unguarded = readOnce(ctl, false);
                    if (unguarded.heartbeat().isAlive() && (unguarded.header().seq() & 1) == 0)
                    {
                        throw ex;
                    }
                    return unguarded;
                }
            }
        }
    }

    private static ControlFileSnapshot readOnce(final ControlFile ctl, final boolean consistent)
    {
        final UnsafeBuffer buffer = ctl.buffer();
        final ControlFileLayout layout = ctl.layout();
        final ControlHeader h = ctl.header();
        final long now = System.currentTimeMillis();
        final Header header = Header.read(ctl);

        final List<MemsegList> lists = readLists(buffer, layout, header.segmentSize());
        final List<Mr> mrs = readMrs(buffer, layout, header.segmentSize(), lists);
        final BitSet inUse = new BitSet();
        mrs.forEach(mr -> inUse.set(mr.index()));
        final DeviceSnapshot devices = DeviceSnapshot.read(buffer, layout, header.mrHighWater(), inUse);
        final Cache cache = readCache(buffer, layout, h);
        final List<Client> clients = readClients(buffer, layout);
        final Map<MrdCounter, Long> counters = ctl.counters();
        return new ControlFileSnapshot(ctl.path(), now, consistent, layout, header, List.copyOf(lists), List.copyOf(mrs),
            devices, cache, List.copyOf(clients), Collections.unmodifiableMap(counters));
    }

    private static List<MemsegList> readLists(
        final UnsafeBuffer buffer, final ControlFileLayout layout, final long segmentSize)
    {
        final MemsegListRecord record = new MemsegListRecord();
        final List<MemsegList> lists = new ArrayList<>();
        for (int l = 0; l < layout.memsegListCount(); l++)
        {
            record.wrap(buffer, layout.memsegListOffset(l));
            final int count = clamp(record.segmentCount(), 0, layout.segmentsPerList());
            final int[] owners = new int[count];
            final int[] first = new int[count];
            final int[] access = new int[count];
            for (int s = 0; s < count; s++)
            {
                owners[s] = record.owner(s);
                first[s] = record.allocationFirst(s);
                access[s] = record.access(s);
            }
            lists.add(new MemsegList(l, record.baseVa(), record.pageSize(), segmentSize, count, record.flags(),
                record.allocatedSegments(), record.backingPath(), owners, first, access));
        }
        return lists;
    }

    private static List<Mr> readMrs(
        final UnsafeBuffer buffer, final ControlFileLayout layout, final long segmentSize, final List<MemsegList> lists)
    {
        final MrRecord record = new MrRecord();
        final List<Mr> mrs = new ArrayList<>();
        final int bitmapBits = layout.mrBitmapLength() * 8;
        final int bitmapAreaEnd = layout.mrBitmapOffset() + layout.mrCapacity() * layout.mrBitmapLength();
        // Every slot, not only those below the high-water mark: a record in use beyond it is itself a fault.
        for (int i = 0; i < layout.mrCapacity(); i++)
        {
            record.wrap(buffer, layout.mrOffset(i));
            final int state = record.state();
            if (state == MrDescriptor.STATE_FREE)
            {
                continue;
            }
            final int msBmpN = record.msBmpN();
            final int bitmapOffset = record.bitmapOffset();
            final boolean external = record.isExternal();
            final BitSet bits = new BitSet();
            int stray = 0;
            final boolean bitmapInBounds = bitmapOffset >= layout.mrBitmapOffset() &&
                bitmapOffset + layout.mrBitmapLength() <= bitmapAreaEnd;
            if (bitmapInBounds)
            {
                final int spanned = clamp(msBmpN, 0, bitmapBits);
                for (int b = 0; b < bitmapBits; b++)
                {
                    if (record.bit(b))
                    {
                        if (b < spanned)
                        {
                            bits.set(b);
                        }
                        else
                        {
                            stray++;
                        }
                    }
                }
            }
            final List<Chunk> chunks = new ArrayList<>();
            final int listIndex = record.listIndex();
            if (external)
            {
                chunks.add(new Chunk(record.start(), record.end()));
            }
            else if (listIndex >= 0 && listIndex < lists.size())
            {
                final long firstVa = lists.get(listIndex).baseVa() + (long)record.msBaseIdx() * segmentSize;
                for (int b = bits.nextSetBit(0); b >= 0; )
                {
                    final int clear = bits.nextClearBit(b);
                    chunks.add(new Chunk(firstVa + b * segmentSize, firstVa + clear * segmentSize));
                    b = bits.nextSetBit(clear);
                }
            }
            mrs.add(new Mr(i, state, record.lkey(), record.rkey(), record.access(), listIndex, record.start(), record.end(),
                record.msBaseIdx(), record.msN(), msBmpN, record.flags(), record.owner(), bitmapOffset,
                record.createdMs(), record.deviceHandle(), bits, stray, List.copyOf(chunks)));
        }
        return mrs;
    }

    private static CacheEntry cacheEntry(final UnsafeBuffer buffer, final int offset, final int i)
    {
        return new CacheEntry(i, SortedTable.start(buffer, offset, i), SortedTable.end(buffer, offset, i),
            SortedTable.lkey(buffer, offset, i), SortedTable.rkey(buffer, offset, i),
            SortedTable.access(buffer, offset, i), SortedTable.mr(buffer, offset, i));
    }

    private static Cache readCache(final UnsafeBuffer buffer, final ControlFileLayout layout, final ControlHeader h)
    {
        final int offset = layout.cacheOffset();
        final int capacity = layout.cacheCapacity();
        final int len = h.cacheLen();
        final int used = clamp(len, 1, capacity);
        final CacheEntry sentinel = cacheEntry(buffer, offset, 0);
        final List<CacheEntry> entries = new ArrayList<>(used - 1);
        for (int i = 1; i < used; i++)
        {
            entries.add(cacheEntry(buffer, offset, i));
        }
        return new Cache(len, capacity, h.cacheOverflow(), sentinel, Collections.unmodifiableList(entries));
    }

    private static List<Client> readClients(final UnsafeBuffer buffer, final ControlFileLayout layout)
    {
        final ClientRecord record = new ClientRecord();
        final List<Client> clients = new ArrayList<>();
        for (int i = 0; i < layout.clientCapacity(); i++)
        {
            record.wrap(buffer, layout.clientOffset(i));
            if (record.state() != ClientDescriptor.STATE_FREE)
            {
                clients.add(new Client(i, record.state(), record.id(), record.pid(), record.uid(), record.gid(),
                    record.connectedMs(), record.name()));
            }
        }
        return clients;
    }

    private static int clamp(final int value, final int min, final int max)
    {
        return Math.max(min, Math.min(value, max));
    }
}
