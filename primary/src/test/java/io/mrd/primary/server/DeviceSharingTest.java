package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.DaemonConnection;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.secondary.ReplyReader;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.QueueReporter;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.testing.BaseAddresses;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.LiveObjects;
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
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static io.mrd.primary.DaemonSettings.IBVERBS_LIBRARY;
import static io.mrd.primary.DaemonSettings.PROVIDER;
import static io.mrd.primary.server.ServerFixture.await;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * IMPORT_PD and QUEUES against an in-process daemon on the emulated device (whose context's command file is the
 * context's holder file, {@code <MRDEMU_DIR>/mrdemu0.ctx-<id>}; the test's own imports stand for other processes'),
 * and against a soft daemon, which has no device to share.
 */
class DeviceSharingTest
{
    private static final long BASE = BaseAddresses.next();
    /** The emulated device's holder file of a context (emulator/src/context.c). */
    private static final Pattern COMMAND_FILE = Pattern.compile(".*/mrdemu0\\.ctx-[0-9]+");

    @TempDir
    Path dir;

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
                "none: start it with --provider ibverbs (on a host without an RDMA NIC, on the emulated device " +
                "(build it with 'scripts/mrd emulator', which prints its path, emulator/target/libmrdemu.so, and set " +
                "MRD_IBVERBS_LIBRARY to that path for the daemon and every worker))", importPd.message());
            final Message.Reply queues = client.request(3, new Message.Queues(Message.Queues.ADD, Message.Queues.QP, 1));
            assertEquals(ErrorCode.EOPNOTSUPP, queues.status());
            assertTrue(queues.message().startsWith("QUEUES needs the daemon's RDMA device"), queues.message());
        }
    }

    @Test
    void importPdAnswersThePdHandleWithADescriptorOfTheCommandFileAndTheDaemonKeepsNoDuplicate()
    {
        try (ServerFixture fixture = ibverbsDaemon(); DaemonConnection connection = connect(fixture))
        {
            assertEquals(1, commandFileDescriptors(), "the context's cmd_fd, in this JVM where the daemon runs");
            final List<Verbs> imports = new ArrayList<>();
            try
            {
                for (int i = 0; i < 3; i++)
                {
                    final DaemonConnection.Answer answer = connection.callForFd(new Message.ImportPd());
                    final Message.PdImported imported = assertInstanceOf(Message.PdImported.class, answer.reply());
                    assertEquals(EmulatedDevice.DEVICE_NAME, imported.device());
                    assertTrue(COMMAND_FILE.matcher(link(answer.fd())).matches(), link(answer.fd()));
                    // the device refuses a PD handle it does not know: importing is the check
                    imports.add(Verbs.importDevice(EmulatedDevice.library().toString(), answer.fd(),
                        imported.pdHandle(), imported.device(), QueueReporter.NONE, DaemonLiveness.UNWATCHED));
                }
                // the daemon closes each duplicate right after the send, maybe after the client read it
                await("the daemon closed its duplicates", () -> commandFileDescriptors() == 1 + imports.size());
            }
            finally
            {
                imports.forEach(Verbs::close);
            }
            assertEquals(1, commandFileDescriptors(), "the imported contexts closed their descriptors");
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
                assertTrue(COMMAND_FILE.matcher(link(fds.get(importId))).matches(), link(fds.get(importId)));
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
    void theQueuesOfAGoneClientAreDestroyedQueuePairsFirstAndOnlyThoseItReported()
    {
        final List<Verbs> opened = new ArrayList<>();
        try (ServerFixture fixture = ibverbsDaemon(); RawClient other = fixture.connect())
        {
            other.hello("other");
            final Verbs verbs;
            final int ownerId;
            final LiveObjects before;
            final Path library = EmulatedDevice.library();
            try (DaemonConnection owner = connect(fixture))
            {
                ownerId = 2; // after "other", client 1
                final DaemonConnection.Answer answer = owner.callForFd(new Message.ImportPd());
                verbs = Verbs.importDevice(library.toString(), answer.fd(),
                    ((Message.PdImported)answer.reply()).pdHandle(), EmulatedDevice.DEVICE_NAME,
                    (operation, kind, handle) -> owner.call(new Message.Queues(operation, kind, handle)),
                    DaemonLiveness.UNWATCHED);
                opened.add(verbs);
                before = LiveObjects.of(library, verbs.context());
                final CompletionQueue cq = verbs.createCq(16);
                final QueuePair qp = verbs.createRcQp(cq, cq, QpCaps.of(8, 1));
                final CompletionQueue closed = verbs.createCq(4);
                closed.close();
                assertEquals(2, fixture.daemon.server().reportedQueues(), "the CQ closed was removed");

                final MrdException twice = assertThrows(MrdException.class,
                    () -> owner.call(queues(Message.Queues.ADD, Message.Queues.QP, qp.handle())));
                assertEquals(ErrorCode.EEXIST, twice.code());
                assertEquals("QP handle " + qp.handle() + " was reported already by this client: report each queue " +
                    "once, after creating it", twice.getMessage());
                refused(other.request(2, queues(Message.Queues.ADD, Message.Queues.QP, qp.handle())),
                    ErrorCode.EEXIST, "QP handle " + qp.handle() + " was reported already by client " + ownerId +
                    ": report each queue once, after creating it");
                refused(other.request(3, queues(Message.Queues.REMOVE, Message.Queues.QP, qp.handle())),
                    ErrorCode.EINVAL, "QP handle " + qp.handle() + " is not a queue this client reported: " +
                    "remove only what it added");
                refused(other.request(4, queues(Message.Queues.ADD, 3, 5)), ErrorCode.EINVAL,
                    "QUEUES kind 3 is unknown: send 1 for a completion queue or 2 for a queue pair");
                refused(other.request(5, queues(9, Message.Queues.QP, 5)), ErrorCode.EINVAL,
                    "QUEUES operation 9 is unknown: send 1 after creating a queue or 2 before destroying it");
                // a handle that names no live queue is refused when reported: a handle is an index anyone can name
                refused(other.request(6, queues(Message.Queues.ADD, Message.Queues.QP, 0xBAD)), ErrorCode.EINVAL,
                    "QP handle " + 0xBAD + " names no live queue of " + EmulatedDevice.DEVICE_NAME + ": report a " +
                    "queue after creating it and remove it before destroying it");
                assertEquals(new LiveObjects(before.pds(), before.mrs(), before.cqs() + 1, before.qps() + 1),
                    LiveObjects.of(library, verbs.context()));
            }
            // the owner's connection ended without destroying its queues, as a killed process's does
            await("the owner's queues destroyed", () -> LiveObjects.of(library, verbs.context()).equals(before));
            assertEquals(0, fixture.daemon.server().reportedQueues(), "the other client reported nothing it may keep");
            other.close();
            await("the other client reclaimed", () -> fixture.daemon.server().connectedClients() == 0);
            assertEquals(0, fixture.daemon.server().reportedQueues());
            assertEquals(before, LiveObjects.of(library, verbs.context()));
        }
        finally
        {
            // even when an assertion failed: an import left open keeps a descriptor the next test counts
            opened.forEach(Verbs::close);
        }
    }

    private ServerFixture ibverbsDaemon()
    {
        return new ServerFixture(dir, BASE, context -> context.set(PROVIDER, "ibverbs")
            .set(IBVERBS_LIBRARY, EmulatedDevice.library().toString()));
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

    private static void write(final UnixSocket socket, final Arena arena, final long id, final Message.Request request)
    {
        final byte[] bytes = RawClient.encode(id, request);
        final MemorySegment out = arena.allocate(bytes.length);
        MemorySegment.copy(bytes, 0, out, JAVA_BYTE, 0, bytes.length);
        socket.writeFully(out, 0, bytes.length);
    }

    private static String link(final int fd)
    {
        try
        {
            return Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString().replace(" (deleted)", "");
        }
        catch (final IOException ex)
        {
            throw new AssertionError(ex);
        }
    }

    private static int commandFileDescriptors()
    {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd")))
        {
            return (int)fds.filter(fd ->
            {
                try
                {
                    return COMMAND_FILE.matcher(Files.readSymbolicLink(fd).toString()).matches();
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
