package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;

import static io.mrd.primary.DaemonSettings.MAX_CLIENTS;
import static io.mrd.primary.server.MrdServerTest.assertContains;
import static io.mrd.primary.server.ServerFixture.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

/**
 * Hostile and broken input: every malformed frame gets EPROTO and its connection closed, is counted, and the
 * daemon goes on serving; limits give clean errors.
 */
class MalformedInputTest
{
    private static final long BASE = BaseAddresses.next();
    /** Request types the fuzzer puts in plausible headers: all but STOP, which would end the test. */
    private static final int[] TYPES = {1, 2, 3, 4, 5, 6, 8};

    @TempDir
    Path dir;

    private ServerFixture fixture;

    @BeforeEach
    void start()
    {
        fixture = new ServerFixture(dir, BASE, context -> context.set(MAX_CLIENTS, 2));
    }

    @AfterEach
    void stop()
    {
        fixture.close();
    }

    @Test
    void garbage()
    {
        final Message.Status status = refused("GET / HTTP/1.1\r\nHost: mrd\r\n\r\n".getBytes(StandardCharsets.US_ASCII),
            false);
        assertEquals(MessageType.ERROR, status.type());
        assertContains(status.message(), "frame length");
    }

    @Test
    void lengthBelowTheHeader()
    {
        final Message.Status status = refused(le(3), false);
        assertContains(status.message(), "frame length 3 is outside [16, 4096]");
    }

    @Test
    void lengthAboveTheLimit()
    {
        final Message.Status status = refused(le(100_000), true);
        assertContains(status.message(), "frame length 100000 is outside [16, 4096]");
    }

