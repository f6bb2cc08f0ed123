package io.mrd.primary.memory;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import static io.mrd.layout.MemsegListDescriptor.OWNER_DAEMON;
import static io.mrd.primary.memory.MemoryFixture.SEGMENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class MemoryManagerTest
{
    private static final long BASE = BaseAddresses.next();
    private static final long STRIDE_8 = MemoryManager.listStride(8, SEGMENT);

    @Test
    void firstFitPlacesRunsConsecutivelyAndReusesTheLowestHoleThatFits()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 8))
        {
            final MemoryManager m = f.manager;
            final Allocation a = m.allocate(2 * SEGMENT, 1);
            final Allocation b = m.allocate(SEGMENT, 1);
            final Allocation c = m.allocate(3 * SEGMENT - 100, 2);

            assertEquals(new Allocation(0, 0, 2, BASE, 2 * SEGMENT, 1, Access.LOCAL), a);
            assertEquals(new Allocation(0, 2, 1, BASE + 2 * SEGMENT, SEGMENT, 1, Access.LOCAL), b);
            assertEquals(new Allocation(0, 3, 3, BASE + 3 * SEGMENT, 3 * SEGMENT, 2, Access.LOCAL), c);

            f.freeAndRelease(b.address(), b.length(), 1);
            final Allocation d = m.allocate(1, 3);
            assertEquals(b.address(), d.address(), "a one-segment request takes the hole B left");

            f.freeAndRelease(d.address(), d.length(), 3);
            final Allocation e = m.allocate(2 * SEGMENT, 3);
            assertEquals(new Allocation(0, 6, 2, BASE + 6 * SEGMENT, 2 * SEGMENT, 3, Access.LOCAL), e,
                "a two-segment request skips the one-segment hole");
            final Allocation g = m.allocate(SEGMENT, 3);
            assertEquals(b.address(), g.address(), "the hole is still the first fit for one segment");
        }
    }

    @Test
    void runsNeverSpanLists()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 4))
        {
            final Allocation first = f.manager.allocate(3 * SEGMENT, 1);
            final Allocation second = f.manager.allocate(3 * SEGMENT, 1);

            assertEquals(0, first.listIndex());
            assertEquals(1, second.listIndex());
            assertEquals(0, second.firstSegment());
            assertEquals(BASE + MemoryManager.listStride(4, SEGMENT), second.address());
            assertEquals(f.manager.list(1).baseVa(), second.address());

            final Allocation third = f.manager.allocate(SEGMENT, 1);
            assertEquals(new Allocation(0, 3, 1, BASE + 3 * SEGMENT, SEGMENT, 1, Access.LOCAL), third,
                "the lowest list first");
        }
    }

    @Test
    void geometryPlacesListsWithGapsBetweenThem()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 3, 8))
        {
            final MemoryManager m = f.manager;
            assertEquals(3, m.listCount());
            assertEquals(3 * 8 * SEGMENT, m.capacity());
            assertEquals(16 * SEGMENT, STRIDE_8);
            assertEquals(BASE + 2 * STRIDE_8 + 8 * SEGMENT, m.endVirtaddr());
            for (int i = 0; i < 3; i++)
            {
                final MemsegList list = m.list(i);
                assertEquals(i, list.index());
                assertEquals(BASE + i * STRIDE_8, list.baseVa());
                assertEquals(8, list.segmentCount());
                assertEquals(8 * SEGMENT, list.length());
                assertEquals(4096, list.pageSize());
                assertFalse(list.isHugetlbfs());
                assertEquals(f.dir.resolve("mem").resolve("list-" + i).toAbsolutePath(), list.backingPath());
                assertTrue(Files.exists(list.backingPath()));
                assertEquals(list.baseVa() + 5 * SEGMENT, list.segmentAddress(5));
                assertEquals(5, list.segmentIndex(list.baseVa() + 5 * SEGMENT + 12345));
                assertTrue(list.contains(list.baseVa()));
                assertTrue(list.contains(list.baseVa() + list.length() - 1));
                assertFalse(list.contains(list.baseVa() + list.length()));
                assertEquals(list, m.listOf(list.baseVa() + 7));
                assertNull(m.listOf(list.baseVa() + list.length()), "the gap after a list belongs to no list");
            }
            assertNull(m.listOf(BASE - 1));
            assertNull(m.listOf(m.endVirtaddr()));
            assertNull(m.listOf(0));
            assertNull(m.listOf(-1));
        }
    }

    @Test
    void aFragmentedListRefusesALargerRunAndSaysWhatIsFree()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 8))
        {
            final List<Allocation> singles = new ArrayList<>();
            for (int i = 0; i < 8; i++)
            {
                singles.add(f.manager.allocate(SEGMENT, 1));
            }
            for (int i = 0; i < 8; i += 2)
            {
                f.freeAndRelease(singles.get(i).address(), SEGMENT, 1);
            }

            final MrdException ex = assertThrows(MrdException.class, () -> f.manager.allocate(2 * SEGMENT, 1));
            assertEquals(ErrorCode.ENOMEM, ex.code());
            assertTrue(ex.getMessage().contains("cannot allocate 4MiB"), ex.getMessage());
            assertTrue(ex.getMessage().contains("largest free run is 2MiB"), ex.getMessage());
            assertTrue(ex.getMessage().contains("4 of 8 segments free"), ex.getMessage());
            assertTrue(ex.getMessage().contains("--max-memory 16MiB"), ex.getMessage());

            assertEquals(singles.get(0).address(), f.manager.allocate(SEGMENT, 1).address());
        }
    }

    @Test
    void segmentsFreedButNotReleasedAreNotHandedOutAgain()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 2))
        {
            final Allocation a = f.manager.allocate(2 * SEGMENT, 1);
            final FreedRange range = f.manager.free(a.address(), a.length(), 1);
            assertEquals(new FreedRange(0, 0, 2, a.address(), a.length()), range);
            assertEquals(0, f.manager.bytesAllocated());

            final MrdException ex = assertThrows(MrdException.class, () -> f.manager.allocate(SEGMENT, 2));
            assertEquals(ErrorCode.ENOMEM, ex.code());
            assertTrue(ex.getMessage().contains("2 being released"), ex.getMessage());

            f.manager.release(range);
            assertEquals(a.address(), f.manager.allocate(SEGMENT, 2).address());
            assertThrows(IllegalStateException.class, () -> f.manager.release(range), "released twice");
        }
    }

    @Test
    void exhaustionNamesTheLimitAndFreeingEverythingEmptiesTheManager()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 4))
        {
            final MemoryManager m = f.manager;
            final List<Allocation> all = new ArrayList<>();
            all.add(m.allocate(4 * SEGMENT, 1));
            all.add(m.allocate(3 * SEGMENT, 2));
            all.add(m.allocate(SEGMENT, OWNER_DAEMON));
            assertEquals(m.capacity(), m.bytesAllocated());

            final MrdException full = assertThrows(MrdException.class, () -> m.allocate(1, 1));
            assertEquals(ErrorCode.ENOMEM, full.code());
            assertTrue(full.getMessage().contains("--max-memory 16MiB"), full.getMessage());
            assertTrue(full.getMessage().contains("0 of 8 segments free"), full.getMessage());

            final MrdException tooBig = assertThrows(MrdException.class, () -> m.allocate(5 * SEGMENT, 1));
            assertEquals(ErrorCode.ENOMEM, tooBig.code());
            assertTrue(tooBig.getMessage().contains("largest possible allocation is one memory-segment list, 8MiB"),
                tooBig.getMessage());
            assertTrue(tooBig.getMessage().contains("--max-memory"), tooBig.getMessage());

            for (final Allocation a : all)
            {
                f.freeAndRelease(a.address(), a.length(), a.owner());
            }
            assertEquals(0, m.bytesAllocated());
            assertEquals(4 * SEGMENT, m.allocate(4 * SEGMENT, 1).length());
        }
    }

    @Test
    void badAllocationArgumentsAreRefused()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 4))
        {
            assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> f.manager.allocate(0, 1)).code());
            assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> f.manager.allocate(-5, 1)).code());
            final MrdException owner = assertThrows(MrdException.class, () -> f.manager.allocate(SEGMENT, 0));
            assertEquals(ErrorCode.EINVAL, owner.code());
            assertTrue(owner.getMessage().contains("owner 0"), owner.getMessage());
        }
    }

    @Test
    void freeRefusesWhatItMustNotFreeAndNamesTheAddress()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 8))
        {
            final MemoryManager m = f.manager;
            final Allocation a = m.allocate(2 * SEGMENT, 1);

            final long unaligned = a.address() + 4096;
            assertFreeFails(m, unaligned, SEGMENT, 1, ErrorCode.EINVAL, "not segment-aligned");

            final long unallocated = a.address() + 2 * SEGMENT;
            assertFreeFails(m, unallocated, SEGMENT, 1, ErrorCode.EINVAL, "not allocated");
            assertFreeFails(m, a.address(), 3 * SEGMENT, 1, ErrorCode.EINVAL, "not allocated");

            final MrdException other =
                assertFreeFails(m, a.address(), SEGMENT, 2, ErrorCode.EPERM, "owned by client 1");
            assertTrue(other.getMessage().contains("client 2"), other.getMessage());

            assertFreeFails(m, BASE - SEGMENT, SEGMENT, 1, ErrorCode.ENXIO, "outside managed memory");
            assertFreeFails(m, BASE + 8 * SEGMENT, SEGMENT, 1, ErrorCode.ENXIO, "outside managed memory");
            assertFreeFails(m, m.endVirtaddr(), SEGMENT, 1, ErrorCode.ENXIO, "outside managed memory");

            assertFreeFails(m, a.address(), 0, 1, ErrorCode.EINVAL, "must be positive");
            final long lastSegment = m.list(0).segmentAddress(7);
            assertFreeFails(m, lastSegment, 2 * SEGMENT, 1, ErrorCode.EINVAL, "end inside list 0");

            assertEquals(2 * SEGMENT, m.bytesAllocated(), "failed frees change nothing");
            final FreedRange byDaemon = f.freeAndRelease(a.address(), a.length(), OWNER_DAEMON);
            assertEquals(a.length(), byDaemon.length(), "the daemon may free anyone's memory");
            assertEquals(0, m.bytesAllocated());
        }
    }

    private static MrdException assertFreeFails(
        final MemoryManager m, final long address, final long length, final int owner, final ErrorCode code,
        final String what)
    {
        final MrdException ex = assertThrows(MrdException.class, () -> m.free(address, length, owner));
        assertEquals(code, ex.code(), ex.getMessage());
        assertTrue(ex.getMessage().contains(Sizes.hex(address)), ex.getMessage());
        assertTrue(ex.getMessage().contains(what), ex.getMessage());
        return ex;
    }

    @Test
    void aTmpfsListIsOneMappingOfItsFileWhateverIsAllocatedOrFreed()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 4))
        {
            final MemsegList list = f.manager.list(0);
            final String whole = wholeListMapping(list);
            final Allocation a = f.manager.allocate(SEGMENT, 1);
            final Allocation b = f.manager.allocate(2 * SEGMENT, 2);
            assertEquals(whole, wholeListMapping(list), "allocating changed the daemon's mappings");
            f.freeAndRelease(a.address(), a.length(), 1);
            assertEquals(whole, wholeListMapping(list), "freeing changed the daemon's mappings");
            f.freeAndRelease(b.address(), b.length(), 2);
            assertEquals(whole, wholeListMapping(list), "freeing changed the daemon's mappings");
        }
    }

    /**
     * @return the /proc/self/maps line of the list, checked to be one shared mapping of its backing file from
     *         the list's first address to its end.
     */
    private static String wholeListMapping(final MemsegList list)
    {
        final String line = MemoryFixture.mapsLine(list.baseVa());
        final String range = Long.toHexString(list.baseVa()) + "-" + Long.toHexString(list.endVa()) + " rw-s 00000000 ";
        assertTrue(line.startsWith(range) && line.endsWith(list.backingPath().toString()),
            "expected one mapping '" + range + "... " + list.backingPath() + "', found '" + line + "'");
        return line;
    }

    @Test
    void allocatedMemoryHoldsDataAndComesBackZeroAfterRelease()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 4))
        {
            final Allocation a = f.manager.allocate(2 * SEGMENT, 1);
            final MemorySegment memory = MemorySegment.ofAddress(a.address()).reinterpret(a.length());
            final long words = a.length() / Long.BYTES;
            for (long i = 0; i < words; i++)
            {
                memory.setAtIndex(ValueLayout.JAVA_LONG, i, a.address() + i * 0x9E3779B97F4A7C15L);
            }
            for (long i = 0; i < words; i++)
            {
                assertEquals(a.address() + i * 0x9E3779B97F4A7C15L, memory.getAtIndex(ValueLayout.JAVA_LONG, i));
            }
            final String mapped = MemoryFixture.mapsLine(a.address());
            assertTrue(mapped.contains("rw-s") && mapped.contains(f.manager.list(0).backingPath().toString()), mapped);

            assertTrue(MemoryFixture.residentKib(a.address()) >= a.length() / 1024, "the pages written are resident");

            f.freeAndRelease(a.address(), a.length(), 1);
            assertEquals(0, MemoryFixture.residentKib(a.address()),
                "after release the list's mapping holds no page: the hole was punched");

            final Allocation again = f.manager.allocate(2 * SEGMENT, 2);
            assertEquals(a.address(), again.address());
            final MemorySegment reused = MemorySegment.ofAddress(again.address()).reinterpret(again.length());
            for (long i = 0; i < words; i++)
            {
                if (reused.getAtIndex(ValueLayout.JAVA_LONG, i) != 0)
                {
                    throw new AssertionError("word " + i + " of the reused segments is not zero: " +
                        "the hole was not punched");
                }
            }
        }
    }

    @Test
    void everyChangeIsMirroredIntoTheControlFile()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 8))
        {
            final MemoryManager m = f.manager;
            final MemsegListRecord record = new MemsegListRecord().wrap(f.control, f.layout.memsegListOffset(0));
            assertEquals(BASE, record.baseVa());
            assertEquals(4096, record.pageSize());
            assertEquals(8, record.segmentCount());
            assertEquals(0, record.flags() & MemsegListDescriptor.FLAG_HUGETLBFS);
            assertEquals(m.list(0).backingPath().toString(), record.backingPath());
            assertEquals(0, record.allocatedSegments());

            final Allocation a = m.allocate(2 * SEGMENT, 1);
            final Allocation b = m.allocate(SEGMENT, 2);
            final Allocation c = m.allocate(4 * SEGMENT, 3);
            assertEquals(7, record.allocatedSegments());
            assertSegments(record, new int[]{1, 1, 2, 3, 3, 3, 3, 0}, new int[]{0, 0, 2, 3, 3, 3, 3, 0});

            f.freeAndRelease(a.address(), a.length(), 1);
            f.freeAndRelease(c.address(), 2 * SEGMENT, 3);
            assertEquals(3, record.allocatedSegments());
            assertSegments(record, new int[]{0, 0, 2, 0, 0, 3, 3, 0}, new int[]{0, 0, 2, 0, 0, 5, 5, 0});
            for (int i = 0; i < 8; i++)
            {
                assertEquals(record.owner(i), m.list(0).owner(i));
                assertEquals(record.allocationFirst(i), m.list(0).allocationFirst(i));
            }
            assertEquals(b.owner(), record.owner(b.firstSegment()));

            final MemsegListRecord second = new MemsegListRecord().wrap(f.control, f.layout.memsegListOffset(1));
            assertEquals(BASE + STRIDE_8, second.baseVa());
            assertEquals(m.list(1).backingPath().toString(), second.backingPath());
            assertEquals(0, second.allocatedSegments());
        }
    }

    private static void assertSegments(final MemsegListRecord record, final int[] owners, final int[] firsts)
    {
        for (int i = 0; i < owners.length; i++)
        {
            assertEquals(owners[i], record.owner(i), "owner of segment " + i);
            if (owners[i] != 0)
            {
                assertEquals(firsts[i], record.allocationFirst(i), "first of the allocation of segment " + i);
            }
        }
    }

    @Test
    void chunksStopAtOtherAccessAndRemoteMemoryAtItsAllocation()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 8))
        {
            final MemoryManager m = f.manager;
            final int remote = Access.LOCAL_WRITE | Access.REMOTE_WRITE;
            final Allocation local1 = m.allocate(SEGMENT, 1);
            final Allocation local2 = m.allocate(SEGMENT, 2, Access.LOCAL);
            final Allocation r1 = m.allocate(2 * SEGMENT, 1, Access.REMOTE_WRITE);
            final Allocation r2 = m.allocate(SEGMENT, 1, remote);
            final Allocation read = m.allocate(SEGMENT, 2, Access.REMOTE_READ);
            assertEquals(remote, r1.access(), "local write is added to what the owner asked");
            assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class,
                () -> m.allocate(SEGMENT, 1, 0x20)).code(), "unknown access bits");

            m.memoryLock().readLock().lock();
            try
            {
                assertEquals(new Chunk(0, 0, 2, local1.address(), local2.end(), Access.LOCAL),
                    m.contiguousChunk(local2.address()), "local memory of two owners shares a chunk");
                assertEquals(new Chunk(0, 2, 2, r1.address(), r1.end(), remote), m.contiguousChunk(r1.address()),
                    "remote memory stops at other access and at its own allocation, even of the same access");
                assertEquals(new Chunk(0, 4, 1, r2.address(), r2.end(), remote), m.contiguousChunk(r2.address()));
                assertEquals(new Chunk(0, 5, 1, read.address(), read.end(), Access.LOCAL_WRITE | Access.REMOTE_READ),
                    m.contiguousChunk(read.address()));
                assertEquals(remote, m.list(0).access(3));
                assertEquals(remote, segments(f).access(3), "the control file records the segment's access");
            }
            finally
            {
                m.memoryLock().readLock().unlock();
            }
            // A partial free cuts the allocation in two: each part is its own chunk.
            f.freeAndRelease(r1.address(), SEGMENT, 1);
            assertEquals(0, segments(f).access(2), "a free segment has no access");
            m.memoryLock().readLock().lock();
            try
            {
                assertEquals(new Chunk(0, 3, 1, r1.address() + SEGMENT, r1.end(), remote),
                    m.contiguousChunk(r1.end() - 1));
            }
            finally
            {
                m.memoryLock().readLock().unlock();
            }
        }
    }

    private static MemsegListRecord segments(final MemoryFixture f)
    {
        return new MemsegListRecord().wrap(f.control, f.layout.memsegListOffset(0));
    }

    @Test
    void contiguousChunksJoinOwnersSplitAtFreeSegmentsAndStopAtListEnds()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 4))
        {
            final MemoryManager m = f.manager;
            final Allocation a = m.allocate(2 * SEGMENT, 1);
            final Allocation b = m.allocate(SEGMENT, 2);
            final Allocation c = m.allocate(SEGMENT, 1);
            final Allocation d = m.allocate(SEGMENT, 3);

            m.memoryLock().readLock().lock();
            try
            {
                final Chunk whole = m.contiguousChunk(b.address() + 100);
                assertEquals(new Chunk(0, 0, 4, BASE, BASE + 4 * SEGMENT, Access.LOCAL), whole,
                    "adjacent allocations of different owners form one chunk, and it ends with the list");
                assertNull(m.contiguousChunk(BASE + 4 * SEGMENT), "the gap after a list is no chunk");
                assertEquals(new Chunk(1, 0, 1, d.address(), d.end(), Access.LOCAL), m.contiguousChunk(d.address()),
                    "the next list's first segment is another chunk");
                assertEquals(new Chunk(0, 2, 1, b.address(), b.end(), Access.LOCAL),
                    m.segmentOf(b.address() + SEGMENT - 1));
            }
            finally
            {
                m.memoryLock().readLock().unlock();
            }

            f.freeAndRelease(c.address(), c.length(), 1);
            f.freeAndRelease(a.address() + SEGMENT, SEGMENT, 1);

            m.memoryLock().readLock().lock();
            try
            {
                assertEquals(new Chunk(0, 0, 1, a.address(), a.address() + SEGMENT, Access.LOCAL),
                    m.contiguousChunk(a.address()));
                assertNull(m.contiguousChunk(a.address() + SEGMENT), "a free segment is in no chunk");
                assertEquals(new Chunk(0, 2, 1, b.address(), b.end(), Access.LOCAL), m.contiguousChunk(b.address()));
                assertNull(m.contiguousChunk(c.address()));
                assertNull(m.segmentOf(c.address()));
                assertNull(m.contiguousChunk(BASE - 1));
            }
            finally
            {
                m.memoryLock().readLock().unlock();
            }
        }
    }

    @Test
    void lockMisuseFailsInsteadOfHanging()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 4))
        {
            final MemoryManager m = f.manager;
            final Allocation a = m.allocate(SEGMENT, 1);
            if (MemoryManager.class.desiredAssertionStatus())
            {
                assertThrows(AssertionError.class, () -> m.contiguousChunk(a.address()));
            }
            m.memoryLock().readLock().lock();
            try
            {
                assertThrows(IllegalStateException.class, () -> m.allocate(SEGMENT, 1));
                assertThrows(IllegalStateException.class, () -> m.free(a.address(), SEGMENT, 1));
            }
            finally
            {
                m.memoryLock().readLock().unlock();
            }
        }
    }

    @Test
    void concurrentAllocationsNeverShareSegmentsAndAlwaysStartZeroed() throws Exception
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 8))
        {
            final MemoryManager m = f.manager;
            final int threads = 4;
            final List<Thread> workers = new ArrayList<>();
            final List<Throwable> failures = java.util.Collections.synchronizedList(new ArrayList<>());
            for (int t = 1; t <= threads; t++)
            {
                final int owner = t;
                workers.add(Thread.ofPlatform().name("alloc-" + t).start(() ->
                {
                    try
                    {
                        for (int i = 0; i < 300; i++)
                        {
                            final Allocation a;
                            try
                            {
                                a = m.allocate((1 + (i + owner) % 3) * SEGMENT, owner);
                            }
                            catch (final MrdException ex)
                            {
                                assertEquals(ErrorCode.ENOMEM, ex.code(), ex.getMessage());
                                continue;
                            }
                            final MemorySegment memory = MemorySegment.ofAddress(a.address()).reinterpret(a.length());
                            for (long at = 0; at < a.length(); at += SEGMENT)
                            {
                                assertEquals(0, memory.get(ValueLayout.JAVA_LONG, at), "fresh segment not zero");
                                memory.set(ValueLayout.JAVA_LONG, at, owner * 1_000_000L + i);
                            }
                            m.memoryLock().readLock().lock();
                            try
                            {
                                final Chunk chunk = m.contiguousChunk(a.address());
                                assertTrue(chunk.start() <= a.address() && chunk.end() >= a.end(), chunk::toString);
                            }
                            finally
                            {
                                m.memoryLock().readLock().unlock();
                            }
                            for (long at = 0; at < a.length(); at += SEGMENT)
                            {
                                assertEquals(owner * 1_000_000L + i, memory.get(ValueLayout.JAVA_LONG, at),
                                    "another allocation shares the segment at " + Sizes.hex(a.address() + at));
                            }
                            m.release(m.free(a.address(), a.length(), owner));
                        }
                    }
                    catch (final Throwable ex)
                    {
                        failures.add(ex);
                    }
                }));
            }
            for (final Thread worker : workers)
            {
                worker.join();
            }
            if (!failures.isEmpty())
            {
                throw new AssertionError(failures.size() + " workers failed", failures.get(0));
            }
            assertEquals(0, m.bytesAllocated());
        }
    }

    @Test
    void freeAllOwnedByTakesEveryRunOfADeadClient()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 2, 4))
        {
            final MemoryManager m = f.manager;
            m.allocate(SEGMENT, 7);
            m.allocate(SEGMENT, 7);
            m.allocate(SEGMENT, 2);
            m.allocate(SEGMENT, 7);
            final Allocation inList1 = m.allocate(3 * SEGMENT, 7);

            final List<FreedRange> freed = m.freeAllOwnedBy(7);
            assertEquals(List.of(
                new FreedRange(0, 0, 2, BASE, 2 * SEGMENT),
                new FreedRange(0, 3, 1, BASE + 3 * SEGMENT, SEGMENT),
                new FreedRange(1, 0, 3, inList1.address(), 3 * SEGMENT)), freed);
            assertEquals(SEGMENT, m.bytesAllocated());
            freed.forEach(m::release);
            assertTrue(m.freeAllOwnedBy(7).isEmpty());
            assertEquals(BASE, m.allocate(2 * SEGMENT, 1).address());
        }
    }

    @Test
    void closeRemovesTheBackingFilesAndIsIdempotent()
    {
        final MemoryFixture f = new MemoryFixture(BASE, 2, 4);
        try
        {
            final MemsegList list = f.manager.list(1);
            f.manager.allocate(SEGMENT, 1);
            assertNotNull(MemoryFixture.mapsLine(list.baseVa()));
            f.manager.close();
            assertFalse(Files.exists(list.backingPath()));
            assertNull(MemoryFixture.mapsLine(list.baseVa()), "the reservation is gone");
            f.manager.close();
            assertEquals(ErrorCode.ENODEV, assertThrows(MrdException.class, () -> f.manager.allocate(1, 1)).code());
        }
        finally
        {
            f.close();
        }
    }

    @Test
    void aTakenAddressRangeIsRefusedWithTheFlagToChange()
    {
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 4))
        {
            final MrdException ex = assertThrows(MrdException.class, () -> new MemoryFixture(BASE, 1, 4));
            assertEquals(ErrorCode.EEXIST, ex.code());
            assertTrue(ex.getMessage().contains("--base-virtaddr"), ex.getMessage());
            assertNotNull(f.manager.list(0));
        }
    }

    @Test
    void badGeometryIsRefused()
    {
        final MrdException unaligned = assertThrows(MrdException.class, () -> new MemoryFixture(BASE + 4096, 1, 4));
        assertEquals(ErrorCode.EINVAL, unaligned.code());
        assertTrue(unaligned.getMessage().contains("--base-virtaddr"), unaligned.getMessage());

        final MrdException tooHigh = assertThrows(MrdException.class,
            () -> new MemoryFixture(MemoryManager.USER_VA_END - 8 * SEGMENT, 2, 4));
        assertEquals(ErrorCode.EINVAL, tooHigh.code());
        assertTrue(tooHigh.getMessage().contains("user address space"), tooHigh.getMessage());
    }
}
