package io.mrd.primary.lineage;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.HolderMessage;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;

/**
 * The codec of {@link HolderMessage} on a connection, for both of its ends: one frame, then its descriptors one
 * per byte. Whoever receives descriptors owns them (close them or keep them).
 */
final class HolderChannel
{
    /**
     * A frame and the descriptors that came with it.
     *
     * @param fds {@code frame.count()} descriptors, close-on-exec.
     */
    record Received(HolderMessage.Frame frame, int[] fds)
    {
        void closeAll()
        {
            for (final int fd : fds)
            {
                Posix.close(fd);
            }
        }
    }

    private HolderChannel()
    {
    }

    static void send(final UnixSocket connection, final int type, final int flags, final long epoch, final int[] fds)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment frame = arena.allocate(HolderMessage.LENGTH);
            HolderMessage.encode(frame, new HolderMessage.Frame(type, flags, fds.length, epoch));
            connection.writeFully(frame, 0, HolderMessage.LENGTH);
        }
        for (final int fd : fds)
        {
            connection.sendFd(fd, (byte)type);
        }
    }

    /**
     * Reads one frame and its descriptors, blocking (up to the connection's receive timeout).
     *
     * @return the frame, or null at end of stream before its first byte.
     * @throws MrdException EPROTO for a malformed frame or a descriptor missing; the errno of a failed read.
     */
    static Received receive(final UnixSocket connection)
    {
        final HolderMessage.Frame frame;
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment bytes = arena.allocate(HolderMessage.LENGTH);
            int read = 0;
            while (read < HolderMessage.LENGTH)
            {
                final int n = connection.read(bytes, read, HolderMessage.LENGTH - read);
                if (n <= 0)
                {
                    if (0 == read)
                    {
                        return null;
                    }
                    throw new MrdException(ErrorCode.EPROTO, "the descriptor holder's peer ended mid-frame");
                }
                read += n;
            }
            frame = HolderMessage.decode(bytes);
        }
        final int[] fds = new int[frame.count()];
        for (int i = 0; i < fds.length; i++)
        {
            final int fd;
            try
            {
                fd = connection.receiveFd();
            }
            catch (final MrdException ex)
            {
                new Received(frame, Arrays.copyOf(fds, i)).closeAll();
                throw ex;
            }
            if (fd < 0)
            {
                new Received(frame, Arrays.copyOf(fds, i)).closeAll();
                throw new MrdException(ErrorCode.EPROTO, "descriptor " + i + " of " + fds.length +
                    " came without its descriptor");
            }
            fds[i] = fd;
        }
        return new Received(frame, fds);
    }
}
