package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;

import static io.mrd.layout.sys.MessageHeader.CMSG_SPACE_ONE_FD;
import static io.mrd.layout.sys.MessageHeader.MSGHDR_LENGTH;
import static io.mrd.layout.sys.MessageHeader.MSG_CMSG_CLOEXEC;
import static io.mrd.layout.sys.MessageHeader.MSG_CTRUNC;
import static io.mrd.layout.sys.MessageHeader.MSG_DONTWAIT;
import static io.mrd.layout.sys.MessageHeader.MSG_FLAGS;
import static io.mrd.layout.sys.MessageHeader.MSG_NOSIGNAL;
import static io.mrd.layout.sys.MessageHeader.RECEIVE_CONTROL_LENGTH;
import static io.mrd.layout.sys.MessageHeader.RECEIVE_MAX_FDS;
import static io.mrd.layout.sys.MessageHeader.SOL_SOCKET;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A Unix-domain stream socket through the Foreign Function &amp; Memory API: the JDK's {@code SocketChannel}
 * cannot pass a file descriptor ({@code SCM_RIGHTS}), which {@code REG_EXTERNAL} needs.
 * <p>
 * One thread may read while another writes (the kernel allows it); writes from several threads must be
 * serialised by the caller. {@link #shutdown()} wakes a thread blocked in {@link #read}; {@link #close()} must
 * come after that thread has left, so that the descriptor number is never reused under it.
 * <p>
 * The static {@link #receive}, {@link #sendWithFd} and {@link #peerGroups} serve a descriptor this class did not
 * open (the daemon's Netty channels): the daemon reads a REG_EXTERNAL's descriptor, sends IMPORT_PD's and reads
 * the peer's groups through them.
 * <p>
 * Every failure is an {@link MrdException} naming the call and the errno as name and text, as
 * {@link Posix} reports them. Layouts are those of LP64 Linux (x86-64 and arm64 agree).
 */
@SuppressWarnings("restricted")
public final class UnixSocket implements AutoCloseable
{
    /** Also {@link UnixDatagram}'s. */
    static final int AF_UNIX = 1;
    private static final int SOCK_STREAM = 1;
    /** Also {@link UnixListener}'s. */
    static final int SOCK_CLOEXEC = 02000000;
    private static final int SO_PEERGROUPS = 59;
    private static final int SO_RCVTIMEO = 20;
    private static final int SHUT_WR = 1;
    private static final int SHUT_RDWR = 2;
    /** Also {@link UnixDatagram}'s. */
    static final short POLLERR = 0x8;
    /** Also {@link UnixDatagram}'s. */
    static final short POLLHUP = 0x10;
    private static final short POLLNVAL = 0x20;
    private static final short POLLRDHUP = 0x2000;

    /** {@code sizeof(sun_path)} on Linux: the longest socket path plus its NUL. */
    public static final int SUN_PATH_LENGTH = 108;

    // struct sockaddr_un { sa_family_t sun_family; char sun_path[108]; }
    private static final int SOCKADDR_UN_LENGTH = 2 + SUN_PATH_LENGTH;
    // struct timeval { time_t tv_sec; suseconds_t tv_usec; }, struct pollfd { int fd; short events, revents; }
    private static final int TIMEVAL_LENGTH = 16;
    private static final int POLLFD_LENGTH = 8;

    private static final MethodHandle SOCKET =
        Libc.bind("socket", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final Libc.Function SOCKETPAIR =
        Libc.function("socketpair", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle CONNECT =
        Libc.bind("connect", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SEND =
        Libc.bind("send", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle RECV =
        Libc.bind("recv", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle SENDMSG =
        Libc.bind("sendmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    /** Also {@link SocketReceiver}'s. */
    static final MethodHandle RECVMSG =
        Libc.bind("recvmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SHUTDOWN =
        Libc.bind("shutdown", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    /** Also {@link UnixListener}'s. */
    static final Libc.Function GETSOCKOPT =
        Libc.function("getsockopt", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final Libc.Function SETSOCKOPT =
        Libc.function("setsockopt", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final Libc.Function POLL =
        Libc.function("poll", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));

    private final int fd;
    private final String peer;
    private volatile boolean closed;

    private UnixSocket(final int fd, final String peer)
    {
        this.fd = fd;
        this.peer = peer;
    }

    /**
     * Connects to a listening socket.
     *
     * @param path the socket file.
     * @return the connected socket.
     * @throws MrdException ECONNREFUSED or ENOENT when nobody listens there (naming the path), EINVAL when
     *                      the path is longer than {@link #SUN_PATH_LENGTH} - 1 bytes.
     */
    public static UnixSocket connect(final Path path)
    {
        final int fd = socket();
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment address = socketAddress(arena, path);
            int rc;
            do
            {
                rc = (int)CONNECT.invokeExact(Libc.callState(), fd, address, (int)address.byteSize());
            }
            while (rc != 0 && Libc.errno() == ErrorCode.EINTR.errno());
            if (rc != 0)
            {
                final int errno = Libc.errno();
                throw new MrdException(ErrorCode.of(errno), "connect(" + path + ") failed: " +
                    ErrorCode.describe(errno));
            }
            return new UnixSocket(fd, path.toString());
        }
        catch (final Throwable t)
        {
            Posix.close(fd);
            throw Libc.rethrow(t);
        }
    }

    /**
     * @return {@code struct sockaddr_un} of {@code path}, as long as {@code connect} and {@code bind} take it
     * (family, path, NUL); also {@link UnixListener}'s.
     * @throws MrdException EINVAL when the path is longer than {@link #SUN_PATH_LENGTH} - 1 bytes.
     */
    static MemorySegment socketAddress(final Arena arena, final Path path)
    {
        final byte[] name = path.toString().getBytes(StandardCharsets.UTF_8);
        if (name.length >= SUN_PATH_LENGTH)
        {
            throw new MrdException(ErrorCode.EINVAL, "socket path " + path + " is " + name.length +
                " bytes, longer than a Unix socket allows (" + (SUN_PATH_LENGTH - 1) + "): use a shorter --dir");
        }
        final MemorySegment address = arena.allocate(SOCKADDR_UN_LENGTH, 8);
        address.set(JAVA_SHORT, 0, (short)AF_UNIX);
        MemorySegment.copy(name, 0, address, JAVA_BYTE, 2, name.length);
        return address.asSlice(0, 2 + name.length + 1);
    }

    /**
     * {@code socketpair(AF_UNIX, SOCK_STREAM)}: two connected sockets, for tests and in-process peers.
     */
    public static UnixSocket[] pair()
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment fds = arena.allocate(JAVA_INT, 2);
            final int rc = (int)SOCKETPAIR.call(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
            if (rc != 0)
            {
                throw Posix.failure(Libc.errno(), "socketpair(AF_UNIX, SOCK_STREAM)");
            }
            return new UnixSocket[] {
                new UnixSocket(fds.getAtIndex(JAVA_INT, 0), "socketpair"),
                new UnixSocket(fds.getAtIndex(JAVA_INT, 1), "socketpair")};
        }
        catch (final Throwable t)
        {
            throw Libc.rethrow(t);
        }
    }

    /**
     * Wraps a connected socket descriptor this class did not open (a test's server side); closing the wrapper
     * closes the descriptor.
     */
    public static UnixSocket wrap(final int fd, final String peer)
    {
        return new UnixSocket(fd, peer);
    }

    /**
     * @return the file descriptor.
     */
    public int fd()
    {
        return fd;
    }

    /**
     * Writes all {@code length} bytes from {@code source} (native memory), retrying short writes and EINTR.
     * A peer that has gone gives EPIPE or ECONNRESET, never SIGPIPE.
     *
     * @throws MrdException with the errno when the write fails.
     */
    public void writeFully(final MemorySegment source, final long offset, final long length)
    {
        long done = 0;
        while (done < length)
        {
            final long n;
            try
            {
                n = (long)SEND.invokeExact(Libc.callState(), fd, source.asSlice(offset + done, length - done), length - done,
                    MSG_NOSIGNAL);
            }
            catch (final Throwable t)
            {
                throw Libc.rethrow(t);
            }
            if (n < 0)
            {
                if (Libc.errno() == ErrorCode.EINTR.errno())
                {
                    continue;
                }
                throw Posix.failure(Libc.errno(), "send(" + peer + ", " + (length - done) + " bytes)");
            }
            done += n;
        }
    }

    /**
     * Reads what is available, blocking until at least one byte is.
     *
     * @return bytes read, 0 at end of stream (the peer closed, or {@link #shutdown()} was called).
     * @throws MrdException with the errno when the read fails.
     */
    public int read(final MemorySegment target, final long offset, final int maxLength)
    {
        while (true)
        {
            final long n;
            try
            {
                n = (long)RECV.invokeExact(Libc.callState(), fd, target.asSlice(offset, maxLength), (long)maxLength, 0);
            }
            catch (final Throwable t)
            {
                throw Libc.rethrow(t);
            }
            if (n >= 0)
            {
                return (int)n;
            }
            if (Libc.errno() != ErrorCode.EINTR.errno())
            {
                throw Posix.failure(Libc.errno(), "recv(" + peer + ")");
            }
        }
    }

    /**
     * Sends one byte carrying {@code fdToSend} as {@code SCM_RIGHTS} ancillary data: the peer receives its own
     * descriptor of the same open file.
     *
     * @throws MrdException with the errno when the send fails (EBADF for a closed descriptor).
     */
    public void sendFd(final int fdToSend, final byte payload)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment data = arena.allocate(1);
            data.set(JAVA_BYTE, 0, payload);
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            MessageHeader.fill(msg, MessageHeader.iovec(arena, data, 1), MessageHeader.rightsOf(arena, fdToSend),
                CMSG_SPACE_ONE_FD);
            while (true)
            {
                final long n = (long)SENDMSG.invokeExact(Libc.callState(), fd, msg, MSG_NOSIGNAL);
                if (n == 1)
                {
                    return;
                }
                if (n < 0 && Libc.errno() == ErrorCode.EINTR.errno())
                {
                    continue;
                }
                throw n < 0 ? Posix.failure(Libc.errno(), "sendmsg(" + peer + ", SCM_RIGHTS fd " + fdToSend + ")") :
                    new MrdException(ErrorCode.EIO, "sendmsg(" + peer + ") sent " + n + " bytes instead of 1");
            }
        }
        catch (final Throwable t)
        {
            throw Libc.rethrow(t);
        }
    }

    /**
     * Receives one byte and the descriptor sent with it by {@link #sendFd} (close-on-exec set), blocking until
     * it comes. Descriptors beyond the first are closed.
     *
     * @return the new descriptor, or -1 when the byte came without one.
     * @throws MrdException EPIPE at end of stream, or with the errno when the receive fails.
     */
    public int receiveFd()
    {
        Receipt receipt;
        do
        {
            receipt = receive(fd, true);
        }
        while (receipt.errno() == ErrorCode.EINTR.errno());
        if (receipt.errno() != 0)
        {
            throw Posix.failure(receipt.errno(), "recvmsg(" + peer + ")");
        }
        if (receipt.bytes() == 0 && receipt.fds().length == 0)
        {
            throw new MrdException(ErrorCode.EPIPE, "recvmsg(" + peer + "): the peer closed the connection");
        }
        for (int i = 1; i < receipt.fds().length; i++)
        {
            Posix.close(receipt.fds()[i]);
        }
        return receipt.fds().length > 0 ? receipt.fds()[0] : -1;
    }

    /**
     * @param target where the receiver's reads go, which must outlive it.
     * @return a receiver of this socket into {@code target} whose structures live as long as {@code arena}.
     */
    public SocketReceiver receiver(final MemorySegment target, final Arena arena)
    {
        return new SocketReceiver(fd, peer, target, arena);
    }

    /**
     * {@code SO_RCVTIMEO}: a blocking read returns without bytes once {@code millis} pass ({@link #read} and
     * {@link #receiveFd} then fail with EAGAIN, {@link SocketReceiver#receive} returns
     * {@link SocketReceiver#AGAIN}); 0 waits for ever. The kernel counts it in scheduler ticks.
     */
    public void receiveTimeout(final long millis)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment timeval = arena.allocate(TIMEVAL_LENGTH, 8);
            timeval.set(JAVA_LONG, 0, millis / 1000);
            timeval.set(JAVA_LONG, 8, (millis % 1000) * 1000);
            if ((int)SETSOCKOPT.call(fd, SOL_SOCKET, SO_RCVTIMEO, timeval, TIMEVAL_LENGTH) != 0)
            {
                throw Posix.failure(Libc.errno(), "setsockopt(" + peer + ", SO_RCVTIMEO, " + millis + " ms)");
            }
        }
    }

    /**
     * Waits until the peer hangs up, the connection breaks or this side shuts it down: {@code poll} for
     * {@code POLLRDHUP}, which, unlike {@code POLLIN}, the kernel's wake-up of a socket's waiters on arriving
     * bytes does not match, so the waiting thread sleeps through every reply another thread reads.
     *
     * @param timeoutMs how long to wait at most, -1 for ever.
     * @return true once the stream has ended or failed (what is left in it can be read without waiting), false
     *         when the time passed or a signal came first.
     */
    public boolean awaitHangup(final int timeoutMs)
    {
        return (poll(fd, POLLRDHUP, timeoutMs, peer + ", POLLRDHUP") & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
    }

    /**
     * {@code poll} of one descriptor for {@code events}; also {@link UnixListener}'s.
     *
     * @param what the descriptor and events, for the error.
     * @return the events that came ({@code revents}), 0 when the time passed or a signal came first.
     * @throws MrdException with the errno of {@code poll}.
     */
    static int poll(final int fd, final short events, final int timeoutMs, final String what)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment pollfd = arena.allocate(POLLFD_LENGTH, 4);
            pollfd.set(JAVA_INT, 0, fd);
            pollfd.set(JAVA_SHORT, 4, events);
            final int rc = (int)POLL.call(pollfd, 1L, timeoutMs);
            if (rc < 0)
            {
                final int errno = Libc.errno();
                if (errno == ErrorCode.EINTR.errno())
                {
                    return 0;
                }
                throw Posix.failure(errno, "poll(" + what + ")");
            }
            return rc > 0 ? pollfd.get(JAVA_SHORT, 6) : 0;
        }
    }

    /**
     * {@code sendmsg} of {@code length} bytes with {@code fdToSend} attached ({@code SCM_RIGHTS}), once,
     * without blocking ({@code MSG_DONTWAIT}), on any connected stream socket: the daemon answers IMPORT_PD
     * on its Netty channel with it. The descriptor travels with the first byte sent.
     *
     * @return bytes sent (possibly fewer than {@code length}: the rest must follow without a descriptor), or
     * the negated errno ({@code -EAGAIN} when the socket's buffer is full; nothing was sent then).
     */
    public static long sendWithFd(final int socketFd, final MemorySegment data, final long length, final int fdToSend)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            MessageHeader.fill(msg, MessageHeader.iovec(arena, data, length), MessageHeader.rightsOf(arena, fdToSend),
                CMSG_SPACE_ONE_FD);
            final long n = (long)SENDMSG.invokeExact(Libc.callState(), socketFd, msg, MSG_NOSIGNAL | MSG_DONTWAIT);
            return n >= 0 ? n : -Libc.errno();
        }
        catch (final Throwable t)
        {
            throw Libc.rethrow(t);
        }
    }

    /**
     * What one {@code recvmsg} of one byte gave.
     *
     * @param bytes     bytes received: 1, 0 at end of stream, -1 when the call failed.
     * @param fds       the descriptors that came with it ({@code SCM_RIGHTS}, close-on-exec set): the caller owns
     *                  them, each must be closed or kept.
     * @param truncated more descriptors came than there was room for ({@code MSG_CTRUNC}); the kernel closed
     *                  those.
     * @param errno     0, or the errno of the failed call ({@code EAGAIN} when nothing is there to read yet).
     */
    public record Receipt(long bytes, int[] fds, boolean truncated, int errno)
    {
    }

    /**
     * {@code recvmsg} of one byte and whatever descriptors come with it, on any connected stream socket, once
     * ({@code EINTR} is returned, not retried).
     *
     * @param socketFd the connection; the caller makes sure nothing else reads it meanwhile.
     * @param block    false for {@code MSG_DONTWAIT}: return {@code EAGAIN} instead of waiting.
     */
    public static Receipt receive(final int socketFd, final boolean block)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment control = arena.allocate(RECEIVE_CONTROL_LENGTH, 8);
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            MessageHeader.fill(msg, MessageHeader.iovec(arena, arena.allocate(1), 1), control, RECEIVE_CONTROL_LENGTH);
            final int flags = MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT);
            final long n = (long)RECVMSG.invokeExact(Libc.callState(), socketFd, msg, flags);
            if (n < 0)
            {
                return new Receipt(-1, new int[0], false, Libc.errno());
            }
            final int[] fds = new int[RECEIVE_MAX_FDS];
            final int[] count = new int[1];
            MessageHeader.forEachFd(msg, control, received -> fds[count[0]++] = received);
            final boolean truncated = (msg.get(JAVA_INT, MSG_FLAGS) & MSG_CTRUNC) != 0;
            return new Receipt(n, Arrays.copyOf(fds, count[0]), truncated, 0);
        }
        catch (final Throwable t)
        {
            throw Libc.rethrow(t);
        }
    }

    /**
     * @return the supplementary groups the peer had when it connected ({@code SO_PEERGROUPS}, Linux 4.13+),
     * or an empty array when the kernel cannot say.
     */
    public static int[] peerGroups(final int socketFd)
    {
        int capacity = 64;
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment length = arena.allocate(JAVA_INT);
            for (int attempt = 0; attempt < 4; attempt++)
            {
                final MemorySegment groups = arena.allocate((long)capacity * Integer.BYTES, 4);
                length.set(JAVA_INT, 0, capacity * Integer.BYTES);
                final int rc = (int)GETSOCKOPT.call(socketFd, SOL_SOCKET, SO_PEERGROUPS, groups,
                    length);
                if (rc == 0)
                {
                    final int count = Math.min(length.get(JAVA_INT, 0) / Integer.BYTES, capacity);
                    final int[] result = new int[count];
                    for (int i = 0; i < count; i++)
                    {
                        result[i] = groups.getAtIndex(JAVA_INT, i);
                    }
                    return result;
                }
                if (Libc.errno() != ErrorCode.ERANGE.errno())
                {
                    return new int[0];
                }
                capacity = Math.max(capacity * 2, length.get(JAVA_INT, 0) / Integer.BYTES);
                if (capacity > 65536)
                {
                    return new int[0];
                }
            }
            return new int[0];
        }
        catch (final Throwable t)
        {
            throw Libc.rethrow(t);
        }
    }

    /**
     * {@code shutdown(SHUT_RDWR)}: the peer sees end of stream and a thread blocked in {@link #read} returns 0.
     * Errors (the peer already gone) are ignored.
     */
    public void shutdown()
    {
        shutdown(SHUT_RDWR);
    }

    /** {@code shutdown(SHUT_WR)}: the peer sees end of stream; this side can still read its answers. */
    public void shutdownOutput()
    {
        shutdown(SHUT_WR);
    }

    private void shutdown(final int how)
    {
        try
        {
            final int ignored = (int)SHUTDOWN.invokeExact(Libc.callState(), fd, how);
        }
        catch (final Throwable t)
        {
            throw Libc.rethrow(t);
        }
    }

    /** Closes the descriptor; idempotent. */
    public void close()
    {
        if (!closed)
        {
            closed = true;
            Posix.close(fd);
        }
    }

    public String toString()
    {
        return "UnixSocket[fd " + fd + ", " + peer + (closed ? ", closed" : "") + "]";
    }

    /** {@code socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC)}; also {@link UnixListener}'s. */
    static int socket()
    {
        try
        {
            final int fd = (int)SOCKET.invokeExact(Libc.callState(), AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0)
            {
                throw Posix.failure(Libc.errno(), "socket(AF_UNIX, SOCK_STREAM)");
            }
            return fd;
        }
        catch (final Throwable t)
        {
            throw Libc.rethrow(t);
        }
    }
}
