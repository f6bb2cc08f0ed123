package io.mrd.layout.sys;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.IntConsumer;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The structures of {@code sendmsg} and {@code recvmsg} as LP64 Linux lays them out (x86-64 and arm64 agree):
 * {@code struct msghdr}, {@code struct iovec}, the {@code cmsghdr} of {@code SCM_RIGHTS}, and the walk over the
 * descriptors a receive brought. {@link UnixSocket} and {@link SocketReceiver} build their messages from these.
 */
final class MessageHeader
{
    static final int SOL_SOCKET = 1;
    static final int SCM_RIGHTS = 1;
    static final int MSG_CTRUNC = 0x8;
    static final int MSG_DONTWAIT = 0x40;
    static final int MSG_NOSIGNAL = 0x4000;
    static final int MSG_CMSG_CLOEXEC = 0x40000000;

    // struct msghdr: name, namelen(+pad), iov, iovlen, control, controllen, flags(+pad).
    static final long MSG_NAME = 0;
    static final long MSG_NAMELEN = 8;
    static final long MSG_IOV = 16;
    static final long MSG_IOVLEN = 24;
    static final long MSG_CONTROL = 32;
    static final long MSG_CONTROLLEN = 40;
    static final long MSG_FLAGS = 48;
    static final long MSGHDR_LENGTH = 56;
    // struct iovec { void *iov_base; size_t iov_len; }
    static final long IOVEC_LENGTH = 16;
    // struct cmsghdr { size_t cmsg_len; int cmsg_level; int cmsg_type; } then the data, 8-byte aligned.
    static final long CMSG_LEVEL = 8;
    static final long CMSG_TYPE = 12;
    static final long CMSG_DATA = 16;
    /** CMSG_LEN(sizeof(int)). */
    static final long CMSG_LEN_ONE_FD = CMSG_DATA + Integer.BYTES;
    /** CMSG_SPACE(sizeof(int)). */
    static final long CMSG_SPACE_ONE_FD = CMSG_DATA + 8;
    /**
     * Room for 60 fds when receiving: a sender of more than one is refused, and whatever fits is closed by the
     * caller rather than leaked.
     */
    static final long RECEIVE_CONTROL_LENGTH = CMSG_DATA + 60 * Integer.BYTES;
    /** How many descriptors {@link #RECEIVE_CONTROL_LENGTH} holds. */
    static final int RECEIVE_MAX_FDS = (int)((RECEIVE_CONTROL_LENGTH - CMSG_DATA) / Integer.BYTES);

    private MessageHeader()
    {
    }

    /** @return an iovec over {@code length} bytes at {@code base}. */
    static MemorySegment iovec(final Arena arena, final MemorySegment base, final long length)
    {
        final MemorySegment iov = arena.allocate(IOVEC_LENGTH, 8);
        iov.set(ADDRESS, 0, base);
        iov.set(JAVA_LONG, 8, length);
        return iov;
    }

    /**
     * Fills {@code msg} (no name) with one iovec and a control buffer: what both send and receive pass. A
     * receive refills it before each call, since the kernel writes the control length and flags back.
     */
    static void fill(final MemorySegment msg, final MemorySegment iov, final MemorySegment control, final long controlLength)
    {
        msg.fill((byte)0);
        msg.set(ADDRESS, MSG_NAME, MemorySegment.NULL);
        msg.set(ADDRESS, MSG_IOV, iov);
        msg.set(JAVA_LONG, MSG_IOVLEN, 1L);
        msg.set(ADDRESS, MSG_CONTROL, control);
        msg.set(JAVA_LONG, MSG_CONTROLLEN, controlLength);
    }

    /** @return a control message that carries {@code fd} ({@code SCM_RIGHTS}), for {@code sendmsg}. */
    static MemorySegment rightsOf(final Arena arena, final int fd)
    {
        final MemorySegment control = arena.allocate(CMSG_SPACE_ONE_FD, 8);
        control.set(JAVA_LONG, 0, CMSG_LEN_ONE_FD);
        control.set(JAVA_INT, CMSG_LEVEL, SOL_SOCKET);
        control.set(JAVA_INT, CMSG_TYPE, SCM_RIGHTS);
        control.set(JAVA_INT, CMSG_DATA, fd);
        return control;
    }

    /**
     * Hands every descriptor of the {@code SCM_RIGHTS} messages in {@code control} to {@code fds}.
     *
     * @param msg the msghdr the receive filled in: how much of the control buffer it used.
     */
    static void forEachFd(final MemorySegment msg, final MemorySegment control, final IntConsumer fds)
    {
        final long controlLength = Math.min(msg.get(JAVA_LONG, MSG_CONTROLLEN), RECEIVE_CONTROL_LENGTH);
        long at = 0;
        while (at + CMSG_DATA <= controlLength)
        {
            final long length = control.get(JAVA_LONG, at);
            if (length < CMSG_DATA || at + length > controlLength)
            {
                break;
            }
            if (control.get(JAVA_INT, at + CMSG_LEVEL) == SOL_SOCKET &&
                control.get(JAVA_INT, at + CMSG_TYPE) == SCM_RIGHTS)
            {
                for (long p = at + CMSG_DATA; p + Integer.BYTES <= at + length; p += Integer.BYTES)
                {
                    fds.accept(control.get(JAVA_INT, p));
                }
            }
            at += (length + 7) & ~7L;
        }
    }
}
