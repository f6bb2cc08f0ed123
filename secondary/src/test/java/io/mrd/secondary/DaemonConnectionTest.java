package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.Message;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * {@link DaemonConnection}'s replies read by its callers ({@link PendingReplies}, {@link ReadTurn}) against the
 * daemon's end of a socket pair ({@link PairedDaemon}): who reads which reply (the listener records the thread
 * that read each one), that every caller gets its own, and that a death, a timeout, a close, a failure and an
 * interrupt wake every caller waiting, the one reading the socket included. Nothing here waits on timing: a
 * test waits for a state (a thread holding the read turn, a thread parked, a request received) with a deadline.
 */
final class DaemonConnectionTest
{
    private static final long LONG_TIMEOUT_MS = 60_000;
    private static final long BASE = 0x4000_0000L;

    /** Reply (its correlation id) → the thread that read it. */
    private final Map<Long, Thread> readBy = new ConcurrentHashMap<>();
    /** The thread that found the stream's end, and how it ended. */
    private final CompletableFuture<String> lostOn = new CompletableFuture<>();
    private PairedDaemon daemon;
    private DaemonConnection connection;

    @AfterEach
    void stop()
    {
        if (null != connection)
        {
            connection.close();
        }
        if (null != daemon)
        {
            daemon.close();
        }
    }

    @Test
    void aCallerAloneReadsItsOwnReplies()
    {
        open(true, LONG_TIMEOUT_MS);
        for (int i = 0; i < 200; i++)
        {
            final Message.MrCreated reply = create(BASE + i * 4096L);
            assertEquals(BASE + i * 4096L, reply.start());
            assertSame(Thread.currentThread(), readBy.get((long)reply.lkey()), "the caller read its reply itself");
        }
        assertEquals(200, readBy.size());
        assertNull(connection.reading(), "nobody holds the read turn between calls");
    }

    @Test
    void concurrentCallersEachGetTheirOwnReply() throws Exception
    {
        open(true, LONG_TIMEOUT_MS);
        final int threads = 8;
        final int calls = 500;
        final List<Caller> callers = new ArrayList<>();
        for (int t = 0; t < threads; t++)
        {
            final long base = BASE + t * (1L << 32);
            callers.add(Caller.start("caller-" + t, () ->
            {
                for (int i = 0; i < calls; i++)
                {
                    final long address = base + i * 4096L;
                    final Message.MrCreated reply = create(address);
                    if (reply.start() != address)
                    {
                        throw new AssertionError("CREATE_MR(" + address + ") got the reply for " + reply.start());
                    }
                }
                return null;
            }));
        }
        for (final Caller caller : callers)
        {
            assertNull(caller.result(), caller.name);
        }
        assertEquals(threads * calls, readBy.size());
        assertTrue(readBy.values().stream().noneMatch(t -> t.getName().equals("mrd-client-hangup")),
            "the hang-up watch read no reply");
        assertNull(connection.reading());
    }

    @Test
    void aWaitersReplyIsHandedToItWhileTheReaderWaitsForItsOwn() throws Exception
    {
        final TwoWaiting two = leaderAndParkedFollower();
        answerAndCheck(two.second(), two.follower(), two.leader().thread);
        assertTrue(two.leader().thread.isAlive(), "the leader still waits for its own");
        answerAndCheck(two.first(), two.leader(), two.leader().thread);
    }

    @Test
    void theReaderHandsTheTurnToAWaiterOnceItsReplyIsIn() throws Exception
    {
        final TwoWaiting two = leaderAndParkedFollower();
        answerAndCheck(two.first(), two.leader(), two.leader().thread);
        // Only a hand-on wakes the follower before its deadline: nobody else reads.
        answerAndCheck(two.second(), two.follower(), two.follower().thread);
    }

