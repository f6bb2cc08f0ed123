package io.mrd.primary.memory;

import io.mrd.testing.BaseAddresses;
import io.mrd.testing.Equipment;
import io.mrd.testing.TestDirs;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

import static io.mrd.layout.sys.Sizes.GIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static io.mrd.primary.memory.MemoryFixture.SEGMENT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

class HugePagesTest
{
    private static final long BASE = BaseAddresses.next();

    @Test
    void mountsAreParsedWithTheirPageSizes()
    {
        final List<HugePages.Mount> mounts = HugePages.parseMounts(List.of(
            "nodev /dev/hugepages hugetlbfs rw,relatime,pagesize=2M 0 0",
            "none /mnt/huge\\0401g hugetlbfs rw,pagesize=1024M 0 0",
            "none /mnt/default hugetlbfs rw,relatime 0 0",
            "tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0",
            "garbage"), 2 * MIB);

        assertEquals(List.of(
            new HugePages.Mount(Path.of("/dev/hugepages"), "hugetlbfs", 2 * MIB),
            new HugePages.Mount(Path.of("/mnt/huge 1g"), "hugetlbfs", GIB),
            new HugePages.Mount(Path.of("/mnt/default"), "hugetlbfs", 2 * MIB),
            new HugePages.Mount(Path.of("/dev/shm"), "tmpfs", 0)), mounts);
        assertTrue(mounts.get(0).isHugetlbfs());
        assertFalse(mounts.get(3).isHugetlbfs());
    }

