package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.FreedRange;
import io.mrd.testing.BaseAddresses;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.ShrinkingMode;
import net.jqwik.api.Tuple;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static io.mrd.layout.sys.Sizes.hex;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Random sequences of allocations, creates, frees (whole and partial), external registrations and
 * deregistrations and client reclaims, run against the engine and against a model made of plain collections
 * (an owner per segment, the MRs as sets of live segments). After every step the engine's MR table, global
 * cache, devGen, pinned bytes and counters must agree with the model and with the invariants of
 * {@link EngineFixture#checkInvariants()}, read both directly and through the secondaries' reader.
 * <p>
 * Allocations and external registrations get one of {@link #ACCESSES}: the model extends a chunk only over
 * segments of the same access (and, for remote access, of the same allocation), so two allocations of different
 * access side by side in a list never share an MR, and an MR with remote access goes as soon as any segment of
 * its range is freed.
 */
class MrEngineModelTest
{
    private static final long BASE = BaseAddresses.next();
    private static final int LISTS = 2;
    private static final int SEGMENTS = 16;
    private static final long SEG = EngineFixture.SEGMENT;
    private static final int MAX_EXTERNALS = 3;
    private static final int[] ACCESSES =
    {
        Access.LOCAL, Access.LOCAL_WRITE | Access.REMOTE_READ, Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ
    };

    enum Kind
    {
        ALLOC, CREATE, CREATE_OUTSIDE, FREE, FREE_PART, REG_EXTERNAL, DEREG_EXTERNAL, RECLAIM, CONCURRENT_CREATES
    }

    /** Threads for {@link Kind#CONCURRENT_CREATES}; daemon threads, so that a failed property cannot hang the JVM. */
    private static final ExecutorService CREATORS = Executors.newFixedThreadPool(4, runnable ->
    {
        final Thread thread = new Thread(runnable, "model-creator");
        thread.setDaemon(true);
        return thread;
    });
    private static final long DEADLINE_SECONDS = 60;
    /** Injected provider latency while creates run concurrently, so that they overlap in flight. */
    private static final long LATENCY_NANOS = 500_000;

    record Op(Kind kind, int a, int b, int c)
    {
    }

    @Provide
    Arbitrary<List<Op>> ops()
    {
        final Arbitrary<Op> op = Combinators.combine(
            Arbitraries.frequency(
                Tuple.of(8, Kind.ALLOC),
                Tuple.of(12, Kind.CREATE),
                Tuple.of(1, Kind.CREATE_OUTSIDE),
                Tuple.of(3, Kind.FREE),
                Tuple.of(3, Kind.FREE_PART),
                Tuple.of(2, Kind.REG_EXTERNAL),
                Tuple.of(2, Kind.DEREG_EXTERNAL),
                Tuple.of(1, Kind.RECLAIM),
                Tuple.of(4, Kind.CONCURRENT_CREATES)),
            Arbitraries.integers().between(0, 1 << 20),
            Arbitraries.integers().between(0, 1 << 20),
            Arbitraries.integers().between(0, 1 << 20)).as(Op::new);
        return op.list().ofMinSize(20).ofMaxSize(60);
    }

    @Property(tries = 75, shrinking = ShrinkingMode.BOUNDED)
    void engineAgreesWithTheModelRegisteringWholeChunks(@ForAll("ops") final List<Op> ops) throws Exception
    {
        run(ops, true, Long.MAX_VALUE);
    }

    @Property(tries = 75, shrinking = ShrinkingMode.BOUNDED)
    void engineAgreesWithTheModelRegisteringSingleSegments(@ForAll("ops") final List<Op> ops) throws Exception
    {
        run(ops, false, Long.MAX_VALUE);
    }

    /** A provider whose max_mr_size is three and a half segments: chunks longer than three are split. */
    @Property(tries = 50, shrinking = ShrinkingMode.BOUNDED)
    void engineAgreesWithTheModelSplittingAtTheMaxRegionLength(@ForAll("ops") final List<Op> ops) throws Exception
    {
        run(ops, true, 3 * SEG + SEG / 2);
    }

    private static void run(final List<Op> ops, final boolean extend, final long maxRegionLength) throws Exception
    {
        try (EngineFixture f = new EngineFixture(EngineOptions.at(BASE).geometry(LISTS, SEGMENTS, SEG)
            .extend(extend)))
        {
            f.registrar.maxRegionLength = maxRegionLength;
            final Model model = new Model(f);
            f.checkInvariants();
            int step = 0;
            for (final Op op : ops)
            {
                final long devGenBefore = f.devGen();
                final String what = "step " + step + " " + op + " (--mr-ext-memseg " + extend + ", max region " +
                    maxRegionLength + ")";
                final boolean invalidating = switch (op.kind())
                {
                    case ALLOC -> model.allocate(op);
                    case CREATE -> model.create(op);
                    case CREATE_OUTSIDE -> model.createOutside(op);
                    case FREE -> model.free(op, false);
                    case FREE_PART -> model.free(op, true);
                    case REG_EXTERNAL -> model.registerExternal(op);
                    case DEREG_EXTERNAL -> model.deregisterExternal(op);
                    case RECLAIM -> model.reclaim(op);
                    case CONCURRENT_CREATES -> model.createConcurrently(op);
                };
                final long devGen = f.devGen();
                assertTrue(devGen >= devGenBefore, what + ": devGen went back from " + devGenBefore + " to " + devGen);
                if (invalidating)
                {
                    assertTrue(devGen > devGenBefore, what + ": an invalidating event left devGen at " + devGen);
                }
                f.checkInvariants();
                model.compare(what);
                step++;
            }
        }
    }

    /**
     * The reference model: who owns each segment, which MR (by lkey) each segment is live in, the MRs' ranges,
     * the allocations still held, the externals and the addresses creates were asked for.
     */
    private static final class Model
    {
        record ModelMr(int lkey, int access, long start, long end, boolean external, Set<Long> live)
        {
        }

        record Alloc(int list, int first, int n, int owner, int access)
        {
        }

        record External(MemorySegment memory, int lkey, int owner)
        {
        }

        private final EngineFixture f;
        private final int[][] owner = new int[LISTS][SEGMENTS];
        /** Access of each allocated segment, and the first segment of its allocation. */
        private final int[][] access = new int[LISTS][SEGMENTS];
        private final int[][] allocFirst = new int[LISTS][SEGMENTS];
        /** lkey of the MR each segment is live in, or null. */
        private final Integer[][] mrOf = new Integer[LISTS][SEGMENTS];
        private final Map<Integer, ModelMr> mrs = new LinkedHashMap<>();
        private final List<Alloc> allocations = new ArrayList<>();
        private final List<External> externals = new ArrayList<>();
        /** Address a create was asked for → the lkey it returned, while its segment stays allocated. */
        private final Map<Long, Integer> created = new HashMap<>();
        /** Segment addresses freed since they were last allocated. */
        private final Set<Long> freed = new HashSet<>();

        Model(final EngineFixture f)
        {
            this.f = f;
        }

        private long address(final int list, final int segment)
        {
            return f.segmentAddress(list, segment);
        }

        boolean allocate(final Op op)
        {
            final int n = 1 + op.a() % 6;
            final int who = 1 + op.b() % 3;
            final int wanted = ACCESSES[op.c() % ACCESSES.length];
            int list = -1;
            int first = -1;
            for (int l = 0; l < LISTS && list < 0; l++)
            {
                for (int s = 0; s + n <= SEGMENTS; s++)
                {
                    boolean free = true;
                    for (int i = s; i < s + n && free; i++)
                    {
                        free = owner[l][i] == 0;
                    }
                    if (free)
                    {
                        list = l;
                        first = s;
                        break;
                    }
                }
            }
            final long allocsBefore = f.counter(MrdCounter.ALLOCS);
            if (list < 0)
            {
                final MrdException ex = assertThrows(MrdException.class,
                    () -> f.engine.allocate(n * SEG, who, wanted));
                assertEquals(ErrorCode.ENOMEM, ex.code(), ex.oneLine());
                return false;
            }
            final Allocation a = f.engine.allocate(n * SEG, who, wanted);
            assertEquals(address(list, first), a.address(), "first fit");
            assertEquals(n, a.segmentCount());
            assertEquals(wanted, a.access(), "access of " + a);
            assertEquals(allocsBefore + 1, f.counter(MrdCounter.ALLOCS));
            for (int i = first; i < first + n; i++)
            {
                owner[list][i] = who;
                access[list][i] = wanted;
                allocFirst[list][i] = first;
                freed.remove(address(list, i));
            }
            allocations.add(new Alloc(list, first, n, who, wanted));
            return false;
        }

        boolean create(final Op op)
        {
            final List<int[]> allocated = new ArrayList<>();
            for (int l = 0; l < LISTS; l++)
            {
                for (int s = 0; s < SEGMENTS; s++)
                {
                    if (owner[l][s] != 0)
                    {
                        allocated.add(new int[]{l, s});
                    }
                }
            }
            if (allocated.isEmpty())
            {
                return createOutside(op);
            }
            final int[] pick = allocated.get(op.a() % allocated.size());
            final int list = pick[0];
            final int segment = pick[1];
            final long address = address(list, segment) + (op.b() % SEG);
            final long requests = f.counter(MrdCounter.CREATE_REQUESTS);

            if (mrOf[list][segment] != null)
            {
                // Registered already: the existing entry comes back and nothing changes.
                final int lkey = mrOf[list][segment];
                final byte[] before = f.tables();
                final int registrations = f.registrar.registrations.get();
                final MrEntry entry = f.engine.createMr(address, owner[list][segment]);
                assertEquals(lkey, entry.lkey, "lkey of an address registered already " + hex(address));
                assertTrue(entry.containsRange(address, 1), entry + " for " + hex(address));
                f.assertTablesUnchanged(before, "a create for a registered address");
                assertEquals(registrations, f.registrar.registrations.get(), "registered twice");
                created.put(address, lkey);
                assertEquals(requests + 1, f.counter(MrdCounter.CREATE_REQUESTS));
                return false;
            }

            // The range the engine must register: the chunk (or the segment) minus what is registered already,
            // trimmed to the first and last uncovered segment.
            int chunkFirst = segment;
            int chunkLast = segment;
            if (f.options.extendToContiguousChunk())
            {
                while (chunkFirst > 0 && mayShareMr(list, chunkFirst - 1, segment))
                {
                    chunkFirst--;
                }
                while (chunkLast + 1 < SEGMENTS && mayShareMr(list, chunkLast + 1, segment))
                {
                    chunkLast++;
                }
            }
            final TreeSet<Integer> uncovered = new TreeSet<>();
            for (int s = chunkFirst; s <= chunkLast; s++)
            {
                if (mrOf[list][s] == null)
                {
                    uncovered.add(s);
                }
            }
            // Longer than the provider takes: a window of the longest it takes, at the address where it fits.
            final int max = maxSegments();
            if (uncovered.last() - uncovered.first() + 1 > max)
            {
                final int windowStart = Math.max(uncovered.first(), Math.min(segment, uncovered.last() + 1 - max));
                uncovered.removeIf(s -> s < windowStart || s >= windowStart + max);
            }
            int entryFirst = segment;
            while (entryFirst > chunkFirst && uncovered.contains(entryFirst - 1))
            {
                entryFirst--;
            }
            int entryLast = segment;
            while (entryLast < chunkLast && uncovered.contains(entryLast + 1))
            {
                entryLast++;
            }

            final long pinnedBefore = f.registrar.pinnedBytes();
            final MrEntry entry = f.engine.createMr(address, owner[list][segment]);
            assertTrue(entry.containsRange(address, 1), entry + " does not contain " + hex(address));
            assertEquals(address(list, entryFirst), entry.start, "entry start for " + hex(address) + ": " + entry);
            assertEquals(address(list, entryLast) + SEG, entry.end, "entry end for " + hex(address) + ": " + entry);
            assertFalse(mrs.containsKey(entry.lkey), "lkey " + hex(entry.lkey) + " is already live");
            assertKeys(entry, access[list][segment], "entry for " + hex(address));
            final long start = address(list, uncovered.first());
            final long end = address(list, uncovered.last()) + SEG;
            final Set<Long> live = new HashSet<>();
            for (final int s : uncovered)
            {
                live.add(address(list, s));
                mrOf[list][s] = entry.lkey;
            }
            mrs.put(entry.lkey, new ModelMr(entry.lkey, access[list][segment], start, end, false, live));
            created.put(address, entry.lkey);
            assertEquals(pinnedBefore + (end - start), f.registrar.pinnedBytes(), "pinned after create");
            assertEquals(requests + 1, f.counter(MrdCounter.CREATE_REQUESTS));
            return false;
        }

        /**
         * Whether {@code neighbour} may be in the MR of {@code segment}: allocated, of the same access, and for
         * remote access of the same allocation.
         */
        private boolean mayShareMr(final int list, final int neighbour, final int segment)
        {
            return owner[list][neighbour] != 0 && access[list][neighbour] == access[list][segment] &&
                (!Access.isRemote(access[list][segment]) || allocFirst[list][neighbour] == allocFirst[list][segment]);
        }

        private static void assertKeys(final MrEntry entry, final int expectedAccess, final String what)
        {
            assertEquals(expectedAccess, entry.access, "access of " + what + ": " + entry);
            assertEquals(Access.isRemote(expectedAccess), entry.rkey != Access.NO_RKEY,
                "an rkey exactly for remote access: " + what + ": " + entry);
        }

        private int maxSegments()
        {
            return (int)Math.min(f.registrar.maxRegionLength / SEG, SEGMENTS);
        }

        /**
         * Two to four creates at once, with provider latency so that they overlap in flight. Which MRs come out
         * depends on the interleaving, so the model checks what any interleaving must give and then adopts the
         * engine's new MRs: each create returns an entry holding its address, which lookups then find; the MRs
         * that existed are unchanged; each new MR was registered once, covers only segments that were
         * allocated, uncovered and of one chunk, is trimmed to live segments at both ends and fits the limit.
         */
        boolean createConcurrently(final Op op) throws Exception
        {
            final List<int[]> allocated = new ArrayList<>();
            for (int l = 0; l < LISTS; l++)
            {
                for (int s = 0; s < SEGMENTS; s++)
                {
                    if (owner[l][s] != 0)
                    {
                        allocated.add(new int[]{l, s});
                    }
                }
            }
            if (allocated.isEmpty())
            {
                return createOutside(op);
            }
            final java.util.Random random = new java.util.Random(op.a() * 31L + op.b());
            final int creates = 2 + op.c() % 3;
            final List<Long> addresses = new ArrayList<>();
            for (int i = 0; i < creates; i++)
            {
                final int[] pick = allocated.get(random.nextInt(allocated.size()));
                addresses.add(address(pick[0], pick[1]) + (random.nextLong(SEG) & ~7L));
            }
            final Map<Integer, ModelMr> before = new LinkedHashMap<>(mrs);
            final int registrationsBefore = f.registrar.registrations.get();

            f.registrar.beforeRegister = (address, length) -> LockSupport.parkNanos(LATENCY_NANOS);
            final List<MrEntry> entries = new ArrayList<>();
            try
            {
                final CyclicBarrier start = new CyclicBarrier(creates);
                final List<Future<MrEntry>> results = new ArrayList<>();
                for (final long address : addresses)
                {
                    final int who = owner[f.memory.listOf(address).index()][segmentIndex(address)];
                    results.add(CREATORS.submit(() ->
                    {
                        start.await(DEADLINE_SECONDS, TimeUnit.SECONDS);
                        return f.engine.createMr(address, who);
                    }));
                }
                for (final Future<MrEntry> result : results)
                {
                    entries.add(result.get(DEADLINE_SECONDS, TimeUnit.SECONDS));
                }
            }
            finally
            {
                f.registrar.beforeRegister = (address, length) -> {};
            }

            final String state = "concurrent creates at " + addresses.stream().map(Sizes::hex).toList() + "\n" +
                f.describe();
            int added = 0;
            for (final RecordedMr mr : f.activeMrs())
            {
                final ModelMr known = before.get(mr.lkey());
                if (null != known)
                {
                    continue;
                }
                added++;
                assertFalse(mr.external(), state);
                final int list = mr.listIndex();
                final int first = mr.msBaseIdx();
                final int last = first + mr.msBmpN() - 1;
                assertTrue(mr.msBmpN() <= maxSegments(), "MR longer than the limit: " + mr + "\n" + state);
                final Set<Long> live = new HashSet<>();
                for (final MrEntry chunk : mr.chunks())
                {
                    for (long a = chunk.start; a < chunk.end; a += SEG)
                    {
                        live.add(a);
                    }
                }
                assertTrue(live.contains(address(list, first)) && live.contains(address(list, last)),
                    "MR not trimmed to live segments: " + mr + "\n" + state);
                for (int s = first; s <= last; s++)
                {
                    assertTrue(owner[list][s] != 0 && mayShareMr(list, s, first),
                        "MR range leaves its chunk at segment " + s + ": " + mr + "\n" + state);
                    if (live.contains(address(list, s)))
                    {
                        assertNull(mrOf[list][s], "segment " + s + " registered twice: " + mr + "\n" + state);
                        mrOf[list][s] = mr.lkey();
                    }
                }
                mrs.put(mr.lkey(), new ModelMr(mr.lkey(), access[list][first], mr.start(), mr.end(), false, live));
            }
            assertEquals(registrationsBefore + added, f.registrar.registrations.get(),
                "registrations against new MRs\n" + state);
            for (int i = 0; i < creates; i++)
            {
                final long address = addresses.get(i);
                final MrEntry entry = entries.get(i);
                assertTrue(entry.containsRange(address, 1), entry + " for " + hex(address) + "\n" + state);
                assertEquals(mrOf[f.memory.listOf(address).index()][segmentIndex(address)], entry.lkey,
                    "lkey returned for " + hex(address) + "\n" + state);
                created.put(address, entry.lkey);
            }
            return false;
        }

        private int segmentIndex(final long address)
        {
            return f.memory.listOf(address).segmentIndex(address);
        }

        boolean createOutside(final Op op)
        {
            final List<Long> candidates = new ArrayList<>();
            for (int l = 0; l < LISTS; l++)
            {
                for (int s = 0; s < SEGMENTS; s++)
                {
                    if (owner[l][s] == 0)
                    {
                        candidates.add(address(l, s) + op.b() % SEG);
                    }
                }
            }
            candidates.add(BASE - 1 - op.b() % SEG);
            candidates.add(f.memory.list(0).endVa() + op.b() % SEG);
            candidates.add(f.memory.endVirtaddr() + op.b() % SEG);
            final long address = candidates.get(op.a() % candidates.size());

            final byte[] before = f.tables();
            final long pinned = f.registrar.pinnedBytes();
            final long errors = f.counter(MrdCounter.CREATE_ERRORS_ENXIO);
            final int registrations = f.registrar.registrations.get() + f.registrar.failures.get();
            final MrdException ex = assertThrows(MrdException.class, () -> f.engine.createMr(address, 1),
                "create for " + hex(address) + ", outside every allocation");
            assertEquals(ErrorCode.ENXIO, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().contains(hex(address)), "the message names the address: " + ex.oneLine());
            f.assertTablesUnchanged(before, "a create outside managed memory");
            assertEquals(pinned, f.registrar.pinnedBytes());
            assertEquals(registrations, f.registrar.registrations.get() + f.registrar.failures.get(),
                "the provider was asked to register");
            assertEquals(errors + 1, f.counter(MrdCounter.CREATE_ERRORS_ENXIO));
            return false;
        }

        boolean free(final Op op, final boolean part)
        {
            if (allocations.isEmpty())
            {
                return allocate(op);
            }
            final Alloc alloc = allocations.get(op.a() % allocations.size());
            int first = alloc.first();
            int n = alloc.n();
            if (part)
            {
                final int offset = op.b() % alloc.n();
                first = alloc.first() + offset;
                n = 1 + op.c() % (alloc.n() - offset);
            }
            final long frees = f.counter(MrdCounter.FREES);
            final FreedRange range = f.engine.freeMemory(address(alloc.list(), first), n * SEG, alloc.owner());
            assertEquals(address(alloc.list(), first), range.address());
            assertEquals(n * SEG, range.length());
            assertEquals(frees + 1, f.counter(MrdCounter.FREES));

            allocations.remove(alloc);
            if (first > alloc.first())
            {
                allocations.add(new Alloc(alloc.list(), alloc.first(), first - alloc.first(), alloc.owner(),
                    alloc.access()));
            }
            if (first + n < alloc.first() + alloc.n())
            {
                allocations.add(new Alloc(alloc.list(), first + n, alloc.first() + alloc.n() - first - n,
                    alloc.owner(), alloc.access()));
                for (int s = first + n; s < alloc.first() + alloc.n(); s++)
                {
                    allocFirst[alloc.list()][s] = first + n;
                }
            }
            return freeSegments(alloc.list(), first, n);
        }

        /**
         * The memory free event in the model.
         *
         * @return whether a segment live in some MR went (an invalidating event).
         */
        private boolean freeSegments(final int list, final int first, final int n)
        {
            boolean invalidating = false;
            for (int s = first; s < first + n; s++)
            {
                owner[list][s] = 0;
                final long segmentAddress = address(list, s);
                freed.add(segmentAddress);
                created.keySet().removeIf(a -> a >= segmentAddress && a < segmentAddress + SEG);
                // An MR with remote access goes with any segment of its range, live in it or not.
                for (final ModelMr mr : List.copyOf(mrs.values()))
                {
                    if (!mr.external() && Access.isRemote(mr.access()) && segmentAddress >= mr.start() &&
                        segmentAddress < mr.end())
                    {
                        invalidating = true;
                        drop(mr);
                    }
                }
                final Integer lkey = mrOf[list][s];
                if (lkey != null)
                {
                    invalidating = true;
                    mrOf[list][s] = null;
                    final ModelMr mr = mrs.get(lkey);
                    mr.live().remove(segmentAddress);
                    if (mr.live().isEmpty())
                    {
                        mrs.remove(lkey);
                    }
                }
            }
            return invalidating;
        }

        /** The MR goes whole: its live segments are registered no more, and their creates are forgotten. */
        private void drop(final ModelMr mr)
        {
            mrs.remove(mr.lkey());
            for (final long live : mr.live())
            {
                final int list = f.memory.listOf(live).index();
                mrOf[list][f.memory.list(list).segmentIndex(live)] = null;
                created.keySet().removeIf(a -> a >= live && a < live + SEG);
            }
        }

        boolean registerExternal(final Op op)
        {
            if (externals.size() >= MAX_EXTERNALS)
            {
                return deregisterExternal(op);
            }
            final long length = (1 + op.a() % 4) * Sizes.MIB;
            final int who = 1 + op.b() % 3;
            final MemorySegment memory = f.mapExternal(length);
            final long devGen = f.devGen();
            final int wanted = ACCESSES[op.c() % ACCESSES.length];
            final MrEntry entry = f.engine.registerExternal(memory.address(), length, who, wanted);
            assertEquals(memory.address(), entry.start);
            assertEquals(memory.address() + length, entry.end);
            assertFalse(mrs.containsKey(entry.lkey), "lkey " + hex(entry.lkey) + " is already live");
            assertKeys(entry, wanted, "external memory");
            assertEquals(devGen, f.devGen(), "registering external memory invalidates nothing");
            mrs.put(entry.lkey, new ModelMr(entry.lkey, wanted, entry.start, entry.end, true,
                new HashSet<>(Set.of(entry.start))));
            externals.add(new External(memory, entry.lkey, who));
            created.put(entry.start + op.c() % length, entry.lkey);
            return false;
        }

        boolean deregisterExternal(final Op op)
        {
            if (externals.isEmpty())
            {
                // Nothing registered there: ENOENT, nothing changes.
                final long address = BASE - SEG;
                final byte[] before = f.tables();
                final MrdException ex = assertThrows(MrdException.class,
                    () -> f.engine.deregisterExternal(address, 1));
                assertEquals(ErrorCode.ENOENT, ex.code(), ex.oneLine());
                f.assertTablesUnchanged(before, "deregistering what is not registered");
                return false;
            }
            final External external = externals.get(op.a() % externals.size());
            final long address = external.memory().address();
            final int stranger = external.owner() % 3 + 1;
            if (op.c() % 4 == 0)
            {
                final byte[] before = f.tables();
                final MrdException ex = assertThrows(MrdException.class,
                    () -> f.engine.deregisterExternal(address, stranger), "client " + stranger + " deregistering " +
                    "client " + external.owner() + "'s external memory");
                assertEquals(ErrorCode.EPERM, ex.code(), ex.oneLine());
                f.assertTablesUnchanged(before, "a refused deregistration");
                return false;
            }
            f.engine.deregisterExternal(address, op.b() % 5 == 0 ? MemsegListDescriptor.OWNER_DAEMON : external.owner());
            dropExternal(external);
            return true;
        }

        private void dropExternal(final External external)
        {
            externals.remove(external);
            mrs.remove(external.lkey());
            final long start = external.memory().address();
            final long end = start + external.memory().byteSize();
            created.keySet().removeIf(a -> a >= start && a < end);
            f.unmapExternal(external.memory());
        }

        boolean reclaim(final Op op)
        {
            final int who = 1 + op.b() % 3;
            final List<FreedRange> ranges = f.engine.reclaim(who);
            boolean invalidating = false;
            int segments = 0;
            for (int l = 0; l < LISTS; l++)
            {
                for (int s = 0; s < SEGMENTS; s++)
                {
                    if (owner[l][s] == who)
                    {
                        segments++;
                        invalidating |= freeSegments(l, s, 1);
                    }
                }
            }
            assertEquals(segments, ranges.stream().mapToInt(FreedRange::segmentCount).sum(), "segments reclaimed");
            allocations.removeIf(a -> a.owner() == who);
            for (final External external : List.copyOf(externals))
            {
                if (external.owner() == who)
                {
                    invalidating = true;
                    dropExternal(external);
                }
            }
            return invalidating;
        }

        /**
         * The engine's ACTIVE MRs are the model's, segment for segment; every address a create was asked for
         * still finds its lkey; freed segments are found by no lookup.
         */
        void compare(final String what)
        {
            final String state = what + "\n" + f.describe();
            final Map<Integer, RecordedMr> active = new HashMap<>();
            for (final RecordedMr mr : f.activeMrs())
            {
                assertNull(active.put(mr.lkey(), mr), "two ACTIVE MRs with lkey " + hex(mr.lkey()) + "\n" + state);
            }
            assertEquals(mrs.keySet(), active.keySet(), "live lkeys\n" + state);
            for (final ModelMr expected : mrs.values())
            {
                final RecordedMr mr = active.get(expected.lkey());
                assertEquals(expected.start(), mr.start(), "start of " + hex(expected.lkey()) + "\n" + state);
                assertEquals(expected.end(), mr.end(), "end of " + hex(expected.lkey()) + "\n" + state);
                assertEquals(expected.external(), mr.external(), state);
                assertEquals(expected.access(), mr.access(), "access of " + hex(expected.lkey()) + "\n" + state);
                final Set<Long> live = new HashSet<>();
                if (mr.external())
                {
                    live.add(mr.start());
                }
                else
                {
                    for (final MrEntry chunk : mr.chunks())
                    {
                        for (long a = chunk.start; a < chunk.end; a += SEG)
                        {
                            live.add(a);
                        }
                    }
                }
                assertEquals(expected.live(), live, "live segments of " + hex(expected.lkey()) + "\n" + state);
            }
            for (final Map.Entry<Long, Integer> e : created.entrySet())
            {
                final Integer lkey = f.secondaryLookup(e.getKey());
                assertNotNull(lkey, "created address " + hex(e.getKey()) + " no longer found\n" + state);
                assertEquals(e.getValue(), lkey, "lkey of created address " + hex(e.getKey()) + "\n" + state);
            }
            for (final long segment : freed)
            {
                assertNull(f.secondaryLookup(segment), "freed segment " + hex(segment) + " still found\n" + state);
                assertNull(f.secondaryLookup(segment + SEG - 1), "freed segment " + hex(segment) + "\n" + state);
            }
        }
    }
}
