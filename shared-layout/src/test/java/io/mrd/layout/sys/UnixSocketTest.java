package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link UnixSocket} against the JDK's Unix-domain channels and against itself (fd passing).
 */
final class UnixSocketTest
{
    @TempDir
    Path dir;

    @Test
    void connectsWritesAndReadsWithAJdkServer() throws Exception
    {
        final Path path = dir.resolve("t.sock");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            Arena arena = Arena.ofConfined())
        {
            server.bind(UnixDomainSocketAddress.of(path));
            try (UnixSocket client = UnixSocket.connect(path); SocketChannel peer = server.accept())
            {
                final byte[] hello = "hello, primary".getBytes(StandardCharsets.US_ASCII);
                final MemorySegment out = arena.allocate(hello.length);
                MemorySegment.copy(hello, 0, out, JAVA_BYTE, 0, hello.length);
                client.writeFully(out, 0, hello.length);
                final ByteBuffer received = ByteBuffer.allocate(hello.length);
                while (received.hasRemaining())
                {
                    assertTrue(peer.read(received) > 0);
                }
                assertEquals("hello, primary", new String(received.array(), StandardCharsets.US_ASCII));

                peer.write(ByteBuffer.wrap("welcome".getBytes(StandardCharsets.US_ASCII)));
                final MemorySegment in = arena.allocate(64);
                int got = 0;
                while (got < 7)
                {
                    got += client.read(in, got, 64 - got);
                }
                assertEquals("welcome", new String(in.asSlice(0, 7).toArray(JAVA_BYTE), StandardCharsets.US_ASCII));

                peer.close();
                assertEquals(0, client.read(in, 0, 64), "end of stream when the peer closes");
                // Writing to a closed peer is an error, never SIGPIPE.
                final MrdException ex = assertThrows(MrdException.class, () ->
                {
                    for (int i = 0; i < 100; i++)
                    {
                        client.writeFully(out, 0, hello.length);
                    }
                });
                assertTrue(ex.code() == ErrorCode.EPIPE || ex.code() == ErrorCode.ECONNRESET, ex.toString());
            }
        }
    }

    @Test
    void connectToNothingNamesThePath()
    {
        final Path path = dir.resolve("none.sock");
        final MrdException ex = assertThrows(MrdException.class, () -> UnixSocket.connect(path));
        assertEquals(ErrorCode.ENOENT, ex.code());
        assertTrue(ex.getMessage().contains(path.toString()), ex.getMessage());
    }

    @Test
    void refusesAPathTooLongForSunPath()
    {
        final Path path = dir.resolve("x".repeat(120));
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> UnixSocket.connect(path)).code());
    }

    @Test
    void shutdownWakesABlockedReader() throws Exception
    {
        final UnixSocket[] pair = UnixSocket.pair();
        try (Arena arena = Arena.ofShared())
        {
            final MemorySegment in = arena.allocate(16);
            final int[] result = {-1};
            final Thread reader = new Thread(() -> result[0] = pair[0].read(in, 0, 16));
            reader.start();
            pair[0].shutdown();
            reader.join(10_000);
            assertEquals(0, result[0]);
        }
        finally
        {
            pair[0].close();
            pair[1].close();
        }
    }

    @Test
    void aReceiverWaitsUpToTheReceiveTimeoutAndAHangUpIsNotABytesArrival()
    {
        final UnixSocket[] pair = UnixSocket.pair();
        try (Arena arena = Arena.ofShared())
        {
            final MemorySegment in = arena.allocate(64);
            final SocketReceiver receiver = pair[0].receiver(in, arena);
            final List<Integer> fds = new ArrayList<>();
            pair[0].receiveTimeout(20);
            assertEquals(SocketReceiver.AGAIN, receiver.receive(0, 64, true, fds::add), "the timeout passed");
            assertEquals(SocketReceiver.AGAIN, receiver.receive(0, 64, false, fds::add), "nothing there");

            final MemorySegment out = arena.allocate(5);
            MemorySegment.copy("hello".getBytes(StandardCharsets.US_ASCII), 0, out, JAVA_BYTE, 0, 5);
            pair[1].writeFully(out, 0, 5);
            assertFalse(pair[0].awaitHangup(20), "bytes waiting are no hang-up");
            assertEquals(2, receiver.receive(3, 2, true, fds::add), "at most what was asked, where it was asked");
            assertEquals("he", new String(in.asSlice(3, 2).toArray(JAVA_BYTE), StandardCharsets.US_ASCII));
            assertEquals(3, receiver.receive(0, 64, false, fds::add));
            assertEquals("llo", new String(in.asSlice(0, 3).toArray(JAVA_BYTE), StandardCharsets.US_ASCII));
            assertEquals(List.of(), fds);

            pair[1].shutdown();
            assertTrue(pair[0].awaitHangup(-1), "the peer's shutdown is a hang-up");
            assertEquals(0, receiver.receive(0, 64, true, fds::add), "then the end of the stream");
        }
        finally
        {
            pair[0].close();
            pair[1].close();
        }
    }

    @Test
    void shuttingThisSideWakesAThreadAwaitingTheHangUp() throws Exception
    {
        final UnixSocket[] pair = UnixSocket.pair();
        try
        {
            final boolean[] result = {false};
            final Thread watch = new Thread(() -> result[0] = pair[0].awaitHangup(-1));
            watch.start();
            pair[0].shutdown();
            watch.join(10_000);
            assertTrue(result[0]);
        }
        finally
        {
            pair[0].close();
            pair[1].close();
        }
    }

    @Test
    void passesAFileDescriptor()
    {
        final UnixSocket[] pair = UnixSocket.pair();
        final int memfd = Posix.memfdCreate("unix-socket-test", Posix.MFD_CLOEXEC);
        int received = -1;
        MemorySegment first = null;
        MemorySegment second = null;
        try
        {
            Posix.ftruncate(memfd, 4096);
            first = Posix.map(4096, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, memfd, 0);
            first.set(JAVA_LONG, 0, 0x1122_3344_5566_7788L);

            pair[0].sendFd(memfd, (byte)0);
            received = pair[1].receiveFd();
            assertTrue(received >= 0);
            assertNotEquals(memfd, received);

            second = Posix.map(4096, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, received, 0);
            assertEquals(0x1122_3344_5566_7788L, second.get(JAVA_LONG, 0), "the same file behind both descriptors");
            second.set(JAVA_LONG, 8, 42);
            assertEquals(42, first.get(JAVA_LONG, 8));

            assertThrows(MrdException.class, () -> pair[0].sendFd(-1, (byte)0));
            assertTrue(Posix.isOpen(memfd));
            assertFalse(Posix.isOpen(-1));
            assertFalse(Posix.isOpen(1 << 20));
        }
        finally
        {
            if (null != first)
            {
                Posix.munmapQuietly(first.address(), 4096);
            }
            if (null != second)
            {
                Posix.munmapQuietly(second.address(), 4096);
            }
            if (received >= 0)
            {
                Posix.close(received);
            }
            Posix.close(memfd);
            pair[0].close();
            pair[1].close();
        }
    }

    /**
     * What IMPORT_PD relies on: a descriptor attached to a message's bytes arrives with a read that holds bytes
     * of that message, never with a later one, and bytes before and after it are read as usual.
     */
    @Test
    void aDescriptorSentWithBytesArrivesWithTheReadOfThoseBytes() throws Exception
    {
        final UnixSocket[] pair = UnixSocket.pair();
        final int memfd = Posix.memfdCreate("unixsocket-test", Posix.MFD_CLOEXEC);
        final List<Integer> fds = new ArrayList<>();
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment before = arena.allocateFrom("before|", StandardCharsets.US_ASCII);
            final MemorySegment carried = arena.allocateFrom("carried|", StandardCharsets.US_ASCII);
            final MemorySegment after = arena.allocateFrom("after", StandardCharsets.US_ASCII);
            pair[0].writeFully(before, 0, 7);
            assertEquals(8, UnixSocket.sendWithFd(pair[0].fd(), carried, 8, memfd));
            pair[0].writeFully(after, 0, 5);

            final MemorySegment in = arena.allocate(64);
            final SocketReceiver receiver = pair[1].receiver(in, arena);
            final int first = receiver.receive(0, 64, true, fds::add);
            assertEquals("before|carried|", new String(in.asSlice(0, first).toArray(JAVA_BYTE),
                StandardCharsets.US_ASCII), "the read ends with the bytes that carried the descriptor");
            assertEquals(1, fds.size());
            assertNotEquals(memfd, (int)fds.get(0));
            final int second = receiver.receive(0, 64, true, fds::add);
            assertEquals("after", new String(in.asSlice(0, second).toArray(JAVA_BYTE), StandardCharsets.US_ASCII));
            assertEquals(1, fds.size(), "no descriptor with later bytes");

            pair[1].close();
            assertEquals(-ErrorCode.EPIPE.errno(), UnixSocket.sendWithFd(pair[0].fd(), carried, 8, memfd),
                "a failure is the negated errno, not an exception");
        }
        finally
        {
            fds.forEach(Posix::close);
            Posix.close(memfd);
            pair[0].close();
            pair[1].close();
        }
    }

    @Test
    void dupCloexecOpensASecondDescriptorOfTheSameFile()
    {
        final int memfd = Posix.memfdCreate("dup-test", Posix.MFD_CLOEXEC);
        final int copy = Posix.dupCloexec(memfd);
        try
        {
            assertNotEquals(memfd, copy);
            assertTrue(Posix.isOpen(copy));
            assertEquals(ErrorCode.EBADF, assertThrows(MrdException.class, () -> Posix.dupCloexec(-1)).code());
        }
        finally
        {
            Posix.close(copy);
            Posix.close(memfd);
        }
    }
}
