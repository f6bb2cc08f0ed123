package io.mrd.primary.server;

import io.mrd.layout.Access;
import io.mrd.layout.ClientDescriptor;
import io.mrd.layout.ClientRecord;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;

import static io.mrd.primary.server.ServerFixture.SEGMENT;
import static io.mrd.primary.server.ServerFixture.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The socket server against a real in-process daemon and a raw client: the requests of DESIGN §7, their
 * errors, and what a closed connection and STOP do.
 */
class MrdServerTest
{
    private static final long BASE = BaseAddresses.next();

    @TempDir
    Path dir;

    private ServerFixture fixture;

    @BeforeEach
    void start()
    {
        fixture = new ServerFixture(dir, BASE);
    }

    @AfterEach
    void stop()
    {
        fixture.close();
    }

    @Test
    void welcomeCarriesClientIdEpochLayoutVersionAndControlFile() throws Exception
    {
        assertEquals("rw-rw----", PosixFilePermissions.toString(Files.getPosixFilePermissions(fixture.socket())));
        try (RawClient first = fixture.connect(); RawClient second = fixture.connect())
        {
            final Message.Welcome welcome = first.hello("worker-a");
            assertEquals(1, welcome.clientId());
            assertEquals(fixture.daemon.controlFile().header().epoch(), welcome.epoch());
            assertEquals(HeaderDescriptor.LAYOUT_VERSION, welcome.layoutVersion());
            assertEquals(dir.resolve(ControlFile.FILE_NAME).toAbsolutePath().toString(), welcome.controlFile());
            assertEquals(2, second.hello("worker-b").clientId());

            assertEquals(2, fixture.daemon.server().connectedClients());
            assertEquals(2, fixture.counter(MrdCounter.CLIENTS_CONNECTED));
            assertEquals(2, fixture.counter(MrdCounter.CLIENTS_TOTAL));
            final ControlFile ctl = fixture.daemon.controlFile();
            final ClientRecord record = new ClientRecord().wrap(ctl.buffer(), ctl.layout().clientOffset(0));
            assertEquals(ClientDescriptor.STATE_CONNECTED, record.state());
            assertEquals(1, record.id());
            assertEquals(ProcessHandle.current().pid(), record.pid());
            assertEquals(Posix.getuid(), record.uid());
            assertEquals("worker-a", record.name());
        }
        await("both clients gone", () -> fixture.daemon.server().connectedClients() == 0);
        assertEquals(0, fixture.counter(MrdCounter.CLIENTS_CONNECTED));
    }

    @Test
    void requestBeforeHelloIsAProtocolError()
    {
        try (RawClient client = fixture.connect())
        {
            client.send(42, new Message.CreateMr(BASE, 64));
            final Frame frame = client.receive();
            assertEquals(42, frame.correlationId());
            final Message.Status status = assertInstanceOf(Message.Status.class, frame.message());
            assertEquals(MessageType.CREATE_MR, status.type());
            assertEquals(ErrorCode.EPROTO, status.status());
            assertContains(status.message(), "expected HELLO version " + FrameDescriptor.PROTOCOL_VERSION);
            client.awaitClosed();
        }
        assertEquals(1, fixture.counter(MrdCounter.PROTOCOL_ERRORS));
    }

