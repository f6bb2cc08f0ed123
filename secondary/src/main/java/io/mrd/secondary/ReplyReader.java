package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.IntConsumer;

/**
 * The thread that reads the daemon's replies from a socket: it decodes each whole frame as it arrives, hands
 * it to its {@link Handler}, and reports once how the stream ended. The one reply read loop of the client, of
 * the benchmarks and of the daemon's test clients.
 * <p>
 * <b>Descriptors.</b> A reply frame with {@code FLAG_FD} (IMPORT_PD's) carries one descriptor attached to its
 * own bytes. The kernel hands descriptors over with the read that takes the first bytes of the message they
 * came with, and ends that read there; so the descriptor of a frame starting at stream offset {@code S} came
 * with a read that ended past {@code S}. The reader pairs each {@code FLAG_FD} frame with the oldest
 * descriptor received and not yet paired; a descriptor still unpaired when a frame starts at or past the end of
 * the read it came with belongs to no frame, and a {@code FLAG_FD} frame without one is missing its: either
 * ends the stream with EPROTO. Every descriptor is handed over or closed.
 */
public final class ReplyReader
{
    private static final int READ_BUFFER_LENGTH = 64 * 1024;
    /** Descriptors received and not yet paired with their frame; a daemon sends one per IMPORT_PD. */
    private static final int MAX_UNPAIRED_FDS = 16;

    /**
     * Called on the reader thread.
     */
    public interface Handler
    {
        /** One decoded reply frame, in the order they arrived. */
        void onFrame(Frame frame);

        /**
         * A frame with {@code FLAG_FD} and the descriptor that came with it, which the handler now owns. By
         * default the descriptor is closed and the frame handled as any other.
         */
        default void onFrameWithFd(final Frame frame, final int fd)
        {
            Posix.close(fd);
            onFrame(frame);
        }

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
    /** Reader-thread state: descriptors not yet paired, oldest first, with where their read ended. */
    private final int[] fds = new int[MAX_UNPAIRED_FDS];
    private final long[] fdReadEnds = new long[MAX_UNPAIRED_FDS];
    private int fdHead;
    private int fdCount;
    /** Descriptors of the read in progress. */
    private final int[] arrived = new int[MAX_UNPAIRED_FDS];
    private int arrivedCount;
    private int arrivedDropped;
    private final IntConsumer onFd = this::arrived;

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
        long streamOffset = 0; // of the buffer's first byte
        String how;
        MrdException cause = null;
        try
        {
            while (true)
            {
                arrivedCount = 0;
                arrivedDropped = 0;
                final int n = socket.read(segment, filled, READ_BUFFER_LENGTH - filled, onFd);
                keepArrived(streamOffset + filled + n);
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
                    final long frameStart = streamOffset + at;
                    if (fdCount > 0 && fdReadEnds[fdHead] <= frameStart)
                    {
                        throw new MrdException(ErrorCode.EPROTO, "a file descriptor arrived with bytes of no reply " +
                            "that carries one");
                    }
                    final Frame frame = FrameCodec.decodeReply(buffer, at, length);
                    if ((frame.flags() & FrameDescriptor.FLAG_FD) == 0)
                    {
                        handler.onFrame(frame);
                    }
                    else if (0 == fdCount)
                    {
                        throw new MrdException(ErrorCode.EPROTO, "the " + frame.message().type() + " reply " +
                            "announces a file descriptor (FLAG_FD) but none came with it");
                    }
                    else
                    {
                        final int fd = fds[fdHead];
                        fdHead = (fdHead + 1) % MAX_UNPAIRED_FDS;
                        fdCount--;
                        handler.onFrameWithFd(frame, fd);
                    }
                    at += length;
                }
                if (at > 0)
                {
                    buffer.putBytes(0, buffer, at, filled - at);
                    filled -= at;
                    streamOffset += at;
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
        for (; fdCount > 0; fdCount--)
        {
            Posix.close(fds[fdHead]);
            fdHead = (fdHead + 1) % MAX_UNPAIRED_FDS;
        }
        handler.onEnd(how, cause);
    }

    private void arrived(final int fd)
    {
        if (arrivedCount < arrived.length)
        {
            arrived[arrivedCount++] = fd;
        }
        else
        {
            Posix.close(fd);
            arrivedDropped++;
        }
    }

    /**
     * Queues the descriptors of the read that ended at stream offset {@code readEnd}.
     */
    private void keepArrived(final long readEnd)
    {
        for (int i = 0; i < arrivedCount; i++)
        {
            if (fdCount == MAX_UNPAIRED_FDS)
            {
                Posix.close(arrived[i]);
                arrivedDropped++;
                continue;
            }
            final int slot = (fdHead + fdCount) % MAX_UNPAIRED_FDS;
            fds[slot] = arrived[i];
            fdReadEnds[slot] = readEnd;
            fdCount++;
        }
        if (arrivedDropped > 0)
        {
            throw new MrdException(ErrorCode.EPROTO, "more than " + MAX_UNPAIRED_FDS + " file descriptors arrived " +
                "that no reply carries");
        }
    }
}
