package io.mrd.cli.reliability;

import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.testing.Wait;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A protocol client that sends whatever bytes a test gives it, over the JDK's Unix-domain {@link SocketChannel}
 * (no fds: see {@link FdConnection}), and reads the daemon's replies with a deadline, decoding them with the
 * one codec ({@link FrameCodec#decodeReply}): a reply the codec refuses fails the test.
 */
final class RawConnection implements AutoCloseable
{
    private final SocketChannel channel;
    private final Selector selector;
    private final ByteBuffer in = ByteBuffer.allocate(64 * 1024);
    private boolean ended;
    private boolean writeFailed;

    private RawConnection(final SocketChannel channel, final Selector selector)
    {
        this.channel = channel;
        this.selector = selector;
    }

    static RawConnection connect(final Path socket)
    {
        try
        {
            final SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            channel.connect(UnixDomainSocketAddress.of(socket));
            channel.configureBlocking(false);
            final Selector selector = Selector.open();
            channel.register(selector, SelectionKey.OP_READ);
            return new RawConnection(channel, selector);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("connect " + socket, ex);
        }
    }

    static byte[] encode(final long correlationId, final int flags, final Message message)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[FrameDescriptor.MAX_FRAME_LENGTH]);
        final int length = FrameCodec.encode(buffer, 0, correlationId, flags, message);
        return Arrays.copyOf(buffer.byteArray(), length);
    }

    static byte[] encode(final long correlationId, final Message message)
    {
        return encode(correlationId, 0, message);
    }

    /**
     * Writes all the bytes, unless the daemon has closed the connection meanwhile (then the rest is dropped:
     * what it answered is still there to read).
     */
    RawConnection send(final byte[] bytes)
    {
        final ByteBuffer out = ByteBuffer.wrap(bytes);
        Wait.await("the daemon to read " + bytes.length + " bytes", Duration.ofSeconds(10), () ->
        {
            try
            {
                channel.write(out);
            }
            catch (final IOException ex)
            {
                writeFailed = true;
            }
            return writeFailed || !out.hasRemaining();
        });
        return this;
    }

    RawConnection send(final long correlationId, final Message message)
    {
        return send(encode(correlationId, message));
    }

    /**
     * Half-closes: the daemon sees the end of the stream and must answer what it has, then close.
     */
    RawConnection shutdownOutput()
    {
        try
        {
            channel.shutdownOutput();
        }
        catch (final IOException ex)
        {
            writeFailed = true;
        }
        return this;
    }

    /**
     * @return true once a write failed because the daemon had closed the connection.
     */
    boolean writeFailed()
    {
        return writeFailed;
    }

    /**
     * @return the next reply, or null at the end of the stream.
     * @throws AssertionError when neither comes within {@code timeout}.
     */
    Frame receive(final Duration timeout)
    {
        final long deadline = System.nanoTime() + timeout.toNanos();
        try
        {
            while (true)
            {
                final Frame frame = parse();
                if (null != frame)
                {
                    return frame;
                }
                if (ended)
                {
                    if (in.position() > 0)
                    {
                        throw new AssertionError("the daemon closed after " + in.position() + " bytes of a reply");
                    }
                    return null;
                }
                final long left = deadline - System.nanoTime();
                if (left <= 0)
                {
                    throw new AssertionError("the daemon neither answered nor closed the connection within " + timeout);
                }
                selector.select(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                selector.selectedKeys().clear();
                final int n;
                try
                {
                    n = channel.read(in);
                }
                catch (final IOException ex)
                {
                    // ECONNRESET: the daemon closed with our bytes unread; what it sent before is already read
                    ended = true;
                    continue;
                }
                if (n < 0)
                {
                    ended = true;
                }
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    /**
     * @return every reply until the daemon closes the connection.
     */
    List<Frame> drain(final Duration timeout)
    {
        final List<Frame> frames = new ArrayList<>();
        final long deadline = System.nanoTime() + timeout.toNanos();
        for (Frame f; null != (f = receive(Duration.ofNanos(Math.max(1, deadline - System.nanoTime())))); )
        {
            frames.add(f);
        }
        return frames;
    }

    private Frame parse()
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(in.array(), 0, in.position());
        final int length = FrameCodec.frameLength(buffer, 0, in.position());
        if (length < 0 || in.position() < length)
        {
            return null;
        }
        final Frame frame = FrameCodec.decodeReply(buffer, 0, length);
        System.arraycopy(in.array(), length, in.array(), 0, in.position() - length);
        in.position(in.position() - length);
        return frame;
    }

    public void close()
    {
        try
        {
            selector.close();
            channel.close();
        }
        catch (final IOException ignore)
        {
            // closing
        }
    }
}