    @Test
    void anExplicitDirectoryThatIsNotHugetlbfsIsRefusedWithHowToMountOne()
    {
        final Path dir = TestDirs.create("nothuge");
        try
        {
            final MrdException ex = assertThrows(MrdException.class,
                () -> HugePages.findMountWithFreePages(Optional.of(dir), 1));
            assertEquals(ErrorCode.EINVAL, ex.code());
            assertTrue(ex.getMessage().contains("not on a hugetlbfs mount"), ex.getMessage());
            assertTrue(ex.getMessage().contains(HugePages.SETUP_SCRIPT), ex.getMessage());
            assertTrue(ex.getMessage().contains(dir.toString()), ex.getMessage());
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    @Test
    void poolCountersAreConsistent()
    {
        assertTrue(HugePages.availablePages() >= 0);
        assertTrue(HugePages.freePages() <= HugePages.totalPages() || HugePages.totalPages() == 0);
        assertFalse(HugePages.available(Long.MAX_VALUE));
    }

    @Test
    void staleBackingFilesAreRemovedAndLiveOnesKept() throws IOException
    {
        final Path dir = TestDirs.create("stale");
        try
        {
            final Path stale = Files.createFile(dir.resolve("mrd-999999-list-0"));
            final Path live = Files.createFile(dir.resolve("mrd-999998-list-1"));
            final Path other = Files.createFile(dir.resolve("something-else"));
            final int fd = Posix.open(live.toString(), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
            try
            {
                assertEquals(0, Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB));
                assertEquals(1, BackingFiles.removeStale(dir));
            }
            finally
            {
                Posix.close(fd);
            }
            assertFalse(Files.exists(stale));
            assertTrue(Files.exists(live), "a file some live process holds the lock on stays");
            assertTrue(Files.exists(other), "files mrd did not name are not touched");
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    @Test
    void listsOnHugetlbfsHoldDataAndShowTheHugetlbfsFileInMaps()
    {
        final Path hugeDir = hugeDirOrSkip(4);
        final Path backing;
        try (MemoryFixture f = new MemoryFixture(BASE, 1, 8, Optional.of(hugeDir)))
        {
            final MemsegList list = f.manager.list(0);
            backing = list.backingPath();
            assertTrue(list.isHugetlbfs());
            assertEquals(2 * MIB, list.pageSize());
            assertEquals(hugeDir.resolve("mrd-" + ProcessHandle.current().pid() + "-list-0").toAbsolutePath(), backing);
            final MemsegListRecord record = new MemsegListRecord().wrap(f.control, f.layout.memsegListOffset(0));
            assertEquals(MemsegListDescriptor.FLAG_HUGETLBFS, record.flags() & MemsegListDescriptor.FLAG_HUGETLBFS);
            assertEquals(2 * MIB, record.pageSize());
            assertEquals(backing.toString(), record.backingPath());

            final Allocation a = f.manager.allocate(2 * SEGMENT, 1);
            final MemorySegment memory = MemorySegment.ofAddress(a.address()).reinterpret(a.length());
            for (long offset = 0; offset < a.length(); offset += 4096)
            {
                memory.set(ValueLayout.JAVA_LONG, offset, a.address() + offset);
            }
            for (long offset = 0; offset < a.length(); offset += 4096)
            {
                assertEquals(a.address() + offset, memory.get(ValueLayout.JAVA_LONG, offset));
            }
            final String maps = MemoryFixture.mapsLine(a.address());
            assertTrue(maps.endsWith(backing.toString()) && maps.contains("rw-s"), maps);

            f.freeAndRelease(a.address(), a.length(), 1);
            final Allocation again = f.manager.allocate(2 * SEGMENT, 1);
            assertEquals(a.address(), again.address());
            final MemorySegment reused = MemorySegment.ofAddress(again.address()).reinterpret(again.length());
            for (long offset = 0; offset < again.length(); offset += 4096)
            {
                assertEquals(0, reused.get(ValueLayout.JAVA_LONG, offset), "the huge page hole was punched");
            }
        }
        assertFalse(Files.exists(backing), "close deletes the hugetlbfs file, giving its pages back");
    }

    @Test
    void runningOutOfHugePagesIsAnEnomemThatSaysHowToAddPages()
    {
        final Path hugeDir = hugeDirOrSkip(1);
        final long total = HugePages.totalPages();
        assumeTrue(total < 4096, "pool of " + total + " pages too large to exhaust in a test");
        assumeTrue(overcommitPages() == 0, "huge page overcommit is on: the pool can grow");

        final int segments = (int)total + 1;
        try (MemoryFixture f = new MemoryFixture(BASE, 1, segments, Optional.of(hugeDir)))
        {
            final MrdException ex = assertThrows(MrdException.class,
                () -> f.manager.allocate(segments * SEGMENT, 1));
            assertEquals(ErrorCode.ENOMEM, ex.code());
            assertTrue(ex.getMessage().contains("hugetlbfs ran out of pages"), ex.getMessage());
            assertTrue(ex.getMessage().contains(HugePages.SETUP_SCRIPT), ex.getMessage());
            assertEquals(0, f.manager.bytesAllocated());

            final Allocation one = f.manager.allocate(SEGMENT, 1);
            assertEquals(f.manager.list(0).baseVa(), one.address(), "the list is still usable after the failure");
        }
    }

    private static Path hugeDirOrSkip(final long pages)
    {
        final Optional<Path> dir = HugePages.findMountWithFreePages(Optional.empty(), pages);
        if (dir.isEmpty())
        {
            final String why = "no writable 2MiB hugetlbfs mount with " + pages + " available pages (" +
                HugePages.describePool() + ", mounts " + HugePages.hugetlbfsMounts() + "); run '" +
                HugePages.SETUP_SCRIPT + " 64' as root";
            Equipment.unavailable(why, Equipment.hugePagesRequired(), Equipment.REQUIRE_HUGEPAGES_ENV + "=1");
        }
        return dir.orElseThrow();
    }

    private static long overcommitPages()
    {
        try
        {
            return Long.parseLong(Files.readString(
                Path.of("/sys/kernel/mm/hugepages/hugepages-2048kB/nr_overcommit_hugepages")).trim());
        }
        catch (final IOException | NumberFormatException ex)
        {
            return 0;
        }
    }
}
