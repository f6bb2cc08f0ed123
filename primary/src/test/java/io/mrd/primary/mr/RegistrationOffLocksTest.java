package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.MemoryLocks;
import io.mrd.testing.BaseAddresses;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * While one registration is blocked inside the provider (on a latch), everything that does not need its range
 * completes: ALLOC, FREE of other memory, CREATE_MR of an existing MR, a lookup and a registration of a disjoint
 * range. A CREATE_MR of an overlapping range waits and returns the same MR; a FREE of the held segments waits
 * and completes once the registration has returned, leaving no pin; a failed registration lets its waiters
 * register themselves; a close waits for it and leaves nothing pinned.
 * <p>
 * Nothing here measures time to decide: an operation that waited behind the blocked registration would never
 * complete while the latch is shut, so the deadlines only keep a failing test from hanging. The latencies seen
 * are printed, for the report.
 */
class RegistrationOffLocksTest
{
    private static final long BASE = BaseAddresses.next();
    private static final long SEG = EngineFixture.SEGMENT;
    private static final long DEADLINE_SECONDS = 30;
    private static final int OTHER = Access.LOCAL_WRITE | Access.REMOTE_READ;
    private static final int THIRD = Access.LOCAL_WRITE | Access.REMOTE_READ | Access.REMOTE_WRITE;

    private final ExecutorService pool = Executors.newCachedThreadPool();
    private EngineFixture f;
    /** Registrations of this address block until {@link #release} opens. */
    private volatile long blockedAddress;
    private final CountDownLatch entered = new CountDownLatch(1);
    private final CountDownLatch release = new CountDownLatch(1);
    /** What the blocked registration saw when it reached the provider. */
    private final List<String> seenInProvider = new ArrayList<>();

    @BeforeEach
    void setUp()
    {
        f = new EngineFixture(EngineOptions.at(BASE));
        f.registrar.beforeRegister = (address, length) ->
        {
            if (address != blockedAddress)
            {
                return;
            }
            synchronized (seenInProvider)
            {
                seenInProvider.add("memory lock " + (MemoryLocks.held(f.memory) ? "held" : "free"));
                seenInProvider.add("holds " + f.memory.holdCount());
            }
            entered.countDown();
            awaitQuietly(release);
        };
    }

