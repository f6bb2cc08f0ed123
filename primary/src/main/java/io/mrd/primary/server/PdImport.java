package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.primary.provider.SharedDevice;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelOutboundBuffer;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.util.concurrent.ScheduledFuture;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayDeque;
import java.util.concurrent.TimeUnit;
import java.util.function.BiConsumer;
import java.util.function.Consumer;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * IMPORT_PD on one connection: the daemon's PD handle in the reply, and a duplicate of its device's command file
 * ({@link SharedDevice#duplicateCommandFd()}) attached to the reply. Any admitted client may ask (the session
 * answers only after HELLO, and the peer checks ran at connect); a daemon without a device answers EOPNOTSUPP
 * naming the provider that has one.
 * <p>
 * The frame and the descriptor leave in one {@code sendmsg} on the channel's socket, the descriptor attached to
 * the frame's own bytes, so the client finds it with that frame and no other.
 * <p>
 * Netty cannot write ancillary data with a frame (its {@code FileDescriptor} message sends a byte of its own,
 * and fails with an {@code Error} when the socket is full), so the send bypasses it, on the event loop, only
 * while Netty has nothing queued for the socket: nothing of another frame can then be half-written before or
 * interleave with this one. Otherwise, or while the socket is full, it tries again shortly; bytes the kernel
 * did not take go through Netty, first in line. A client that does not read for {@link #TIMEOUT_MS} loses its
 * connection. Every descriptor is closed once sent or given up, and every frame released.
 * <p>
 * Event-loop confined.
 */
final class PdImport
{
    /** How long a reply may wait for the client to make room in its socket. */
    static final long TIMEOUT_MS = PendingFd.TIMEOUT_MS;
    /** Replies one connection may have waiting; more are EAGAIN: a client that never reads holds few fds. */
    static final int MAX_WAITING = 8;
    private static final long RETRY_MS = 1;

    private record Pending(ByteBuf frame, int fd, long deadlineNs)
    {
    }

    private final RequestHandler handler;
    private final EpollDomainSocketChannel channel;
    private final BiConsumer<Long, Message.Reply> reply;
    private final Consumer<String> giveUp;
    private final ArrayDeque<Pending> queue = new ArrayDeque<>();
    private ScheduledFuture<?> retry;

    /**
     * @param handler says which device there is, if any.
     * @param reply   writes a reply without a descriptor (a refusal), as the session writes any.
     * @param giveUp  closes the connection, told why (the client does not read, or the socket broke).
     */
    PdImport(
        final RequestHandler handler,
        final EpollDomainSocketChannel channel,
        final BiConsumer<Long, Message.Reply> reply,
        final Consumer<String> giveUp)
    {
        this.handler = handler;
        this.channel = channel;
        this.reply = reply;
        this.giveUp = giveUp;
    }

    /**
     * Answers an IMPORT_PD, on the event loop.
     */
    void answer(final long correlationId, final int deviceNumber)
    {
        if (queue.size() >= MAX_WAITING)
        {
            reply.accept(correlationId, new Message.Status(MessageType.IMPORT_PD, ErrorCode.EAGAIN, MAX_WAITING +
                " IMPORT_PD replies of this connection wait for it to read its replies: read them before asking " +
                "again"));
            return;
        }
        final SharedDevice device;
        final int fd;
        try
        {
            device = handler.sharedDevice("IMPORT_PD", deviceNumber);
            fd = device.duplicateCommandFd();
        }
        catch (final MrdException ex)
        {
            reply.accept(correlationId, new Message.Status(MessageType.IMPORT_PD, ex.code(), ex.getMessage()));
            return;
        }
        send(ReplyEncoder.encode(channel, correlationId, FrameDescriptor.FLAG_FD,
            new Message.PdImported(ErrorCode.OK, "", device.pdHandle(), device.deviceName())), fd);
    }

    /**
     * Sends {@code frame} with {@code fd} attached, now or as soon as it can; takes both.
     */
    private void send(final ByteBuf frame, final int fd)
    {
        queue.add(new Pending(frame, fd, System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS)));
        drain();
    }

    /**
     * Releases what is still waiting: the connection is closed.
     */
    void close()
    {
        if (null != retry)
        {
            retry.cancel(false);
            retry = null;
        }
        Pending pending;
        while (null != (pending = queue.poll()))
        {
            release(pending);
        }
    }

    private void drain()
    {
        retry = null;
        while (!queue.isEmpty())
        {
            if (!channel.isActive())
            {
                close();
                return;
            }
            final Pending head = queue.peek();
            final ChannelOutboundBuffer outbound = channel.unsafe().outboundBuffer();
            final long sent = null != outbound && outbound.totalPendingWriteBytes() > 0 ? -ErrorCode.EAGAIN.errno() :
                sendNow(head);
            if (sent == -ErrorCode.EAGAIN.errno() || sent == -ErrorCode.EINTR.errno())
            {
                if (System.nanoTime() - head.deadlineNs() > 0)
                {
                    close();
                    giveUp.accept("the client read none of its replies for " + TIMEOUT_MS + " ms, so the " +
                        "IMPORT_PD reply and its descriptor could not be sent");
                    return;
                }
                retry = channel.eventLoop().schedule(this::drain, RETRY_MS, TimeUnit.MILLISECONDS);
                return;
            }
            queue.poll();
            if (sent < 0)
            {
                release(head);
                close();
                giveUp.accept("sending the IMPORT_PD reply and its descriptor failed: " +
                    ErrorCode.describe((int)-sent));
                return;
            }
            Posix.close(head.fd());
            final ByteBuf frame = head.frame();
            if (sent < frame.readableBytes())
            {
                frame.skipBytes((int)sent);
                channel.writeAndFlush(frame, channel.voidPromise());
            }
            else
            {
                frame.release();
            }
        }
    }

    /**
     * @return bytes the kernel took, or the negated errno.
     */
    private long sendNow(final Pending pending)
    {
        final ByteBuf frame = pending.frame();
        final int length = frame.readableBytes();
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment bytes = arena.allocate(length);
            for (int i = 0; i < length; i++)
            {
                bytes.set(JAVA_BYTE, i, frame.getByte(frame.readerIndex() + i));
            }
            return UnixSocket.sendWithFd(channel.fd().intValue(), bytes, length, pending.fd());
        }
    }

    private static void release(final Pending pending)
    {
        Posix.close(pending.fd());
        pending.frame().release();
    }
}
