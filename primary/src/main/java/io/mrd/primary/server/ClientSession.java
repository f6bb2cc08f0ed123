package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.channel.unix.PeerCredentials;
import io.netty.util.ReferenceCountUtil;
import io.netty.util.concurrent.ScheduledFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.Arrays;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.IntStream;

/**
 * One connection: its peer check, its frames, its requests in flight, and the reclaim of everything it owned
 * when it closes (DESIGN §7: a closed connection is a dead client).
 * <p>
 * <b>Threads.</b> Netty calls the handler methods on the connection's event loop, which owns every field not
 * marked volatile or atomic. Requests other than HELLO run on the server's workers and write their replies
 * from there ({@code writeAndFlush} is thread-safe; replies carry their request's correlation id, so their
 * order does not matter), except a CREATE_MR the global cache answers at once ({@link CachedCreate}).
 * <p>
 * <b>REG_EXTERNAL.</b> Its fd cannot travel in the byte stream: the session answers {@code SEND_FD} and waits
 * for one byte carrying exactly one fd ({@link PendingFd}). Then Netty reads again and the registration runs
 * on a worker. Anything else (bytes between REG_EXTERNAL and the fd, a byte without an fd, several fds,
 * nothing within {@link PendingFd#TIMEOUT_MS}) is EPROTO and the connection is closed. An fd sent when none
 * is expected needs no handling: Netty reads its message as one stray byte and the kernel closes the fd
 * (nothing leaks); the byte shifts the stream, so the next frame is refused EPROTO (or, rarely, its shifted
 * length is plausible and it waits incomplete until the client gives up).
 * <p>
 * <b>Close.</b> The client's memory is reclaimed once the connection is closed and its last request in flight
 * has finished, so a request that was allocating when the client died cannot leave memory behind.
 */
final class ClientSession extends ChannelInboundHandlerAdapter
{
    /** A connection must say HELLO within this. */
    static final long HELLO_TIMEOUT_MS = 10_000;
    /** Requests one connection may have running or queued; more are answered EAGAIN. */
    static final int MAX_IN_FLIGHT = 256;

    private static final Logger LOG = LoggerFactory.getLogger(ClientSession.class);

    private final MrdServer server;
    private final EpollDomainSocketChannel channel;
    private final FrameAccumulator frames = new FrameAccumulator();
    private final AtomicInteger inFlight = new AtomicInteger();
    private final AtomicBoolean reclaimStarted = new AtomicBoolean();
    /** Set when the connection is closed; workers then skip their work and write nothing. */
    private volatile boolean closed;
    /** Set when the session has given up on the connection (refusal, protocol error) and is closing it. */
    private volatile boolean closing;
    /** The peer shut its sending side: close once the requests in flight are answered. */
    private volatile boolean inputShutdown;
    private volatile int clientId;

    private int pid = -1;
    private int uid = -1;
    private int gid = -1;
    private int slot = -1;
    private String name = "";
    private ScheduledFuture<?> helloTimer;
    private PendingFd pendingFd;
    private final FdOutcome fdOutcome = new FdOutcome();
    private final PdImport pdImport;

    ClientSession(final MrdServer server, final EpollDomainSocketChannel channel)
    {
        this.server = server;
        this.channel = channel;
        this.pdImport = new PdImport(server, channel, this::reply, why ->
        {
            server.refusals().refused(describe() + ": " + why);
            closing = true;
            channel.close();
        });
    }

    int clientId()
    {
        return clientId;
    }

    public void channelActive(final ChannelHandlerContext ctx)
    {
        final int[] gids;
        try
        {
            final PeerCredentials credentials = channel.peerCredentials();
            pid = credentials.pid();
            uid = credentials.uid();
            gid = credentials.gids().length > 0 ? credentials.gids()[0] : -1;
            gids = IntStream.concat(Arrays.stream(credentials.gids()),
                Arrays.stream(UnixSocket.peerGroups(channel.fd().intValue()))).distinct().toArray();
        }
        catch (final IOException | RuntimeException ex)
        {
            reject("cannot read the peer's credentials (SO_PEERCRED): " + ex);
            return;
        }
        final String refusal = server.peerPolicy().refusal(pid, uid, gids);
        if (null != refusal)
        {
            reject(refusal);
            return;
        }
        LOG.debug("connection from pid {} uid {} gids {}", pid, uid, gids);
        helloTimer = ctx.executor().schedule(this::helloTimedOut, HELLO_TIMEOUT_MS, TimeUnit.MILLISECONDS);
        ctx.fireChannelActive();
    }

