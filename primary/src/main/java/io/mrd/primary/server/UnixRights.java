package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;

import java.util.Arrays;

/**
 * What the server needs of a Unix socket that Netty does not give safely: receiving the one file descriptor of a
 * REG_EXTERNAL ({@code recvmsg} with {@code SCM_RIGHTS}).
 * <p>
 * Why not Netty's {@code DomainSocketReadMode.FILE_DESCRIPTORS}: its {@code recvFd} gives room for one fd
 * but keeps reading when a message carries two (both leak in the daemon), and answers a byte that carries no
 * fd with a stale {@code errno}, so the connection is closed silently, or the byte swallowed, or an exception
 * raised, depending on what the event loop did before. Here every fd that arrives is either handed over or
 * closed, and every outcome is one of {@link Result}'s cases.
 * <p>
 * The libc calls are {@link UnixSocket}'s and {@link Posix}'s, shared with the secondary; this class is the
 * server's reading of what one receive gave.
 */
final class UnixRights
{
    private UnixRights()
    {
    }

    /**
     * What one attempt to receive the fd of a REG_EXTERNAL gave.
     */
    sealed interface Result
    {
    }

    /** One byte carrying exactly one fd: the caller owns {@code fd} and must close it. */
    record Received(int fd) implements Result
    {
    }

    /** Nothing to read yet. */
    record NotYet() implements Result
    {
    }

    /** The peer closed its end. */
    record Closed() implements Result
    {
    }

    /** Something arrived that is not one byte with one fd; any fds that came with it are closed already. */
    record Refused(String reason) implements Result
    {
    }

    /**
     * Reads one byte and its ancillary data from a non-blocking stream socket, without blocking.
     *
     * @param socketFd the connection; the caller makes sure nothing else reads it meanwhile.
     */
    static Result receiveOneFd(final int socketFd)
    {
        final UnixSocket.Receipt receipt = UnixSocket.receive(socketFd, false);
        if (receipt.errno() != 0)
        {
            final int errno = receipt.errno();
            return errno == ErrorCode.EAGAIN.errno() || errno == ErrorCode.EINTR.errno() ? new NotYet() :
                new Refused("recvmsg failed: " + ErrorCode.describe(errno));
        }
        final int[] fds = receipt.fds();
        if (receipt.bytes() == 0 && fds.length == 0)
        {
            return new Closed();
        }
        if (fds.length == 1 && !receipt.truncated())
        {
            return new Received(fds[0]);
        }
        Arrays.stream(fds).forEach(Posix::close);
        return new Refused(fds.length == 0 ?
            "a byte without a file descriptor arrived: send one byte carrying the fd (sendmsg with SCM_RIGHTS)" :
            (receipt.truncated() ? "more than " + fds.length : String.valueOf(fds.length)) +
            " file descriptors arrived: send exactly one");
    }
}
