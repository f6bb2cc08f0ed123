package io.mrd.primary.server;

import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFutureListener;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The state of one session ({@link SessionState}) and its requests in flight, and what happens when the last
 * of them finishes: every transition is made here.
 * <p>
 * <b>Threads.</b> The event loop makes every transition but one: into {@link SessionState#DRAINING},
 * {@link SessionState#CLOSING} and {@link SessionState#CLOSED}, each from Netty's handler methods or the
 * session's timers, which run on that one thread, so they never race each other. Workers read the state (a
 * worker starting a request abandons it unless replies may be written; a reply is dropped likewise) and
 * count the requests in flight down. The one transition both make is {@link SessionState#CLOSED} to
 * {@link SessionState#FINISHED}, by compare-and-set, so the reclaim starts exactly once: the event loop tries
 * it after the channel closed if nothing is in flight, a worker after its request was the last in flight if
 * the channel is closed. Both the state and the count are volatile, so of the event loop's write of CLOSED
 * then read of the count and a worker's decrement then read of the state, at least one sees the other's
 * write: the reclaim cannot be missed. The same holds for {@link SessionState#DRAINING} and its close after
 * the last reply; there both may see it, and the second close is harmless.
 */
final class SessionLifecycle
{
    private static final VarHandle STATE;

    static
    {
        try
        {
            STATE = MethodHandles.lookup().findVarHandle(SessionLifecycle.class, "state", SessionState.class);
        }
        catch (final ReflectiveOperationException ex)
        {
            throw new ExceptionInInitializerError(ex);
        }
    }

    private final Channel channel;
    private final Runnable reclaim;
    private final AtomicInteger inFlight = new AtomicInteger();
    private volatile SessionState state = SessionState.OPEN;

    /**
     * @param reclaim what frees the client's memory; run once, on the event loop or a worker, when the channel
     *                is closed and nothing is in flight.
     */
    SessionLifecycle(final Channel channel, final Runnable reclaim)
    {
        this.channel = channel;
        this.reclaim = reclaim;
    }

    SessionState state()
    {
        return state;
    }

    /**
     * @return true while requests may run and replies be written ({@link SessionState#OPEN},
     * {@link SessionState#DRAINING}); any thread.
     */
    boolean answers()
    {
        final SessionState now = state;
        return now == SessionState.OPEN || now == SessionState.DRAINING;
    }

    /**
     * @return true once the session gave up on the connection or it closed: nothing more is read or answered.
     */
    boolean givenUp()
    {
        return !answers();
    }

    /**
     * OPEN to DRAINING: the peer shut its sending side. On the event loop.
     *
     * @return false when the session had given up already, and nothing changed.
     */
    boolean inputShut()
    {
        return moveTo(SessionState.OPEN, SessionState.DRAINING) || state == SessionState.DRAINING;
    }

    /**
     * OPEN or DRAINING to CLOSING: the session gives up on the connection. On the event loop.
     *
     * @return false when it had given up already (or the channel closed), and nothing changed.
     */
    boolean giveUp()
    {
        return moveTo(SessionState.OPEN, SessionState.CLOSING) || moveTo(SessionState.DRAINING, SessionState.CLOSING);
    }

    /**
     * Any state but the last two to CLOSED: the channel is inactive. Starts the reclaim when nothing is in
     * flight. On the event loop.
     */
    void channelClosed()
    {
        SessionState now;
        do
        {
            now = state;
            if (now == SessionState.CLOSED || now == SessionState.FINISHED)
            {
                return;
            }
        }
        while (!STATE.compareAndSet(this, now, SessionState.CLOSED));
        if (inFlight.get() == 0)
        {
            finish();
        }
    }

    int inFlight()
    {
        return inFlight.get();
    }

    /**
     * A request is handed to a worker. On the event loop.
     */
    void requestStarted()
    {
        inFlight.incrementAndGet();
    }

    /**
     * A request handed over was refused by the workers' queue and never ran. On the event loop, while it reads,
     * so the channel is open and this cannot be the moment the session finishes.
     */
    void requestRefused()
    {
        inFlight.decrementAndGet();
    }

    /**
     * A request finished on its worker, its reply written or dropped. The last one in flight of a closed
     * channel starts the reclaim; of a drained one, closes the channel once its reply is out.
     */
    void requestFinished()
    {
        if (inFlight.decrementAndGet() == 0)
        {
            final SessionState now = state;
            if (now == SessionState.CLOSED)
            {
                finish();
            }
            else if (now == SessionState.DRAINING)
            {
                closeAfterFlush();
            }
        }
    }

    /**
     * Closes a DRAINING connection with nothing in flight, after what is written is out. On the event loop.
     */
    void closeIfIdle()
    {
        if (inFlight.get() == 0)
        {
            closeAfterFlush();
        }
    }

    /**
     * After the last reply is out, not before: a close would drop what is still unflushed.
     */
    private void closeAfterFlush()
    {
        channel.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
    }

    private void finish()
    {
        if (moveTo(SessionState.CLOSED, SessionState.FINISHED))
        {
            reclaim.run();
        }
    }

    private boolean moveTo(final SessionState from, final SessionState to)
    {
        return STATE.compareAndSet(this, from, to);
    }
}
