package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.sys.UnixSocket;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The thread that reads the daemon's replies from a socket: it decodes each whole frame as it arrives, hands
 * it to its {@link Handler}, and reports once how the stream ended. The one reply read loop of the client, of
 * the benchmarks and of the daemon's test clients.
 */
public final class ReplyReader
{
    private static final int READ_BUFFER_LENGTH = 64 * 1024;

    /**
     * Called on the reader thread.
     */
    public interface Handler
    {
        /** One decoded reply frame, in the order they arrived. */
        void onFrame(Frame frame);

        /**
         * The last call: the stream ended or could not be read any further.
         *
         * @param how   as the end of a sentence about the daemon: "closed the connection", "died (its
         *              connection was reset: the process is gone)", "sent a reply this client cannot read (...)".
         * @param cause null when the daemon closed the connection (or this side shut it), else what stopped the
         *              reader (ECONNRESET, EPROTO from the codec, ...).
         */
        void onEnd(String how, MrdException cause);
    }

    private final UnixSocket socket;
    private final Handler handler;
    private final Thread thread;

    private ReplyReader(final UnixSocket socket, final String threadName, final Handler handler)
    {
        this.socket = socket;
        this.handler = handler;
        this.thread = new Thread(this::run, threadName);
        this.thread.setDaemon(true);
    }

    /**
     * Starts reading {@code socket}; the caller shuts the socket down to stop the reader, then {@link #join}s
     * it, then closes the socket.
     */
    public static ReplyReader start(final UnixSocket socket, final String threadName, final Handler handler)
    {
        final ReplyReader reader = new ReplyReader(socket, threadName, handler);
        reader.thread.start();
        return reader;
    }

    /**
     * Waits for the reader thread to end, keeping this thread's interrupt status.
     */
    public void join()
    {
        boolean interrupted = false;
        while (thread.isAlive())
        {
            try
            {
                thread.join();
            }
            catch (final InterruptedException ex)
            {
                interrupted = true;
            }
        }
        if (interrupted)
        {
            Thread.currentThread().interrupt();
        }
    }

    private void run()
    {
        final MemorySegment segment = Arena.ofAuto().allocate(READ_BUFFER_LENGTH, 64);
        final UnsafeBuffer buffer = new UnsafeBuffer(segment.address(), READ_BUFFER_LENGTH);
        int filled = 0;
        String how;
        MrdException cause = null;
        try
        {
            while (true)
            {
                final int n = socket.read(segment, filled, READ_BUFFER_LENGTH - filled);
                if (0 == n)
                {
                    how = "closed the connection";
                    break;
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
                    handler.onFrame(FrameCodec.decodeReply(buffer, at, length));
                    at += length;
                }
                if (at > 0)
                {
                    buffer.putBytes(0, buffer, at, filled - at);
                    filled -= at;
                }
            }
        }
        catch (final MrdException ex)
        {
            cause = ex;
            how = switch (ex.code())
            {
                case ECONNRESET -> "died (its connection was reset: the process is gone)";
                case EPROTO -> "sent a reply this client cannot read (" + ex.oneLine() + ")";
                default -> "broke the connection (" + ex.oneLine() + ")";
            };
        }
        catch (final RuntimeException ex)
        {
            cause = new MrdException(ErrorCode.EIO, ex.toString(), ex);
            how = "broke the connection (" + ex + ")";
        }
        handler.onEnd(how, cause);
    }
}
