package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Objects;
import java.util.function.IntConsumer;

import static io.mrd.layout.sys.MessageHeader.MSGHDR_LENGTH;
import static io.mrd.layout.sys.MessageHeader.MSG_CMSG_CLOEXEC;
import static io.mrd.layout.sys.MessageHeader.MSG_DONTWAIT;
import static io.mrd.layout.sys.MessageHeader.RECEIVE_CONTROL_LENGTH;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * {@code recvmsg} of one socket into one buffer, with the msghdr, the iovec and the control buffer allocated
 * once ({@link UnixSocket#receiver}): a connection's reader receives once per reply, and allocating them for each
 * receive costs a good part of what the receive itself does. The descriptors that came with the bytes
 * ({@code SCM_RIGHTS}, close-on-exec set) are handed over, and the receiver's caller owns them; the kernel ends a
 * receive right after the first bytes of a message that carried descriptors, so they came with bytes of this
 * receive's last message.
 * <p>
 * Not thread-safe: one receive at a time, in an order the caller keeps (the client's read turn), and none once
 * the socket is closed.
 */
public final class SocketReceiver
{
    /** What {@link #receive} returns when nothing came: not blocking and nothing there, or the receive timeout. */
    public static final int AGAIN = -1;

    private final int fd;
    private final String peer;
    private final MemorySegment target;
    private final MemorySegment iov;
    private final MemorySegment control;
    private final MemorySegment msg;

    SocketReceiver(final int fd, final String peer, final MemorySegment target, final Arena arena)
    {
        this.fd = fd;
        this.peer = peer;
        this.target = target;
        this.iov = MessageHeader.iovec(arena, target, target.byteSize());
        this.control = arena.allocate(RECEIVE_CONTROL_LENGTH, 8);
        this.msg = arena.allocate(MSGHDR_LENGTH, 8);
    }

    /**
     * Receives what is available into {@code [offset, offset + maxLength)} of the target, retrying EINTR.
     *
     * @param block false for {@code MSG_DONTWAIT}. A blocking receive returns {@link #AGAIN} when the socket's
     *              receive timeout ({@link UnixSocket#receiveTimeout}) passed first.
     * @param fds   given each descriptor that came with the bytes (close-on-exec set), which it now owns.
     * @return bytes received, 0 at end of stream, {@link #AGAIN} when nothing came.
     * @throws io.mrd.layout.MrdException with the errno when the receive fails (ECONNRESET: the peer died).
     */
    public int receive(final long offset, final int maxLength, final boolean block, final IntConsumer fds)
    {
        Objects.checkFromIndexSize(offset, maxLength, target.byteSize());
        iov.set(JAVA_LONG, 0, target.address() + offset);
        iov.set(JAVA_LONG, 8, (long)maxLength);
        final int flags = MSG_CMSG_CLOEXEC | (block ? 0 : MSG_DONTWAIT);
        while (true)
        {
            MessageHeader.fill(msg, iov, control, RECEIVE_CONTROL_LENGTH);
            final long n;
            try
            {
                n = (long)UnixSocket.RECVMSG.invokeExact(Libc.callState(), fd, msg, flags);
            }
            catch (final Throwable t)
            {
                throw Libc.rethrow(t);
            }
            if (n >= 0)
            {
                MessageHeader.forEachFd(msg, control, fds);
                return (int)n;
            }
            final int errno = Libc.errno();
            if (errno == ErrorCode.EAGAIN.errno())
            {
                return AGAIN;
            }
            if (errno != ErrorCode.EINTR.errno())
            {
                throw Posix.failure(errno, "recvmsg(" + peer + ")");
            }
        }
    }
}