    private void reject(final String why)
    {
        server.journal().clientRefused(pid, uid, ErrorCode.EPERM);
        server.counters().increment(MrdCounter.PEERS_REJECTED);
        server.refusals().refused(why);
        fail(0, MessageType.ERROR, ErrorCode.EPERM, why);
    }

    private void helloTimedOut()
    {
        if (clientId == 0 && !closing)
        {
            protocolError(0, MessageType.ERROR, "no HELLO within " + HELLO_TIMEOUT_MS + " ms of connecting");
        }
    }

    public void channelRead(final ChannelHandlerContext ctx, final Object msg)
    {
        if (!(msg instanceof ByteBuf in))
        {
            ReferenceCountUtil.release(msg);
            return;
        }
        try
        {
            if (closing)
            {
                return;
            }
            if (null != pendingFd)
            {
                // Netty read although told not to (the peer hung up and the kernel said so): the stream is
                // broken either way.
                protocolError(pendingFd.correlationId(), MessageType.REG_EXTERNAL,
                    "bytes arrived while waiting for the fd of REG_EXTERNAL: send one byte carrying the fd, nothing else");
                return;
            }
            while (in.isReadable() && !closing && null == pendingFd)
            {
                final Frame frame;
                try
                {
                    frame = frames.poll(in);
                }
                catch (final MrdException ex)
                {
                    protocolError(frames.lastCorrelationId(), frames.lastType(), ex.getMessage());
                    return;
                }
                if (null != frame)
                {
                    onFrame(frame);
                }
            }
            if (null != pendingFd && !closing)
            {
                if (in.isReadable())
                {
                    protocolError(pendingFd.correlationId(), MessageType.REG_EXTERNAL, in.readableBytes() +
                        " bytes followed REG_EXTERNAL: send nothing between REG_EXTERNAL and its fd");
                    return;
                }
                awaitFd();
            }
        }
        finally
        {
            in.release();
        }
    }

    private void onFrame(final Frame frame)
    {
        final long startNs = System.nanoTime();
        server.counters().increment(MrdCounter.REQUESTS);
        final long correlationId = frame.correlationId();
        final Message message = frame.message();
        final MessageType type = message.type();
        if (clientId == 0)
        {
            if (message instanceof Message.Hello hello)
            {
                hello(correlationId, hello);
                server.counters().histograms().requestAnswered(type, startNs);
            }
            else
            {
                protocolError(correlationId, type, "expected HELLO version " + FrameDescriptor.PROTOCOL_VERSION +
                    " as the first request, got " + type);
            }
            return;
        }
        if (inFlight.get() >= MAX_IN_FLIGHT)
        {
            reply(correlationId, new Message.Status(type, ErrorCode.EAGAIN, MAX_IN_FLIGHT +
                " requests of this connection are in flight: wait for replies before sending more"));
            return;
        }
        switch (message)
        {
            case Message.Hello hello -> protocolError(correlationId, type, "HELLO sent twice: this connection is " +
                "client " + clientId + " already");
            case Message.RegExternal reg ->
            {
                final String bad = server.handler().checkExternal(reg.length(), reg.access());
                if (null != bad)
                {
                    reply(correlationId, new Message.Status(type, ErrorCode.EINVAL, bad));
                }
                else
                {
                    pendingFd = new PendingFd(correlationId, reg.length(), reg.access());
                }
            }
            case Message.Stop stop -> stop(correlationId, startNs);
            case Message.ImportPd importPd -> pdImport.answer(correlationId);
            case Message.Request request ->
            {
                final Message.MrCreated cached = request instanceof Message.CreateMr create && !server.isClosing() ?
                    server.cachedCreate().answer(create) : null;
                if (null != cached)
                {
                    reply(correlationId, cached);
                    server.counters().histograms().requestAnswered(type, startNs);
                    return;
                }
                final int id = clientId;
                submit(correlationId, type, startNs, () -> server.handler().execute(request, id, pid), null);
            }
            case Message.Reply reply -> protocolError(correlationId, type, "a reply is not a request");
        }
    }

