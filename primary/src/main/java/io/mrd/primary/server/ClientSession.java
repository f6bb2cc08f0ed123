package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelFutureListener;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.socket.ChannelInputShutdownEvent;
import io.netty.util.ReferenceCountUtil;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;

/**
 * One connection, as Netty sees it: it cuts the frames and routes each request to the part of the session that
 * answers it, and turns Netty's events (connect, input shut, exception, close) into transitions of the
 * session's {@link SessionLifecycle} (DESIGN §7: a closed connection is a dead client). Its parts:
 * {@link PeerHandshake} (the peer check at connect, HELLO), {@link FdHandshake} (the fd of a REG_EXTERNAL),
 * {@link PdImport} (IMPORT_PD), {@link RequestDispatch} (the workers and the replies) and {@link ExistingMrReply}
 * (a CREATE_MR the global cache answers at once). It uses the server through {@link SessionServices} only.
 * <p>
 * Everything before HELLO, and HELLO itself, is answered on the event loop; a request that is not HELLO
 * before it is a protocol error, and so is a second HELLO. Any protocol error, refusal or failure is answered
 * (EPROTO, EPERM, EBUSY) and closes this connection only: the daemon never dies of input.
 * <p>
 * An fd sent when none is expected needs no handling: Netty reads its message as one stray byte and the kernel
 * closes the fd (nothing leaks); the byte shifts the stream, so the next frame is refused EPROTO (or, rarely,
 * its shifted length is plausible and it waits incomplete until the client gives up).
 * <p>
 * <b>Threads.</b> Netty calls the handler methods on the connection's event loop, which alone touches the frame
 * accumulator, the parts' event-loop state (the awaited fd, the hello timer, IMPORT_PD's queue) and writes the
 * peer's identity. Workers touch only what {@link RequestDispatch} and {@link SessionLifecycle} say they do:
 * the lifecycle's volatile state and atomic count, and the identity written before their request was handed
 * to them.
 */
final class ClientSession extends ChannelInboundHandlerAdapter
{
    /** Requests one connection may have running or queued; more are answered EAGAIN. */
    static final int MAX_IN_FLIGHT = 256;

    private static final Logger LOG = LoggerFactory.getLogger(ClientSession.class);

    private final SessionServices services;
    private final EpollDomainSocketChannel channel;
    private final FrameAccumulator frames = new FrameAccumulator();
    private final PeerHandshake peer;
    private final SessionLifecycle lifecycle;
    private final RequestDispatch dispatch;
    private final FdHandshake fd;
    private final PdImport pdImport;

    ClientSession(final SessionServices services, final EpollDomainSocketChannel channel)
    {
        this.services = services;
        this.channel = channel;
        this.peer = new PeerHandshake(services, channel);
        this.lifecycle = new SessionLifecycle(channel, this::reclaim);
        this.dispatch = new RequestDispatch(services, channel, lifecycle, peer);
        this.fd = new FdHandshake(services, channel, lifecycle, peer, dispatch,
            (why, correlationId) -> protocolError(correlationId, MessageType.REG_EXTERNAL, why));
        this.pdImport = new PdImport(services.handler(), channel, dispatch::reply, why ->
        {
            services.refusals().refused(peer.describe() + ": " + why);
            lifecycle.giveUp();
            channel.close();
        });
    }

    int clientId()
    {
        return peer.clientId();
    }

    public void channelActive(final ChannelHandlerContext ctx)
    {
        final String refusal = peer.admit();
        if (null != refusal)
        {
            fail(0, MessageType.ERROR, ErrorCode.EPERM, refusal);
            return;
        }
        peer.awaitHello(ctx.executor(), this::helloTimedOut);
        ctx.fireChannelActive();
    }