    @Test
    void anInterruptedReaderHandsTheTurnToAWaiter() throws Exception
    {
        final TwoWaiting two = leaderAndParkedFollower();
        two.leader().thread.interrupt();
        final MrdException interrupted = assertInstanceOf(MrdException.class, two.leader().result());
        assertEquals(ErrorCode.EIO, interrupted.code());
        assertTrue(interrupted.getMessage().startsWith("interrupted while waiting for the reply to CREATE_MR("),
            interrupted.getMessage());

        // Only a hand-on wakes the follower before its deadline: nobody else reads.
        answerAndCheck(two.second(), two.follower(), two.follower().thread);

        daemon.answer(two.first());
        daemon.echo(true);
        assertEquals(BASE + 8192, create(BASE + 8192).start(), "the late reply was dropped, the next call got its own");
        assertTrue(readBy.containsKey(two.first().correlationId()));
    }

    @Test
    void theDaemonsDeathWakesEveryWaiter() throws Exception
    {
        final List<Caller> callers = waiting(3, LONG_TIMEOUT_MS);
        daemon.die();
        assertEachFailed(callers, ErrorCode.ECONNRESET, message -> message.endsWith("closed the connection"));
        assertEquals(ErrorCode.ECONNRESET, assertThrows(DaemonDeadException.class, () -> create(BASE)).code());
    }

    @Test
    void aTimeoutWakesEveryWaiterAndTheConnectionGoesOn() throws Exception
    {
        assertEachFailed(waiting(3, 300), ErrorCode.ETIMEDOUT,
            message -> message.contains("got no reply within 300 ms"));
        assertNull(connection.reading(), "the timed-out reader left the turn");
        daemon.echo(true);
        assertEquals(BASE + (1 << 20), create(BASE + (1 << 20)).start());
    }

    @Test
    void closeWakesEveryWaiter() throws Exception
    {
        final List<Caller> callers = waiting(3, LONG_TIMEOUT_MS);
        connection.close();
        assertEachFailed(callers, ErrorCode.EBADF, message -> message.endsWith("is closed"));
        assertEquals(ErrorCode.EBADF, assertThrows(MrdException.class, () -> create(BASE)).code());
    }

    @Test
    void aFailureFromElsewhereWakesEveryWaiterTheReaderIncluded() throws Exception
    {
        final List<Caller> callers = waiting(3, LONG_TIMEOUT_MS);
        assertTrue(connection.fail(new DaemonDeadException("the watchdog found the heartbeat stale")));
        assertEachFailed(callers, ErrorCode.ECONNRESET, "the watchdog found the heartbeat stale"::equals);
        waitFor(() -> null == connection.reading(), "the reader leaving the turn");
    }

    @Test
    void theEndIsNoticedWithNoCallInFlight() throws Exception
    {
        open(true, LONG_TIMEOUT_MS);
        create(BASE);
        assertTrue(!lostOn.isDone());
        daemon.die();
        assertEquals("mrd-client-hangup: closed the connection", lostOn.get(20, TimeUnit.SECONDS));
        // Whether this call or the end's failure comes first, the connection is dead.
        assertThrows(DaemonDeadException.class, () -> create(BASE));
    }

    /** A caller reading the socket for its reply, another parked waiting for its own, and their requests. */
    private record TwoWaiting(Caller leader, Frame first, Caller follower, Frame second)
    {
    }

    private TwoWaiting leaderAndParkedFollower() throws Exception
    {
        open(false, LONG_TIMEOUT_MS);
        final Caller leader = Caller.start("leader", () -> create(BASE));
        final Frame first = daemon.nextRequest();
        waitFor(() -> connection.reading() == leader.thread, "the leader reading");
        final Caller follower = Caller.start("follower", () -> create(BASE + 4096));
        final Frame second = daemon.nextRequest();
        waitFor(() -> follower.thread.getState() == Thread.State.TIMED_WAITING, "the follower parked");
        return new TwoWaiting(leader, first, follower, second);
    }

