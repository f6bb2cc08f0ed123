package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.sys.Posix;
import io.mrd.testing.Equipment;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import static io.mrd.layout.sys.Sizes.KIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link PagePopulator} against the kernel's own view of a shared mapping ({@code mincore}: a page of a memfd is
 * resident once it has been faulted in): every page of the range is there afterwards, whichever way it was
 * faulted in and however many threads did it, and no byte changed, not even one a client was writing meanwhile.
 */
final class PagePopulatorTest
{
    private static final long PAGE = PageLocks.PAGE_SIZE;
    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();

    private final TestMappings mappings = new TestMappings();
    private final List<PagePopulator> populators = new ArrayList<>();

    @AfterEach
    void removeWhatTheTestCreated()
    {
        populators.forEach(PagePopulator::close);
        mappings.unmapAll();
    }

    @Test
    void thisKernelHasMadvPopulateWrite()
    {
        // Linux 5.14+; this test machine runs 6.x. On an older kernel the touch below is the path taken.
        Assumptions.assumeTrue(kernelAtLeast(5, 14), "kernel older than 5.14");
        assertTrue(PagePopulator.madviseSupported());
    }

    @Test
    void madvisePopulatesEveryPageFromSeveralThreads()
    {
        assertEveryPageResidentAfterPopulate(populator(2, 4 * MIB, true), 64 * MIB + 3 * PAGE);
        assertEveryPageResidentAfterPopulate(populator(3, 4 * MIB, true), 40 * MIB);
    }

    @Test
    void theTouchPopulatesEveryPageFromSeveralThreads()
    {
        assertEveryPageResidentAfterPopulate(populator(2, 4 * MIB, false), 64 * MIB + 3 * PAGE);
    }

    @Test
    void aRangeShorterThanTheThresholdIsLeftToThePin()
    {
        final MemorySegment memory = sharedMemory(4 * MIB - PAGE);
        assertEquals(0, populator(2, 4 * MIB, true).populate(memory.address(), memory.byteSize()));
        assertEquals(0, residentPages(memory.address(), memory.byteSize()), "pages faulted in below the threshold");
    }

    @Test
    void oneThreadPopulatesALongRangeOnTheCaller()
    {
        assertEveryPageResidentAfterPopulate(populator(1, 4 * MIB, true), 16 * MIB);
        assertEveryPageResidentAfterPopulate(populator(1, 4 * MIB, false), 4 * MIB);
    }

    @Test
    void anUnalignedRangeIsWidenedToWholePages()
    {
        final PagePopulator populator = populator(2, 4 * MIB, true);
        final MemorySegment memory = sharedMemory(16 * MIB);
        assertEquals(0, populator.populate(memory.address() + PAGE + 100, 8 * MIB - 200));
        assertEquals(0, residentPages(memory.address(), PAGE));
        assertEquals(8 * MIB / PAGE, residentPages(memory.address() + PAGE, 8 * MIB));
        assertEquals(0, residentPages(memory.address() + PAGE + 8 * MIB, 8 * MIB - 2 * PAGE));
    }

    @Test
    void neitherWayChangesAByte()
    {
        for (final boolean madvise : new boolean[] {true, false})
        {
            final MemorySegment memory = sharedMemory(32 * MIB);
            // Every fifth page written (and so present) before: the others are holes that read as zeroes.
            for (long offset = 0; offset < memory.byteSize(); offset += 5 * PAGE)
            {
                memory.set(ValueLayout.JAVA_LONG, offset, pattern(offset));
                memory.set(ValueLayout.JAVA_LONG, offset + PAGE - 8, ~pattern(offset));
            }
            assertEquals(0, populator(2, 4 * MIB, madvise).populate(memory.address(), memory.byteSize()));
            for (long offset = 0; offset < memory.byteSize(); offset += PAGE)
            {
                final boolean written = offset % (5 * PAGE) == 0;
                assertEquals(written ? pattern(offset) : 0, memory.get(ValueLayout.JAVA_LONG, offset),
                    (madvise ? "madvise" : "touch") + ": first bytes of page at " + offset);
                assertEquals(written ? ~pattern(offset) : 0, memory.get(ValueLayout.JAVA_LONG, offset + PAGE - 8),
                    (madvise ? "madvise" : "touch") + ": last bytes of page at " + offset);
            }
        }
    }

    /**
     * A client writing the memory while the daemon touches it keeps every store: the touch is one atomic
     * read-modify-write, never a load and a store back that could put an older value over the client's.
     */
    @Test
    void theTouchNeverUndoesAStoreAClientMakesMeanwhile() throws InterruptedException
    {
        final PagePopulator populator = populator(1, Long.MAX_VALUE, false);
        final MemorySegment memory = sharedMemory(64 * PAGE);
        final AtomicBoolean stop = new AtomicBoolean();
        final AtomicLong lost = new AtomicLong();
        final AtomicLong stores = new AtomicLong();
        // The client counts up in the first int of every page, each page by one store at a time, and reads back
        // what it stored last: an older value there is a store the daemon undid.
        final Thread client = new Thread(() ->
        {
            final int[] expected = new int[64];
            while (!stop.get())
            {
                for (int page = 0; page < expected.length; page++)
                {
                    final long offset = page * PAGE;
                    final int seen = (int)INT.getVolatile(memory, offset);
                    if (seen != expected[page])
                    {
                        lost.incrementAndGet();
                    }
                    expected[page] = seen + 1;
                    INT.setVolatile(memory, offset, seen + 1);
                    stores.incrementAndGet();
                }
            }
        }, "client");
        client.start();
        try
        {
            final long deadline = System.nanoTime() + 4_000_000_000L;
            while (stores.get() < 20_000_000 && System.nanoTime() < deadline)
            {
                populator.populate(memory.address(), memory.byteSize());
            }
        }
        finally
        {
            stop.set(true);
            client.join();
        }
        assertEquals(0, lost.get(), "stores undone out of " + stores.get());
        assertTrue(stores.get() > 0, "the client ran");
    }