    @AfterEach
    void tearDown() throws InterruptedException
    {
        release.countDown();
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(DEADLINE_SECONDS, TimeUnit.SECONDS), "threads left running");
        f.close();
    }

    @Test
    void otherRequestsCompleteWhileARegistrationIsBlockedAndAnOverlappingOneWaitsForIt() throws Exception
    {
        final Allocation blocked = f.engine.allocate(4 * SEG, 1);
        final Allocation disjoint = f.engine.allocate(2 * SEG, 2, OTHER);
        final Allocation registered = f.engine.allocate(SEG, 3, THIRD);
        final int existingLkey = f.engine.createMr(registered.address(), 3).lkey;
        final Map<String, Long> unloaded = measureOthers(registered, 3 * SEG);

        blockedAddress = blocked.address();
        final Future<MrEntry> first = pool.submit(() -> f.engine.createMr(blocked.address() + SEG, 1));
        assertTrue(entered.await(DEADLINE_SECONDS, TimeUnit.SECONDS), "the registration never reached the provider");
        assertEquals(List.of("memory lock free", "holds 4"), seenInProvider, "what the registration holds");

        final Map<String, Long> loaded = new TreeMap<>();
        final Allocation spare = timed(loaded, "ALLOC", () -> f.engine.allocate(SEG, 2, OTHER));
        timed(loaded, "FREE of other memory", () -> f.engine.freeMemory(spare.address(), spare.length(), 2));
        assertEquals(existingLkey, timed(loaded, "CREATE_MR of an existing MR",
            () -> f.engine.createMr(registered.address(), 3)).lkey);
        assertTrue(timed(loaded, "lookup", () -> f.engine.lookup(registered.address(), new MrEntry())));
        final MrEntry other = timed(loaded, "CREATE_MR of a disjoint range",
            () -> f.engine.createMr(disjoint.address(), 2));
        assertEquals(disjoint.address(), other.start);
        assertFalse(first.isDone(), "the blocked registration returned before its latch opened");

        // The overlapping request parks until the registration in flight is published.
        final Future<MrEntry> overlapping = pool.submit(() -> f.engine.createMr(blocked.address() + 3 * SEG, 1));
        final Thread waiter = awaitParkedThread("createMr", overlapping);
        final int registrationsBefore = f.registrar.registrations.get();

        release.countDown();
        final MrEntry created = first.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        final MrEntry joined = overlapping.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        assertEquals(created.lkey, joined.lkey, "the overlapping request got another MR (waiter " + waiter + ")");
        assertEquals(blocked.address(), created.start);
        assertEquals(blocked.end(), created.end);
        assertEquals(registrationsBefore + 1, f.registrar.registrations.get(), "registrations of the blocked range");
        f.checkInvariants();
        System.out.printf("latency with no registration in flight: %s%nlatency while one is blocked in the " +
            "provider: %s%n", micros(unloaded), micros(loaded));
    }

    @Test
    void freeOfHeldSegmentsWaitsForTheRegistrationAndLeavesNoPin() throws Exception
    {
        final Allocation blocked = f.engine.allocate(2 * SEG, 1);
        blockedAddress = blocked.address();
        final Future<MrEntry> create = pool.submit(() -> f.engine.createMr(blocked.address(), 1));
        assertTrue(entered.await(DEADLINE_SECONDS, TimeUnit.SECONDS), "the registration never reached the provider");

        final Future<?> free = pool.submit(() -> f.engine.freeMemory(blocked.address(), blocked.length(), 1));
        awaitParkedThread("freeMemory", free);
        assertTrue(f.memory.list(0).isAllocated(0), "the free took the held segments out of use");

        release.countDown();
        assertEquals(blocked.address(), create.get(DEADLINE_SECONDS, TimeUnit.SECONDS).start);
        free.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        f.engine.garbageCollect();
        assertEquals(0, f.registrar.pinnedBytes(), "pinned bytes after the free\n" + f.describe());
        assertEquals(0, f.registrar.live());
        assertEquals(0, f.memory.holdCount());
        f.checkInvariants();
    }

    @Test
    void reclaimOfAClientWaitsForItsRegistration() throws Exception
    {
        final Allocation blocked = f.engine.allocate(2 * SEG, 7);
        blockedAddress = blocked.address();
        final Future<MrEntry> create = pool.submit(() -> f.engine.createMr(blocked.address(), 7));
        assertTrue(entered.await(DEADLINE_SECONDS, TimeUnit.SECONDS), "the registration never reached the provider");

        final Future<?> reclaim = pool.submit(() -> f.engine.reclaim(7));
        awaitParkedThread("reclaim", reclaim);
        assertTrue(f.memory.list(0).isAllocated(0), "the reclaim took the held segments out of use");

        release.countDown();
        create.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        reclaim.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        assertEquals(0, f.registrar.pinnedBytes(), "pinned bytes after the reclaim\n" + f.describe());
        f.checkInvariants();
    }

    @Test
    void aFailedRegistrationWakesItsWaitersWhichRegisterThemselves() throws Exception
    {
        final Allocation blocked = f.engine.allocate(2 * SEG, 1);
        blockedAddress = blocked.address();
        final CountDownLatch failOnce = new CountDownLatch(1);
        final var blocking = f.registrar.beforeRegister;
        f.registrar.beforeRegister = (address, length) ->
        {
            blocking.accept(address, length);
            if (failOnce.getCount() > 0)
            {
                failOnce.countDown();
                throw new MrdException(ErrorCode.ENOMEM, "injected failure of the blocked registration");
            }
        };
        final Future<MrEntry> failing = pool.submit(() -> f.engine.createMr(blocked.address(), 1));
        assertTrue(entered.await(DEADLINE_SECONDS, TimeUnit.SECONDS), "the registration never reached the provider");
        final Future<MrEntry> waiting = pool.submit(() -> f.engine.createMr(blocked.address() + SEG, 1));
        awaitParkedThread("createMr", waiting);

        release.countDown();
        final ExecutionException ex = assertThrows(ExecutionException.class,
            () -> failing.get(DEADLINE_SECONDS, TimeUnit.SECONDS));
        assertEquals(ErrorCode.ENOMEM, ((MrdException)ex.getCause()).code());
        final MrEntry entry = waiting.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        assertEquals(blocked.address(), entry.start, "the waiter registered the chunk itself");
        assertEquals(1, f.registrar.live());
        f.checkInvariants();
    }

    @Test
    void closeWithARegistrationInFlightWaitsForItAndLeavesNoPin() throws Exception
    {
        final Allocation blocked = f.engine.allocate(2 * SEG, 1);
        blockedAddress = blocked.address();
        final Future<MrEntry> create = pool.submit(() -> f.engine.createMr(blocked.address(), 1));
        assertTrue(entered.await(DEADLINE_SECONDS, TimeUnit.SECONDS), "the registration never reached the provider");

        final Future<?> close = pool.submit(() -> f.engine.close());
        awaitParkedThread("close", close);

        release.countDown();
        final ExecutionException ex = assertThrows(ExecutionException.class,
            () -> create.get(DEADLINE_SECONDS, TimeUnit.SECONDS));
        assertEquals(ErrorCode.ENODEV, ((MrdException)ex.getCause()).code(), ex.getCause().getMessage());
        close.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
        assertEquals(0, f.registrar.pinnedBytes(), "pinned bytes after close");
        assertEquals(0, f.registrar.live(), "live registrations after close");
        assertEquals(0, f.memory.holdCount());
    }

    /** ALLOC, FREE, CREATE_MR of an existing MR and a lookup with nothing in flight, for comparison. */
    private Map<String, Long> measureOthers(final Allocation registered, final long length)
    {
        final Map<String, Long> latencies = new TreeMap<>();
        final Allocation spare = timed(latencies, "ALLOC", () -> f.engine.allocate(length, 2, OTHER));
        timed(latencies, "FREE of other memory", () -> f.engine.freeMemory(spare.address(), spare.length(), 2));
        timed(latencies, "CREATE_MR of an existing MR", () -> f.engine.createMr(registered.address(), 3));
        timed(latencies, "lookup", () -> f.engine.lookup(registered.address(), new MrEntry()));
        return latencies;
    }

    /** Runs {@code call} on another thread, waiting for it with a deadline, and records how long it took. */
    private <T> T timed(final Map<String, Long> latencies, final String what, final Callable<T> call)
    {
        final long start = System.nanoTime();
        final Future<T> result = pool.submit(call);
        try
        {
            final T value = result.get(DEADLINE_SECONDS, TimeUnit.SECONDS);
            latencies.put(what, System.nanoTime() - start);
            return value;
        }
        catch (final TimeoutException ex)
        {
            return fail(what + " did not complete while a registration was in flight: it waits behind it");
        }
        catch (final InterruptedException | ExecutionException ex)
        {
            throw new AssertionError(what + " failed", ex);
        }
    }

    /**
     * Waits until the thread running {@code task} (found by the engine method in its stack) is parked, and
     * checks that the task has not completed: it is waiting, not merely slow.
     */
    private static Thread awaitParkedThread(final String method, final Future<?> task)
    {
        final Thread parked = Wait.await(method + " to park", Duration.ofSeconds(DEADLINE_SECONDS), () ->
        {
            assertFalse(task.isDone(), method + " completed although it should wait");
            return parkedIn(method);
        }, Optional::isPresent).orElseThrow();
        assertFalse(task.isDone(), method + " completed although it should wait");
        return parked;
    }

    /**
     * @return a thread parked in the engine's {@code method}, if there is one now.
     */
    private static Optional<Thread> parkedIn(final String method)
    {
        for (final Map.Entry<Thread, StackTraceElement[]> e : Thread.getAllStackTraces().entrySet())
        {
            final Thread.State state = e.getKey().getState();
            if ((state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING) &&
                inEngine(e.getValue(), method))
            {
                return Optional.of(e.getKey());
            }
        }
        return Optional.empty();
    }

    private static boolean inEngine(final StackTraceElement[] stack, final String method)
    {
        boolean parked = false;
        for (final StackTraceElement frame : stack)
        {
            parked |= frame.getClassName().contains("SegmentHolds") || frame.getClassName().contains("InFlightRanges");
            if (frame.getClassName().equals(MrEngine.class.getName()) && frame.getMethodName().startsWith(method))
            {
                return parked;
            }
        }
        return false;
    }

    private static String micros(final Map<String, Long> latencies)
    {
        final StringBuilder sb = new StringBuilder();
        latencies.forEach((what, nanos) -> sb.append(sb.isEmpty() ? "" : ", ").append(what).append(' ')
            .append(nanos / 1000).append(" µs"));
        return sb.toString();
    }

    private static void awaitQuietly(final CountDownLatch latch)
    {
        try
        {
            if (!latch.await(DEADLINE_SECONDS, TimeUnit.SECONDS))
            {
                throw new IllegalStateException("the test never released the blocked registration");
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while blocked", ex);
        }
    }
}
