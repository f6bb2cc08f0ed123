package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.ReplyReader;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.Arrays;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The smallest client of the protocol, for tests: the client library's {@link UnixSocket} (which can pass a
 * file descriptor, {@code SCM_RIGHTS}, as REG_EXTERNAL expects after SEND_FD), frames from {@link FrameCodec}
 * written as raw bytes (so that a test can send malformed ones), and the client's {@link ReplyReader}, whose
 * thread queues every reply frame and finally the end of the stream, so a test can wait for either with a
 * deadline.
 */
final class RawClient implements AutoCloseable
{
    /** Queued when the daemon closed the connection. */
    static final Object EOF = new Object();

    private final UnixSocket socket;
    private final ReplyQueue received = new ReplyQueue();
    private final ReplyReader reader;

    private RawClient(final UnixSocket socket)
    {
        this.socket = socket;
        this.reader = ReplyReader.start(socket, "raw-client-reader", new ReplyReader.Handler()
        {
            public void onFrame(final Frame frame)
            {
                received.add(frame);
            }

            public void onEnd(final String how, final MrdException cause)
            {
                // A reset is the daemon closing with input unread; anything else (a reply the codec refuses)
                // fails the test that waits for the next reply.
                received.add(null == cause || cause.code() == ErrorCode.ECONNRESET ? EOF : cause);
            }
        });
    }

    static RawClient connect(final Path socket)
    {
        return new RawClient(UnixSocket.connect(socket));
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
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment out = arena.allocate(Math.max(1, bytes.length));
            MemorySegment.copy(bytes, 0, out, JAVA_BYTE, 0, bytes.length);
            socket.writeFully(out, 0, bytes.length);
        }
    }

    /**
     * Sends one byte carrying {@code fd} (the fd stays open here: the kernel passes a duplicate).
     */
    void sendFd(final int fd)
    {
        socket.sendFd(fd, (byte)0);
    }

    void shutdownOutput()
    {
        socket.shutdownOutput();
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

    public void close()
    {
        socket.shutdown();
        reader.join();
        socket.close();
    }
}
