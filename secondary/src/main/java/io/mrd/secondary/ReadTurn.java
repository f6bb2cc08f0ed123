package io.mrd.secondary;

import io.mrd.layout.MrdException;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * Who reads a connection's replies: the calls waiting for theirs, keyed by correlation id, and the read turn,
 * which one of their threads holds at a time (Schmidt's Leader/Followers). {@link PendingReplies} does the
 * reading; this class keeps the rule that a reply is never left unread while its caller parks.
 * <p>
 * A caller {@linkplain #register registers} its call before its request goes out, then {@linkplain #tryTake
 * tries the turn}: if it gets it, it reads until its own reply is in, handing the others theirs
 * ({@link #deliver}, which wakes their threads), then {@linkplain #leave leaves}; if not, it parks until its reply
 * is delivered or it is woken to try again. Whoever leaves the turn, or gives up waiting while nobody holds it
 * ({@link #giveUp}), wakes one caller still waiting ({@link #handOn}).
 * <p>
 * Why the hand-on is never lost: a caller registers (a volatile write to the map) before it tries the turn, and a
 * leaver releases the turn (a volatile write) before it looks at the map. Volatile accesses are totally ordered,
 * so either the leaver sees the call and wakes its caller, or the caller's try comes after the release and takes
 * the turn. A wake before the park is kept by the thread's permit. A caller that gives up settles its call, then
 * looks at the turn: a leaver that still saw the call waiting and woke it in vain had released the turn before,
 * so the caller sees it free and hands on in its place (or someone took it since, who will hand on in turn).
 * {@code TurnHandOnStress} and {@code GiveUpHandOnStress} (the {@code stress} module) prove both races.
 * <p>
 * Thread-safe.
 */
final class ReadTurn
{
    private final Turn turn = new Turn();
    private final ConcurrentHashMap<Long, Call> calls = new ConcurrentHashMap<>();
    private final Consumer<Call> waker;

    /**
     * One call waiting for its reply: its thread, to wake, and its outcome once known.
     */
    static final class Call
    {
        private static final VarHandle OUTCOME;

        static
        {
            try
            {
                OUTCOME = MethodHandles.lookup().findVarHandle(Call.class, "outcome", Object.class);
            }
            catch (final ReflectiveOperationException ex)
            {
                throw new ExceptionInInitializerError(ex);
            }
        }

        final long id;
        final Thread thread;
        /**
         * Null while waiting; then the reply's {@link DaemonConnection.Answer}, or the {@link MrdException} the
         * call fails with. Set once, by whoever comes first (the reader with the reply, a failure, or the caller
         * giving up), so that a reply arriving as its caller gives up is either taken or left to the reader to
         * close.
         */
        private volatile Object outcome;

        private Call(final long id, final Thread thread)
        {
            this.id = id;
            this.thread = thread;
        }

        /** @return null while waiting, else the answer or the failure. */
        Object outcome()
        {
            return outcome;
        }

        private boolean settle(final Object value)
        {
            return OUTCOME.compareAndSet(this, null, value);
        }
    }

    /** A lock that names its holder, for tests and messages. */
    private static final class Turn extends ReentrantLock
    {
        Thread holder()
        {
            return getOwner();
        }
    }

    ReadTurn()
    {
        this(call -> LockSupport.unpark(call.thread));
    }

    /**
     * @param waker how a waiting call's thread is woken ({@link LockSupport#unpark}; a stress test records it).
     */
    ReadTurn(final Consumer<Call> waker)
    {
        this.waker = waker;
    }

    /**
     * Registers a call of this thread for {@code id}.
     */
    Call register(final long id)
    {
        final Call call = new Call(id, Thread.currentThread());
        calls.put(id, call);
        return call;
    }

    /**
     * Forgets a call without settling it: its request did not go out, or the connection failed first.
     */
    void forget(final Call call)
    {
        calls.remove(call.id, call);
    }

    /**
     * @return true when this thread now holds the turn, and must {@link #leave} it.
     */
    boolean tryTake()
    {
        return turn.tryLock();
    }

    /**
     * Waits for the turn, however long whoever holds it keeps it: the hang-up watch (which leaves it with no
     * call of its own), and close for good.
     */
    void take()
    {
        turn.lock();
    }

    /**
     * Leaves the turn, then hands it on to a caller still waiting.
     *
     * @param own the leaver's call, not to be woken (still waiting when it leaves at its deadline), or null.
     */
    void leave(final Call own)
    {
        turn.unlock();
        handOn(own);
    }

    /** @return the thread holding the turn, or null. */
    Thread holder()
    {
        return turn.holder();
    }

    /**
     * Settles the call for {@code id} with {@code outcome} and wakes its thread (unless it is this one).
     *
     * @return false when no call waits for {@code id} any more (its caller gave up, or the connection failed).
     */
    boolean deliver(final long id, final Object outcome)
    {
        final Call call = calls.remove(id);
        if (null == call || !call.settle(outcome))
        {
            return false;
        }
        if (call.thread != Thread.currentThread())
        {
            waker.accept(call);
        }
        return true;
    }

    /**
     * Gives up waiting for {@code call} ({@code why}: a timeout, an interrupt), unless its outcome came first.
     *
     * @return true when given up: a reply that comes later finds no call ({@link #deliver} returns false).
     */
    boolean giveUp(final Call call, final MrdException why)
    {
        if (!call.settle(why))
        {
            return false;
        }
        calls.remove(call.id, call);
        // This caller may have been woken to take the turn: if it is free, another must take it instead.
        if (!turn.isLocked())
        {
            handOn(call);
        }
        return true;
    }

    /**
     * Fails every call registered, waking their threads. Calls registered meanwhile are the caller's to check.
     */
    void failAll(final MrdException reason)
    {
        for (final Long id : calls.keySet())
        {
            final Call call = calls.remove(id);
            if (null != call && call.settle(reason) && call.thread != Thread.currentThread())
            {
                waker.accept(call);
            }
        }
    }

    /**
     * Wakes one caller still waiting, other than {@code own}'s: only when several calls are in flight.
     */
    private void handOn(final Call own)
    {
        if (calls.isEmpty())
        {
            return;
        }
        for (final Call waiting : calls.values())
        {
            if (null == waiting.outcome && waiting != own)
            {
                waker.accept(waiting);
                return;
            }
        }
    }
}