    private void hello(final long correlationId, final Message.Hello hello)
    {
        if (hello.version() != FrameDescriptor.PROTOCOL_VERSION)
        {
            protocolError(correlationId, MessageType.HELLO, "expected HELLO version " +
                FrameDescriptor.PROTOCOL_VERSION + ", got version " + hello.version() +
                ": use a client library that speaks the daemon's protocol version");
            return;
        }
        final String clean = ClientTable.printable(hello.name());
        final int id = server.nextClientId();
        final int taken = server.clients().add(id, pid, uid, gid, clean);
        if (taken < 0)
        {
            final String why = "the daemon has " + server.clients().capacity() + " clients connected, its " +
                "--max-clients: close a client or start the daemon with a larger --max-clients";
            server.refusals().refused("client pid " + pid + " (" + clean + ") refused: " + why);
            server.journal().clientRefused(pid, uid, ErrorCode.EBUSY);
            fail(correlationId, MessageType.HELLO, ErrorCode.EBUSY, why);
            return;
        }
        if (null != helloTimer)
        {
            helloTimer.cancel(false);
            helloTimer = null;
        }
        slot = taken;
        name = clean;
        clientId = id;
        server.counters().increment(MrdCounter.CLIENTS_TOTAL);
        server.journal().clientAttached(id, pid, uid);
        LOG.info("client {} (pid {}, uid {}, {}) connected", id, pid, uid, clean.isEmpty() ? "no name" : clean);
        reply(correlationId, new Message.Welcome(ErrorCode.OK, "", id, server.epoch(), HeaderDescriptor.LAYOUT_VERSION,
            server.controlFilePath()));
    }

    private void stop(final long correlationId, final long startNs)
    {
        if (!server.peerPolicy().mayStop(uid))
        {
            final String why = "STOP refused for client " + clientId + " (pid " + pid + " uid " + uid + "): only the " +
                "daemon's uid " + server.peerPolicy().daemonUid() + " or root may stop it; run 'mrd stop' as that user";
            server.refusals().refused(why);
            reply(correlationId, new Message.Status(MessageType.STOP, ErrorCode.EPERM, why));
            return;
        }
        LOG.info("STOP from client {} (pid {}, uid {})", clientId, pid, uid);
        submit(correlationId, MessageType.STOP, startNs,
            () -> new Message.Status(MessageType.STOP, ErrorCode.OK, "stopping"), server::requestStop);
    }

    private void awaitFd()
    {
        pendingFd.start(channel, server.encode(channel, pendingFd.correlationId(),
            new Message.Status(MessageType.SEND_FD, ErrorCode.OK, "")), fdOutcome);
    }

    /**
     * What becomes of a REG_EXTERNAL's fd.
     */
    private final class FdOutcome implements PendingFd.Session
    {
        public boolean awaits(final PendingFd pending)
        {
            return pendingFd == pending && !closing;
        }

        public void received(final PendingFd pending, final int fd)
        {
            pendingFd = null;
            resumeReading();
            final int id = clientId;
            submit(pending.correlationId(), MessageType.REG_EXTERNAL, System.nanoTime(), new RequestWork()
            {
                public Message.Reply run()
                {
                    return server.handler().registerExternal(pending.length(), pending.access(), fd, id);
                }

                public void abandon()
                {
                    Posix.close(fd);
                }
            }, null);
        }

        public void refused(final PendingFd pending, final String why)
        {
            protocolError(pending.correlationId(), MessageType.REG_EXTERNAL, why);
        }

        public void peerClosed(final PendingFd pending)
        {
            pendingFd = null;
            channel.close();
        }
    }

    private void resumeReading()
    {
        if (!closing && null == pendingFd)
        {
            channel.config().setAutoRead(channel.isWritable());
        }
    }

    /**
     * A peer that does not read its replies is not read either, so replies cannot pile up in the daemon.
     */
    public void channelWritabilityChanged(final ChannelHandlerContext ctx)
    {
        resumeReading();
        ctx.fireChannelWritabilityChanged();
    }

    private void submit(
        final long correlationId, final MessageType type, final long startNs, final RequestWork work,
        final Runnable afterReply)
    {
        inFlight.incrementAndGet();
        try
        {
            server.workers().execute(() -> run(correlationId, type, startNs, work, afterReply));
        }
        catch (final RejectedExecutionException ex)
        {
            work.abandon();
            inFlight.decrementAndGet();
            reply(correlationId, new Message.Status(type, ErrorCode.EAGAIN, server.isClosing() ?
                "the daemon is shutting down" : "the daemon is overloaded (its request queue is full): retry later"));
        }
    }

