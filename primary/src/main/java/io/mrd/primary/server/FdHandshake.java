package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.netty.channel.epoll.EpollDomainSocketChannel;

import java.util.function.ObjLongConsumer;

/**
 * One session's REG_EXTERNAL handshake: the request's fields are checked, the session answers {@code SEND_FD}
 * and stops reading, waits for one byte carrying exactly one fd ({@link PendingFd}), then reads again and the
 * registration runs on a worker, which owns the fd from then on (and closes it if the work is abandoned).
 * Anything else (bytes between REG_EXTERNAL and the fd, a byte without an fd, several fds, nothing within
 * {@link PendingFd#TIMEOUT_MS}) is refused, and the session answers EPROTO and closes the connection.
 * <p>
 * It also decides when Netty reads: never while an fd is awaited, and, so that replies cannot pile up in the
 * daemon, not while the peer does not read its replies (the channel is not writable).
 * <p>
 * <b>Threads.</b> Event-loop confined: the awaited fd is set, polled for and cleared there only; a worker gets
 * the received fd inside its work.
 */
final class FdHandshake
{
    private final SessionServices services;
    private final EpollDomainSocketChannel channel;
    private final SessionLifecycle lifecycle;
    private final PeerHandshake peer;
    private final RequestDispatch dispatch;
    private final ObjLongConsumer<String> refuse;
    private final Outcome outcome = new Outcome();
    private PendingFd pendingFd;

    /**
     * @param refuse answers EPROTO with the reason, to the request of the correlation id, and closes.
     */
    FdHandshake(
        final SessionServices services,
        final EpollDomainSocketChannel channel,
        final SessionLifecycle lifecycle,
        final PeerHandshake peer,
        final RequestDispatch dispatch,
        final ObjLongConsumer<String> refuse)
    {
        this.services = services;
        this.channel = channel;
        this.lifecycle = lifecycle;
        this.peer = peer;
        this.dispatch = dispatch;
        this.refuse = refuse;
    }

    /**
     * A REG_EXTERNAL arrived: answers EINVAL for bad fields, or awaits its fd ({@link #start()} once the bytes
     * read with it are checked).
     */
    void request(final long correlationId, final Message.RegExternal reg)
    {
        final String bad = services.handler().checkExternal(reg.length(), reg.access());
        if (null != bad)
        {
            dispatch.reply(correlationId, new Message.Status(MessageType.REG_EXTERNAL, ErrorCode.EINVAL, bad));
        }
        else
        {
            pendingFd = new PendingFd(correlationId, reg.length(), reg.access());
        }
    }

    /**
     * @return true from a valid REG_EXTERNAL until its fd arrived or the wait ended.
     */
    boolean awaiting()
    {
        return null != pendingFd;
    }

    /**
     * @return the correlation id of the REG_EXTERNAL whose fd is awaited.
     */
    long correlationId()
    {
        return pendingFd.correlationId();
    }

    /**
     * Stops Netty reading, answers SEND_FD and polls for the fd.
     */
    void start()
    {
        pendingFd.start(channel, ReplyEncoder.encode(channel, pendingFd.correlationId(),
            new Message.Status(MessageType.SEND_FD, ErrorCode.OK, "")), outcome);
    }

    /**
     * Stops polling: the session gives up. The fd stays awaited, so nothing more is read.
     */
    void cancel()
    {
        if (null != pendingFd)
        {
            pendingFd.cancel();
        }
    }

    /**
     * The channel closed: nothing is awaited any more.
     */
    void channelClosed()
    {
        cancel();
        pendingFd = null;
    }

    /**
     * Lets Netty read again unless an fd is awaited, the session gave up, or the peer does not read.
     */
    void resumeReading()
    {
        if (!lifecycle.givenUp() && null == pendingFd)
        {
            channel.config().setAutoRead(channel.isWritable());
        }
    }

    /**
     * What becomes of the awaited fd.
     */
    private final class Outcome implements PendingFd.Session
    {
        public boolean awaits(final PendingFd pending)
        {
            return pendingFd == pending && !lifecycle.givenUp();
        }

        public void received(final PendingFd pending, final int fd)
        {
            pendingFd = null;
            resumeReading();
            final int id = peer.clientId();
            dispatch.submit(pending.correlationId(), MessageType.REG_EXTERNAL, System.nanoTime(), new RequestWork()
            {
                public Message.Reply run()
                {
                    return services.handler().registerExternal(pending.length(), pending.access(), fd, id);
                }

                public void abandon()
                {
                    Posix.close(fd);
                }
            }, null);
        }

        public void refused(final PendingFd pending, final String why)
        {
            refuse.accept(why, pending.correlationId());
        }

        public void peerClosed(final PendingFd pending)
        {
            pendingFd = null;
            channel.close();
        }
    }
}
