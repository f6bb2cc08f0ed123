package io.mrd.primary.mr;

import io.mrd.testing.TestDirs;
import io.mrd.layout.Access;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrChunks;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrRecord;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.SortedTable;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.memory.MemoryConfig;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.memory.MemsegList;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registrars;
import org.agrona.concurrent.SystemEpochClock;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.errors.DistinctErrorLog;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;

import static io.mrd.layout.sys.Sizes.hex;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * An MR engine as the daemon builds it (control file, counters, error log, memory manager, soft provider) in a
 * fresh directory on tmpfs, with a second, read-only mapping of the control file read through the secondaries'
 * {@link GlobalCacheReader}; everything is released on close, whatever the test did.
 * <p>
 * {@link #checkInvariants()} checks what must hold between any two engine calls, reading the control file both
 * directly and as a secondary would.
 */
final class EngineFixture implements AutoCloseable
{
    static final long SEGMENT = 2 * Sizes.MIB;

    final EngineOptions options;
    final Path dir;
    final ControlFile ctl;
    final DaemonCounters counters;
    final DistinctErrorLog errorLog;
    final MemoryManager memory;
    final CountingRegistrar registrar;
    final MrEngine engine;
    /** The control file mapped read-only, as a secondary maps it. */
    final ControlFile secondaryView;
    final GlobalCacheReader reader;
    private final List<MemorySegment> externals = new ArrayList<>();
    private boolean closed;

    EngineFixture(final EngineOptions options)
    {
        this.options = options;
        dir = TestDirs.create("mr");
        ControlFile ctl = null;
        MemoryManager memory = null;
        Registrar soft = null;
        MrEngine engine = null;
        ControlFile view = null;
        try
        {
            final ControlFileLayout layout = ControlFileLayout.compute(
                options.lists(), options.segmentsPerList(), options.mrCapacity(), options.cacheCapacity(), 4);
            ctl = ControlFile.create(dir.resolve(ControlFile.FILE_NAME), layout, 4096);
            ctl.header().magic(HeaderDescriptor.MAGIC)
                .pid(ProcessHandle.current().pid())
                .baseVirtaddr(options.base())
                .segmentSize(options.segmentSize())
                .providerName(options.provider().name());
            counters = new DaemonCounters(ctl);
            errorLog = new DistinctErrorLog(ctl.errorLogBuffer(), SystemEpochClock.INSTANCE);
            memory = new MemoryManager(new MemoryConfig(options.base(), options.segmentSize(), options.lists(),
                options.segmentsPerList(), dir.resolve("mem"), Optional.empty(), ctl.buffer(), layout));
            soft = Registrars.create(options.provider());
            Registrars.recordDevices(ctl, soft);
            registrar = new CountingRegistrar(soft);
            engine = new MrEngine(ctl, memory, registrar, counters, errorLog, options.extendToContiguousChunk());
            ctl.header().publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);
            view = ControlFile.openReadOnly(ctl.path());
        }
        catch (final RuntimeException ex)
        {
            closeQuietly(view, engine, soft, memory, ctl);
            TestDirs.deleteTree(dir);
            throw ex;
        }
        this.ctl = ctl;
        this.memory = memory;
        this.engine = engine;
        this.secondaryView = view;
        this.reader = new GlobalCacheReader(view);
    }

    /**
     * Closes the engine (releasing every MR), the provider, the memory, the external mappings and both
     * mappings of the control file, and removes the directory.
     */
    public void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        try
        {
            closeQuietly(engine, registrar, memory);
        }
        finally
        {
            for (final MemorySegment external : externals)
            {
                Posix.munmapQuietly(external.address(), external.byteSize());
            }
            try
            {
                closeQuietly(secondaryView, ctl);
            }
            finally
            {
                TestDirs.deleteTree(dir);
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Memory helpers

    long segmentSize()
    {
        return options.segmentSize();
    }

    /**
     * @return the address of segment {@code index} of list {@code list}.
     */
    long segmentAddress(final int list, final int index)
    {
        return memory.list(list).segmentAddress(index);
    }

    /**
     * Maps fresh anonymous memory of {@code length} bytes wherever the kernel likes, as a secondary's external
     * buffer; unmapped at close unless {@link #unmapExternal} came first.
     */
    MemorySegment mapExternal(final long length)
    {
        final MemorySegment segment = Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE,
            Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
        externals.add(segment);
        return segment;
    }

    void unmapExternal(final MemorySegment segment)
    {
        externals.remove(segment);
        Posix.munmap(segment.address(), segment.byteSize());
    }

    // ---------------------------------------------------------------------------------------------------------
    // Reading the control file directly

    long counter(final MrdCounter counter)
    {
        return counters.get(counter).get();
    }

    long devGen()
    {
        return ctl.header().devGen();
    }

    boolean overflow()
    {
        return ctl.header().cacheOverflow();
    }

    /**
     * Rebuilds the global cache when it has overflowed, through a cache writer of its own: the test is the only
     * thread calling the engine meanwhile, so the engine's cache lock is not needed.
     *
     * @return true when the cache now holds every chunk.
     */
    boolean rebuildIfOverflowed()
    {
        if (overflow())
        {
            final GlobalCacheWriter writer = new GlobalCacheWriter(ctl, counters);
            writer.write(writer::rebuild);
        }
        return !overflow();
    }

    /**
     * @return every MR record below the high-water mark that is not FREE.
     */
    List<RecordedMr> mrs()
    {
        final MrChunks chunks = new MrChunks(ctl);
        final List<RecordedMr> result = new ArrayList<>();
        final int highWater = ctl.header().mrHighWater();
        for (int slot = 0; slot < highWater; slot++)
        {
            final MrRecord r = chunks.record(slot);
            if (r.state() == MrDescriptor.STATE_FREE)
            {
                continue;
            }
            final int state = r.state();
            final int lkey = r.lkey();
            final int rkey = r.rkey();
            final int access = r.access();
            final long start = r.start();
            final long end = r.end();
            final int listIndex = r.listIndex();
            final int msBaseIdx = r.msBaseIdx();
            final int msN = r.msN();
            final int msBmpN = r.msBmpN();
            final boolean external = r.isExternal();
            final int owner = r.owner();
            final List<MrEntry> live = new ArrayList<>();
            for (int from = 0; from != Integer.MAX_VALUE; )
            {
                final MrEntry chunk = new MrEntry();
                from = chunks.next(slot, from, chunk);
                if (chunk.end == 0)
                {
                    break;
                }
                live.add(chunk);
            }
            result.add(new RecordedMr(slot, state, lkey, rkey, access, start, end, listIndex, msBaseIdx, msN, msBmpN,
                external, owner, List.copyOf(live)));
        }
        return result;
    }

    List<RecordedMr> activeMrs()
    {
        return mrs().stream().filter(mr -> mr.state() == MrDescriptor.STATE_ACTIVE).toList();
    }

    /**
     * @return the control file's record of list {@code index}.
     */
    MemsegListRecord segmentRecord(final int index)
    {
        return new MemsegListRecord().wrap(ctl.buffer(), ctl.layout().memsegListOffset(index));
    }

    /**
     * @return the MR record in {@code slot}, whatever its state.
     */
    int state(final int slot)
    {
        return new MrChunks(ctl).record(slot).state();
    }

    /**
     * @return the global cache entries, sentinel excluded, in table order.
     */
    List<MrEntry> cacheEntries()
    {
        final int offset = ctl.layout().cacheOffset();
        final int len = ctl.header().cacheLen();
        final List<MrEntry> entries = new ArrayList<>();
        for (int i = 1; i < len; i++)
        {
            entries.add(new MrEntry().set(SortedTable.start(ctl.buffer(), offset, i),
                SortedTable.end(ctl.buffer(), offset, i), SortedTable.lkey(ctl.buffer(), offset, i),
                SortedTable.rkey(ctl.buffer(), offset, i), SortedTable.access(ctl.buffer(), offset, i),
                SortedTable.mr(ctl.buffer(), offset, i)));
        }
        return entries;
    }

    /**
     * @return a copy of everything a failed call must leave as it was: the MR table, its bitmaps, the global
     * cache and the header fields that describe them.
     */
    byte[] tables()
    {
        final ControlFileLayout layout = ctl.layout();
        final int from = layout.mrTableOffset();
        final int to = layout.cacheOffset() + layout.cacheCapacity() * CacheEntryDescriptor.ENTRY_LENGTH;
        final byte[] bytes = new byte[to - from + 24];
        ctl.buffer().getBytes(from, bytes, 0, to - from);
        final UnsafeBuffer tail = new UnsafeBuffer(bytes);
        tail.putInt(to - from, ctl.header().cacheLen());
        tail.putInt(to - from + 4, ctl.header().cacheOverflow() ? 1 : 0);
        tail.putInt(to - from + 8, ctl.header().mrHighWater());
        tail.putLong(to - from + 16, ctl.header().devGen());
        return bytes;
    }

    void assertTablesUnchanged(final byte[] before, final String what)
    {
        final byte[] after = tables();
        if (!Arrays.equals(before, after))
        {
            assertArrayEquals(before, after, what + " changed the MR table or the global cache:\n" + describe());
        }
    }

    /**
     * @return the address's lkey according to the ACTIVE MRs' live chunks, or null when none holds it.
     */
    static Integer expectedLkey(final List<RecordedMr> active, final long address)
    {
        for (final RecordedMr mr : active)
        {
            for (final MrEntry chunk : mr.chunks())
            {
                if (address >= chunk.start && address < chunk.end)
                {
                    return mr.lkey();
                }
            }
        }
        return null;
    }

    /**
     * Looks the address up as a secondary would.
     *
     * @return the lkey, or null when not found.
     */
    Integer secondaryLookup(final long address)
    {
        final MrEntry out = new MrEntry();
        if (!reader.lookup(address, out))
        {
            return null;
        }
        assertTrue(address >= out.start && address < out.end, "entry " + out + " returned for " + hex(address));
        return out.lkey;
    }

    /**
     * Looks the address up through the engine (under its cache lock).
     *
     * @return the lkey, or null when not found.
     */
    Integer engineLookup(final long address)
    {
        final MrEntry out = new MrEntry();
        if (!engine.lookup(address, out))
        {
            return null;
        }
        assertTrue(address >= out.start && address < out.end, "entry " + out + " returned for " + hex(address));
        return out.lkey;
    }

    /**
     * Checks what must hold between any two engine calls (after the garbage collection that freeing and
     * deregistration end with):
     * <ul>
     *   <li>no DETACHED record is left; every ACTIVE record is consistent (msN = bits set, range = msBmpN
     *   segments from msBaseIdx, live segments allocated);</li>
     *   <li>the global cache is sorted and non-overlapping; every entry lies inside exactly one ACTIVE MR's live
     *   chunk and carries its lkey; while the cache has not overflowed it holds exactly those chunks;</li>
     *   <li>no two ACTIVE MRs share a live segment (or byte, for external memory);</li>
     *   <li>the provider pins exactly the ACTIVE MRs' ranges, it made as many live registrations as there are
     *   ACTIVE MRs, and the counters agree;</li>
     *   <li>no segment is held (every registration has returned and released its hold);</li>
     *   <li>lookups through the secondaries' reader and through the engine agree with the live chunks at every
     *   segment of every list and at the edges of every chunk.</li>
     * </ul>
     */
    void checkInvariants()
    {
        // Every record that is not FREE must be ACTIVE: the calls that detach MRs collect them before returning.
        final List<RecordedMr> active = mrs();
        final String state = describe();
        for (final RecordedMr mr : active)
        {
            assertEquals(MrDescriptor.STATE_ACTIVE, mr.state(), "record left DETACHED after GC: " + mr + "\n" + state);
        }
        final MrChunks chunks = new MrChunks(ctl);
        for (int slot = ctl.header().mrHighWater(); slot < ctl.layout().mrCapacity(); slot++)
        {
            assertEquals(MrDescriptor.STATE_FREE, chunks.record(slot).state(), "record above high water " + slot);
        }

        // Records.
        final long seg = options.segmentSize();
        long pinned = 0;
        for (final RecordedMr mr : active)
        {
            pinned += mr.length();
            assertFalse(mr.chunks().isEmpty(), "ACTIVE MR without live chunks: " + mr + "\n" + state);
            assertEquals(Access.isRemote(mr.access()), mr.rkey() != Access.NO_RKEY,
                "rkey of an MR is 0 exactly when it has no remote access: " + mr + "\n" + state);
            assertEquals(Access.LOCAL_WRITE, mr.access() & ~Access.REMOTE, "access of " + mr + "\n" + state);
            if (mr.external())
            {
                assertEquals(1, mr.chunks().size(), state);
                assertEquals(mr.start(), mr.chunks().getFirst().start, state);
                assertEquals(mr.end(), mr.chunks().getFirst().end, state);
                continue;
            }
            final MemsegList list = memory.list(mr.listIndex());
            assertEquals(list.segmentAddress(mr.msBaseIdx()), mr.start(), "start of " + mr);
            assertEquals((long)mr.msBmpN() * seg, mr.length(), "msBmpN of " + mr);
            long liveSegments = 0;
            for (final MrEntry chunk : mr.chunks())
            {
                assertEquals(mr.lkey(), chunk.lkey, state);
                assertTrue(chunk.start >= mr.start() && chunk.end <= mr.end(), "chunk " + chunk + " outside " + mr);
                for (long a = chunk.start; a < chunk.end; a += seg)
                {
                    liveSegments++;
                    assertTrue(list.isAllocated(list.segmentIndex(a)),
                        "live segment " + hex(a) + " of " + mr + " is not allocated\n" + state);
                    assertEquals(mr.access(), list.access(list.segmentIndex(a)),
                        "live segment " + hex(a) + " has another access than its " + mr + "\n" + state);
                    assertEquals(mr.access(), segmentRecord(mr.listIndex()).access(list.segmentIndex(a)),
                        "the control file's access of live segment " + hex(a) + " of " + mr + "\n" + state);
                }
            }
            assertEquals(mr.msN(), liveSegments, "msN of " + mr);
        }

        // No segment in two MRs.
        final List<MrEntry> liveChunks = new ArrayList<>();
        active.forEach(mr -> liveChunks.addAll(mr.chunks()));
        liveChunks.sort(Comparator.comparingLong(e -> e.start));
        for (int i = 1; i < liveChunks.size(); i++)
        {
            assertTrue(liveChunks.get(i - 1).end <= liveChunks.get(i).start,
                "live chunks overlap: " + liveChunks.get(i - 1) + " and " + liveChunks.get(i) + "\n" + state);
        }

        // The global cache.
        final List<MrEntry> cache = cacheEntries();
        for (int i = 0; i < cache.size(); i++)
        {
            final MrEntry e = cache.get(i);
            assertTrue(e.start < e.end, "empty cache entry " + e + "\n" + state);
            if (i > 0)
            {
                assertTrue(cache.get(i - 1).end <= e.start, "cache unsorted or overlapping at " + i + "\n" + state);
            }
            int containing = 0;
            for (final RecordedMr mr : active)
            {
                for (final MrEntry chunk : mr.chunks())
                {
                    if (e.start >= chunk.start && e.end <= chunk.end)
                    {
                        containing++;
                        assertEquals(mr.lkey(), e.lkey, "lkey of cache entry " + e + "\n" + state);
                        assertEquals(mr.rkey(), e.rkey, "rkey of cache entry " + e + "\n" + state);
                        assertEquals(mr.access(), e.access, "access of cache entry " + e + "\n" + state);
                        assertEquals(mr.slot(), e.mr, "MR index of cache entry " + e + "\n" + state);
                    }
                }
            }
            assertEquals(1, containing, "cache entry " + e + " is in " + containing + " live chunks\n" + state);
        }
        if (!overflow())
        {
            assertEquals(liveChunks.size(), cache.size(), "a complete cache holds every live chunk\n" + state);
            for (int i = 0; i < cache.size(); i++)
            {
                assertEquals(liveChunks.get(i).start, cache.get(i).start, state);
                assertEquals(liveChunks.get(i).end, cache.get(i).end, state);
            }
        }

        // The provider and the counters.
        assertEquals(pinned, registrar.pinnedBytes(), "pinned bytes against the ACTIVE MRs\n" + state);
        assertEquals(pinned, counter(MrdCounter.BYTES_PINNED), "BYTES_PINNED counter");
        assertEquals(pinned, counter(MrdCounter.BYTES_REGISTERED), "BYTES_REGISTERED counter");
        assertEquals(active.size(), counter(MrdCounter.MRS_ACTIVE), "MRS_ACTIVE counter");
        assertEquals(active.size(), registrar.live(), "live registrations against ACTIVE MRs");
        assertEquals(0, ctl.seqLock().sequence() & 1, "seqlock left odd");
        assertEquals(0, memory.holdCount(), "segment holds left once every registration has returned\n" + state);

        // Lookups: every segment of every list, and the edges of every chunk.
        final List<Long> probes = new ArrayList<>();
        for (int l = 0; l < options.lists(); l++)
        {
            for (int s = 0; s < options.segmentsPerList(); s++)
            {
                probes.add(segmentAddress(l, s));
                probes.add(segmentAddress(l, s) + seg / 2 + 8);
            }
            probes.add(memory.list(l).endVa());
        }
        for (final MrEntry chunk : liveChunks)
        {
            probes.add(chunk.start);
            probes.add(chunk.end - 1);
            probes.add(chunk.end);
            probes.add(chunk.start - 1);
        }
        for (final long address : probes)
        {
            final Integer expected = expectedLkey(active, address);
            assertEquals(expected, secondaryLookup(address), "secondary lookup of " + hex(address) + "\n" + state);
            assertEquals(expected, engineLookup(address), "engine lookup of " + hex(address) + "\n" + state);
        }
    }

    /**
     * @return the MR table and the cache, for failure messages.
     */
    String describe()
    {
        final StringBuilder sb = new StringBuilder();
        sb.append("devGen ").append(devGen()).append(" overflow ").append(overflow()).append(" pinned ")
            .append(Sizes.format(registrar.pinnedBytes())).append('\n');
        for (final RecordedMr mr : mrs())
        {
            sb.append("  MR ").append(mr.slot()).append(' ').append(MrDescriptor.stateName(mr.state()))
                .append(" lkey ").append(hex(mr.lkey() & 0xFFFF_FFFFL)).append(" [").append(hex(mr.start()))
                .append(", ").append(hex(mr.end())).append(") list ").append(mr.listIndex()).append(" base ")
                .append(mr.msBaseIdx()).append(" msN ").append(mr.msN()).append(" msBmpN ").append(mr.msBmpN())
                .append(mr.external() ? " external" : "").append(" chunks ").append(mr.chunks()).append('\n');
        }
        sb.append("  cache ").append(cacheEntries()).append('\n');
        return sb.toString();
    }


    // ---------------------------------------------------------------------------------------------------------

    private static void closeQuietly(final AutoCloseable... closeables)
    {
        RuntimeException first = null;
        for (final AutoCloseable closeable : closeables)
        {
            if (null == closeable)
            {
                continue;
            }
            try
            {
                closeable.close();
            }
            catch (final Exception ex)
            {
                if (null == first)
                {
                    first = ex instanceof RuntimeException r ? r : new IllegalStateException(ex);
                }
                else
                {
                    first.addSuppressed(ex);
                }
            }
        }
        if (null != first)
        {
            throw first;
        }
    }
}