    @Test
    void anUnmappedRangeIsLeftForThePinToRefuse()
    {
        final MemorySegment hole = Posix.map(4 * MIB, Posix.PROT_READ, Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
        Posix.munmap(hole.address(), hole.byteSize());
        assertEquals(ErrorCode.ENOMEM.errno(), populator(2, MIB, true).populate(hole.address(), hole.byteSize()));
        assertEquals(ErrorCode.ENOMEM.errno(), populator(2, MIB, false).populate(hole.address(), hole.byteSize()),
            "the touch checks the mapping first instead of faulting the daemon");
    }

    @Test
    void hugePagesArePopulatedWholeFromSeveralThreads()
    {
        Equipment.freeHugePages(8, "run 'scripts/setup-hugepages 64' as root");
        final int fd = Posix.memfdCreate("populate-test-huge", Posix.MFD_CLOEXEC | Posix.MFD_HUGETLB);
        final long length = 16 * MIB;
        try
        {
            Posix.ftruncate(fd, length);
            final MemorySegment memory = Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
            mappings.add(memory);
            assertEquals(0, populator(2, 4 * MIB, true).populate(memory.address(), length));
            assertEquals(length / PAGE, residentPages(memory.address(), length));
        }
        finally
        {
            Posix.close(fd);
        }
    }

    @Test
    void poolThreadsAreDaemonsNamedMrdPopulateAndStopOnClose() throws InterruptedException
    {
        final PagePopulator populator = new PagePopulator(3, 4 * MIB, true);
        final MemorySegment memory = sharedMemory(64 * MIB);
        populator.populate(memory.address(), memory.byteSize());
        final List<Thread> pool = Thread.getAllStackTraces().keySet().stream()
            .filter(t -> t.getName().matches("mrd-populate-[12]")).toList();
        assertTrue(pool.size() >= 2, "two pool threads for three populating threads: " + pool);
        pool.forEach(t -> assertTrue(t.isDaemon(), t + " is a daemon thread"));
        populator.close();
        for (final Thread thread : pool)
        {
            thread.join(10_000);
        }
        assertTrue(pool.stream().noneMatch(Thread::isAlive), "pool threads stopped on close");
    }

    @Property(tries = 2000)
    void slicesCoverTheRangeExactlyOnAlignedBoundaries(
        @ForAll @LongRange(min = 0, max = 4096) final long startPage,
        @ForAll @LongRange(min = 1, max = 1 << 20) final long pages,
        @ForAll("alignments") final long alignment,
        @ForAll @IntRange(min = 1, max = 256) final int wanted)
    {
        final long start = 0x1000_0000_0000L + startPage * PAGE;
        final long end = start + pages * PAGE;
        final long[] bounds = PagePopulator.slices(start, end, alignment, wanted);
        final long base = start / alignment * alignment;
        final long units = ((end + alignment - 1) / alignment * alignment - base) / alignment;
        final int count = bounds.length - 1;
        assertEquals(Math.min(wanted, units), count, "as many slices as asked for, if the units allow");
        assertEquals(start, bounds[0], "from the first byte");
        assertEquals(end, bounds[count], "to the last");
        final long most = (units + count - 1) / count * alignment;
        for (int i = 0; i < count; i++)
        {
            assertTrue(bounds[i] < bounds[i + 1], "slice " + i + " is not empty");
            assertTrue(bounds[i + 1] - bounds[i] <= most, "slice " + i + " is at most its even share");
            if (i > 0)
            {
                assertEquals(0, bounds[i] % alignment, "inner boundary " + i + " on the alignment");
            }
        }
    }

    @Provide
    Arbitrary<Long> alignments()
    {
        return Arbitraries.of(PAGE, 64 * KIB, PagePopulator.SLICE_ALIGNMENT, 1L << 30);
    }

    private void assertEveryPageResidentAfterPopulate(final PagePopulator populator, final long length)
    {
        final MemorySegment memory = sharedMemory(length);
        assertEquals(0, residentPages(memory.address(), length), "a fresh memfd has no page");
        assertEquals(0, populator.populate(memory.address(), length), populator.toString());
        assertEquals(length / PAGE, residentPages(memory.address(), length), populator + " left pages out");
    }

    private PagePopulator populator(final int threads, final long threshold, final boolean madvise)
    {
        final PagePopulator populator = new PagePopulator(threads, threshold, madvise);
        populators.add(populator);
        return populator;
    }

    private MemorySegment sharedMemory(final long length)
    {
        return mappings.sharedMemfd("populate-test", length);
    }

    /**
     * @return pages of the range that are resident, by {@code mincore}.
     */
    static long residentPages(final long address, final long length)
    {
        final long pages = (length + PAGE - 1) / PAGE;
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment vector = arena.allocate(pages);
            assertEquals(0, Posix.mincore(address, length, vector), "mincore");
            long resident = 0;
            for (long i = 0; i < pages; i++)
            {
                resident += vector.get(ValueLayout.JAVA_BYTE, i) & 1;
            }
            return resident;
        }
    }

    private static long pattern(final long offset)
    {
        return 0x5EED_0000_0000_0000L | offset;
    }

    private static boolean kernelAtLeast(final int major, final int minor)
    {
        final String[] parts = System.getProperty("os.version").split("[.-]");
        final int kernelMajor = Integer.parseInt(parts[0]);
        return kernelMajor > major || kernelMajor == major && Integer.parseInt(parts[1]) >= minor;
    }
}
