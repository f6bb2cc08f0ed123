package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.mrd.layout.sys.Sizes.KIB;
import static io.mrd.layout.sys.Sizes.MIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The soft provider against the kernel's own count of locked memory ({@code VmLck} in /proc/self/status): what it
 * says it pinned is what the kernel has locked, and failures leave nothing locked.
 */
final class SoftRegistrarTest
{
    /** What the MR engine asks for local memory. */
    private static final int LOCAL_ACCESS = Access.LOCAL | Access.RELAXED_ORDERING;

    private static final long LENGTH = 4 * MIB;

    private final TestMappings mappings = new TestMappings();
    private final List<Registrar> registrars = new ArrayList<>();
    private long vmLckBefore;

    @BeforeEach
    void recordLockedMemory()
    {
        vmLckBefore = vmLck();
    }

    @AfterEach
    void removeWhatTheTestCreated()
    {
        registrars.forEach(Registrar::close);
        mappings.unmapAll();
        assertEquals(vmLckBefore, vmLck(), "memory left locked after the test");
    }

    @Test
    void pinsTheRangeAndKeysItLikeAnMlx5Mkey()
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults());
        final MemorySegment memory = map(LENGTH);

        final Registration first = soft.register(memory.address(), LENGTH, LOCAL_ACCESS);
        assertEquals(memory.address(), first.address());
        assertEquals(LENGTH, first.length());
        assertEquals(Access.NO_RKEY, first.rkey(), "no rkey for local access: nothing remote may use it");
        assertEquals(first.lkey() & 0xFFFF_FFFFL, first.handle());
        assertEquals(SoftRegistrar.index(first.lkey()) << 8 | SoftRegistrar.variant(first.lkey()), first.lkey());
        assertNotEquals(0, SoftRegistrar.index(first.lkey()), "index 0 is never handed out");
        assertEquals(LENGTH, soft.pinnedBytes());
        assertEquals(vmLckBefore + LENGTH, vmLck(), "the kernel's count of locked memory");

        final Registration second = soft.register(memory.address(), 64 * KIB, Access.LOCAL_WRITE | Access.REMOTE_READ);
        assertEquals(second.lkey(), second.rkey(), "with remote access, mlx5 gives one key for both");
        assertEquals(SoftRegistrar.index(first.lkey()) + 1, SoftRegistrar.index(second.lkey()));
        assertEquals((SoftRegistrar.variant(first.lkey()) + 1) & 0xFF, SoftRegistrar.variant(second.lkey()));
        assertEquals(LENGTH + 64 * KIB, soft.pinnedBytes(), "counted per registration, as pinned_vm is");

        soft.deregister(first);
        assertEquals(64 * KIB, soft.pinnedBytes());
        assertEquals(vmLckBefore + 64 * KIB, vmLck(), "the pages the second registration holds stay locked");
        soft.deregister(second);
        assertEquals(0, soft.pinnedBytes());
        assertEquals(vmLckBefore, vmLck());
        assertEquals(0, soft.liveCount());
    }

    @Test
    void refusesToPassMaxPinnedNamingTheLimitAndPinsNothing()
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults().withMaxPinned(6 * MIB));
        final MemorySegment memory = map(2 * LENGTH);
        soft.register(memory.address(), LENGTH, LOCAL_ACCESS);

        final MrdException ex = assertThrows(MrdException.class,
            () -> soft.register(memory.address() + LENGTH, LENGTH, LOCAL_ACCESS));
        assertEquals(ErrorCode.ENOMEM, ex.code());
        assertEquals("registering 4MiB would pin 8MiB, over --max-pinned 6MiB (4MiB pinned now): free memory, " +
            "or raise --max-pinned", ex.getMessage());
        assertEquals(LENGTH, soft.pinnedBytes());
        assertEquals(vmLckBefore + LENGTH, vmLck());

        soft.register(memory.address() + LENGTH, 2 * MIB, LOCAL_ACCESS);
        assertEquals(6 * MIB, soft.pinnedBytes(), "exactly at the limit is allowed");
    }

    @Test
    void failsTheNthRegistrationAndLeavesNothingPinnedByIt()
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults().withFailNth(3));
        final MemorySegment memory = map(LENGTH);
        final long slice = MIB;

        soft.register(memory.address(), slice, LOCAL_ACCESS);
        soft.register(memory.address() + slice, slice, LOCAL_ACCESS);
        final MrdException ex = assertThrows(MrdException.class,
            () -> soft.register(memory.address() + 2 * slice, slice, LOCAL_ACCESS));
        assertEquals(ErrorCode.ENOMEM, ex.code());
        assertEquals("injected failure of registration #3 (--fail-nth)", ex.getMessage());
        assertEquals(2 * slice, soft.pinnedBytes());
        assertEquals(vmLckBefore + 2 * slice, vmLck());

        soft.register(memory.address() + 3 * slice, slice, LOCAL_ACCESS);
        assertEquals(3 * slice, soft.pinnedBytes());
        assertEquals(vmLckBefore + 3 * slice, vmLck());
        assertEquals(3, soft.liveCount());
    }

    @Test
    void addsTheConfiguredLatencyToEachRegistration()
    {
        final long latency = 2_000_000;
        final SoftRegistrar soft = registrar(ProviderConfig.defaults().withLatencyNanos(latency));
        final MemorySegment memory = map(64 * KIB);
        final long start = System.nanoTime();
        soft.register(memory.address(), 64 * KIB, LOCAL_ACCESS);
        // A floor the provider guarantees by waiting until its deadline, not a measurement of this machine.
        assertTrue(System.nanoTime() - start >= latency);
    }

    @Test
    void concurrentRegistrationsGetDistinctKeysAndAnExactPinnedCount() throws Exception
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults());
        final int threads = 8;
        final int perThread = 32;
        final long slice = 64 * KIB;
        final MemorySegment memory = map(threads * perThread * slice);
        final CountDownLatch go = new CountDownLatch(1);
        final ExecutorService pool = Executors.newFixedThreadPool(threads);
        try
        {
            final List<Future<List<Registration>>> futures = new ArrayList<>();
            for (int t = 0; t < threads; t++)
            {
                final long base = memory.address() + t * perThread * slice;
                futures.add(pool.submit(() ->
                {
                    go.await();
                    final List<Registration> mine = new ArrayList<>();
                    for (int i = 0; i < perThread; i++)
                    {
                        mine.add(soft.register(base + i * slice, slice, LOCAL_ACCESS));
                    }
                    return mine;
                }));
            }
            go.countDown();
            final List<Registration> all = new ArrayList<>();
            for (final Future<List<Registration>> f : futures)
            {
                all.addAll(f.get(60, TimeUnit.SECONDS));
            }
            final Set<Integer> keys = new HashSet<>();
            all.forEach(r -> keys.add(r.lkey()));
            assertEquals(threads * perThread, keys.size(), "every lkey distinct");
            assertEquals(memory.byteSize(), soft.pinnedBytes());
            assertEquals(vmLckBefore + memory.byteSize(), vmLck());

            final CountDownLatch release = new CountDownLatch(1);
            final List<Future<?>> deregistrations = new ArrayList<>();
            for (int t = 0; t < threads; t++)
            {
                final List<Registration> mine = all.subList(t * perThread, (t + 1) * perThread);
                deregistrations.add(pool.submit(() ->
                {
                    release.await();
                    mine.forEach(soft::deregister);
                    return null;
                }));
            }
            release.countDown();
            for (final Future<?> f : deregistrations)
            {
                f.get(60, TimeUnit.SECONDS);
            }
            assertEquals(0, soft.pinnedBytes());
            assertEquals(0, soft.liveCount());
            assertEquals(vmLckBefore, vmLck());
        }
        finally
        {
            pool.shutdownNow();
        }
    }

    @Test
    void refusesASecondDeregistrationAndAKeyFromAnotherRegistration()
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults());
        final MemorySegment memory = map(LENGTH);
        final Registration registration = soft.register(memory.address(), LENGTH, LOCAL_ACCESS);
        final Registration kept = soft.register(memory.address(), 64 * KIB, LOCAL_ACCESS);

        final int staleKey = registration.lkey() ^ 0x01;
        final Registration stale = new Registration(registration.address(), registration.length(), staleKey,
            staleKey, staleKey & 0xFFFF_FFFFL, registration.deviceHandle());
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> soft.deregister(stale)).code());

        soft.deregister(registration);
        final MrdException twice = assertThrows(MrdException.class, () -> soft.deregister(registration));
        assertEquals(ErrorCode.EINVAL, twice.code());
        assertTrue(twice.getMessage().contains("deregistered twice"), twice.getMessage());
        assertEquals(64 * KIB, soft.pinnedBytes(), "the refused call changed nothing");
        assertEquals(vmLckBefore + 64 * KIB, vmLck());
        soft.deregister(kept);
    }

    @Test
    void aPageSharedByTwoRegistrationsStaysLockedUntilBothAreGone()
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults());
        final long page = PageLocks.PAGE_SIZE;
        final MemorySegment memory = map(4 * page);
        final long base = memory.address();

        // [0, 1.5 pages) and [1.5 pages, 3 pages): page 1 belongs to both.
        final Registration left = soft.register(base, page + page / 2, LOCAL_ACCESS);
        final Registration right = soft.register(base + page + page / 2, page + page / 2, LOCAL_ACCESS);
        assertEquals(vmLckBefore + 3 * page, vmLck());

        soft.deregister(left);
        assertEquals(vmLckBefore + 2 * page, vmLck(), "page 1 still held by the right-hand registration");
        soft.deregister(right);
        assertEquals(vmLckBefore, vmLck());
    }

    @Test
    void anUnmappedRangeFailsWithEnomemNamingRlimitMemlockAndPinsNothing()
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults());
        final long page = PageLocks.PAGE_SIZE;
        final MemorySegment memory = map(3 * page);
        Posix.munmap(memory.address() + page, page);

        final MrdException ex = assertThrows(MrdException.class,
            () -> soft.register(memory.address(), 3 * page, LOCAL_ACCESS));
        assertEquals(ErrorCode.ENOMEM, ex.code());
        assertTrue(ex.getMessage().contains("ENOMEM: Cannot allocate memory"), ex.getMessage());
        assertTrue(ex.getMessage().contains("RLIMIT_MEMLOCK is "), ex.getMessage());
        assertTrue(ex.getMessage().contains("not mapped"), ex.getMessage());
        assertEquals(0, soft.pinnedBytes());
        assertEquals(0, soft.liveCount());
        assertEquals(vmLckBefore, vmLck(), "the first page, locked before mlock hit the hole, is unlocked again");
    }

    @Test
    void translatesMlockErrnoIntoAnActionableMessage()
    {
        final long limit = Posix.memlockLimit();
        final MrdException again = SoftRegistrar.lockFailure(ErrorCode.EAGAIN.errno(), 0x10000, 64 * MIB, 2 * MIB);
        assertEquals(ErrorCode.ENOMEM, again.code());
        final String cause = "mlock of 64MiB at 0x10000 failed: EAGAIN: Resource temporarily unavailable";
        if (Posix.RLIM_INFINITY != limit && limit < 66 * MIB)
        {
            assertEquals(cause + "; mrd has 2MiB pinned and RLIMIT_MEMLOCK is " + Sizes.format(limit) +
                ": raise it (ulimit -l, LimitMEMLOCK= in the systemd unit, memlock in /etc/security/limits.conf) " +
                "or give the daemon CAP_IPC_LOCK", again.getMessage());
        }
        else
        {
            assertEquals(cause + ": part of the range is not mapped, or the system is short of memory (mrd has " +
                "2MiB pinned; RLIMIT_MEMLOCK is " + PinnedBytes.formatLimit(limit) + ")", again.getMessage());
        }

        final MrdException perm = SoftRegistrar.lockFailure(ErrorCode.EPERM.errno(), 0x10000, 64 * MIB, 0);
        assertEquals(ErrorCode.EPERM, perm.code());
        assertTrue(perm.getMessage().contains("EPERM: Operation not permitted"), perm.getMessage());
    }

    @Test
    void refusesAnEmptyOrWrappingRange()
    {
        final SoftRegistrar soft = registrar(ProviderConfig.defaults());
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class,
            () -> soft.register(0x10000, 0, LOCAL_ACCESS)).code());
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class,
            () -> soft.register(Long.MAX_VALUE - 10, 4096, LOCAL_ACCESS)).code());
        assertEquals(0, soft.pinnedBytes());
    }

    @Test
    void closeUnlocksWhatIsStillLiveAndRefusesNewRegistrations()
    {
        final SoftRegistrar soft = new SoftRegistrar();
        final MemorySegment memory = map(LENGTH);
        soft.register(memory.address(), LENGTH, LOCAL_ACCESS);
        assertEquals(vmLckBefore + LENGTH, vmLck());
        soft.close();
        assertEquals(vmLckBefore, vmLck());
        assertEquals(0, soft.pinnedBytes());
        assertFalse(soft.liveCount() > 0);
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class,
            () -> soft.register(memory.address(), LENGTH, LOCAL_ACCESS)).code());
    }

    /**
     * A large range faulted in by three threads, then locked with one mlock: the kernel's count of locked memory
     * rises by exactly the range and falls back to where it was, and the populator's threads go with the provider.
     */
    @Test
    void registersAQuarterGibibyteFaultedInBySeveralThreadsAndUnlocksItAll() throws InterruptedException
    {
        final long length = 256 * MIB;
        Assumptions.assumeTrue(canLock(length), "RLIMIT_MEMLOCK below 256MiB and no CAP_IPC_LOCK");
        final Set<Thread> before = populateThreads();
        final SoftRegistrar soft = registrar(ProviderConfig.defaults().withPopulateThreads(3));
        final MemorySegment memory = sharedMemory(length);

        final Registration registration = soft.register(memory.address(), length, LOCAL_ACCESS);
        assertEquals(length, soft.pinnedBytes());
        assertEquals(vmLckBefore + length, vmLck(), "the kernel's count of locked memory");
        final Set<Thread> pool = populateThreads();
        pool.removeAll(before);
        assertEquals(2, pool.size(), "two pool threads beside the registering one: " + pool);
        pool.forEach(t -> assertTrue(t.isDaemon(), t + " is a daemon thread"));

        soft.deregister(registration);
        assertEquals(0, soft.pinnedBytes());
        assertEquals(vmLckBefore, vmLck(), "all unlocked");
        soft.close();
        for (final Thread thread : pool)
        {
            thread.join(10_000);
            assertFalse(thread.isAlive(), thread + " stopped with the provider");
        }
    }

    private static Set<Thread> populateThreads()
    {
        final Set<Thread> threads = new HashSet<>();
        Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().startsWith("mrd-populate-"))
            .forEach(threads::add);
        return threads;
    }

    /**
     * @return whether this process may lock {@code length} more bytes: RLIMIT_MEMLOCK allows it, or the process has
     * CAP_IPC_LOCK (bit 14 of CapEff), which lifts the limit.
     */
    private static boolean canLock(final long length)
    {
        final long limit = Posix.memlockLimit();
        if (Posix.RLIM_INFINITY == limit || limit >= vmLck() + length)
        {
            return true;
        }
        try
        {
            for (final String line : Files.readAllLines(Path.of("/proc/self/status")))
            {
                if (line.startsWith("CapEff:"))
                {
                    return 0 != (Long.parseUnsignedLong(line.substring("CapEff:".length()).trim(), 16) & 1L << 14);
                }
            }
            return false;
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    private MemorySegment sharedMemory(final long length)
    {
        return mappings.sharedMemfd("soft-registrar-test", length);
    }

    private SoftRegistrar registrar(final ProviderConfig config)
    {
        final SoftRegistrar soft = (SoftRegistrar)Registrars.create(config);
        registrars.add(soft);
        return soft;
    }

    private MemorySegment map(final long length)
    {
        final MemorySegment memory = Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE,
            Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
        mappings.add(memory);
        return memory;
    }

    /**
     * @return the kernel's count of memory locked by this process, in bytes.
     */
    static long vmLck()
    {
        try
        {
            for (final String line : Files.readAllLines(Path.of("/proc/self/status")))
            {
                if (line.startsWith("VmLck:"))
                {
                    final String[] parts = line.substring("VmLck:".length()).trim().split("\\s+");
                    assertEquals("kB", parts[1]);
                    return Long.parseLong(parts[0]) * KIB;
                }
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        throw new IllegalStateException("no VmLck in /proc/self/status");
    }
}
