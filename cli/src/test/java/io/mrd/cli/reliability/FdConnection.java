package io.mrd.cli.reliability;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.sys.UnixSocket;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A protocol client that can also pass file descriptors ({@code SCM_RIGHTS}, through the secondary library's
 * {@link UnixSocket}) where the daemon does not expect them. Reads with a deadline: a timer shuts the socket
 * when the daemon neither answers nor closes in time.
 */
@SuppressWarnings("restricted")
final class FdConnection implements AutoCloseable
{
    private static final int SHUT_WR = 1;
    private static final MethodHandle SHUTDOWN = Linker.nativeLinker().downcallHandle(
        Linker.nativeLinker().defaultLookup().find("shutdown").orElseThrow(),
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final ScheduledExecutorService TIMER = Executors.newSingleThreadScheduledExecutor(r ->
    {
        final Thread thread = new Thread(r, "fd-connection-timer");
        thread.setDaemon(true);
        return thread;
    });

    private final UnixSocket socket;
    private final Arena arena = Arena.ofConfined();
    private final MemorySegment buffer = arena.allocate(64 * 1024, 64);
    private int filled;
    private volatile boolean timedOut;

    FdConnection(final Path path)
    {
        this.socket = UnixSocket.connect(path);
    }

    FdConnection send(final byte[] bytes)
    {
        final MemorySegment out = arena.allocate(Math.max(1, bytes.length));
        MemorySegment.copy(bytes, 0, out, JAVA_BYTE, 0, bytes.length);
        socket.writeFully(out, 0, bytes.length);
        return this;
    }

    FdConnection sendFd(final int fd)
    {
        socket.sendFd(fd, (byte)0);
        return this;
    }

    /**
     * {@code shutdown(SHUT_WR)}: the daemon sees the end of the stream.
     */
    FdConnection shutdownOutput()
    {
        try
        {
            final int ignored = (int)SHUTDOWN.invokeExact(socket.fd(), SHUT_WR);
        }
        catch (final Throwable t)
        {
            throw new IllegalStateException(t);
        }
        return this;
    }

    /**
     * @return the next reply, or null at the end of the stream.
     * @throws AssertionError when neither comes within {@code timeout}.
     */
    Frame receive(final Duration timeout)
    {
        final ScheduledFuture<?> timer = TIMER.schedule(() ->
        {
            timedOut = true;
            socket.shutdown();
        }, timeout.toMillis(), TimeUnit.MILLISECONDS);
        try
        {
            while (true)
            {
                final UnsafeBuffer view = new UnsafeBuffer(buffer.address(), filled);
                final int length = FrameCodec.frameLength(view, 0, filled);
                if (length > 0 && filled >= length)
                {
                    final Frame frame = FrameCodec.decodeReply(view, 0, length);
                    MemorySegment.copy(buffer, length, buffer, 0, filled - length);
                    filled -= length;
                    return frame;
                }
                int n;
                try
                {
                    n = socket.read(buffer, filled, (int)buffer.byteSize() - filled);
                }
                catch (final MrdException ex)
                {
                    if (ex.code() != ErrorCode.ECONNRESET)
                    {
                        throw ex;
                    }
                    // the daemon closed with bytes of ours unread: the end of the stream all the same
                    n = 0;
                }
                if (timedOut)
                {
                    throw new AssertionError("the daemon neither answered nor closed the connection within " + timeout);
                }
                if (0 == n)
                {
                    if (filled > 0)
                    {
                        throw new AssertionError("the daemon closed after " + filled + " bytes of a reply");
                    }
                    return null;
                }
                filled += n;
            }
        }
        finally
        {
            timer.cancel(false);
        }
    }

    /**
     * @return every reply until the daemon closes the connection.
     */
    List<Frame> drain(final Duration timeout)
    {
        final List<Frame> frames = new ArrayList<>();
        for (Frame f; null != (f = receive(timeout)); )
        {
            frames.add(f);
        }
        return frames;
    }

    public void close()
    {
        socket.close();
        arena.close();
    }
}
