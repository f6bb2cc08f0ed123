package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.primary.provider.StandIn;
import io.mrd.secondary.DaemonConnection;
import io.mrd.secondary.ReplyReader;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static io.mrd.primary.server.ServerFixture.await;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * IMPORT_PD and QUEUES against an in-process daemon on the ibverbs stand-in (whose context's command file is a
 * memfd named {@code mrd-standin-cmd} and which has the emulated device's {@code mrdemu_destroy_by_handle}), and
 * against a soft daemon, which has no device to share.
 */
class DeviceSharingTest
{
    private static final long BASE = ServerFixture.base(6);
    private static final String COMMAND_FILE = "/memfd:mrd-standin-cmd";

    @TempDir
    static Path buildDir;
    @TempDir
    Path dir;

    private static StandIn standIn;

    @BeforeAll
    static void buildStandIn() throws Exception
    {
        standIn = StandIn.withDestroyByHandle(buildDir);
    }

    @Test
    void aSoftDaemonRefusesBothNamingTheProviderThatHasADevice()
    {
        try (ServerFixture fixture = new ServerFixture(dir, BASE); RawClient client = fixture.connect())
        {
            client.hello("soft");
            final Message.Reply importPd = client.request(2, new Message.ImportPd());
            assertEquals(MessageType.IMPORT_PD, importPd.type());
            assertEquals(ErrorCode.EOPNOTSUPP, importPd.status());
            assertEquals("IMPORT_PD needs the daemon's RDMA device, and this daemon runs --provider soft, which has " +
                "none: start it with --provider ibverbs (on a host without an RDMA NIC, with MRD_IBVERBS_LIBRARY " +
                "pointing at the emulated device, emulator/target/libmrdemu.so)", importPd.message());
            final Message.Reply queues = client.request(3, new Message.Queues(Message.Queues.ADD, Message.Queues.QP, 1));
            assertEquals(ErrorCode.EOPNOTSUPP, queues.status());
            assertTrue(queues.message().startsWith("QUEUES needs the daemon's RDMA device"), queues.message());
        }
    }

    @Test
    void importPdAnswersThePdHandleWithADescriptorOfTheCommandFileAndTheDaemonKeepsNoDuplicate() throws Exception
    {
        try (ServerFixture fixture = ibverbsDaemon(); DaemonConnection connection = connect(fixture))
        {
            final int daemonsOwn = commandFileDescriptors();
            assertEquals(1, daemonsOwn, "the context's cmd_fd, in this JVM where the daemon runs");
            final List<Integer> received = new ArrayList<>();
            try
            {
                for (int i = 0; i < 3; i++)
                {
                    final DaemonConnection.Answer answer = connection.callForFd(new Message.ImportPd());
                    received.add(answer.fd());
                    final Message.PdImported imported = assertInstanceOf(Message.PdImported.class, answer.reply());
                    assertEquals(7, imported.pdHandle(), "the stand-in's ibv_pd.handle");
                    assertEquals("mrd_standin0", imported.device());
                    assertEquals(COMMAND_FILE, link(answer.fd()));
                }
                // the daemon closes each duplicate right after the send, maybe after the client read it
                await("the daemon closed its duplicates", () -> commandFileDescriptors() == 1 + received.size());
            }
            finally
            {
                received.forEach(Posix::close);
            }
            assertEquals(daemonsOwn, commandFileDescriptors());
        }
    }

    /**
     * The descriptor pairs with its own reply while many other replies of the same connection are being written
     * (the daemon's Netty buffer is rarely empty then, so the send waits for it), and nothing else carries one.
     */
    @Test
    void pipelinedAmongManyRepliesTheDescriptorComesWithItsOwnReplyOnly() throws Exception
    {
        try (ServerFixture fixture = ibverbsDaemon())
        {
            final UnixSocket socket = UnixSocket.connect(fixture.socket());
            final ConcurrentHashMap<Long, Frame> replies = new ConcurrentHashMap<>();
            final ConcurrentHashMap<Long, Integer> fds = new ConcurrentHashMap<>();
            final int requests = 2000;
            final CountDownLatch all = new CountDownLatch(requests + 1);
            final ReplyReader reader = ReplyReader.start(socket, "pipelined", new ReplyReader.Handler()
            {
                public void onFrame(final Frame frame)
                {
                    replies.put(frame.correlationId(), frame);
                    all.countDown();
                }

                public void onFrameWithFd(final Frame frame, final int fd)
                {
                    fds.put(frame.correlationId(), fd);
                    onFrame(frame);
                }

                public void onEnd(final String how, final MrdException cause)
                {
                    if (null != cause)
                    {
                        cause.printStackTrace();
                    }
                }
            });
            try (Arena arena = Arena.ofConfined())
            {
                write(socket, arena, 1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "pipelined"));
                // fewer requests before it than a connection may have in flight, so it is not answered EAGAIN
                final long importId = 200;
                for (long id = 2; id <= requests + 1; id++)
                {
                    // ALLOC with unknown flags: answered EINVAL with a long message, on the workers
                    write(socket, arena, id, id == importId ? new Message.ImportPd() : new Message.Alloc(4096, 1));
                }
                assertTrue(all.await(60, TimeUnit.SECONDS), "replies: " + replies.size() + " of " + (requests + 1));
                assertEquals(List.of(importId), List.copyOf(fds.keySet()), "one descriptor, with IMPORT_PD's reply");
                assertEquals(COMMAND_FILE, link(fds.get(importId)));
                assertInstanceOf(Message.PdImported.class, replies.get(importId).message());
            }
            finally
            {
                fds.values().forEach(Posix::close);
                socket.shutdown();
                reader.join();
                socket.close();
            }
        }
    }

    @Test
    void theQueuesOfAGoneClientAreDestroyedQueuePairsFirstAndOnlyThoseItReported() throws Throwable
    {
        try (ServerFixture fixture = ibverbsDaemon(); RawClient owner = fixture.connect();
            RawClient other = fixture.connect())
        {
            final int ownerId = owner.hello("owner").clientId();
            other.hello("other");
            assertEquals(ErrorCode.OK, owner.request(2, queues(Message.Queues.ADD, Message.Queues.CQ, 6)).status());
            assertEquals(ErrorCode.OK, owner.request(3, queues(Message.Queues.ADD, Message.Queues.QP, 5)).status());
            assertEquals(ErrorCode.OK, owner.request(4, queues(Message.Queues.ADD, Message.Queues.CQ, 7)).status());
            assertEquals(ErrorCode.OK, owner.request(5, queues(Message.Queues.REMOVE, Message.Queues.CQ, 7)).status());

            refused(owner.request(6, queues(Message.Queues.ADD, Message.Queues.QP, 5)), ErrorCode.EEXIST,
                "QP handle 5 was reported already by this client: report each queue once, after creating it");
            refused(other.request(2, queues(Message.Queues.ADD, Message.Queues.QP, 5)), ErrorCode.EEXIST,
                "QP handle 5 was reported already by client " + ownerId + ": report each queue once, after " +
                "creating it");
            refused(other.request(3, queues(Message.Queues.REMOVE, Message.Queues.QP, 5)), ErrorCode.EINVAL,
                "QP handle 5 is not a queue this client reported: remove only what it added");
            refused(other.request(4, queues(Message.Queues.ADD, 3, 5)), ErrorCode.EINVAL,
                "QUEUES kind 3 is unknown: send 1 for a completion queue or 2 for a queue pair");
            refused(other.request(5, queues(9, Message.Queues.QP, 5)), ErrorCode.EINVAL,
                "QUEUES operation 9 is unknown: send 1 after creating a queue or 2 before destroying it");
            assertEquals(ErrorCode.OK, other.request(6, queues(Message.Queues.ADD, Message.Queues.QP, 0xBAD)).status());

            final int before = standIn.destroyed();
            owner.close();
            await("the owner's two queues destroyed", () -> destroyed() == before + 2);
            assertEquals((1L << 32) | 6, standIn.lastDestroyed(), "CQ 6 last: after the QP that may use it");
            assertEquals(1, fixture.daemon.server().reportedQueues(), "the other client's QP is still reported");

            // The device refuses this handle: the daemon logs it and goes on.
            other.close();
            await("the other client reclaimed", () -> fixture.daemon.server().connectedClients() == 0);
            assertEquals(before + 2, standIn.destroyed());
            assertEquals(0, fixture.daemon.server().reportedQueues());
            try (RawClient after = fixture.connect())
            {
                after.hello("after");
            }
        }
    }

    private ServerFixture ibverbsDaemon()
    {
        return new ServerFixture(dir, BASE, context -> context.provider("ibverbs")
            .ibverbsLibrary(standIn.library().toString()));
    }

    private static DaemonConnection connect(final ServerFixture fixture)
    {
        final DaemonConnection connection = DaemonConnection.open(UnixSocket.connect(fixture.socket()), "daemon",
            fixture.dir, 10_000, new DaemonConnection.Listener()
            {
            });
        connection.hello("importer");
        return connection;
    }

    private static Message.Queues queues(final int operation, final int kind, final int handle)
    {
        return new Message.Queues(operation, kind, handle);
    }

    private static void refused(final Message.Reply reply, final ErrorCode code, final String message)
    {
        assertEquals(code, reply.status(), reply::toString);
        assertEquals(message, reply.message());
    }

    private static int destroyed()
    {
        try
        {
            return standIn.destroyed();
        }
        catch (final Throwable t)
        {
            throw new AssertionError(t);
        }
    }

    private static void write(final UnixSocket socket, final Arena arena, final long id, final Message.Request request)
    {
        final byte[] bytes = RawClient.encode(id, request);
        final MemorySegment out = arena.allocate(bytes.length);
        MemorySegment.copy(bytes, 0, out, JAVA_BYTE, 0, bytes.length);
        socket.writeFully(out, 0, bytes.length);
    }

    private static String link(final int fd) throws IOException
    {
        return Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString().replace(" (deleted)", "");
    }

    private static int commandFileDescriptors()
    {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd")))
        {
            return (int)fds.filter(fd ->
            {
                try
                {
                    return Files.readSymbolicLink(fd).toString().startsWith(COMMAND_FILE);
                }
                catch (final IOException ex)
                {
                    return false;
                }
            }).count();
        }
        catch (final IOException ex)
        {
            throw new AssertionError(ex);
        }
    }
}
