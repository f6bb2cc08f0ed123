package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * What the server needs of a Unix socket that Netty does not give safely: receiving the one file descriptor of a
 * REG_EXTERNAL ({@code recvmsg} with {@code SCM_RIGHTS}) and the peer's supplementary groups
 * ({@code SO_PEERGROUPS}).
 * <p>
 * Why not Netty's {@code DomainSocketReadMode.FILE_DESCRIPTORS}: its {@code recvFd} gives room for one fd
 * but keeps reading when a message carries two (both leak in the daemon), and answers a byte that carries no
 * fd with a stale {@code errno}, so the connection is closed silently, or the byte swallowed, or an exception
 * raised, depending on what the event loop did before. Here every fd that arrives is either handed over or
 * closed, and every outcome is one of {@link Result}'s cases.
 * <p>
 * Layouts are those of LP64 Linux (x86-64 and arm64 agree): {@code struct msghdr} is 56 bytes, {@code struct
 * cmsghdr} a {@code size_t} length and two ints before the data, aligned to 8.
 */
final class UnixRights
{
    private static final int SOL_SOCKET = 1;
    private static final int SCM_RIGHTS = 1;
    private static final int SO_PEERGROUPS = 59;
    private static final int MSG_CTRUNC = 0x8;
    private static final int MSG_DONTWAIT = 0x40;
    private static final int MSG_CMSG_CLOEXEC = 0x4000_0000;
    private static final int EINTR = 4;
    private static final int EAGAIN = 11;
    private static final int ERANGE = 34;

    private static final int MSGHDR_LENGTH = 56;
    private static final int MSG_IOV_OFFSET = 16;
    private static final int MSG_IOVLEN_OFFSET = 24;
    private static final int MSG_CONTROL_OFFSET = 32;
    private static final int MSG_CONTROLLEN_OFFSET = 40;
    private static final int MSG_FLAGS_OFFSET = 48;
    private static final int CMSG_HEADER_LENGTH = 16;
    /** Room for 60 fds: a sender of more than one is refused, and whatever fits is closed rather than leaked. */
    private static final int CONTROL_LENGTH = CMSG_HEADER_LENGTH + 60 * Integer.BYTES;

    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(MemoryLayout.PathElement.groupElement("errno"));
    private static final MethodHandle RECVMSG = bind("recvmsg",
        FunctionDescriptor.of(JAVA_LONG, JAVA_INT, ADDRESS, JAVA_INT));
    private static final MethodHandle GETSOCKOPT = bind("getsockopt",
        FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_INT, JAVA_INT, ADDRESS, ADDRESS));
    private static final MethodHandle CLOSE = bind("close", FunctionDescriptor.of(JAVA_INT, JAVA_INT));

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
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment state = arena.allocate(CAPTURE_LAYOUT);
            final MemorySegment data = arena.allocate(1);
            final MemorySegment iov = arena.allocate(16, 8);
            iov.set(ADDRESS, 0, data);
            iov.set(JAVA_LONG, 8, 1);
            final MemorySegment control = arena.allocate(CONTROL_LENGTH, 8);
            final MemorySegment msg = arena.allocate(MSGHDR_LENGTH, 8);
            msg.set(ADDRESS, MSG_IOV_OFFSET, iov);
            msg.set(JAVA_LONG, MSG_IOVLEN_OFFSET, 1);
            msg.set(ADDRESS, MSG_CONTROL_OFFSET, control);
            msg.set(JAVA_LONG, MSG_CONTROLLEN_OFFSET, CONTROL_LENGTH);

            final long received = (long)RECVMSG.invokeExact(state, socketFd, msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
            if (received < 0)
            {
                final int errno = (int)ERRNO.get(state, 0L);
                return errno == EAGAIN || errno == EINTR ? new NotYet() :
                    new Refused("recvmsg failed: " + ErrorCode.describe(errno));
            }

            final List<Integer> fds = new ArrayList<>();
            final long controlLength = Math.min(msg.get(JAVA_LONG, MSG_CONTROLLEN_OFFSET), CONTROL_LENGTH);
            long at = 0;
            while (at + CMSG_HEADER_LENGTH <= controlLength)
            {
                final long length = control.get(JAVA_LONG, at);
                if (length < CMSG_HEADER_LENGTH || at + length > controlLength)
                {
                    break;
                }
                if (control.get(JAVA_INT, at + 8) == SOL_SOCKET && control.get(JAVA_INT, at + 12) == SCM_RIGHTS)
                {
                    for (long p = at + CMSG_HEADER_LENGTH; p + Integer.BYTES <= at + length; p += Integer.BYTES)
                    {
                        fds.add(control.get(JAVA_INT, p));
                    }
                }
                at += (length + 7) & ~7L;
            }
            final boolean truncated = (msg.get(JAVA_INT, MSG_FLAGS_OFFSET) & MSG_CTRUNC) != 0;

            if (received == 0 && fds.isEmpty())
            {
                return new Closed();
            }
            if (fds.size() == 1 && !truncated)
            {
                return new Received(fds.getFirst());
            }
            fds.forEach(UnixRights::close);
            return new Refused(fds.isEmpty() ?
                "a byte without a file descriptor arrived: send one byte carrying the fd (sendmsg with SCM_RIGHTS)" :
                (truncated ? "more than " + fds.size() : String.valueOf(fds.size())) +
                " file descriptors arrived: send exactly one");
        }
        catch (final Throwable t)
        {
            throw new IllegalStateException("recvmsg binding", t);
        }
    }

    /**
     * @return the supplementary groups the peer had when it connected ({@code SO_PEERGROUPS}, Linux 4.13+),
     * or an empty array when the kernel cannot say.
     */
    static int[] peerGroups(final int socketFd)
    {
        int capacity = 64;
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment state = arena.allocate(CAPTURE_LAYOUT);
            final MemorySegment length = arena.allocate(JAVA_INT);
            for (int attempt = 0; attempt < 4; attempt++)
            {
                final MemorySegment groups = arena.allocate((long)capacity * Integer.BYTES, 4);
                length.set(JAVA_INT, 0, capacity * Integer.BYTES);
                final int rc = (int)GETSOCKOPT.invokeExact(state, socketFd, SOL_SOCKET, SO_PEERGROUPS, groups, length);
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
                if ((int)ERRNO.get(state, 0L) != ERANGE)
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
            throw new IllegalStateException("getsockopt binding", t);
        }
    }

    static void close(final int fd)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final int ignored = (int)CLOSE.invokeExact(arena.allocate(CAPTURE_LAYOUT), fd);
        }
        catch (final Throwable t)
        {
            throw new IllegalStateException("close binding", t);
        }
    }

    private static MethodHandle bind(final String name, final FunctionDescriptor descriptor)
    {
        return LINKER.downcallHandle(LINKER.defaultLookup().find(name).orElseThrow(
            () -> new IllegalStateException("libc has no " + name)), descriptor, Linker.Option.captureCallState("errno"));
    }
}
