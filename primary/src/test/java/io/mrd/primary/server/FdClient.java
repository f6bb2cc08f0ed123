package io.mrd.primary.server;

import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.Message;
import io.netty.bootstrap.Bootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.channel.unix.FileDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * A test client that can pass a file descriptor: Netty's epoll domain socket, whose write of a
 * {@link FileDescriptor} is {@code sendmsg} of one byte carrying the fd ({@code SCM_RIGHTS}), exactly what
 * REG_EXTERNAL expects after SEND_FD.
 */
final class FdClient implements AutoCloseable
{
    private final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, EpollIoHandler.newFactory());
    private final ReplyQueue received = new ReplyQueue();
    private final Channel channel;

    FdClient(final Path socket)
    {
        final Bootstrap bootstrap = new Bootstrap().group(group).channel(EpollDomainSocketChannel.class)
            .handler(new ChannelInboundHandlerAdapter()
            {
                private final UnsafeBuffer buffer = new UnsafeBuffer(new byte[64 * 1024]);
                private int filled;

                public void channelRead(final ChannelHandlerContext ctx, final Object msg)
                {
                    final ByteBuf in = (ByteBuf)msg;
                    try
                    {
                        final int n = in.readableBytes();
                        in.readBytes(buffer.byteArray(), filled, n);
                        filled += n;
                        int at = 0;
                        while (true)
                        {
                            final int length = FrameCodec.frameLength(buffer, at, filled - at);
                            if (length < 0 || filled - at < length)
                            {
                                break;
                            }
                            received.add(FrameCodec.decodeReply(buffer, at, length));
                            at += length;
                        }
                        System.arraycopy(buffer.byteArray(), at, buffer.byteArray(), 0, filled - at);
                        filled -= at;
                    }
                    catch (final MrdException ex)
                    {
                        received.add(ex);
                    }
                    finally
                    {
                        in.release();
                    }
                }

                public void channelInactive(final ChannelHandlerContext ctx)
                {
                    received.add(RawClient.EOF);
                }
            });
        try
        {
            channel = bootstrap.connect(new DomainSocketAddress(socket.toString())).sync().channel();
        }
        catch (final InterruptedException ex)
        {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
            throw new IllegalStateException(ex);
        }
    }

    void send(final long correlationId, final Message.Request request)
    {
        sendRaw(RawClient.encode(correlationId, request));
    }

    void sendRaw(final byte[] bytes)
    {
        channel.writeAndFlush(Unpooled.wrappedBuffer(bytes)).syncUninterruptibly();
    }

    /**
     * Sends one byte carrying {@code fd} (the fd stays open here: the kernel passes a duplicate).
     */
    void sendFd(final int fd)
    {
        channel.writeAndFlush(new FileDescriptor(fd)).syncUninterruptibly();
    }

    Frame receive()
    {
        final Object next = next();
        if (next == RawClient.EOF)
        {
            fail("the daemon closed the connection instead of replying");
        }
        return assertInstanceOf(Frame.class, next);
    }

    Message.Reply request(final long correlationId, final Message.Request request)
    {
        send(correlationId, request);
        final Frame frame = receive();
        assertEquals(correlationId, frame.correlationId());
        return (Message.Reply)frame.message();
    }

    void awaitClosed()
    {
        final Object next = next();
        if (next != RawClient.EOF)
        {
            fail("expected the daemon to close the connection, got " + next);
        }
    }

    private Object next()
    {
        return received.next();
    }

    public void close()
    {
        channel.close().syncUninterruptibly();
        group.shutdownGracefully(0, 1, TimeUnit.SECONDS).syncUninterruptibly();
    }
}
