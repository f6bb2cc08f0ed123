package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.concurrent.RejectedExecutionException;

/**
 * One session's requests on the workers, and every reply it writes: a request is counted in flight
 * ({@link SessionLifecycle}), queued for the workers (EAGAIN when their queue is full; once the server is closing,
 * no answer to a request a client sends again to a successor, {@link MessageType#sentAgainToSuccessor()}), run
 * unless the session stopped answering meanwhile (then its work is abandoned, releasing what it would have
 * consumed), and its reply, or the failure it threw, written back. A failure that is not an {@link MrdException}
 * is a bug: it is recorded and answered EIO.
 * <p>
 * <b>Threads.</b> {@link #submit} and the replies the session gives itself run on the event loop; the work and
 * its reply on a worker. Nothing here is mutable: {@code writeAndFlush} is thread-safe and replies carry their
 * request's correlation id, so their order does not matter; whether to write at all is the lifecycle's
 * volatile state, read just before (a reply that loses the race with a close is dropped by Netty).
 */
final class RequestDispatch
{
    private static final Logger LOG = LoggerFactory.getLogger(ClientSession.class);

    private final SessionServices services;
    private final EpollDomainSocketChannel channel;
    private final SessionLifecycle lifecycle;
    private final PeerHandshake peer;

    RequestDispatch(
        final SessionServices services,
        final EpollDomainSocketChannel channel,
        final SessionLifecycle lifecycle,
        final PeerHandshake peer)
    {
        this.services = services;
        this.channel = channel;
        this.lifecycle = lifecycle;
        this.peer = peer;
    }

    /**
     * Hands {@code work} to a worker, on the event loop.
     *
     * @param afterReply run once the reply is written (or dropped), or null.
     */
    void submit(
        final long correlationId, final MessageType type, final long startNs, final RequestWork work,
        final Runnable afterReply)
    {
        lifecycle.requestStarted();
        try
        {
            services.workers().execute(() -> run(correlationId, type, startNs, work, afterReply));
        }
        catch (final RejectedExecutionException ex)
        {
            work.abandon();
            lifecycle.requestRefused();
            final boolean closing = services.serverClosing().getAsBoolean();
            if (closing && type.sentAgainToSuccessor())
            {
                // Not answered: the closing server ends this connection (it closes every one before it stops the
                // workers), and the client sends a request whose reply the connection's end cut off again to the
                // successor of a handover or an adoption (or fails it as the daemon's end when there is none).
                // An answer here would fail a request that the successor would have served.
                return;
            }
            reply(correlationId, new Message.Status(type, ErrorCode.EAGAIN, closing ? "the daemon is shutting down" :
                "the daemon is overloaded (its request queue is full): retry later"));
        }
    }

    private void run(
        final long correlationId, final MessageType type, final long startNs, final RequestWork work,
        final Runnable afterReply)
    {
        try
        {
            if (!lifecycle.answers())
            {
                work.abandon();
                return;
            }
            Message.Reply reply;
            try
            {
                reply = work.run();
            }
            catch (final MrdException ex)
            {
                LOG.debug("client {}: {} failed: {}", peer.clientId(), type, ex.oneLine());
                reply = new Message.Status(type, ex.code(), ex.getMessage());
            }
            catch (final RuntimeException | LinkageError | OutOfMemoryError ex)
            {
                services.failures().unexpected("client " + peer.clientId() + " " + type, ex);
                reply = new Message.Status(type, ErrorCode.EIO, "internal error: " + ex +
                    " (recorded in the daemon's error log: mrd dump --errors)");
            }
            if (null != afterReply)
            {
                writeThen(correlationId, reply, afterReply);
            }
            else
            {
                reply(correlationId, reply);
            }
            services.counters().histograms().requestAnswered(type, startNs);
        }
        finally
        {
            lifecycle.requestFinished();
        }
    }

    /**
     * Writes a reply unless the session stopped answering (so nothing is written after a close or a give-up).
     * Any thread.
     */
    void reply(final long correlationId, final Message.Reply reply)
    {
        if (!lifecycle.answers() || !channel.isActive())
        {
            return;
        }
        channel.writeAndFlush(ReplyEncoder.encode(channel, correlationId, reply), channel.voidPromise());
    }

    private void writeThen(final long correlationId, final Message.Reply reply, final Runnable then)
    {
        if (!lifecycle.answers() || !channel.isActive())
        {
            then.run();
            return;
        }
        channel.writeAndFlush(ReplyEncoder.encode(channel, correlationId, reply)).addListener(f -> then.run());
    }
}
