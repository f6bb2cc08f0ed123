package io.mrd.primary.server;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

import static io.mrd.primary.server.MrdServerTest.assertContains;
import static io.mrd.primary.server.ServerFixture.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * REG_EXTERNAL end to end with a real fd: REG_EXTERNAL, SEND_FD, one byte carrying a memfd, the registration;
 * DEREG_EXTERNAL; reclaim on close; and the ways the fd can fail to come.
 */
class ExternalRegistrationTest
{
    private static final long BASE = BaseAddresses.next();
    private static final long FILE_LENGTH = 4 * Sizes.MIB;

    @TempDir
    Path dir;

    private ServerFixture fixture;
    private int memfd = -1;
    private MemorySegment local;

    @BeforeEach
    void start()
    {
        fixture = new ServerFixture(dir, BASE);
        memfd = Posix.memfdCreate("mrd-external-test", Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING);
        Posix.ftruncate(memfd, FILE_LENGTH);
        local = Posix.map(FILE_LENGTH, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, memfd, 0);
        for (long i = 0; i < FILE_LENGTH; i += 4096)
        {
            local.set(ValueLayout.JAVA_LONG, i, i * 31 + 7);
        }
    }

    @AfterEach
    void stop()
    {
        fixture.close();
        Posix.munmap(local.address(), FILE_LENGTH);
        Posix.close(memfd);
    }

