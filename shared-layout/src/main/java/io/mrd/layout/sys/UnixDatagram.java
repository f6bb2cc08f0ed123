package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;

import static io.mrd.layout.sys.MessageHeader.CMSG_SPACE_ONE_FD;
import static io.mrd.layout.sys.MessageHeader.MSGHDR_LENGTH;
import static io.mrd.layout.sys.MessageHeader.MSG_CMSG_CLOEXEC;
import static io.mrd.layout.sys.MessageHeader.MSG_DONTWAIT;
import static io.mrd.layout.sys.MessageHeader.MSG_NOSIGNAL;
import static io.mrd.layout.sys.MessageHeader.RECEIVE_CONTROL_LENGTH;
import static io.mrd.layout.sys.MessageHeader.RECEIVE_MAX_FDS;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A Unix-domain datagram socket through the Foreign Function &amp; Memory API (the JDK's {@code DatagramChannel}
 * has no Unix-domain family): what the service manager's notification protocol ({@code sd_notify},
 * {@code NOTIFY_SOCKET}) travels on. A sender {@link #connect}s to an address and sends text, with a descriptor
 * when it asks for a {@link #barrier}; a receiver {@link #bind}s a path and {@link #receive}s.
 * <p>
 * An address is a path, or, starting with {@code @}, a name in the abstract namespace (the first byte of
 * {@code sun_path} NUL, the rest the name, no terminating NUL), as systemd gives {@code NOTIFY_SOCKET}.
 * Not thread-safe.
 */
@SuppressWarnings("restricted")
public final class UnixDatagram implements AutoCloseable
{
    private static final int SOCK_DGRAM = 2;
    private static final short POLLIN = 0x1;
    /** The longest datagram {@link #receive} returns whole; the service manager's messages are far shorter. */
    private static final int RECEIVE_LENGTH = 4096;

    private static final Libc.Function SOCKET =
        Libc.function("socket", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT));
    private static final Libc.Function CONNECT =
        Libc.function("connect", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final Libc.Function BIND =
        Libc.function("bind", FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_INT));
    private static final Libc.Function SENDMSG =
        Libc.function("sendmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final Libc.Function RECVMSG =
        Libc.function("recvmsg", FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final Libc.Function PIPE2 = Libc.function("pipe2", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT));

    private final int fd;
    private final String address;

    private UnixDatagram(final int fd, final String address)
    {
        this.fd = fd;
        this.address = address;
    }

    /**
     * @param address a path, or {@code @name} in the abstract namespace.
     * @return a socket whose datagrams go to {@code address}.
     * @throws MrdException ENOENT or ECONNREFUSED (naming the address) when nothing is bound there.
     */
    public static UnixDatagram connect(final String address)
    {
        final UnixDatagram socket = new UnixDatagram(socket(), address);
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment sockaddr = socketAddress(arena, address);
            if ((int)CONNECT.call(socket.fd, sockaddr, (int)sockaddr.byteSize()) != 0)
            {
                throw Posix.failure(Libc.errno(), "connect(datagram socket " + address + ")");
            }
            return socket;
        }
        catch (final RuntimeException ex)
        {
            socket.close();
            throw ex;
        }
    }

    /**
     * @return a socket bound at {@code path} (which must not exist), receiving what is sent there.
     */
    public static UnixDatagram bind(final Path path)
    {
        final UnixDatagram socket = new UnixDatagram(socket(), path.toString());
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment sockaddr = UnixSocket.socketAddress(arena, path);
            if ((int)BIND.call(socket.fd, sockaddr, (int)sockaddr.byteSize()) != 0)
            {
                throw Posix.failure(Libc.errno(), "bind(datagram socket " + path + ")");
            }
            return socket;
        }
        catch (final RuntimeException ex)
        {
            socket.close();
            throw ex;
        }
    }

    /**
     * Sends {@code text} as one datagram (UTF-8), without waiting for room.
     *
     * @throws MrdException with the errno: ECONNREFUSED once the receiver is gone, EAGAIN when its queue is full.
     */
    public void send(final String text)
    {
        send(text, -1);
    }

    /**
     * Sends {@code text} with the write end of a new pipe attached and waits until the receiver has closed it:
     * a receiver that reads its datagrams in order (the service manager does) has then read every datagram this
     * socket sent before, and acted on them ({@code sd_notify_barrier}'s protocol).
     *
     * @return true when the receiver closed it within {@code timeoutMs}, false when the time passed first.
     */
    public boolean barrier(final String text, final int timeoutMs)
    {
        final int[] pipe = pipe();
        try
        {
            try
            {
                send(text, pipe[1]);
            }
            finally
            {
                // Only the receiver's copy of the write end may be left, so that its close is the hang-up.
                Posix.close(pipe[1]);
            }
            return (UnixSocket.poll(pipe[0], POLLIN, timeoutMs, "barrier of " + address) &
                (UnixSocket.POLLHUP | UnixSocket.POLLERR)) != 0;
        }
        finally
        {
            Posix.close(pipe[0]);
        }
    }

    /**
     * One datagram that was {@link #receive}d.
     *
     * @param text what it said (UTF-8).
     * @param fds  the descriptors that came with it ({@code SCM_RIGHTS}, close-on-exec set): the caller owns them.
     */
    public record Datagram(String text, int[] fds)
    {
    }

    /**
     * Waits up to {@code timeoutMs} for a datagram.
     *
     * @return it, or null when none came in time.
     */
    public Datagram receive(final int timeoutMs)
    {
        if ((UnixSocket.poll(fd, POLLIN, timeoutMs, address + ", POLLIN") & POLLIN) == 0)
        {
            return null;
        }
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment data = arena.allocate(RECEIVE_LENGTH);
            final MemorySegment control = arena.allocate(RECEIVE_CONTROL_LENGTH, 8);
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            MessageHeader.fill(msg, MessageHeader.iovec(arena, data, RECEIVE_LENGTH), control, RECEIVE_CONTROL_LENGTH);
            final long n = (long)RECVMSG.call(fd, msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
            if (n < 0)
            {
                throw Posix.failure(Libc.errno(), "recvmsg(datagram socket " + address + ")");
            }
            final int[] fds = new int[RECEIVE_MAX_FDS];
            final int[] count = new int[1];
            MessageHeader.forEachFd(msg, control, received -> fds[count[0]++] = received);
            final byte[] bytes = data.asSlice(0, n).toArray(JAVA_BYTE);
            return new Datagram(new String(bytes, StandardCharsets.UTF_8), Arrays.copyOf(fds, count[0]));
        }
    }

    public void close()
    {
        Posix.close(fd);
    }

    public String toString()
    {
        return "UnixDatagram[fd " + fd + ", " + address + "]";
    }

    private void send(final String text, final int fdToSend)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final byte[] bytes = text.getBytes(StandardCharsets.UTF_8);
            final MemorySegment data = arena.allocate(Math.max(1, bytes.length));
            MemorySegment.copy(bytes, 0, data, JAVA_BYTE, 0, bytes.length);
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            final MemorySegment iov = MessageHeader.iovec(arena, data, bytes.length);
            if (fdToSend >= 0)
            {
                MessageHeader.fill(msg, iov, MessageHeader.rightsOf(arena, fdToSend), CMSG_SPACE_ONE_FD);
            }
            else
            {
                MessageHeader.fill(msg, iov, MemorySegment.NULL, 0);
            }
            if ((long)SENDMSG.call(fd, msg, MSG_NOSIGNAL | MSG_DONTWAIT) != bytes.length)
            {
                throw Posix.failure(Libc.errno(), "sendmsg(datagram socket " + address + ")");
            }
        }
    }

    private static int socket()
    {
        final int fd = (int)SOCKET.call(UnixSocket.AF_UNIX, SOCK_DGRAM | UnixSocket.SOCK_CLOEXEC, 0);
        if (fd < 0)
        {
            throw Posix.failure(Libc.errno(), "socket(AF_UNIX, SOCK_DGRAM)");
        }
        return fd;
    }

    /** @return {@code pipe2(O_CLOEXEC)}: the read end, then the write end. */
    private static int[] pipe()
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment ends = arena.allocate(JAVA_INT, 2);
            if ((int)PIPE2.call(ends, Posix.O_CLOEXEC) != 0)
            {
                throw Posix.failure(Libc.errno(), "pipe2");
            }
            return new int[] {ends.get(JAVA_INT, 0), ends.get(JAVA_INT, 4)};
        }
    }

    /**
     * @return the {@code sockaddr_un} of {@code address}: an abstract name here, a path as
     * {@link UnixSocket#socketAddress} builds it.
     */
    private static MemorySegment socketAddress(final Arena arena, final String address)
    {
        if (!address.startsWith("@"))
        {
            return UnixSocket.socketAddress(arena, Path.of(address));
        }
        final byte[] name = address.substring(1).getBytes(StandardCharsets.UTF_8);
        if (name.length + 1 > UnixSocket.SUN_PATH_LENGTH)
        {
            throw new MrdException(ErrorCode.EINVAL, "abstract socket name " + address + " is longer than a Unix " +
                "socket allows (" + (UnixSocket.SUN_PATH_LENGTH - 1) + " bytes)");
        }
        final MemorySegment sockaddr = arena.allocate(2 + UnixSocket.SUN_PATH_LENGTH, 8);
        sockaddr.set(JAVA_SHORT, 0, (short)UnixSocket.AF_UNIX);
        MemorySegment.copy(name, 0, sockaddr, JAVA_BYTE, 3, name.length);
        return sockaddr.asSlice(0, 3 + name.length);
    }
}
