package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.locks.LockSupport;

/**
 * The replies of a {@link DaemonConnection}, read by the callers waiting for them: a caller alone on the
 * connection reads its own reply from the socket, blocking in {@code recvmsg}, with no thread between it and the
 * socket (two thread wake-ups per round trip, the daemon's and its own, as in the C ping-pong); with several
 * in flight, the one holding the read turn ({@link ReadTurn}) reads, hands each reply to its caller, and hands
 * the turn on once its own is in. Every read goes through the one {@link ReplyReader}, under the turn, so the
 * frames are decoded and their descriptors paired in stream order whoever reads.
 * <p>
 * <b>A blocked reader wakes</b> when bytes come, when the stream ends (the daemon's death closes its end; a failed
 * write, {@link #lost} and {@link #close} shut this one) and every {@link #READ_TICK_MS} ({@code SO_RCVTIMEO}):
 * it then looks at its deadline, its interrupt status and its call, which {@link #fail} may have failed. So a
 * leader notices a timeout, an interrupt or a failure from elsewhere (the watchdog) within a tick; a follower
 * at once, as it parks until its deadline and is woken by both.
 * <p>
 * <b>The hang-up watch.</b> While no call waits nobody reads, and the daemon sends nothing unasked except before
 * it closes a connection (an ERROR, at most). A thread of the connection waits for the end with
 * {@code poll(POLLRDHUP)} ({@link UnixSocket#awaitHangup}), which arriving replies do not wake; at the end it
 * takes the turn (after a reading caller, who may find the end first) and reads the stream to its end, so that a
 * death is reported at once with no call in flight, and after the replies that came before it.
 * <p>
 * <b>Failure.</b> Once {@link #fail} was called, with the first reason given, every call in flight and every
 * later one fails with a copy of that reason.
 */
final class PendingReplies
{
    /** The longest a reader blocks in one receive: how late a leader notices a timeout, an interrupt, a failure. */
    static final long READ_TICK_MS = 10;

    private static final Logger LOG = LoggerFactory.getLogger(PendingReplies.class);

    private final UnixSocket socket;
    private final String daemon;
    private final long replySpinNs;
    private final DaemonConnection.Listener listener;
    private final ReadTurn turn = new ReadTurn();
    private final ReplyReader reader;
    private final Object failLock = new Object();
    private final Thread hangupWatch;

    /** Null while usable; else why not, thrown (as a fresh copy) by every call. */
    private volatile MrdException failure;
    /** Set by {@link #close} once {@link #failure} is: from then on the socket's number may be reused. */
    private volatile boolean closed;

    /**
     * Makes the socket's blocking reads last a tick at most and starts the hang-up watch.
     *
     * @param daemon who is at the other end, for messages.
     */
    PendingReplies(
        final UnixSocket socket, final String daemon, final long replySpinNs, final DaemonConnection.Listener listener)
    {
        this.socket = socket;
        this.daemon = daemon;
        this.replySpinNs = replySpinNs;
        this.listener = listener;
        this.reader = new ReplyReader(socket, new ReplyReader.Handler()
        {
            public void onFrame(final Frame frame)
            {
                dispatch(frame, -1);
            }

            public void onFrameWithFd(final Frame frame, final int fd)
            {
                dispatch(frame, fd);
            }

            public void onEnd(final String how, final MrdException cause)
            {
                lost(how, cause);
            }
        });
        socket.receiveTimeout(READ_TICK_MS);
        this.hangupWatch = new Thread(this::watchHangup, "mrd-client-hangup");
        this.hangupWatch.setDaemon(true);
        this.hangupWatch.start();
    }

    /**
     * Registers a call of this thread for {@code id}, before its request goes out.
     *
     * @throws MrdException a copy of the failure once failed.
     */
    ReadTurn.Call expect(final long id)
    {
        MrdException reason = failure;
        if (null != reason)
        {
            throw DaemonConnection.copy(reason);
        }
        final ReadTurn.Call call = turn.register(id);
        // fail() publishes the reason before it fails what is registered: either it saw this call or we see it.
        reason = failure;
        if (null != reason)
        {
            turn.forget(call);
            throw DaemonConnection.copy(reason);
        }
        return call;
    }

    /**
     * Forgets a call whose request did not go out.
     */
    void forget(final ReadTurn.Call call)
    {
        turn.forget(call);
    }

