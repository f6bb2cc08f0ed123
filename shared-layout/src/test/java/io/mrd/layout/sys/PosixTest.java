package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * The native calls, against the real kernel: fixed-address reservations, memfd mappings inside them,
 * {@code flock}, {@code mlock}, and the errno text in failures.
 */
final class PosixTest
{
    /** Candidate bases, far from where the JVM and libc map (just below the stack and libraries). */
    private static final long[] CANDIDATE_BASES =
    {
        0x7e0000000000L, 0x7d0000000000L, 0x6f0000000000L, 0x5e0000000000L, 0x400000000000L, 0x300000000000L
    };
    private static final long RESERVATION = 64 * Sizes.MIB;
    private static final long WINDOW_OFFSET = 4 * Sizes.MIB;
    private static final long WINDOW = 2 * Sizes.MIB;

    private long base;
    private int memfd = -1;
    private MemorySegment second;

    @AfterEach
    void cleanUp()
    {
        if (null != second)
        {
            Posix.munmapQuietly(second.address(), second.byteSize());
        }
        if (base != 0)
        {
            Posix.munmapQuietly(base, RESERVATION);
        }
        if (memfd >= 0)
        {
            Posix.close(memfd);
        }
    }

    @Test
    void reservesAFixedRangeOnceAndNamesItOnTheSecondTry()
    {
        final MemorySegment reservation = reserve();
        assertEquals(base, reservation.address());
        assertEquals(RESERVATION, reservation.byteSize());
        final ProcMaps.Mapping m = ProcMaps.covering(base);
        assertNotNull(m, "reservation not in /proc/self/maps");
        assertEquals("---p", m.perms(), m.toString());
        assertTrue(m.end() >= base + RESERVATION, m.toString());

        final String range = "[" + Sizes.hex(base) + ", " + Sizes.hex(base + RESERVATION) + ")";
        final MrdException again = assertThrows(MrdException.class, () -> Posix.reserve(base, RESERVATION));
        assertEquals(ErrorCode.EEXIST, again.code());
        assertTrue(again.getMessage().contains(range), again.getMessage());
        assertTrue(again.getMessage().contains("--base-virtaddr"), again.getMessage());

        // Overlapping only the last page is refused as well, and leaves the reservation as it was.
        final long tail = base + RESERVATION - 4096;
        final MrdException overlap = assertThrows(MrdException.class, () -> Posix.reserve(tail, 2 * 4096));
        assertEquals(ErrorCode.EEXIST, overlap.code());
        assertEquals("---p", ProcMaps.covering(base).perms());
    }

    @Test
    void mapsAMemfdInsideTheReservationAndGivesItBack()
    {
        reserve();
        memfd = Posix.memfdCreate("mrd-posix-test", Posix.MFD_CLOEXEC);
        Posix.ftruncate(memfd, WINDOW);
        final long window = base + WINDOW_OFFSET;
        final MemorySegment mapped = Posix.mapFixed(window, WINDOW, Posix.PROT_READ | Posix.PROT_WRITE,
            Posix.MAP_SHARED, memfd, 0);
        assertEquals(window, mapped.address());
        assertEquals(WINDOW, mapped.byteSize());

        final ProcMaps.Mapping m = ProcMaps.covering(window);
        assertEquals("rw-s", m.perms(), m.toString());
        assertTrue(m.path().contains("memfd:mrd-posix-test"), m.toString());
        assertEquals(window, m.start(), m.toString());
        assertEquals(window + WINDOW, m.end(), m.toString());
        assertEquals("---p", ProcMaps.covering(base).perms(), "the rest stays reserved");
        assertEquals("---p", ProcMaps.covering(window + WINDOW).perms(), "the rest stays reserved");

        mapped.set(ValueLayout.JAVA_LONG, 0, 0x1122334455667788L);
        mapped.set(ValueLayout.JAVA_LONG, WINDOW - 8, 42L);
        assertEquals(0x1122334455667788L, mapped.get(ValueLayout.JAVA_LONG, 0));

        // The same file mapped elsewhere shows the same bytes: the mapping is shared, as secondaries need.
        second = Posix.map(WINDOW, Posix.PROT_READ, Posix.MAP_SHARED, memfd, 0);
        assertEquals(0x1122334455667788L, second.get(ValueLayout.JAVA_LONG, 0));
        assertEquals(42L, second.get(ValueLayout.JAVA_LONG, WINDOW - 8));

        assertEquals(0, Posix.punchHole(memfd, 0, 4096));
        assertEquals(0L, mapped.get(ValueLayout.JAVA_LONG, 0), "a punched page reads as zero");
        assertEquals(42L, mapped.get(ValueLayout.JAVA_LONG, WINDOW - 8));

        Posix.unmapToReservation(window, WINDOW);
        final ProcMaps.Mapping back = ProcMaps.covering(window);
        assertNotNull(back);
        assertEquals("---p", back.perms(), back.toString());
        assertTrue(!back.path().contains("memfd"), back.toString());
    }

    @Test
    void locksAndUnlocksMappedPages()
    {
        final long limit = Posix.memlockLimit();
        assumeTrue(limit == Posix.RLIM_INFINITY || limit >= 64 * Sizes.KIB, "RLIMIT_MEMLOCK " + limit);
        reserve();
        memfd = Posix.memfdCreate("mrd-mlock-test", Posix.MFD_CLOEXEC);
        Posix.ftruncate(memfd, WINDOW);
        final long window = base + WINDOW_OFFSET;
        Posix.mapFixed(window, WINDOW, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, memfd, 0);
        assertEquals(0, Posix.mlock(window, 4 * 4096));
        assertEquals(0, Posix.munlock(window, 4 * 4096));
        Posix.unmapToReservation(window, WINDOW);
    }

