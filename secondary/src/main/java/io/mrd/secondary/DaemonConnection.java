package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.layout.sys.UnixSocket;
import org.agrona.concurrent.UnsafeBuffer;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A connection to the daemon's socket: requests out, replies in, as Aeron's {@code DriverProxy} and
 * {@code DriverEventsAdapter} together.
 * <p>
 * <b>Requests</b> are pipelined: each carries a correlation id of its own, a lock serialises frame writes, and
 * each caller waits at most the request timeout for the reply with its id. The callers read the replies
 * themselves ({@link PendingReplies}): a caller alone on the connection reads its own, with no thread between it
 * and the socket; with several in flight one reads and hands the others theirs, then hands the reading on.
 * {@link #callWithFd} holds the write lock through the whole {@code SEND_FD} exchange, since the daemon reads
 * the next bytes of the connection as the descriptor's message. {@link #callForFd} is the other way: the reply
 * brings a descriptor (IMPORT_PD), which the reader pairs with its frame ({@link ReplyReader}) and which a
 * caller that gave up never leaks (the reader closes what nobody takes). The reply spin
 * ({@link ClientContext#replySpinNs}) makes a caller read without blocking, or spin instead of parking, for that
 * long before it blocks.
 * <p>
 * <b>Failure.</b> Once {@link #fail} was called, with the first reason given, every call in flight and every
 * later call throws a copy of that reason. The connection calls it itself when the stream ends (which it
 * notices at once even with no call in flight: {@link PendingReplies}'s hang-up watch) or a write breaks it,
 * with what its {@link Listener} makes of that; its owner calls it when it learns by other means that the
 * daemon is gone, and on close.
 * <p>
 * Thread-safe.
 */
public final class DaemonConnection implements AutoCloseable
{
    /**
     * What the owner of a connection learns from it, on the thread reading (a caller, or the hang-up watch) or on
     * the thread whose write failed.
     */
    public interface Listener
    {
        /**
         * Each reply, in the order they arrive, before the call waiting for it (if any) is completed.
         */
        default void onReply(Frame frame)
        {
        }

        /**
         * The connection cannot be used any more: the stream ended or broke, or a write or an fd exchange
         * failed half-way.
         *
         * @param daemon who the connection was to ("daemon pid 42 in /run/mrd").
         * @param how    what happened, as the end of a sentence about the daemon ("closed the connection").
         * @param cause  the error that ended the stream, null when the daemon closed it.
         * @return why calls fail from now on.
         */
        default MrdException onLost(final String daemon, final String how, final MrdException cause)
        {
            return new DaemonDeadException(daemon + " " + how);
        }
    }

    private final UnixSocket socket;
    private final String daemon;
    private final Path dir;
    private final long requestTimeoutMs;
    private final long requestTimeoutNs;
    private final ReentrantLock writeLock = new ReentrantLock();
    private final MemorySegment sendSegment = Arena.ofAuto().allocate(FrameDescriptor.MAX_FRAME_LENGTH, 64);
    private final UnsafeBuffer sendBuffer = new UnsafeBuffer(sendSegment.address(), FrameDescriptor.MAX_FRAME_LENGTH);
    private final AtomicLong correlationIds = new AtomicLong();
    private final PendingReplies replies;
    /** Guarded by the write lock: set once the socket is closed, after which nothing is written. */
    private boolean socketClosed;

    /**
     * A reply and the descriptor that came with it ({@code FLAG_FD}), which the caller owns.
     *
     * @param fd the descriptor, -1 when none came.
     */
    public record Answer(Message.Reply reply, int fd)
    {
    }

    private DaemonConnection(
        final UnixSocket socket, final String daemon, final Path dir, final long requestTimeoutMs,
        final long replySpinNs, final Listener listener)
    {
        this.socket = socket;
        this.daemon = daemon;
        this.dir = dir;
        this.requestTimeoutMs = requestTimeoutMs;
        this.requestTimeoutNs = TimeUnit.MILLISECONDS.toNanos(requestTimeoutMs);
        this.replies = new PendingReplies(socket, daemon, replySpinNs, listener);
    }

    /**
     * Takes over a connected socket, which the connection owns from now on, and starts watching it for its end.
     *
     * @param daemon           who is at the other end, for messages ("daemon pid 42 in /run/mrd").
     * @param dir              the daemon's run directory, where its log is.
     * @param requestTimeoutMs how long each call waits for its reply.
     * @see #open(UnixSocket, String, Path, long, long, Listener) the same with a reply spin; this one spins for
     *      {@link ClientContext#DEFAULT_REPLY_SPIN_NS}.
     */
    public static DaemonConnection open(
        final UnixSocket socket, final String daemon, final Path dir, final long requestTimeoutMs,
        final Listener listener)
    {
        return open(socket, daemon, dir, requestTimeoutMs, ClientContext.DEFAULT_REPLY_SPIN_NS, listener);
    }

    /**
     * As {@link #open(UnixSocket, String, Path, long, Listener)}, with the reply spin.
     *
     * @param replySpinNs how long a call spins for its reply before it parks, 0 to park at once (checked by
     *                    {@link ClientContext#conclude()}).
     */
    public static DaemonConnection open(
        final UnixSocket socket, final String daemon, final Path dir, final long requestTimeoutMs,
        final long replySpinNs, final Listener listener)
    {
        return new DaemonConnection(socket, daemon, dir, requestTimeoutMs, replySpinNs, listener);
    }

    /**
     * Says HELLO.
     *
     * @return the daemon's WELCOME.
     * @throws MrdException the daemon's status when it refused, EPROTO when it answered something else.
     */
    public Message.Welcome hello(final String name)
    {
        return hello(name, 0);
    }

    /**
     * Says HELLO, resuming as client {@code resumeClientId} of the daemon a successor adopted (0: a new client).
     *
     * @return the daemon's WELCOME.
     * @throws MrdException the daemon's status when it refused, EPROTO when it answered something else.
     */
    public Message.Welcome hello(final String name, final int resumeClientId)
    {
        final Message.Reply reply = call(new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, name, resumeClientId));
        if (!(reply instanceof Message.Welcome welcome))
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered HELLO with " + reply);
        }
        return welcome;
    }

    /**
     * Sends a request and waits for its reply.
     *
     * @return the reply, its status OK and its type the request's.
     * @throws MrdException the reply's status and the daemon's message; ETIMEDOUT; the failure once failed.
     */
    public Message.Reply call(final Message.Request request)
    {
        final Answer answer = exchange(request);
        if (answer.fd() >= 0)
        {
            Posix.close(answer.fd());
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered " + describe(request) + " with a file " +
                "descriptor it does not carry");
        }
        return answer.reply();
    }

    /**
     * Sends a request whose reply carries a descriptor ({@code IMPORT_PD}) and waits for both.
     *
     * @return the reply, its status OK, and the descriptor, which the caller owns.
     * @throws MrdException the reply's status and the daemon's message; EPROTO when a successful reply came
     *                      without a descriptor; ETIMEDOUT; the failure once failed.
     */
    public Answer callForFd(final Message.Request request)
    {
        final Answer answer = exchange(request);
        if (answer.fd() < 0)
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered " + describe(request) + " without the " +
                "file descriptor it carries: " + answer.reply());
        }
        return answer;
    }

    private Answer exchange(final Message.Request request)
    {
        final ReadTurn.Call call = replies.expect(correlationIds.incrementAndGet());
        writeLock.lock();
        try
        {
            send(call, 0, request);
        }
        finally
        {
            writeLock.unlock();
        }
        final Answer answer = await(call, request, false);
        try
        {
            checkStatus(answer.reply());
            if (answer.reply().type() != request.type())
            {
                throw new MrdException(ErrorCode.EPROTO, "the daemon answered " + describe(request) + " with " +
                    answer.reply());
            }
        }
        catch (final MrdException ex)
        {
            closeFd(answer);
            throw ex;
        }
        return answer;
    }

    /**
     * Sends a request that carries a descriptor ({@code FLAG_FD}): waits for the daemon's {@code SEND_FD},
     * sends {@code fd} ({@code SCM_RIGHTS}), and waits for the final reply. The caller keeps its descriptor.
     *
     * @return the final reply, its status OK.
     * @throws MrdException the daemon's status; EPROTO when it answered without asking for the descriptor. A
     *                      failure half-way fails the connection: the stream is in an unknown state.
     */
    public Message.Reply callWithFd(final Message.Request request, final int fd)
    {
        writeLock.lock();
        try
        {
            final long id = correlationIds.incrementAndGet();
            final ReadTurn.Call sendFd = replies.expect(id);
            send(sendFd, FrameDescriptor.FLAG_FD, request);
            final Message.Reply first = withoutFd(await(sendFd, request, true));
            if (first.type() != MessageType.SEND_FD)
            {
                throw first.status() != ErrorCode.OK ? new MrdException(first.status(), first.message()) :
                    new MrdException(ErrorCode.EPROTO, "the daemon answered " + describe(request) + " with " + first +
                    " before asking for the descriptor");
            }
            checkStatus(first);
            final ReadTurn.Call done = replies.expect(id);
            try
            {
                socket.sendFd(fd, (byte)0);
            }
            catch (final MrdException ex)
            {
                replies.forget(done);
                throw replies.lost("is unreachable: sending fd " + fd + " for " + describe(request) + " failed (" +
                    ex.oneLine() + ")", ex);
            }
            final Message.Reply last = withoutFd(await(done, request, true));
            checkStatus(last);
            return last;
        }
        finally
        {
            writeLock.unlock();
        }
    }

    /**
     * Fails the connection: every call in flight and every later one throws a copy of {@code reason}. Only
     * the first reason counts.
     *
     * @return true when this was the first.
     */
    public boolean fail(final MrdException reason)
    {
        return replies.fail(reason);
    }

    /**
     * Fails the connection with {@code reason} (unless it failed already), ends the stream, waits for whoever
     * reads it to leave and for a write in progress to end (the shut socket fails it), and closes the socket.
     * Idempotent.
     */
    public void close(final MrdException reason)
    {
        if (!replies.close(reason))
        {
            return;
        }
        // Under the write lock: nothing may write to the descriptor's number once it is closed (and reused).
        writeLock.lock();
        try
        {
            socketClosed = true;
            socket.close();
        }
        finally
        {
            writeLock.unlock();
        }
    }

    /**
     * Closes with EBADF: the connection is closed.
     */
    public void close()
    {
        close(new MrdException(ErrorCode.EBADF, "the connection to " + daemon + " is closed"));
    }

    /** @return the thread reading the socket now, or null (for tests). */
    Thread reading()
    {
        return replies.reading();
    }

    public String toString()
    {
        final MrdException failure = replies.failure();
        return "DaemonConnection[" + daemon + ", " + socket + (null == failure ? "" : ", " + failure.oneLine()) + "]";
    }

    /**
     * @return a fresh copy of {@code reason} to throw, so that the stack trace is the caller's.
     */
    static MrdException copy(final MrdException reason)
    {
        return reason instanceof DaemonDeadException ? new DaemonDeadException(reason.getMessage()) :
            new MrdException(reason.code(), reason.getMessage());
    }

    private static String describe(final Message.Request request)
    {
        return switch (request)
        {
            case Message.Hello m -> "HELLO(version " + m.version() + ", " + m.name() + ")";
            case Message.CreateMr m -> "CREATE_MR(" + Sizes.hex(m.address()) + ", " + m.length() + ")";
            case Message.Alloc m -> "ALLOC(" + Sizes.format(m.length()) + ", " + Access.describe(m.access()) +
                (m.register() ? ", register" : "") + ")";
            case Message.Free m -> "FREE(" + Sizes.hex(m.address()) + ", " + Sizes.format(m.length()) + ")";
            case Message.RegExternal m -> "REG_EXTERNAL(" + Sizes.format(m.length()) + ", " +
                Access.describe(m.access()) + ")";
            case Message.DeregExternal m -> "DEREG_EXTERNAL(" + Sizes.hex(m.address()) + ")";
            case Message.Stop m -> "STOP";
            case Message.ImportPd m -> "IMPORT_PD";
            case Message.Queues m -> "QUEUES(" + (m.operation() == Message.Queues.ADD ? "add " : "remove ") +
                (m.kind() == Message.Queues.CQ ? "CQ " : "QP ") + Integer.toUnsignedString(m.handle()) + ")";
        };
    }

    private static void closeFd(final Answer answer)
    {
        if (answer.fd() >= 0)
        {
            Posix.close(answer.fd());
        }
    }

    private static Message.Reply withoutFd(final Answer answer)
    {
        closeFd(answer);
        return answer.reply();
    }

    /** Called with the write lock held. */
    private void send(final ReadTurn.Call call, final int flags, final Message.Request request)
    {
        if (socketClosed)
        {
            replies.forget(call);
            throw copy(replies.failure());
        }
        final int length;
        try
        {
            length = FrameCodec.encode(sendBuffer, 0, call.id, flags, request);
        }
        catch (final MrdException ex)
        {
            replies.forget(call);
            throw ex;
        }
        try
        {
            socket.writeFully(sendSegment, 0, length);
        }
        catch (final MrdException ex)
        {
            replies.forget(call);
            throw replies.lost("is unreachable: sending " + describe(request) + " failed (" + ex.oneLine() + ")",
                ex);
        }
    }

    /**
     * Waits for the answer ({@link PendingReplies#await}). A caller that gives up (timeout, interrupt) first
     * settles its call itself, so an answer that arrives at that moment is either taken here or closed by the
     * reader, never lost with its descriptor.
     */
    private Answer await(final ReadTurn.Call call, final Message.Request request, final boolean midExchange)
    {
        replies.await(call, System.nanoTime() + requestTimeoutNs);
        final Object outcome = call.outcome();
        if (null == outcome && Thread.currentThread().isInterrupted())
        {
            final MrdException interrupted = new MrdException(ErrorCode.EIO, "interrupted while waiting for the " +
                "reply to " + describe(request));
            if (!replies.giveUp(call, interrupted) && call.outcome() instanceof Answer answer)
            {
                closeFd(answer);
            }
            throw interrupted;
        }
        if (null == outcome)
        {
            final MrdException timeout = new MrdException(ErrorCode.ETIMEDOUT, describe(request) +
                " got no reply within " + requestTimeoutMs + " ms from " + daemon + ": it may be overloaded or " +
                "stuck; see " + dir.resolve(RunDirectoryPath.LOG_FILE) + " or raise the request timeout (" +
                ClientContext.MRD_REQUEST_TIMEOUT_MS + ")");
            if (!replies.giveUp(call, timeout) && call.outcome() instanceof Answer answer)
            {
                return answer;
            }
            if (midExchange)
            {
                // The daemon may still be waiting for the descriptor: the stream is in an unknown state.
                replies.lost("is unreachable: " + describe(request) + " timed out (" + timeout.oneLine() + ")",
                    timeout);
            }
            throw timeout;
        }
        if (outcome instanceof MrdException failed)
        {
            throw copy(failed);
        }
        return (Answer)outcome;
    }

    private static void checkStatus(final Message.Reply reply)
    {
        if (reply.status() != ErrorCode.OK)
        {
            throw new MrdException(reply.status(), reply.message());
        }
    }
}