    /**
     * Waits until {@code call} has its outcome ({@link ReadTurn.Call#outcome()}), {@code deadlineNs} passes
     * ({@link System#nanoTime()}) or this thread is interrupted, reading the socket meanwhile whenever nobody
     * else does. For the first {@link ClientContext#replySpinNs} a reader reads without blocking and a follower
     * spins instead of parking.
     */
    void await(final ReadTurn.Call call, final long deadlineNs)
    {
        final long spinEndNs = System.nanoTime() + replySpinNs;
        while (null == call.outcome())
        {
            final long now = System.nanoTime();
            if (now - deadlineNs >= 0 || Thread.currentThread().isInterrupted())
            {
                return;
            }
            if (turn.tryTake())
            {
                try
                {
                    lead(call, deadlineNs, spinEndNs);
                }
                finally
                {
                    turn.leave(call);
                }
            }
            else if (now - spinEndNs < 0)
            {
                Thread.onSpinWait();
            }
            else
            {
                LockSupport.parkNanos(this, deadlineNs - now);
            }
        }
    }

    /**
     * Gives up waiting for {@code call} ({@code why}: a timeout, an interrupt), unless its outcome came first.
     *
     * @return true when given up: a reply that comes later is dropped (its descriptor closed) by the reader.
     */
    boolean giveUp(final ReadTurn.Call call, final MrdException why)
    {
        return turn.giveUp(call, why);
    }

    /**
     * Fails every call in flight and every later one with {@code reason}. Only the first reason counts.
     *
     * @return true when this was the first.
     */
    boolean fail(final MrdException reason)
    {
        synchronized (failLock)
        {
            if (null != failure)
            {
                return false;
            }
            failure = reason;
        }
        turn.failAll(reason);
        return true;
    }

    /** @return why calls fail, or null while usable. */
    MrdException failure()
    {
        return failure;
    }

    /** @return the thread reading the socket now, or null (for tests). */
    Thread reading()
    {
        return turn.holder();
    }

    /**
     * The stream cannot be used any more: fail with what the listener makes of it (unless failed already), and
     * shut the socket so that a blocked reader, the hang-up watch and the daemon all see it end. Not once
     * closed: the socket's number may have been reused.
     *
     * @return what the caller throws.
     */
    MrdException lost(final String how, final MrdException cause)
    {
        if (!closed)
        {
            fail(listener.onLost(daemon, how, cause));
            socket.shutdown();
        }
        return DaemonConnection.copy(failure);
    }

    /**
     * Fails with {@code reason} (unless failed already), shuts the socket, waits for the hang-up watch and for a
     * reading caller to leave, and keeps the read turn for good: once this returns nothing reads the socket, and
     * it may be closed. Idempotent.
     *
     * @return true for the first call, which the caller follows by closing the socket.
     */
    boolean close(final MrdException reason)
    {
        fail(reason);
        synchronized (failLock)
        {
            if (closed)
            {
                return false;
            }
            closed = true;
        }
        socket.shutdown();
        Threads.join(hangupWatch);
        turn.take();
        return true;
    }

    /**
     * Holding the turn: reads until {@code call} has its outcome, or until its deadline, an interrupt or the end
     * of the stream (which fails every call).
     */
    private void lead(final ReadTurn.Call call, final long deadlineNs, final long spinEndNs)
    {
        while (null == call.outcome())
        {
            if (reader.read(System.nanoTime() - spinEndNs >= 0) == ReplyReader.ENDED)
            {
                if (null == call.outcome())
                {
                    // The end fails every call unless the listener threw first: nothing will ever come now.
                    fail(new MrdException(ErrorCode.EIO, "the connection to " + daemon + " ended"));
                }
                return;
            }
            if (null == call.outcome() &&
                (System.nanoTime() - deadlineNs >= 0 || Thread.currentThread().isInterrupted()))
            {
                return;
            }
        }
    }

    /** On the thread holding the turn. */
    private void dispatch(final Frame frame, final int fd)
    {
        listener.onReply(frame);
        if (!turn.deliver(frame.correlationId(), new DaemonConnection.Answer((Message.Reply)frame.message(), fd)))
        {
            // the caller gave up (timed out, interrupted) or the connection failed: nobody takes the descriptor
            if (fd >= 0)
            {
                Posix.close(fd);
            }
            LOG.debug("reply to correlation id {} that nobody waits for (timed out?): {}", frame.correlationId(),
                frame.message());
        }
    }

    /**
     * The hang-up watch's thread: sleeps through every reply, wakes at the end of the stream and reads it to the
     * end under the turn. Should {@code poll} itself fail, it stops watching: the next caller to read, or the
     * watchdog, then finds the end.
     */
    private void watchHangup()
    {
        try
        {
            while (!socket.awaitHangup(-1))
            {
                // a signal: wait on
            }
        }
        catch (final MrdException ex)
        {
            LOG.warn("cannot watch the connection to {} for its end ({}): a death is noticed by the next request " +
                "or by the watchdog", daemon, ex.oneLine());
            return;
        }
        turn.take();
        try
        {
            reader.readToEnd();
        }
        finally
        {
            turn.leave(null);
        }
    }
}
