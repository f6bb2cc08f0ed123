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
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A connection to the daemon's socket: requests out, replies in, as Aeron's {@code DriverProxy} and
 * {@code DriverEventsAdapter} together.
 * <p>
 * <b>Requests</b> are pipelined: each carries a correlation id of its own, a lock serialises frame writes, one
 * reader thread ({@link ReplyReader}) completes the caller waiting for that id, and each waits at most the
 * request timeout. {@link #callWithFd} holds the write lock through the whole {@code SEND_FD} exchange, since
 * the daemon reads the next bytes of the connection as the descriptor's message. {@link #callForFd} is the
 * other way: the reply brings a descriptor (IMPORT_PD), which the reader pairs with its frame and which a
 * caller that gave up never leaks (the reader closes what nobody takes). A caller spins for its reply for the
 * reply spin ({@link ClientContext#replySpinNs}) before it parks: a reply the daemon answers from its cache
 * comes back in about the time it takes to wake a parked thread.
 * <p>
 * <b>Failure.</b> Once {@link #fail} was called, with the first reason given, every call in flight and every
 * later call throws a copy of that reason. The connection calls it itself when the stream ends or a write
 * breaks it, with what its {@link Listener} makes of that; its owner calls it when it learns by other means
 * that the daemon is gone, and on close.
 * <p>
 * Thread-safe.
 */
public final class DaemonConnection implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(DaemonConnection.class);

    /**
     * What the owner of a connection learns from it, on the reader thread or on the thread whose write failed.
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
    private final long replySpinNs;
    private final Listener listener;
    private final ReentrantLock writeLock = new ReentrantLock();
    private final MemorySegment sendSegment = Arena.ofAuto().allocate(FrameDescriptor.MAX_FRAME_LENGTH, 64);
    private final UnsafeBuffer sendBuffer = new UnsafeBuffer(sendSegment.address(), FrameDescriptor.MAX_FRAME_LENGTH);
    private final ConcurrentHashMap<Long, CompletableFuture<Answer>> pending = new ConcurrentHashMap<>();
    private final AtomicLong correlationIds = new AtomicLong();
    private final Object failLock = new Object();
    private final ReplyReader reader;

    /** Null while usable; else why not, thrown (as a fresh copy) by every call. */
    private volatile MrdException failure;
    /** Set by {@link #close} once {@link #failure} is: from then on the socket's number may be reused. */
    private volatile boolean closed;

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
        this.replySpinNs = replySpinNs;
        this.listener = listener;
        this.reader = ReplyReader.start(socket, "mrd-client-reader", new ReplyReader.Handler()
        {
            public void onFrame(final Frame frame)
            {
                dispatch(frame, -1);
            }

            public void onFrameWithFd(final Frame frame, final int fd)
            {
                dispatch(frame, fd);
            }

            public void onEnd(final String how, final MrdException cause)
            {
                lost(how, cause);
            }
        });
    }

    /**
     * Starts reading replies from a connected socket; the connection owns it from now on.
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
        final Message.Reply reply = call(new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, name));
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
        final long id = correlationIds.incrementAndGet();
        final CompletableFuture<Answer> future = expect(id);
        writeLock.lock();
        try
        {
            send(id, 0, request);
        }
        finally
        {
            writeLock.unlock();
        }
        spinFor(future);
        final Answer answer = await(id, future, request, false);
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
            final CompletableFuture<Answer> sendFd = expect(id);
            send(id, FrameDescriptor.FLAG_FD, request);
            final Message.Reply first = withoutFd(await(id, sendFd, request, true));
            if (first.type() != MessageType.SEND_FD)
            {
                throw first.status() != ErrorCode.OK ? new MrdException(first.status(), first.message()) :
                    new MrdException(ErrorCode.EPROTO, "the daemon answered " + describe(request) + " with " + first +
                    " before asking for the descriptor");
            }
            checkStatus(first);
            final CompletableFuture<Answer> done = expect(id);
            try
            {
                socket.sendFd(fd, (byte)0);
            }
            catch (final MrdException ex)
            {
                pending.remove(id);
                throw lost("is unreachable: sending fd " + fd + " for " + describe(request) + " failed (" +
                    ex.oneLine() + ")", ex);
            }
            final Message.Reply last = withoutFd(await(id, done, request, true));
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
        synchronized (failLock)
        {
            if (null != failure)
            {
                return false;
            }
            failure = reason;
        }
        for (final Long id : pending.keySet())
        {
            final CompletableFuture<Answer> future = pending.remove(id);
            if (null != future)
            {
                future.completeExceptionally(reason);
            }
        }
        return true;
    }

    /**
     * Fails the connection with {@code reason} (unless it failed already), ends the stream, waits for the
     * reader thread and closes the socket. Idempotent.
     */
    public void close(final MrdException reason)
    {
        fail(reason);
        if (closed)
        {
            return;
        }
        closed = true;
        socket.shutdown();
        reader.join();
        socket.close();
    }

    /**
     * Closes with EBADF: the connection is closed.
     */
    public void close()
    {
        close(new MrdException(ErrorCode.EBADF, "the connection to " + daemon + " is closed"));
    }

    public String toString()
    {
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

    /**
     * The stream cannot be used any more: fail with what the listener makes of it (unless the connection failed
     * already), and shut the socket so that the reader thread and the daemon both see it end. Not once closed:
     * the socket's number may have been reused.
     *
     * @return what the caller throws.
     */
    private MrdException lost(final String how, final MrdException cause)
    {
        if (!closed)
        {
            fail(listener.onLost(daemon, how, cause));
            socket.shutdown();
        }
        return copy(failure);
    }

    private void dispatch(final Frame frame, final int fd)
    {
        listener.onReply(frame);
        final CompletableFuture<Answer> future = pending.remove(frame.correlationId());
        final Answer answer = new Answer((Message.Reply)frame.message(), fd);
        if (null == future || !future.complete(answer))
        {
            // the caller gave up (timed out, interrupted) or the connection failed: nobody takes the descriptor
            closeFd(answer);
            LOG.debug("reply to correlation id {} that nobody waits for (timed out?): {}", frame.correlationId(),
                frame.message());
        }
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

    private CompletableFuture<Answer> expect(final long id)
    {
        MrdException reason = failure;
        if (null != reason)
        {
            throw copy(reason);
        }
        final CompletableFuture<Answer> future = new CompletableFuture<>();
        pending.put(id, future);
        // fail() publishes the reason before it fails what is pending: either it saw this entry or we see it.
        reason = failure;
        if (null != reason)
        {
            pending.remove(id);
            throw copy(reason);
        }
        return future;
    }

    /** Called with the write lock held. */
    private void send(final long id, final int flags, final Message.Request request)
    {
        final int length;
        try
        {
            length = FrameCodec.encode(sendBuffer, 0, id, flags, request);
        }
        catch (final MrdException ex)
        {
            pending.remove(id);
            throw ex;
        }
        try
        {
            socket.writeFully(sendSegment, 0, length);
        }
        catch (final MrdException ex)
        {
            pending.remove(id);
            throw lost("is unreachable: sending " + describe(request) + " failed (" + ex.oneLine() + ")", ex);
        }
    }

    /**
     * Spins until the answer came or the reply spin is over: waking a parked caller costs a few µs, which a
     * reply answered from the daemon's cache takes all told. Not interruptible and bounded by the reply spin;
     * {@link #await} does the rest.
     */
    private void spinFor(final CompletableFuture<Answer> future)
    {
        if (replySpinNs > 0)
        {
            final long deadline = System.nanoTime() + replySpinNs;
            while (!future.isDone() && System.nanoTime() - deadline < 0)
            {
                Thread.onSpinWait();
            }
        }
    }

    /**
     * Waits for the answer. A caller that gives up (timeout, interrupt) first completes the future itself, so an
     * answer that arrives at that moment is either taken here or closed by the reader, never lost with its
     * descriptor.
     */
    private Answer await(
        final long id,
        final CompletableFuture<Answer> future,
        final Message.Request request,
        final boolean midExchange)
    {
        try
        {
            return future.get(requestTimeoutMs, TimeUnit.MILLISECONDS);
        }
        catch (final TimeoutException ex)
        {
            pending.remove(id);
            final MrdException timeout = new MrdException(ErrorCode.ETIMEDOUT, describe(request) +
                " got no reply within " + requestTimeoutMs + " ms from " + daemon + ": it may be overloaded or " +
                "stuck; see " + dir.resolve(RunDirectoryPath.LOG_FILE) + " or raise the request timeout (" +
                ClientContext.MRD_REQUEST_TIMEOUT_MS + ")");
            if (!future.completeExceptionally(timeout) && !future.isCompletedExceptionally())
            {
                return future.join();
            }
            if (midExchange)
            {
                // The daemon may still be waiting for the descriptor: the stream is in an unknown state.
                lost("is unreachable: " + describe(request) + " timed out (" + timeout.oneLine() + ")", timeout);
            }
            throw timeout;
        }
        catch (final ExecutionException ex)
        {
            throw ex.getCause() instanceof MrdException mrd ? copy(mrd) :
                new MrdException(ErrorCode.EIO, describe(request) + " failed: " + ex.getCause(), ex.getCause());
        }
        catch (final InterruptedException ex)
        {
            pending.remove(id);
            Thread.currentThread().interrupt();
            final MrdException interrupted = new MrdException(ErrorCode.EIO, "interrupted while waiting for the " +
                "reply to " + describe(request));
            if (!future.completeExceptionally(interrupted) && !future.isCompletedExceptionally())
            {
                closeFd(future.join());
            }
            throw interrupted;
        }
    }

    private static void checkStatus(final Message.Reply reply)
    {
        if (reply.status() != ErrorCode.OK)
        {
            throw new MrdException(reply.status(), reply.message());
        }
    }
}