    /**
     * Answers {@code request}, then checks that {@code caller} got that reply and that {@code reader} read it.
     */
    private void answerAndCheck(final Frame request, final Caller caller, final Thread reader) throws Exception
    {
        daemon.answer(request);
        final long address = ((Message.CreateMr)request.message()).address();
        assertEquals(address, assertInstanceOf(Message.MrCreated.class, caller.result()).start(), caller.name);
        assertSame(reader, readBy.get(request.correlationId()), caller.name + "'s reply read by " + reader.getName());
    }

    private void open(final boolean echo, final long requestTimeoutMs)
    {
        daemon = new PairedDaemon(echo);
        connection = DaemonConnection.open(daemon.clientEnd(), "paired daemon", Path.of("/nonexistent"),
            requestTimeoutMs, new DaemonConnection.Listener()
            {
                public void onReply(final Frame frame)
                {
                    readBy.put(frame.correlationId(), Thread.currentThread());
                }

                public MrdException onLost(final String who, final String how, final MrdException cause)
                {
                    lostOn.complete(Thread.currentThread().getName() + ": " + how);
                    return new DaemonDeadException(who + " " + how);
                }
            });
    }

    /**
     * @return {@code count} callers waiting for replies that do not come: one reading, the others parked.
     */
    private List<Caller> waiting(final int count, final long requestTimeoutMs) throws Exception
    {
        open(false, requestTimeoutMs);
        final List<Caller> callers = new ArrayList<>();
        for (int i = 0; i < count; i++)
        {
            final long address = BASE + i * 4096L;
            callers.add(Caller.start("waiter-" + i, () -> create(address)));
            daemon.nextRequest();
        }
        if (requestTimeoutMs == LONG_TIMEOUT_MS)
        {
            waitFor(() -> callers.stream().anyMatch(c -> connection.reading() == c.thread), "a caller reading");
            waitFor(() -> callers.stream().filter(c -> c.thread.getState() == Thread.State.TIMED_WAITING).count() ==
                count - 1, "the others parked");
        }
        return callers;
    }

    /**
     * Checks that every caller failed with {@code code} and a message {@code message} accepts.
     */
    private static void assertEachFailed(
        final List<Caller> callers, final ErrorCode code, final Predicate<String> message) throws Exception
    {
        for (final Caller caller : callers)
        {
            final MrdException failed = assertInstanceOf(MrdException.class, caller.result(), caller.name);
            assertEquals(code, failed.code(), failed.getMessage());
            assertTrue(message.test(failed.getMessage()), failed.getMessage());
        }
    }

    private Message.MrCreated create(final long address)
    {
        return (Message.MrCreated)connection.call(new Message.CreateMr(address, 4096));
    }

    private static void waitFor(final BooleanSupplier condition, final String what)
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!condition.getAsBoolean())
        {
            if (System.nanoTime() - deadline > 0)
            {
                fail("no " + what + " within 20 s");
            }
            LockSupport.parkNanos(100_000);
        }
    }

    /** A thread making calls; its result is what the body returned or threw. */
    private static final class Caller
    {
        interface Body
        {
            Object run() throws Exception;
        }

        final String name;
        final Thread thread;
        final AtomicReference<Object> outcome = new AtomicReference<>();

        private Caller(final String name, final Body body)
        {
            this.name = name;
            this.thread = Thread.ofPlatform().daemon().name(name).unstarted(() ->
            {
                Object result;
                try
                {
                    result = body.run();
                }
                catch (final Throwable t)
                {
                    result = t;
                }
                outcome.set(null == result ? Void.TYPE : result);
            });
        }

        static Caller start(final String name, final Body body)
        {
            final Caller caller = new Caller(name, body);
            caller.thread.start();
            return caller;
        }

        /** @return what the body returned (null for null) or threw, waiting up to 20 s for it. */
        Object result() throws InterruptedException
        {
            if (!thread.join(Duration.ofSeconds(20)))
            {
                fail(name + " did not finish within 20 s");
            }
            final Object result = outcome.get();
            if (result instanceof AssertionError error)
            {
                throw error;
            }
            return Void.TYPE == result ? null : result;
        }
    }
}