    @Test
    void registersMapsAtTheSharedAddressAndDeregisters()
    {
        final long length = 3 * Sizes.MIB + 5;
        final long externalBase = fixture.daemon.controlFile().header().externalBase();
        try (RawClient client = fixture.connect())
        {
            assertEquals(ErrorCode.OK, client.request(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "ext")).status());
            final Message.ExternalRegistered registered = register(client, 5, length);
            assertEquals(externalBase, registered.address());
            assertEquals(length, registered.length());
            assertEquals(1, fixture.counter(MrdCounter.EXTERNAL_REGISTRATIONS));

            // the daemon maps the same file at the address it replied (this test is in the daemon's process)
            final MemorySegment shared = MemorySegment.ofAddress(registered.address()).reinterpret(FILE_LENGTH);
            for (long i = 0; i < length - 8; i += 4096)
            {
                assertEquals(i * 31 + 7, shared.get(ValueLayout.JAVA_LONG, i));
            }
            final MrEntry entry = new MrEntry();
            assertTrue(new GlobalCacheReader(fixture.daemon.controlFile()).lookup(registered.address() + 100, entry));
            assertEquals(registered.lkey(), entry.lkey);

            final Message.MrCreated created = assertInstanceOf(Message.MrCreated.class,
                client.request(6, new Message.CreateMr(registered.address() + 100, 1000)));
            assertEquals(registered.lkey(), created.lkey());
            assertEquals(registered.address(), created.start());

            // a second registration goes to the next 2 MiB granule after the first's span
            final Message.ExternalRegistered second = register(client, 7, Sizes.MIB);
            assertEquals(externalBase + 4 * Sizes.MIB, second.address());

            final Message.Reply dereg = client.request(8, new Message.DeregExternal(registered.address()));
            assertEquals(ErrorCode.OK, dereg.status(), dereg::message);
            assertEquals(MessageType.DEREG_EXTERNAL, dereg.type());
            assertFalse(fixture.daemon.engine().lookup(registered.address() + 100, entry));
            assertEquals(2 * Sizes.MIB, fixture.daemon.server().externalBytesInUse());
            assertEquals(ErrorCode.ENOENT, client.request(9, new Message.DeregExternal(registered.address())).status());

            // the freed range is first fit again
            assertEquals(externalBase, register(client, 10, Sizes.MIB).address());
        }
        await("externals reclaimed on close", () -> fixture.daemon.server().externalBytesInUse() == 0 &&
            fixture.daemon.server().connectedClients() == 0);
        assertEquals(0, fixture.counter(MrdCounter.MRS_ACTIVE));
        assertEquals(0, fixture.counter(MrdCounter.BYTES_PINNED));
    }

    @Test
    void lengthsThatCannotBeRegisteredAreRefusedBeforeAnyFd()
    {
        try (RawClient client = fixture.connect())
        {
            client.request(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "ext"));
            final Message.Reply zero = client.request(2, new Message.RegExternal(0, Access.LOCAL));
            assertEquals(ErrorCode.EINVAL, zero.status());
            assertEquals(MessageType.REG_EXTERNAL, zero.type());
            final Message.Reply huge = client.request(3, new Message.RegExternal(Sizes.GIB, Access.LOCAL));
            assertEquals(ErrorCode.EINVAL, huge.status());
            assertContains(huge.message(), "--max-external");
            final Message.Reply unknown = client.request(5, new Message.RegExternal(Sizes.MIB, 0x80 | Access.REMOTE_READ));
            assertEquals(ErrorCode.EINVAL, unknown.status(), "unknown access bits are refused before any fd");
            assertEquals(MessageType.REG_EXTERNAL, unknown.type());
            assertContains(unknown.message(), "unknown bits 0x80");

            // a file shorter than the length: refused after the fd, which is closed
            final Message.Reply reply = client.request(4, new Message.RegExternal(FILE_LENGTH + 4096, Access.LOCAL));
            assertEquals(MessageType.SEND_FD, reply.type());
            client.sendFd(memfd);
            final Frame frame = client.receive();
            assertEquals(4, frame.correlationId());
            final Message.Reply shorter = (Message.Reply)frame.message();
            assertEquals(ErrorCode.EINVAL, shorter.status());
            assertContains(shorter.message(), "fewer than the");
            assertEquals(0, fixture.daemon.server().externalBytesInUse());

            // the connection goes on
            assertEquals(ErrorCode.OK, register(client, 5, Sizes.MIB).status());
        }
    }

    @Test
    void aByteWithoutAnFdIsAProtocolError()
    {
        try (RawClient client = fixture.connect())
        {
            client.request(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "nofd"));
            assertEquals(MessageType.SEND_FD, client.request(2, new Message.RegExternal(Sizes.MIB, Access.LOCAL)).type());
            client.sendRaw(new byte[]{1});
            final Frame frame = client.receive();
            assertEquals(2, frame.correlationId());
            final Message.Reply reply = (Message.Reply)frame.message();
            assertEquals(ErrorCode.EPROTO, reply.status());
            assertEquals(MessageType.REG_EXTERNAL, reply.type());
            assertContains(reply.message(), "without a file descriptor");
            client.awaitClosed();
        }
        assertEquals(1, fixture.counter(MrdCounter.PROTOCOL_ERRORS));
        assertEquals(0, fixture.daemon.server().externalBytesInUse());
    }

    @Test
    void anFdNobodyAskedForIsDroppedAndBreaksTheFrame()
    {
        try (RawClient client = fixture.connect())
        {
            client.request(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "stray"));
            client.sendFd(memfd);
            client.send(2, new Message.Alloc(Sizes.MIB, 0));
            final Message.Reply reply = (Message.Reply)client.receive().message();
            assertEquals(ErrorCode.EPROTO, reply.status());
            client.awaitClosed();
        }
        assertEquals(1, fixture.counter(MrdCounter.PROTOCOL_ERRORS));
    }

    @Test
    void externalMemoryGetsTheAccessAskedForAndAnRkeyOnlyWithRemoteAccess()
    {
        try (RawClient client = fixture.connect())
        {
            client.request(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "ext"));
            final Message.ExternalRegistered remote = register(client, 2, Sizes.MIB, Access.REMOTE_WRITE);
            assertEquals(Access.LOCAL_WRITE | Access.REMOTE_WRITE, remote.access());
            assertEquals(remote.lkey(), remote.rkey(), "the soft provider's rkey is its lkey, as mlx5's");
            final Message.ExternalRegistered local = register(client, 3, Sizes.MIB, Access.LOCAL);
            assertEquals(Access.LOCAL_WRITE, local.access());
            assertEquals(Access.NO_RKEY, local.rkey());
            final Message.MrCreated created = assertInstanceOf(Message.MrCreated.class,
                client.request(4, new Message.CreateMr(remote.address() + 64, 64)));
            assertEquals(remote.rkey(), created.rkey());
            assertEquals(remote.access(), created.access());
        }
    }

    private Message.ExternalRegistered register(final RawClient client, final long correlationId, final long length)
    {
        return register(client, correlationId, length, Access.LOCAL);
    }

    private Message.ExternalRegistered register(
        final RawClient client, final long correlationId, final long length, final int access)
    {
        final Message.Reply sendFd = client.request(correlationId, new Message.RegExternal(length, access));
        assertEquals(MessageType.SEND_FD, sendFd.type(), sendFd::message);
        assertEquals(ErrorCode.OK, sendFd.status());
        client.sendFd(memfd);
        final Frame frame = client.receive();
        assertEquals(correlationId, frame.correlationId());
        final Message.ExternalRegistered registered = assertInstanceOf(Message.ExternalRegistered.class, frame.message(),
            () -> frame.message().toString());
        assertEquals(ErrorCode.OK, registered.status());
        return registered;
    }
}