    private void run(
        final long correlationId, final MessageType type, final long startNs, final RequestWork work,
        final Runnable afterReply)
    {
        try
        {
            if (closed || closing)
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
                LOG.debug("client {}: {} failed: {}", clientId, type, ex.oneLine());
                reply = new Message.Status(type, ex.code(), ex.getMessage());
            }
            catch (final RuntimeException | LinkageError | OutOfMemoryError ex)
            {
                server.unexpected("client " + clientId + " " + type, ex);
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
            server.counters().histograms().requestAnswered(type, startNs);
        }
        finally
        {
            if (inFlight.decrementAndGet() == 0)
            {
                if (closed)
                {
                    startReclaim();
                }
                else if (inputShutdown)
                {
                    // after the last reply is out, not before: a close would drop what is still unflushed
                    channel.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
                }
            }
        }
    }

    /**
     * Writes a reply unless the connection is closed or being given up (so nothing is written after close).
     */
    private void reply(final long correlationId, final Message.Reply reply)
    {
        if (closed || closing || !channel.isActive())
        {
            return;
        }
        channel.writeAndFlush(server.encode(channel, correlationId, reply), channel.voidPromise());
    }

    private void writeThen(final long correlationId, final Message.Reply reply, final Runnable then)
    {
        if (closed || closing || !channel.isActive())
        {
            then.run();
            return;
        }
        channel.writeAndFlush(server.encode(channel, correlationId, reply)).addListener(f -> then.run());
    }

    private void protocolError(final long correlationId, final MessageType type, final String message)
    {
        if (closing)
        {
            return;
        }
        server.counters().increment(MrdCounter.PROTOCOL_ERRORS);
        server.refusals().refused(describe() + ": EPROTO: " + message);
        fail(correlationId, type, ErrorCode.EPROTO, message);
    }

    /**
     * Answers once more and closes: the session reads nothing further.
     */
    private void fail(final long correlationId, final MessageType type, final ErrorCode code, final String message)
    {
        if (closing)
        {
            return;
        }
        closing = true;
        cancelTimers();
        if (!channel.isActive())
        {
            channel.close();
            return;
        }
        channel.writeAndFlush(server.encode(channel, correlationId, new Message.Status(type, code, message)))
            .addListener(ChannelFutureListener.CLOSE);
    }

    public void userEventTriggered(final ChannelHandlerContext ctx, final Object event)
    {
        if (event instanceof ChannelInputShutdownEvent)
        {
            inputShutdown = true;
            if (closing)
            {
                return;
            }
            if (null != pendingFd)
            {
                channel.close();
            }
            else if (frames.buffered() > 0)
            {
                final int declared = frames.pendingFrameLength();
                protocolError(0, MessageType.ERROR, "the connection was shut after " + frames.buffered() +
                    " bytes of a frame" + (declared < 0 ? "" : " of " + declared + " bytes") + ": frame truncated");
            }
            else if (inFlight.get() == 0)
            {
                // after the replies written here are out (CREATE_MRs the cache answered): a close drops them
                channel.writeAndFlush(Unpooled.EMPTY_BUFFER).addListener(ChannelFutureListener.CLOSE);
            }
            return;
        }
        ctx.fireUserEventTriggered(event);
    }

    public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
    {
        if (cause instanceof IOException)
        {
            LOG.debug("{}: {}", describe(), cause.toString());
        }
        else
        {
            server.unexpected(describe(), cause);
        }
        closing = true;
        channel.close();
    }

    public void channelInactive(final ChannelHandlerContext ctx)
    {
        closed = true;
        closing = true;
        cancelTimers();
        pendingFd = null;
        pdImport.close();
        if (clientId != 0 && inFlight.get() == 0)
        {
            startReclaim();
        }
        ctx.fireChannelInactive();
    }

    private void cancelTimers()
    {
        if (null != helloTimer)
        {
            helloTimer.cancel(false);
            helloTimer = null;
        }
        if (null != pendingFd)
        {
            pendingFd.cancel();
        }
    }

    /**
     * Runs once, after the connection closed and its last request finished.
     */
    private void startReclaim()
    {
        if (clientId != 0 && reclaimStarted.compareAndSet(false, true))
        {
            server.reclaim(clientId, slot, pid, name);
        }
    }

    private String describe()
    {
        return (clientId == 0 ? "peer" : "client " + clientId) + " (pid " + pid + " uid " + uid +
            (name.isEmpty() ? "" : ", " + name) + ")";
    }
}