    private void helloTimedOut()
    {
        if (peer.clientId() == 0 && !lifecycle.givenUp())
        {
            protocolError(0, MessageType.ERROR, "no HELLO within " + PeerHandshake.HELLO_TIMEOUT_MS +
                " ms of connecting");
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
            if (lifecycle.givenUp())
            {
                return;
            }
            if (fd.awaiting())
            {
                // Netty read although told not to (the peer hung up and the kernel said so): the stream is
                // broken either way.
                protocolError(fd.correlationId(), MessageType.REG_EXTERNAL,
                    "bytes arrived while waiting for the fd of REG_EXTERNAL: send one byte carrying the fd, nothing else");
                return;
            }
            while (in.isReadable() && !lifecycle.givenUp() && !fd.awaiting())
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
            if (fd.awaiting() && !lifecycle.givenUp())
            {
                if (in.isReadable())
                {
                    protocolError(fd.correlationId(), MessageType.REG_EXTERNAL, in.readableBytes() +
                        " bytes followed REG_EXTERNAL: send nothing between REG_EXTERNAL and its fd");
                    return;
                }
                fd.start();
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
        services.counters().increment(MrdCounter.REQUESTS);
        final long correlationId = frame.correlationId();
        final Message message = frame.message();
        final MessageType type = message.type();
        if (peer.clientId() == 0)
        {
            if (message instanceof Message.Hello hello)
            {
                hello(correlationId, hello);
                services.counters().histograms().requestAnswered(type, startNs);
            }
            else
            {
                protocolError(correlationId, type, "expected HELLO version " + FrameDescriptor.PROTOCOL_VERSION +
                    " as the first request, got " + type);
            }
            return;
        }
        if (lifecycle.inFlight() >= MAX_IN_FLIGHT)
        {
            dispatch.reply(correlationId, new Message.Status(type, ErrorCode.EAGAIN, MAX_IN_FLIGHT +
                " requests of this connection are in flight: wait for replies before sending more"));
            return;
        }
        switch (message)
        {
            case Message.Hello hello -> protocolError(correlationId, type, "HELLO sent twice: this connection is " +
                "client " + peer.clientId() + " already");
            case Message.RegExternal reg -> fd.request(correlationId, reg);
            case Message.Stop stop -> stop(correlationId, startNs, stop.handover());
            case Message.ImportPd importPd -> pdImport.answer(correlationId, importPd.device());
            case Message.Request request ->
            {
                final Message.MrCreated cached = request instanceof Message.CreateMr create &&
                    !services.serverClosing().getAsBoolean() ? services.existingMrReply().answer(create) : null;
                if (null != cached)
                {
                    dispatch.reply(correlationId, cached);
                    services.counters().histograms().requestAnswered(type, startNs);
                    return;
                }
                final int id = peer.clientId();
                final int pid = peer.pid();
                dispatch.submit(correlationId, type, startNs, () -> services.handler().execute(request, id, pid), null);
            }
            case Message.Reply reply -> protocolError(correlationId, type, "a reply is not a request");
        }
    }

    private void hello(final long correlationId, final Message.Hello hello)
    {
        final String badVersion = PeerHandshake.versionRefusal(hello);
        if (null != badVersion)
        {
            protocolError(correlationId, MessageType.HELLO, badVersion);
            return;
        }
        final Message.Reply answer = peer.hello(hello);
        if (answer instanceof Message.Status refused)
        {
            fail(correlationId, MessageType.HELLO, refused.status(), refused.message());
            return;
        }
        dispatch.reply(correlationId, answer);
    }

    private void stop(final long correlationId, final long startNs, final boolean handover)
    {
        final String refused = peer.stopRefusal();
        if (null != refused)
        {
            dispatch.reply(correlationId, new Message.Status(MessageType.STOP, ErrorCode.EPERM, refused));
            return;
        }
        dispatch.submit(correlationId, MessageType.STOP, startNs,
            () -> new Message.Status(MessageType.STOP, ErrorCode.OK, handover ? "handing over" : "stopping"),
            handover ? services.handover() : services.stop());
    }

    /**
     * A peer that does not read its replies is not read either, so replies cannot pile up in the daemon.
     */
    public void channelWritabilityChanged(final ChannelHandlerContext ctx)
    {
        fd.resumeReading();
        ctx.fireChannelWritabilityChanged();
    }

    private void protocolError(final long correlationId, final MessageType type, final String message)
    {
        if (lifecycle.givenUp())
        {
            return;
        }
        services.counters().increment(MrdCounter.PROTOCOL_ERRORS);
        services.refusals().refused(peer.describe() + ": EPROTO: " + message);
        fail(correlationId, type, ErrorCode.EPROTO, message);
    }

    /**
     * Answers once more and closes: the session reads nothing further.
     */
    private void fail(final long correlationId, final MessageType type, final ErrorCode code, final String message)
    {
        if (!lifecycle.giveUp())
        {
            return;
        }
        cancelTimers();
        if (!channel.isActive())
        {
            channel.close();
            return;
        }
        channel.writeAndFlush(ReplyEncoder.encode(channel, correlationId, new Message.Status(type, code, message)))
            .addListener(ChannelFutureListener.CLOSE);
    }

    public void userEventTriggered(final ChannelHandlerContext ctx, final Object event)
    {
        if (event instanceof ChannelInputShutdownEvent)
        {
            if (!lifecycle.inputShut())
            {
                return;
            }
            if (fd.awaiting())
            {
                channel.close();
            }
            else if (frames.buffered() > 0)
            {
                final int declared = frames.pendingFrameLength();
                protocolError(0, MessageType.ERROR, "the connection was shut after " + frames.buffered() +
                    " bytes of a frame" + (declared < 0 ? "" : " of " + declared + " bytes") + ": frame truncated");
            }
            else
            {
                // after the replies written here are out (CREATE_MRs the cache answered)
                lifecycle.closeIfIdle();
            }
            return;
        }
        ctx.fireUserEventTriggered(event);
    }

    public void exceptionCaught(final ChannelHandlerContext ctx, final Throwable cause)
    {
        if (cause instanceof IOException)
        {
            LOG.debug("{}: {}", peer.describe(), cause.toString());
        }
        else
        {
            services.failures().unexpected(peer.describe(), cause);
        }
        lifecycle.giveUp();
        channel.close();
    }

    public void channelInactive(final ChannelHandlerContext ctx)
    {
        cancelTimers();
        fd.channelClosed();
        pdImport.close();
        lifecycle.channelClosed();
        ctx.fireChannelInactive();
    }

    private void cancelTimers()
    {
        peer.cancelHelloTimer();
        fd.cancel();
    }

    /**
     * Frees what the client owned; the lifecycle runs this once, after the channel closed and its last request
     * finished, on the event loop or a worker. A peer that never said HELLO owns nothing.
     */
    private void reclaim()
    {
        final int id = peer.clientId();
        if (id != 0)
        {
            services.reclaim().reclaim(id, peer.slot(), peer.pid(), peer.name());
        }
    }
}