    @Test
    void truncatedFrameThenShutdown()
    {
        final byte[] hello = RawClient.encode(5, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "cut"));
        try (RawClient client = fixture.connect())
        {
            client.sendRaw(Arrays.copyOf(hello, 10));
            client.shutdownOutput();
            final Message.Status status = assertInstanceOf(Message.Status.class, client.receive().message());
            assertEquals(ErrorCode.EPROTO, status.status());
            assertContains(status.message(), "after 10 bytes of a frame of " + hello.length + " bytes");
            client.awaitClosed();
        }
        assertServing(1);
    }

    @Test
    void unknownType()
    {
        final byte[] frame = header(FrameDescriptor.HEADER_LENGTH, 0x42, 77);
        final Message.Status status = refused(frame, false);
        assertEquals(MessageType.ERROR, status.type());
        assertContains(status.message(), "unknown request type 66");
    }

    @Test
    void replyTypeFromAClient()
    {
        final byte[] frame = header(FrameDescriptor.HEADER_LENGTH + 4, MessageType.HELLO.replyCode(), 78);
        final Message.Status status = refused(frame, false);
        assertEquals(MessageType.ERROR, status.type());
        assertContains(status.message(), "is a reply");
    }

    @Test
    void trailingBytesNameTheRequestAndItsCorrelationId()
    {
        final byte[] good = RawClient.encode(99, new Message.CreateMr(BASE, 8));
        final byte[] frame = Arrays.copyOf(good, good.length + 3);
        ByteBuffer.wrap(frame).order(ByteOrder.LITTLE_ENDIAN).putInt(0, frame.length);
        try (RawClient client = fixture.connect())
        {
            client.hello("trailing");
            client.sendRaw(frame);
            final Frame reply = client.receive();
            assertEquals(99, reply.correlationId());
            final Message.Status status = assertInstanceOf(Message.Status.class, reply.message());
            assertEquals(MessageType.CREATE_MR, status.type());
            assertEquals(ErrorCode.EPROTO, status.status());
            assertContains(status.message(), "3 trailing bytes");
            client.awaitClosed();
        }
        assertServing(1);
    }

    @Test
    void unknownFlagsAndHelloTwice()
    {
        final byte[] flagged = RawClient.encode(4, new Message.Alloc(Sizes.MIB, 0));
        ByteBuffer.wrap(flagged).order(ByteOrder.LITTLE_ENDIAN).putShort(FrameDescriptor.FLAGS_OFFSET, (short)0x80);
        try (RawClient client = fixture.connect())
        {
            client.hello("flags");
            client.sendRaw(flagged);
            final Message.Reply reply = (Message.Reply)client.receive().message();
            assertEquals(ErrorCode.EPROTO, reply.status());
            assertContains(reply.message(), "unknown flags 0x80");
            client.awaitClosed();
        }
        try (RawClient client = fixture.connect())
        {
            client.hello("twice");
            final Message.Reply reply = client.request(2, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "again"));
            assertEquals(ErrorCode.EPROTO, reply.status());
            assertContains(reply.message(), "HELLO sent twice");
            client.awaitClosed();
        }
        assertServing(2);
    }

    @Test
    void randomBytesNeverKillTheDaemon()
    {
        final Random random = new Random(7);
        for (int i = 0; i < 50; i++)
        {
            byte[] bytes = new byte[1 + random.nextInt(300)];
            random.nextBytes(bytes);
            if (random.nextBoolean() && bytes.length >= 4)
            {
                // a plausible header, so that the codec gets to the body
                bytes = Arrays.copyOf(bytes, Math.max(FrameDescriptor.HEADER_LENGTH, bytes.length));
                ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
                    .putInt(0, bytes.length)
                    .putShort(FrameDescriptor.TYPE_OFFSET, (short)TYPES[random.nextInt(TYPES.length)])
                    .putShort(FrameDescriptor.FLAGS_OFFSET, (short)0);
            }
            try (RawClient client = fixture.connect())
            {
                if (random.nextBoolean())
                {
                    // --max-clients is 2 here and a closed client's record is released asynchronously
                    await("previous fuzz clients released", () -> fixture.daemon.server().connectedClients() == 0);
                    client.hello("fuzz-" + i);
                }
                client.sendRaw(bytes);
                client.shutdownOutput();
                client.drainUntilClosed();
            }
        }
        await("all fuzz connections gone", () -> fixture.daemon.server().openConnections() == 0);
        try (RawClient client = fixture.connect())
        {
            client.hello("after-fuzz");
            assertEquals(ErrorCode.OK, client.request(2, new Message.Alloc(Sizes.MIB, 0)).status());
        }
        await("memory of the fuzz clients reclaimed", () -> fixture.daemon.server().connectedClients() == 0 &&
            fixture.daemon.memory().bytesAllocated() == 0);
    }

    @Test
    void maxClientsIsEbusyAndFreesUpWhenOneLeaves()
    {
        try (RawClient a = fixture.connect(); RawClient b = fixture.connect())
        {
            a.hello("a");
            b.hello("b");
            try (RawClient c = fixture.connect())
            {
                final Message.Reply reply = c.request(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "c"));
                assertEquals(ErrorCode.EBUSY, reply.status());
                assertEquals(MessageType.HELLO, reply.type());
                assertContains(reply.message(), "--max-clients");
                c.awaitClosed();
            }
            a.close();
            await("a's record released", () -> fixture.daemon.server().connectedClients() == 1);
            try (RawClient d = fixture.connect())
            {
                d.hello("d");
            }
        }
    }

    /**
     * Sends the bytes on a fresh connection (after HELLO when asked), expects EPROTO and the close, then checks
     * the daemon still serves.
     */
    private Message.Status refused(final byte[] bytes, final boolean afterHello)
    {
        final Message.Status status;
        try (RawClient client = fixture.connect())
        {
            if (afterHello)
            {
                client.hello("bad");
            }
            client.sendRaw(bytes);
            final Frame frame = client.receive();
            status = assertInstanceOf(Message.Status.class, frame.message());
            assertEquals(ErrorCode.EPROTO, status.status());
            client.awaitClosed();
        }
        assertServing(1);
        return status;
    }

    private void assertServing(final long protocolErrors)
    {
        assertEquals(protocolErrors, fixture.counter(MrdCounter.PROTOCOL_ERRORS));
        await("closed clients released", () -> fixture.daemon.server().connectedClients() == 0);
        try (RawClient client = fixture.connect())
        {
            client.hello("still-serving");
            assertEquals(ErrorCode.OK, client.request(2, new Message.Alloc(Sizes.MIB, 0)).status());
        }
    }

    private static byte[] le(final int value)
    {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(value).array();
    }

    private static byte[] header(final int length, final int type, final long correlationId)
    {
        final ByteBuffer buffer = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
        buffer.putInt(length).putShort((short)type).putShort((short)0).putLong(correlationId);
        return buffer.array();
    }
}
