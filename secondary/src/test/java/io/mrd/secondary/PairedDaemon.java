package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.UnixSocket;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * The daemon's end of a socket pair, for tests of {@link DaemonConnection} without a daemon: a thread reads the
 * requests and either queues them for the test to answer when it likes ({@link #nextRequest}, {@link #answer}),
 * or, echoing, answers each {@code CREATE_MR} at once with an MR starting at the address asked, the requests of
 * one read in reverse order, so that replies come out of order whenever several were in flight.
 */
final class PairedDaemon implements AutoCloseable
{
    private static final int BUFFER_LENGTH = 64 * 1024;

    private final UnixSocket socket;
    private final UnixSocket clientEnd;
    private volatile boolean echo;
    private final LinkedBlockingQueue<Frame> requests = new LinkedBlockingQueue<>();
    private final MemorySegment out = Arena.ofAuto().allocate(FrameDescriptor.MAX_FRAME_LENGTH, 8);
    private final UnsafeBuffer outBuffer = new UnsafeBuffer(out.address(), FrameDescriptor.MAX_FRAME_LENGTH);
    private final Thread reader;

    /**
     * @param echo true to answer every request at once, false to queue them for the test.
     */
    PairedDaemon(final boolean echo)
    {
        final UnixSocket[] pair = UnixSocket.pair();
        this.clientEnd = pair[0];
        this.socket = pair[1];
        this.echo = echo;
        this.reader = Thread.ofPlatform().daemon().name("paired-daemon").start(this::readRequests);
    }

    /** @return the client's end, which the connection owns and closes. */
    UnixSocket clientEnd()
    {
        return clientEnd;
    }

    /**
     * @return the next request the client sent, waiting up to 20 s for it.
     */
    Frame nextRequest() throws InterruptedException
    {
        final Frame request = requests.poll(20, TimeUnit.SECONDS);
        if (null == request)
        {
            throw new AssertionError("the client sent no request within 20 s");
        }
        return request;
    }

    /**
     * Answers a {@code CREATE_MR} as echoing does: an MR from the address asked, the correlation id as its lkey.
     */
    void answer(final Frame request)
    {
        final Message.CreateMr create = (Message.CreateMr)request.message();
        send(request.correlationId(), new Message.MrCreated(ErrorCode.OK, "", create.address(),
            create.address() + create.length(), (int)request.correlationId(), 0, 0));
    }

    /**
     * From now on answers every request at once (true), or queues it (false).
     */
    void echo(final boolean on)
    {
        echo = on;
    }

    /**
     * Closes the daemon's end as the kernel does when the daemon dies.
     */
    void die()
    {
        socket.shutdown();
    }

    public void close()
    {
        socket.shutdown();
        try
        {
            reader.join(Duration.ofSeconds(20));
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        socket.close();
    }

    private synchronized void send(final long correlationId, final Message.Reply reply)
    {
        final int length = FrameCodec.encode(outBuffer, 0, correlationId, 0, reply);
        socket.writeFully(out, 0, length);
    }

    private void readRequests()
    {
        final MemorySegment in = Arena.ofAuto().allocate(BUFFER_LENGTH, 8);
        final UnsafeBuffer buffer = new UnsafeBuffer(in.address(), BUFFER_LENGTH);
        final List<Frame> batch = new ArrayList<>();
        int filled = 0;
        try
        {
            while (true)
            {
                final int n = socket.read(in, filled, BUFFER_LENGTH - filled);
                if (0 == n)
                {
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
                    batch.add(FrameCodec.decodeRequest(buffer, at, length));
                    at += length;
                }
                buffer.putBytes(0, buffer, at, filled - at);
                filled -= at;
                final boolean answering = echo;
                for (int i = batch.size() - 1; i >= 0; i--)
                {
                    if (answering)
                    {
                        answer(batch.get(i));
                    }
                    else
                    {
                        requests.add(batch.get(batch.size() - 1 - i));
                    }
                }
                batch.clear();
            }
        }
        catch (final RuntimeException ex)
        {
            // the client's end is gone: the test is over
        }
    }
}
