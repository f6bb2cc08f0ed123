package io.mrd.primary.server;

import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.util.concurrent.ScheduledFuture;

import java.util.concurrent.TimeUnit;

/**
 * The fd of one REG_EXTERNAL, awaited on the connection's event loop.
 * <p>
 * The fd cannot travel in the byte stream: Netty reads bytes with {@code read()}, and the kernel drops the fds
 * of a message read that way. So the session stops Netty reading ({@code autoRead} off), answers
 * {@code SEND_FD} with the request's correlation id, and this reads the next message itself with
 * {@code recvmsg} ({@link UnixRights}), polling with a growing delay until it arrives: it must be one byte
 * carrying exactly one fd. Anything else (a byte without an fd, several fds, nothing within
 * {@link #TIMEOUT_MS}) is refused, and the session answers EPROTO and closes the connection.
 * <p>
 * Event loop only, like the session.
 */
final class PendingFd
{
    /** The fd must arrive within this after SEND_FD (the client's request timeout is 5 s). */
    static final long TIMEOUT_MS = 5_000;

    private static final long FIRST_POLL_NANOS = TimeUnit.MICROSECONDS.toNanos(100);
    private static final long MAX_POLL_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

    /**
     * What the session does with the outcome, on the event loop.
     */
    interface Session
    {
        /** @return true while the session still waits for this fd (not closing, not given up). */
        boolean awaits(PendingFd pending);

        /** The fd arrived; the session owns it from now on. */
        void received(PendingFd pending, int fd);

        /** The peer sent something else, or nothing in time. */
        void refused(PendingFd pending, String why);

        /** The peer hung up. */
        void peerClosed(PendingFd pending);
    }

    private final long correlationId;
    private final long length;
    private final int access;
    private final long deadlineNanos = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
    private long delayNanos = FIRST_POLL_NANOS;
    private ScheduledFuture<?> poll;

    PendingFd(final long correlationId, final long length, final int access)
    {
        this.correlationId = correlationId;
        this.length = length;
        this.access = access;
    }

    long correlationId()
    {
        return correlationId;
    }

    /**
     * @return the bytes the REG_EXTERNAL asks to register.
     */
    long length()
    {
        return length;
    }

    /**
     * @return the access the REG_EXTERNAL asks for.
     */
    int access()
    {
        return access;
    }

    /**
     * Stops Netty reading, writes {@code sendFd} and starts polling once it is out.
     */
    void start(final EpollDomainSocketChannel channel, final ByteBuf sendFd, final Session session)
    {
        channel.config().setAutoRead(false);
        channel.writeAndFlush(sendFd).addListener((ChannelFutureListener)f ->
        {
            if (f.isSuccess())
            {
                poll(channel, session);
            }
            else
            {
                // nothing would ever read this connection again
                channel.close();
            }
        });
    }

    void cancel()
    {
        if (null != poll)
        {
            poll.cancel(false);
        }
    }

    private void poll(final EpollDomainSocketChannel channel, final Session session)
    {
        if (!session.awaits(this) || !channel.isOpen())
        {
            return;
        }
        switch (UnixRights.receiveOneFd(channel.fd().intValue()))
        {
            case UnixRights.Received received -> session.received(this, received.fd());
            case UnixRights.NotYet notYet ->
            {
                if (System.nanoTime() - deadlineNanos > 0)
                {
                    session.refused(this, "no fd arrived within " + TIMEOUT_MS + " ms of SEND_FD: send one byte " +
                        "carrying the fd (sendmsg with SCM_RIGHTS)");
                    return;
                }
                poll = channel.eventLoop().schedule(() -> poll(channel, session), delayNanos, TimeUnit.NANOSECONDS);
                delayNanos = Math.min(delayNanos * 2, MAX_POLL_NANOS);
            }
            case UnixRights.Closed gone -> session.peerClosed(this);
            case UnixRights.Refused refused -> session.refused(this, refused.reason());
        }
    }
}