    @Test
    void mlockOfUnmappedMemoryReturnsTheErrno()
    {
        // Nothing is ever mapped at the second page of the address space.
        assumeTrue(null == ProcMaps.covering(0x1000));
        assertEquals(ErrorCode.ENOMEM.errno(), Posix.mlock(0x1000, 4096));
    }

    @Test
    void memlockLimitIsTheSoftLimit() throws IOException
    {
        final long limit = Posix.memlockLimit();
        String soft = null;
        for (final String line : Files.readAllLines(Path.of("/proc/self/limits")))
        {
            if (line.startsWith("Max locked memory"))
            {
                soft = line.substring("Max locked memory".length()).trim().split("\\s+")[0];
            }
        }
        assertNotNull(soft);
        assertEquals("unlimited".equals(soft) ? Posix.RLIM_INFINITY : Long.parseLong(soft), limit);
    }

    @Test
    void flockIsExclusiveBetweenTwoOpenFiles(@TempDir final Path dir) throws IOException
    {
        final Path file = Files.createFile(dir.resolve("mrd.lock"));
        final int fd1 = Posix.open(file.toString(), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
        try
        {
            final int fd2 = Posix.open(file.toString(), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
            try
            {
                assertEquals(0, Posix.flock(fd1, Posix.LOCK_EX | Posix.LOCK_NB));
                assertEquals(ErrorCode.EAGAIN.errno(), Posix.flock(fd2, Posix.LOCK_EX | Posix.LOCK_NB));
                assertEquals(ErrorCode.EAGAIN.errno(), Posix.flock(fd2, Posix.LOCK_SH | Posix.LOCK_NB));
                assertEquals(0, Posix.flock(fd1, Posix.LOCK_EX | Posix.LOCK_NB), "re-locking the same file");
                assertEquals(0, Posix.flock(fd1, Posix.LOCK_UN));
                assertEquals(0, Posix.flock(fd2, Posix.LOCK_EX | Posix.LOCK_NB));
                assertEquals(ErrorCode.EAGAIN.errno(), Posix.flock(fd1, Posix.LOCK_EX | Posix.LOCK_NB));
            }
            finally
            {
                Posix.close(fd2);
            }
            // Closing the holder's descriptor releases its lock.
            assertEquals(0, Posix.flock(fd1, Posix.LOCK_EX | Posix.LOCK_NB));
        }
        finally
        {
            Posix.close(fd1);
        }
    }

    @Test
    void failuresNameTheCallAndTheErrno(@TempDir final Path dir)
    {
        final MrdException enomem = Posix.failure(12, "mmap(x)");
        assertEquals(ErrorCode.ENOMEM, enomem.code());
        assertTrue(enomem.getMessage().contains("ENOMEM: Cannot allocate memory"), enomem.getMessage());
        assertTrue(enomem.getMessage().startsWith("mmap(x)"), enomem.getMessage());

        final MrdException unknown = Posix.failure(4000, "f()");
        assertEquals(ErrorCode.EUNKNOWN, unknown.code());
        assertTrue(unknown.getMessage().contains("errno 4000"), unknown.getMessage());

        final Path missing = dir.resolve("missing");
        final MrdException open = assertThrows(MrdException.class,
            () -> Posix.open(missing.toString(), Posix.O_RDONLY, 0));
        assertEquals(ErrorCode.ENOENT, open.code());
        assertTrue(open.getMessage().contains(missing.toString()), open.getMessage());
        assertTrue(open.getMessage().contains("ENOENT: No such file or directory"), open.getMessage());

        final MrdException badFd = assertThrows(MrdException.class, () -> Posix.ftruncate(-1, 4096));
        assertEquals(ErrorCode.EBADF, badFd.code());
        assertTrue(badFd.getMessage().contains("EBADF: Bad file descriptor"), badFd.getMessage());
    }

    @Test
    void uidAndGidAreThisProcesses() throws IOException
    {
        for (final String line : Files.readAllLines(Path.of("/proc/self/status")))
        {
            if (line.startsWith("Uid:"))
            {
                assertEquals(Integer.parseInt(line.split("\\s+")[1]), Posix.getuid());
            }
            else if (line.startsWith("Gid:"))
            {
                assertEquals(Integer.parseInt(line.split("\\s+")[1]), Posix.getgid());
            }
        }
    }

    /**
     * Reserves {@link #RESERVATION} bytes at the first candidate base that is free, moving on when a JVM
     * thread maps there between the check and the call.
     */
    private MemorySegment reserve()
    {
        for (final long candidate : CANDIDATE_BASES)
        {
            if (ProcMaps.isFree(candidate, candidate + RESERVATION))
            {
                try
                {
                    final MemorySegment reservation = Posix.reserve(candidate, RESERVATION);
                    base = candidate;
                    return reservation;
                }
                catch (final MrdException ex)
                {
                    if (ex.code() != ErrorCode.EEXIST)
                    {
                        throw ex;
                    }
                }
            }
        }
        return fail("no free candidate base for a test reservation");
    }
}
