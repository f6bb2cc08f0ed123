package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;

import static io.mrd.layout.sys.MessageHeader.SOL_SOCKET;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * A listening Unix-domain stream socket through the Foreign Function &amp; Memory API, for a process that must
 * pass descriptors to whoever connects ({@code SCM_RIGHTS}), which the JDK's {@code ServerSocketChannel} cannot:
 * the descriptor holder ({@code io.mrd.primary.lineage}). The daemon's own socket is Netty's.
 * <p>
 * The socket file is made with mode 0600 before anyone can connect (bound under a umask of the caller's, then
 * set), and {@link #peerUid} reads who connected as the kernel saw it ({@code SO_PEERCRED}), so that a holder can
 * refuse every uid but its own. Accepting and closing are for one thread.
 */
@SuppressWarnings("restricted")
public final class UnixListener implements AutoCloseable
{
    private static final int SO_PEERCRED = 17;
    /** {@code struct ucred { pid_t pid; uid_t uid; gid_t gid; }}. */
    private static final int UCRED_LENGTH = 12;
    private static final short POLLIN = 0x1;

    private static final Libc.Function BIND =
        Libc.function("bind", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final Libc.Function LISTEN = Libc.function("listen", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT));
    private static final Libc.Function ACCEPT4 =
        Libc.function("accept4", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));

    private final int fd;
    private final Path path;
    private boolean closed;

    private UnixListener(final int fd, final Path path)
    {
        this.fd = fd;
        this.path = path;
    }

    /**
     * Binds {@code path} (an existing socket file there is replaced: the caller has made sure that nobody
     * listens on it any more) and listens, the file's mode 0600.
     *
     * @throws MrdException EINVAL for a path too long for a socket, the errno of {@code bind} or {@code listen}.
     */
    public static UnixListener bind(final Path path)
    {
        try
        {
            Files.deleteIfExists(path);
        }
        catch (final java.io.IOException ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot remove old socket " + path + ": " + ex);
        }
        final int fd = UnixSocket.socket();
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment address = UnixSocket.socketAddress(arena, path);
            if ((int)BIND.call(fd, address, (int)address.byteSize()) != 0)
            {
                throw Posix.failure(Libc.errno(), "bind(" + path + ")");
            }
            // No connection can be accepted before listen: the mode is right before anyone gets in.
            Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-------"));
            if ((int)LISTEN.call(fd, 16) != 0)
            {
                throw Posix.failure(Libc.errno(), "listen(" + path + ")");
            }
            return new UnixListener(fd, path);
        }
        catch (final java.io.IOException ex)
        {
            Posix.close(fd);
            throw new MrdException(ErrorCode.EIO, "cannot set the mode of socket " + path + ": " + ex);
        }
        catch (final RuntimeException ex)
        {
            Posix.close(fd);
            throw ex;
        }
    }

    /**
     * Waits up to {@code timeoutMs} for a connection and accepts it.
     *
     * @return the connection (close-on-exec), or null when the time passed or a signal came first.
     * @throws MrdException with the errno of {@code poll} or {@code accept4}.
     */
    public UnixSocket accept(final int timeoutMs)
    {
        if (0 == UnixSocket.poll(fd, POLLIN, timeoutMs, path.toString()))
        {
            return null;
        }
        final int connection = (int)ACCEPT4.call(fd, MemorySegment.NULL, MemorySegment.NULL, UnixSocket.SOCK_CLOEXEC);
        if (connection < 0)
        {
            final int errno = Libc.errno();
            if (errno == ErrorCode.EINTR.errno() || errno == ErrorCode.EAGAIN.errno() ||
                errno == ErrorCode.ECONNABORTED.errno())
            {
                return null;
            }
            throw Posix.failure(errno, "accept4(" + path + ")");
        }
        return UnixSocket.wrap(connection, path + " peer");
    }

    /**
     * @return the uid of the process at the other end of {@code connection} when it connected
     * ({@code SO_PEERCRED}).
     * @throws MrdException with the errno of {@code getsockopt}.
     */
    public static int peerUid(final UnixSocket connection)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment ucred = arena.allocate(UCRED_LENGTH, 4);
            final MemorySegment length = arena.allocate(JAVA_INT);
            length.set(JAVA_INT, 0, UCRED_LENGTH);
            if ((int)UnixSocket.GETSOCKOPT.call(connection.fd(), SOL_SOCKET, SO_PEERCRED, ucred, length) != 0)
            {
                throw Posix.failure(Libc.errno(), "getsockopt(" + connection + ", SO_PEERCRED)");
            }
            return ucred.get(JAVA_INT, 4);
        }
    }

    /** @return the socket file. */
    public Path path()
    {
        return path;
    }

    /** Closes the socket and removes its file; idempotent. */
    public void close()
    {
        if (!closed)
        {
            closed = true;
            Posix.close(fd);
            try
            {
                Files.deleteIfExists(path);
            }
            catch (final java.io.IOException ex)
            {
                // a socket file nobody listens on is refused at connect, and replaced by the next bind
            }
        }
    }
}
