package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

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
 * Every failure is an {@link MrdException} naming the call and the errno as name and text, as
 * {@link io.mrd.layout.sys.Posix} reports them.
 */
@SuppressWarnings("restricted")
public final class UnixSocket implements AutoCloseable
{
    static final int AF_UNIX = 1;
    static final int SOCK_STREAM = 1;
    static final int SOCK_CLOEXEC = 02000000;
    static final int SOL_SOCKET = 1;
    static final int SCM_RIGHTS = 1;
    static final int MSG_NOSIGNAL = 0x4000;
    static final int MSG_CMSG_CLOEXEC = 0x40000000;
    static final int SHUT_RDWR = 2;
    static final int EINTR = 4;

    /** {@code sizeof(sun_path)} on Linux: the longest socket path plus its NUL. */
    public static final int SUN_PATH_LENGTH = 108;

    // struct sockaddr_un { sa_family_t sun_family; char sun_path[108]; }
    private static final int SOCKADDR_UN_LENGTH = 2 + SUN_PATH_LENGTH;

    // struct msghdr on x86_64 / aarch64 (LP64): name, namelen(+pad), iov, iovlen, control, controllen, flags(+pad).
    private static final long MSG_NAME = 0;
    private static final long MSG_NAMELEN = 8;
    private static final long MSG_IOV = 16;
    private static final long MSG_IOVLEN = 24;
    private static final long MSG_CONTROL = 32;
    private static final long MSG_CONTROLLEN = 40;
    private static final long MSGHDR_LENGTH = 56;
    // struct iovec { void *iov_base; size_t iov_len; }
    private static final long IOVEC_LENGTH = 16;
    // struct cmsghdr { size_t cmsg_len; int cmsg_level; int cmsg_type; } then the data, 8-byte aligned.
    private static final long CMSG_LEVEL = 8;
    private static final long CMSG_TYPE = 12;
    private static final long CMSG_DATA = 16;
    /** CMSG_LEN(sizeof(int)). */
    private static final long CMSG_LEN_ONE_FD = CMSG_DATA + Integer.BYTES;
    /** CMSG_SPACE(sizeof(int)). */
    private static final long CMSG_SPACE_ONE_FD = CMSG_DATA + 8;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO =
        CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final ThreadLocal<MemorySegment> CALL_STATE =
        ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    private static final MethodHandle SOCKET = bind("socket", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle SOCKETPAIR =
        bind("socketpair", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS));
    private static final MethodHandle CONNECT = bind("connect", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SEND =
        bind("send", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle RECV =
        bind("recv", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_LONG, JAVA_INT));
    private static final MethodHandle SENDMSG = bind("sendmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle RECVMSG = bind("recvmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle SHUTDOWN = bind("shutdown", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final MethodHandle CLOSE = bind("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));
    private static final MethodHandle FCNTL = LINKER.downcallHandle(LIBC.find("fcntl").orElseThrow(),
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT), Linker.Option.captureCallState("errno"),
        Linker.Option.firstVariadicArg(2));
    private static final int F_GETFD = 1;

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
        final byte[] name = path.toString().getBytes(StandardCharsets.UTF_8);
        if (name.length >= SUN_PATH_LENGTH)
        {
            throw new MrdException(ErrorCode.EINVAL, "socket path " + path + " is " + name.length +
                " bytes, longer than a Unix socket allows (" + (SUN_PATH_LENGTH - 1) + "): use a shorter --dir");
        }
        final int fd = socket();
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment address = arena.allocate(SOCKADDR_UN_LENGTH, 8);
            address.set(JAVA_SHORT, 0, (short)AF_UNIX);
            MemorySegment.copy(name, 0, address, JAVA_BYTE, 2, name.length);
            int rc;
            do
            {
                rc = (int)CONNECT.invokeExact(callState(), fd, address, 2 + name.length + 1);
            }
            while (rc != 0 && errno() == EINTR);
            if (rc != 0)
            {
                final int errno = errno();
                throw new MrdException(ErrorCode.of(errno), "connect(" + path + ") failed: " +
                    ErrorCode.describe(errno));
            }
            return new UnixSocket(fd, path.toString());
        }
        catch (final Throwable t)
        {
            closeFd(fd);
            throw rethrow(t);
        }
    }

    /**
     * {@code socketpair(AF_UNIX, SOCK_STREAM)}: two connected sockets, for tests and in-process peers.
     */
    public static UnixSocket[] pair()
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment fds = arena.allocate(JAVA_INT, 2);
            final int rc = (int)SOCKETPAIR.invokeExact(callState(), AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds);
            if (rc != 0)
            {
                throw failure("socketpair(AF_UNIX, SOCK_STREAM)");
            }
            return new UnixSocket[] {
                new UnixSocket(fds.getAtIndex(JAVA_INT, 0), "socketpair"),
                new UnixSocket(fds.getAtIndex(JAVA_INT, 1), "socketpair")};
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * Wraps a connected socket descriptor this class did not open (a test's server side); closing the wrapper
     * closes the descriptor.
     */
    static UnixSocket wrap(final int fd, final String peer)
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
                n = (long)SEND.invokeExact(callState(), fd, source.asSlice(offset + done, length - done), length - done,
                    MSG_NOSIGNAL);
            }
            catch (final Throwable t)
            {
                throw rethrow(t);
            }
            if (n < 0)
            {
                if (errno() == EINTR)
                {
                    continue;
                }
                throw failure("send(" + peer + ", " + (length - done) + " bytes)");
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
                n = (long)RECV.invokeExact(callState(), fd, target.asSlice(offset, maxLength), (long)maxLength, 0);
            }
            catch (final Throwable t)
            {
                throw rethrow(t);
            }
            if (n >= 0)
            {
                return (int)n;
            }
            if (errno() != EINTR)
            {
                throw failure("recv(" + peer + ")");
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
            final MemorySegment iov = arena.allocate(IOVEC_LENGTH, 8);
            iov.set(ADDRESS, 0, data);
            iov.set(JAVA_LONG, 8, 1L);
            final MemorySegment control = arena.allocate(CMSG_SPACE_ONE_FD, 8);
            control.set(JAVA_LONG, 0, CMSG_LEN_ONE_FD);
            control.set(JAVA_INT, CMSG_LEVEL, SOL_SOCKET);
            control.set(JAVA_INT, CMSG_TYPE, SCM_RIGHTS);
            control.set(JAVA_INT, CMSG_DATA, fdToSend);
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            msg.set(ADDRESS, MSG_NAME, MemorySegment.NULL);
            msg.set(JAVA_INT, MSG_NAMELEN, 0);
            msg.set(ADDRESS, MSG_IOV, iov);
            msg.set(JAVA_LONG, MSG_IOVLEN, 1L);
            msg.set(ADDRESS, MSG_CONTROL, control);
            msg.set(JAVA_LONG, MSG_CONTROLLEN, CMSG_SPACE_ONE_FD);
            while (true)
            {
                final long n = (long)SENDMSG.invokeExact(callState(), fd, msg, MSG_NOSIGNAL);
                if (n == 1)
                {
                    return;
                }
                if (n < 0 && errno() == EINTR)
                {
                    continue;
                }
                throw n < 0 ? failure("sendmsg(" + peer + ", SCM_RIGHTS fd " + fdToSend + ")") :
                    new MrdException(ErrorCode.EIO, "sendmsg(" + peer + ") sent " + n + " bytes instead of 1");
            }
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * Receives one byte and the descriptor sent with it by {@link #sendFd} (close-on-exec set).
     *
     * @return the new descriptor, or -1 when the byte came without one.
     * @throws MrdException EPIPE at end of stream, or with the errno when the receive fails.
     */
    public int receiveFd()
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment data = arena.allocate(1);
            final MemorySegment iov = arena.allocate(IOVEC_LENGTH, 8);
            iov.set(ADDRESS, 0, data);
            iov.set(JAVA_LONG, 8, 1L);
            final MemorySegment control = arena.allocate(CMSG_SPACE_ONE_FD, 8);
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            msg.set(ADDRESS, MSG_IOV, iov);
            msg.set(JAVA_LONG, MSG_IOVLEN, 1L);
            msg.set(ADDRESS, MSG_CONTROL, control);
            msg.set(JAVA_LONG, MSG_CONTROLLEN, CMSG_SPACE_ONE_FD);
            long n;
            do
            {
                n = (long)RECVMSG.invokeExact(callState(), fd, msg, MSG_CMSG_CLOEXEC);
            }
            while (n < 0 && errno() == EINTR);
            if (n < 0)
            {
                throw failure("recvmsg(" + peer + ")");
            }
            if (n == 0)
            {
                throw new MrdException(ErrorCode.EPIPE, "recvmsg(" + peer + "): the peer closed the connection");
            }
            final long controlLength = msg.get(JAVA_LONG, MSG_CONTROLLEN);
            if (controlLength >= CMSG_LEN_ONE_FD && control.get(JAVA_INT, CMSG_LEVEL) == SOL_SOCKET &&
                control.get(JAVA_INT, CMSG_TYPE) == SCM_RIGHTS)
            {
                return control.get(JAVA_INT, CMSG_DATA);
            }
            return -1;
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * @return true when {@code fd} is an open descriptor of this process ({@code fcntl(F_GETFD)}), so that it
     * can be checked before a protocol exchange commits to sending it.
     */
    public static boolean isOpen(final int fd)
    {
        try
        {
            return fd >= 0 && (int)FCNTL.invokeExact(callState(), fd, F_GETFD, 0) != -1;
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * {@code shutdown(SHUT_RDWR)}: the peer sees end of stream and a thread blocked in {@link #read} returns 0.
     * Errors (the peer already gone) are ignored.
     */
    public void shutdown()
    {
        try
        {
            final int ignored = (int)SHUTDOWN.invokeExact(callState(), fd, SHUT_RDWR);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * Closes the descriptor; idempotent.
     */
    public void close()
    {
        if (!closed)
        {
            closed = true;
            closeFd(fd);
        }
    }

    public String toString()
    {
        return "UnixSocket[fd " + fd + ", " + peer + (closed ? ", closed" : "") + "]";
    }

    private static int socket()
    {
        try
        {
            final int fd = (int)SOCKET.invokeExact(callState(), AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (fd < 0)
            {
                throw failure("socket(AF_UNIX, SOCK_STREAM)");
            }
            return fd;
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    private static void closeFd(final int fd)
    {
        try
        {
            final int ignored = (int)CLOSE.invokeExact(callState(), fd);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    private static MemorySegment callState()
    {
        return CALL_STATE.get();
    }

    private static int errno()
    {
        return (int)ERRNO.get(CALL_STATE.get(), 0L);
    }

    private static MrdException failure(final String call)
    {
        final int errno = errno();
        return new MrdException(ErrorCode.of(errno), call + " failed: " + ErrorCode.describe(errno));
    }

    private static RuntimeException rethrow(final Throwable t)
    {
        if (t instanceof RuntimeException runtime)
        {
            return runtime;
        }
        if (t instanceof Error error)
        {
            throw error;
        }
        return new IllegalStateException("native socket call binding", t);
    }

    private static MethodHandle bind(final String name, final FunctionDescriptor descriptor)
    {
        return LINKER.downcallHandle(LIBC.find(name).orElseThrow(
            () -> new IllegalStateException("libc has no " + name)), descriptor, Linker.Option.captureCallState("errno"));
    }
}