    @Test
    void helloOfAnotherVersionIsRefused()
    {
        try (RawClient client = fixture.connect())
        {
            final Message.Reply reply = client.request(3, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION + 1, "x"));
            assertEquals(ErrorCode.EPROTO, reply.status());
            assertContains(reply.message(), "expected HELLO version " + FrameDescriptor.PROTOCOL_VERSION +
                ", got version " + (FrameDescriptor.PROTOCOL_VERSION + 1));
            client.awaitClosed();
        }
    }

    /**
     * {@code close()} stops the workers while the event loop may still read a connection it has not closed yet
     * (as in {@code mrd restart} under load): an ALLOC read then is left unanswered, so that the client, seeing
     * the connection end with it in flight, sends it again to the successor; a STOP, which no client sends again,
     * is refused. A HELLO sent twice after them is answered on the event loop, in order, so its reply coming
     * right after the STOP's shows that the ALLOC got none (its protocol error then ends the connection).
     */
    @Test
    void aRequestTheClosingServerCanNoLongerRunIsLeftUnansweredForASuccessor() throws Exception
    {
        try (RawClient client = fixture.connect())
        {
            client.hello("late");
            final MrdServer server = fixture.daemon.server();
            server.stopAccepting();
            server.stopWorkers();
            client.send(6, new Message.Stop(false));
            client.send(7, new Message.Alloc(SEGMENT, Access.LOCAL, false));
            client.send(8, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "again"));
            final Frame stop = client.receive();
            assertEquals(6, stop.correlationId());
            final Message.Status refused = assertInstanceOf(Message.Status.class, stop.message());
            assertEquals(ErrorCode.EAGAIN, refused.status());
            assertContains(refused.message(), "the daemon is shutting down");
            final Frame next = client.receive();
            assertEquals(8, next.correlationId(), () -> "the ALLOC was answered: " + next.message());
            assertEquals(ErrorCode.EPROTO, assertInstanceOf(Message.Status.class, next.message()).status());
            client.awaitClosed();
        }
        assertEquals(0, fixture.counter(MrdCounter.BYTES_ALLOCATED), "the ALLOC left unanswered did not run");
    }

    @Test
    void allocatedMemoryGetsAnLkeyThatTheGlobalCacheAgreesWith()
    {
        try (RawClient client = fixture.connect())
        {
            client.hello("alloc");
            final Message.Allocated allocated = assertInstanceOf(Message.Allocated.class,
                client.request(10, new Message.Alloc(3 * SEGMENT, 0)));
            assertEquals(ErrorCode.OK, allocated.status());
            assertEquals(BASE, allocated.address());
            assertEquals(3 * SEGMENT, allocated.length());

            final Message.MrCreated created = assertInstanceOf(Message.MrCreated.class,
                client.request(11, new Message.CreateMr(allocated.address() + 4096, SEGMENT)));
            assertEquals(ErrorCode.OK, created.status(), created::message);
            assertEquals(BASE, created.start());
            assertEquals(BASE + 3 * SEGMENT, created.end());

            final MrEntry entry = new MrEntry();
            assertTrue(new GlobalCacheReader(fixture.daemon.controlFile()).lookup(BASE + SEGMENT, entry));
            assertEquals(created.lkey(), entry.lkey);
            assertEquals(created.start(), entry.start);
            assertEquals(created.end(), entry.end);

            final Message.Reply freed = client.request(12, new Message.Free(allocated.address(), allocated.length()));
            assertEquals(ErrorCode.OK, freed.status(), freed::message);
            assertEquals(MessageType.FREE, freed.type());
            assertEquals(0, fixture.daemon.memory().bytesAllocated());
            assertFalse(new GlobalCacheReader(fixture.daemon.controlFile()).lookup(BASE + SEGMENT, entry));
        }
    }

    @Test
    void allocationAccessGoesIntoItsMrAndOnlyRemoteAccessGetsAnRkey()
    {
        try (RawClient client = fixture.connect())
        {
            client.hello("access");
            final int remote = Access.LOCAL_WRITE | Access.REMOTE_WRITE | Access.REMOTE_READ;
            final Message.Allocated local = assertInstanceOf(Message.Allocated.class,
                client.request(2, new Message.Alloc(SEGMENT, 0)));
            assertEquals(Access.LOCAL_WRITE, local.access(), "0 asks for local access only");
            final Message.Allocated shared = assertInstanceOf(Message.Allocated.class,
                client.request(3, new Message.Alloc(SEGMENT, Access.REMOTE_WRITE | Access.REMOTE_READ)));
            assertEquals(remote, shared.access(), "local write is added");
            assertEquals(local.address() + SEGMENT, shared.address(), "the two are neighbours");

            final Message.MrCreated sharedMr = assertInstanceOf(Message.MrCreated.class,
                client.request(4, new Message.CreateMr(shared.address(), 64)));
            assertEquals(ErrorCode.OK, sharedMr.status(), sharedMr::message);
            assertEquals(remote, sharedMr.access());
            assertNotEquals(Access.NO_RKEY, sharedMr.rkey());
            assertEquals(shared.address(), sharedMr.start(), "the MR stops where the local neighbour starts");
            final Message.MrCreated localMr = assertInstanceOf(Message.MrCreated.class,
                client.request(5, new Message.CreateMr(local.address(), 64)));
            assertEquals(Access.LOCAL_WRITE, localMr.access());
            assertEquals(Access.NO_RKEY, localMr.rkey(), "no rkey for memory nobody let peers reach");
            assertEquals(shared.address(), localMr.end());

            final MrEntry entry = new MrEntry();
            assertTrue(new GlobalCacheReader(fixture.daemon.controlFile()).lookup(shared.address() + 64, entry));
            assertEquals(sharedMr.rkey(), entry.rkey, "the global cache carries the rkey");
            assertEquals(remote, entry.access);

            final Message.Reply unknown = client.request(6, new Message.Alloc(SEGMENT, 0x30 | Access.REMOTE_READ));
            assertEquals(ErrorCode.EINVAL, unknown.status());
            assertTrue(unknown.message().contains("ALLOC access 0x34 has unknown bits 0x30"), unknown.message());
            assertEquals(2 * SEGMENT, fixture.daemon.memory().bytesAllocated(), "nothing allocated for it");
            assertEquals(ErrorCode.OK, client.request(7, new Message.Alloc(SEGMENT, 0)).status(),
                "the connection goes on");
        }
    }

    @Test
    void requestsInFlightTogetherAreAnsweredByCorrelationId()
    {
        try (RawClient client = fixture.connect())
        {
            client.hello("pipeline");
            final Message.Allocated a = assertInstanceOf(Message.Allocated.class,
                client.request(2, new Message.Alloc(SEGMENT, 0)));
            final byte[] both = concat(RawClient.encode(100, new Message.CreateMr(a.address(), 64)),
                RawClient.encode(200, new Message.Alloc(2 * SEGMENT, 0)),
                RawClient.encode(300, new Message.CreateMr(0x1000, 8)));
            client.sendRaw(both);
            final Map<Long, Message> replies = new HashMap<>();
            for (int i = 0; i < 3; i++)
            {
                final Frame frame = client.receive();
                replies.put(frame.correlationId(), frame.message());
            }
            assertEquals(Set.of(100L, 200L, 300L), replies.keySet());
            assertEquals(ErrorCode.OK, assertInstanceOf(Message.MrCreated.class, replies.get(100L)).status());
            assertEquals(ErrorCode.OK, assertInstanceOf(Message.Allocated.class, replies.get(200L)).status());
            assertEquals(ErrorCode.ENXIO, ((Message.Reply)replies.get(300L)).status());
        }
    }

    @Test
    void aBufferStraddlingTwoMrsIsRefusedWithWhereToSplitIt()
    {
        try (RawClient client = fixture.connect())
        {
            client.hello("straddle");
            final Message.Allocated a = assertInstanceOf(Message.Allocated.class,
                client.request(2, new Message.Alloc(SEGMENT, 0)));
            assertEquals(ErrorCode.OK, client.request(3, new Message.CreateMr(a.address(), SEGMENT)).status());
            final Message.Allocated b = assertInstanceOf(Message.Allocated.class,
                client.request(4, new Message.Alloc(SEGMENT, 0)));
            assertEquals(a.address() + SEGMENT, b.address());
            final Message.MrCreated second = assertInstanceOf(Message.MrCreated.class,
                client.request(5, new Message.CreateMr(b.address(), SEGMENT)));
            assertEquals(b.address(), second.start());

            final long start = b.address() - 4096;
            final Message.Reply reply = client.request(6, new Message.CreateMr(start, 8192));
            assertEquals(ErrorCode.EINVAL, reply.status());
            assertEquals(MessageType.CREATE_MR, reply.type());
            assertEquals("buffer [" + Sizes.hex(start) + ", " + Sizes.hex(start + 8192) + ") straddles two MRs: " +
                "the chunk holding its start ends at " + Sizes.hex(b.address()) + "; split the buffer at " +
                Sizes.hex(b.address()), reply.message());

            final Message.Reply negative = client.request(7, new Message.CreateMr(a.address(), -1));
            assertEquals(ErrorCode.EINVAL, negative.status());
        }
    }

    @Test
    void addressesOutsideManagedMemoryAreRefusedEnxioAndNothingIsPinned()
    {
        try (RawClient client = fixture.connect())
        {
            client.hello("outside");
            final long listLength = 32 * Sizes.MIB;
            for (final long address : new long[]{0x1000, BASE - 4096, BASE + listLength + 4096,
                BASE + MemoryManager.listStride(16, SEGMENT) * 2 + 4096})
            {
                final Message.Reply reply = client.request(address, new Message.CreateMr(address, 8));
                assertEquals(ErrorCode.ENXIO, reply.status(), () -> Sizes.hex(address) + ": " + reply.message());
                assertContains(reply.message(), Sizes.hex(address));
            }
            // allocated memory that is free again is no longer managed either
            final Message.Allocated a = assertInstanceOf(Message.Allocated.class,
                client.request(2, new Message.Alloc(SEGMENT, 0)));
            assertEquals(ErrorCode.OK, client.request(3, new Message.Free(a.address(), a.length())).status());
            assertEquals(ErrorCode.ENXIO, client.request(4, new Message.CreateMr(a.address(), 8)).status());
            assertEquals(0, fixture.counter(MrdCounter.BYTES_PINNED));
            assertEquals(0, fixture.counter(MrdCounter.MRS_ACTIVE));

            final Message.Reply access = client.request(5, new Message.Alloc(SEGMENT, 0x10000));
            assertEquals(ErrorCode.EINVAL, access.status());
            final Message.Reply tooBig = client.request(6, new Message.Alloc(Sizes.GIB, 0));
            assertEquals(ErrorCode.ENOMEM, tooBig.status());
            final Message.Reply notMine = client.request(7, new Message.Free(BASE + 7, SEGMENT));
            assertEquals(ErrorCode.EINVAL, notMine.status());
        }
    }

    @Test
    void closingAConnectionFreesItsMemoryAndItsMrs()
    {
        final long address;
        try (RawClient client = fixture.connect())
        {
            client.hello("dies");
            final Message.Allocated a = assertInstanceOf(Message.Allocated.class,
                client.request(2, new Message.Alloc(4 * SEGMENT, 0)));
            address = a.address();
            final Message.Allocated b = assertInstanceOf(Message.Allocated.class,
                client.request(3, new Message.Alloc(SEGMENT, 0)));
            assertEquals(ErrorCode.OK, client.request(4, new Message.CreateMr(address, 64)).status());
            assertEquals(ErrorCode.OK, client.request(5, new Message.CreateMr(b.address(), 64)).status());
            assertEquals(5 * SEGMENT, fixture.daemon.memory().bytesAllocated());
            assertTrue(fixture.counter(MrdCounter.BYTES_PINNED) > 0);
        }
        await("memory reclaimed", () -> fixture.daemon.memory().bytesAllocated() == 0 &&
            fixture.daemon.server().connectedClients() == 0);
        assertEquals(0, fixture.counter(MrdCounter.MRS_ACTIVE));
        assertEquals(0, fixture.counter(MrdCounter.BYTES_PINNED));
        assertEquals(0, fixture.counter(MrdCounter.BYTES_ALLOCATED));
        assertFalse(fixture.daemon.engine().lookup(address, new MrEntry()));
        final ControlFile ctl = fixture.daemon.controlFile();
        assertEquals(ClientDescriptor.STATE_FREE,
            new ClientRecord().wrap(ctl.buffer(), ctl.layout().clientOffset(0)).state());

        // the memory can be allocated again by the next client
        try (RawClient client = fixture.connect())
        {
            assertEquals(2, client.hello("next").clientId());
            final Message.Allocated again = assertInstanceOf(Message.Allocated.class,
                client.request(2, new Message.Alloc(4 * SEGMENT, 0)));
            assertEquals(address, again.address());
        }
    }

    @Test
    void stopClosesTheDaemon() throws Exception
    {
        try (RawClient client = fixture.connect())
        {
            client.hello("stopper");
            final Message.Reply reply = client.request(9, new Message.Stop());
            assertEquals(ErrorCode.OK, reply.status());
            assertEquals(MessageType.STOP, reply.type());
            client.awaitClosed();
        }
        assertTrue(fixture.daemon.awaitClosed(ServerFixture.WAIT.toSeconds(), java.util.concurrent.TimeUnit.SECONDS));
        assertFalse(Files.exists(fixture.socket()));
        assertFalse(Files.exists(dir.resolve(ControlFile.FILE_NAME)));
    }

    static void assertContains(final String actual, final String expected)
    {
        assertTrue(null != actual && actual.contains(expected), () -> "expected \"" + actual + "\" to contain \"" +
            expected + "\"");
    }

    static byte[] concat(final byte[]... parts)
    {
        int length = 0;
        for (final byte[] part : parts)
        {
            length += part.length;
        }
        final byte[] all = new byte[length];
        int at = 0;
        for (final byte[] part : parts)
        {
            System.arraycopy(part, 0, all, at, part.length);
            at += part.length;
        }
        return all;
    }
}
