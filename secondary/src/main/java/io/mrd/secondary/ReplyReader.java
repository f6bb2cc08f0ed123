package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.SocketReceiver;
import io.mrd.layout.sys.UnixSocket;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.IntConsumer;

/**
 * Reads the daemon's replies from a socket: each {@link #read} receives what has arrived, decodes every whole
 * frame in it and hands each to the {@link Handler}, in the order they came; once the stream ends it reports how,
 * once. The one reply read loop of the client, of the benchmarks and of the daemon's test clients. A
 * {@link DaemonConnection} has its reads made by whichever of its callers holds its read turn
 * ({@link PendingReplies}); {@link #start} makes a thread of its own that reads until the end.
 * <p>
 * Not thread-safe: one read at a time. The reads of several threads must be ordered by the caller (a lock), which
 * also makes each read see the buffer, the partial frame and the unpaired descriptors the previous one left.
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
    /** {@link #read}: bytes came, and every whole frame among them was handed over. */
    public static final int READ = 1;
    /** {@link #read}: nothing came: not blocking and nothing there, or the socket's receive timeout passed. */
    public static final int AGAIN = 0;
    /** {@link #read}: the stream has ended, and {@link Handler#onEnd} was called (by this read or an earlier one). */
    public static final int ENDED = -1;

    private static final int READ_BUFFER_LENGTH = 64 * 1024;
    /** Descriptors received and not yet paired with their frame; a daemon sends one per IMPORT_PD. */
    private static final int MAX_UNPAIRED_FDS = 16;

    /**
     * Called on the thread that reads.
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

    private final Handler handler;
    private final UnsafeBuffer buffer;
    private final SocketReceiver receiver;
    private final IntConsumer onFd = this::arrived;
    /** The thread of {@link #start}, else null. */
    private final Thread thread;

    /* The rest is the reading thread's state, handed from one read to the next by the caller's lock. */
    private int filled;
    /** Of the buffer's first byte. */
    private long streamOffset;
    private boolean ended;
    /** Descriptors not yet paired, oldest first, with where their read ended. */
    private final int[] fds = new int[MAX_UNPAIRED_FDS];
    private final long[] fdReadEnds = new long[MAX_UNPAIRED_FDS];
    private int fdHead;
    private int fdCount;
    /** Descriptors of the read in progress. */
    private final int[] arrived = new int[MAX_UNPAIRED_FDS];
    private int arrivedCount;
    private int arrivedDropped;

    /**
     * A reader of {@code socket} whose reads the caller makes ({@link #read}); it owns no thread.
     */
    public ReplyReader(final UnixSocket socket, final Handler handler)
    {
        this(socket, handler, null);
    }

    private ReplyReader(final UnixSocket socket, final Handler handler, final String threadName)
    {
        final Arena arena = Arena.ofAuto();
        final MemorySegment segment = arena.allocate(READ_BUFFER_LENGTH, 64);
        this.handler = handler;
        this.buffer = new UnsafeBuffer(segment.address(), READ_BUFFER_LENGTH);
        this.receiver = socket.receiver(segment, arena);
        this.thread = null == threadName ? null : new Thread(this::readToEnd, threadName);
    }

    /**
     * Starts a thread that reads {@code socket} until the stream ends; the caller shuts the socket down to stop
     * it, then {@link #join}s it, then closes the socket.
     */
    public static ReplyReader start(final UnixSocket socket, final String threadName, final Handler handler)
    {
        final ReplyReader reader = new ReplyReader(socket, handler, threadName);
        reader.thread.setDaemon(true);
        reader.thread.start();
        return reader;
    }

    /**
     * Waits for the thread of {@link #start} to end (at once for a reader without one), keeping this thread's
     * interrupt status.
     */
    public void join()
    {
        if (null != thread)
        {
            Threads.join(thread);
        }
    }

    /**
     * Receives once and hands over every whole frame now in the buffer; at the end of the stream (or a failure
     * to read it, or a reply it cannot read) closes the descriptors still unpaired and calls
     * {@link Handler#onEnd}. A handler that throws ends the stream too.
     *
     * @param block false to return {@link #AGAIN} at once when nothing has arrived.
     * @return {@link #READ}, {@link #AGAIN} or {@link #ENDED}; {@link #ENDED} for ever once the stream ended,
     *         without reading again.
     */
    public int read(final boolean block)
    {
        if (ended)
        {
            return ENDED;
        }
        String how;
        MrdException cause = null;
        try
        {
            arrivedCount = 0;
            arrivedDropped = 0;
            final int n = receiver.receive(filled, READ_BUFFER_LENGTH - filled, block, onFd);
            if (SocketReceiver.AGAIN == n)
            {
                return AGAIN;
            }
            keepArrived(streamOffset + filled + n);
            if (n > 0)
            {
                filled += n;
                handFrames();
                return READ;
            }
            how = "closed the connection";
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
        ended = true;
        for (; fdCount > 0; fdCount--)
        {
            Posix.close(fds[fdHead]);
            fdHead = (fdHead + 1) % MAX_UNPAIRED_FDS;
        }
        handler.onEnd(how, cause);
        return ENDED;
    }

    /**
     * Reads, blocking, until the stream ends.
     */
    public void readToEnd()
    {
        while (read(true) != ENDED)
        {
            // AGAIN only when the socket has a receive timeout: read on
        }
    }

    /** @return true once the stream has ended ({@link Handler#onEnd} was called). */
    public boolean ended()
    {
        return ended;
    }

    private void handFrames()
    {
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
