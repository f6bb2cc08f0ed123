package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The smallest client of the protocol, for tests: a JDK Unix socket, frames from {@link FrameCodec}, and a
 * reader thread that queues every reply frame and finally the end of the stream, so a test can wait for
 * either with a deadline.
 */
final class RawClient implements AutoCloseable
{
    /** Queued when the daemon closed the connection. */
    static final Object EOF = new Object();

    private final SocketChannel channel;
    private final ReplyQueue received = new ReplyQueue();
    private final Thread reader;

    private RawClient(final SocketChannel channel)
    {
        this.channel = channel;
        this.reader = Thread.ofPlatform().daemon(true).name("raw-client-reader").start(this::read);
    }

    static RawClient connect(final Path socket)
    {
        try
        {
            final SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            channel.connect(UnixDomainSocketAddress.of(socket));
            return new RawClient(channel);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    static byte[] encode(final long correlationId, final Message message)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[FrameDescriptor.MAX_FRAME_LENGTH]);
        final int length = FrameCodec.encode(buffer, 0, correlationId, 0, message);
        return Arrays.copyOf(buffer.byteArray(), length);
    }

    void send(final long correlationId, final Message.Request request)
    {
        sendRaw(encode(correlationId, request));
    }

    void sendRaw(final byte[] bytes)
    {
        try
        {
            final ByteBuffer buffer = ByteBuffer.wrap(bytes);
            while (buffer.hasRemaining())
            {
                channel.write(buffer);
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    void shutdownOutput()
    {
        try
        {
            channel.shutdownOutput();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * @return the next reply frame; fails on timeout or when the connection closed instead.
     */
    Frame receive()
    {
        final Object next = next();
        if (next == EOF)
        {
            fail("the daemon closed the connection instead of replying");
        }
        return assertInstanceOf(Frame.class, next);
    }

    /**
     * Sends a request and returns its reply, checking that the reply echoes the correlation id.
     */
    Message.Reply request(final long correlationId, final Message.Request request)
    {
        send(correlationId, request);
        final Frame frame = receive();
        assertEquals(correlationId, frame.correlationId(), "correlation id of the reply to " + request);
        return (Message.Reply)frame.message();
    }

    Message.Welcome hello(final String name)
    {
        final Message.Reply reply = request(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, name));
        assertEquals(ErrorCode.OK, reply.status(), () -> "HELLO: " + reply);
        return assertInstanceOf(Message.Welcome.class, reply);
    }

    /**
     * Waits for the daemon to close the connection, failing if another reply comes first.
     */
    void awaitClosed()
    {
        final Object next = next();
        if (next != EOF)
        {
            fail("expected the daemon to close the connection, got " + next);
        }
    }

    /**
     * Reads whatever replies come until the daemon closes the connection.
     */
    void drainUntilClosed()
    {
        while (next() != EOF)
        {
            // replies to whatever of the input made sense
        }
    }

    private Object next()
    {
        return received.next();
    }

    private void read()
    {
        final byte[] bytes = new byte[64 * 1024];
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        int filled = 0;
        try
        {
            while (true)
            {
                final int n = channel.read(ByteBuffer.wrap(bytes, filled, bytes.length - filled));
                if (n < 0)
                {
                    received.add(EOF);
                    return;
                }
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
                System.arraycopy(bytes, at, bytes, 0, filled - at);
                filled -= at;
            }
        }
        catch (final IOException ex)
        {
            received.add(EOF);
        }
        catch (final MrdException ex)
        {
            received.add(ex);
        }
    }

    public void close()
    {
        try
        {
            channel.close();
            reader.join(5_000);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }
}
