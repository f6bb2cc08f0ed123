package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.SeqLock;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static io.mrd.primary.DaemonSettings.CACHE_CAPACITY;
import static io.mrd.primary.server.ServerFixture.SEGMENT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link ExistingMrReply}: a CREATE_MR whose whole buffer the global cache holds is answered on the event loop
 * (counted in {@link MrdCounter#CREATES_ON_EVENT_LOOP}), with the bytes a worker sends; misses, a write in
 * progress, an overflowed cache, straddling buffers and bad fields go to a worker and are answered as before.
 */
class ExistingMrReplyTest
{
    private static final long BASE = BaseAddresses.next();

    @TempDir
    Path dir;

    private ServerFixture fixture;

    @AfterEach
    void stop()
    {
        if (null != fixture)
        {
            fixture.close();
        }
    }

    @Test
    void aCreateOfAnExistingMrIsAnsweredOnTheEventLoopWithTheWorkersBytes()
    {
        fixture = new ServerFixture(dir, BASE);
        try (RawClient client = fixture.connect(); RawClient other = fixture.connect())
        {
            client.hello("cached");
            other.hello("other");
            final Message.Allocated a = allocate(client, 2, 2 * SEGMENT);
            final long requests = fixture.counter(MrdCounter.CREATE_REQUESTS);

            final Message.Reply created = client.request(3, new Message.CreateMr(a.address() + 64, 4096));
            assertEquals(ErrorCode.OK, created.status(), created::message);
            assertEquals(0, onEventLoop(), "the miss registered on a worker");
            assertEquals(requests + 1, fixture.counter(MrdCounter.CREATE_REQUESTS));

            final Message.Reply again = client.request(4, new Message.CreateMr(a.address() + 64, 4096));
            assertEquals(1, onEventLoop(), "the hit answered on the event loop");
            assertEquals(requests + 2, fixture.counter(MrdCounter.CREATE_REQUESTS), "counted as a create request");
            assertArrayEquals(RawClient.encode(4, created), RawClient.encode(4, again), "the worker's bytes");

            // The whole MR, from another client: CREATE_MR has no owner check on either path.
            final Message.Reply whole = other.request(5, new Message.CreateMr(a.address(), 2 * SEGMENT));
            assertEquals(2, onEventLoop());
            assertArrayEquals(RawClient.encode(5, created), RawClient.encode(5, whole));
            assertEquals(1, fixture.counter(MrdCounter.MRS_CREATED), "registered once");
        }
    }

    @Test
    void whileAWriteIsInProgressAWorkerAnswers()
    {
        fixture = new ServerFixture(dir, BASE);
        try (RawClient client = fixture.connect())
        {
            client.hello("writer");
            final Message.Allocated a = allocate(client, 2, SEGMENT);
            final Message.Reply created = client.request(3, new Message.CreateMr(a.address(), 64));
            assertEquals(ErrorCode.OK, created.status(), created::message);

            // The write side, as the engine's writer holds it. Nothing else writes meanwhile: a worker answers an
            // existing MR from the engine's own lookup, under its cache lock, without a write section.
            final SeqLock seqLock = fixture.daemon.controlFile().seqLock();
            final Message.Reply duringWrite;
            seqLock.beginWrite();
            try
            {
                duringWrite = client.request(4, new Message.CreateMr(a.address(), 64));
            }
            finally
            {
                seqLock.endWrite();
            }
            assertEquals(0, onEventLoop(), "a write in progress sends the request to a worker");
            assertArrayEquals(RawClient.encode(4, created), RawClient.encode(4, duringWrite));

            final Message.Reply after = client.request(5, new Message.CreateMr(a.address(), 64));
            assertEquals(1, onEventLoop(), "the event loop answers once the write is over");
            assertArrayEquals(RawClient.encode(5, created), RawClient.encode(5, after));
        }
    }

    @Test
    void straddlingBuffersMissesAndBadFieldsGoToAWorkerAndAreAnsweredAsBefore()
    {
        fixture = new ServerFixture(dir, BASE);
        try (RawClient client = fixture.connect())
        {
            client.hello("worker");
            final Message.Allocated a = allocate(client, 2, SEGMENT);
            assertEquals(ErrorCode.OK, client.request(3, new Message.CreateMr(a.address(), SEGMENT)).status());
            final Message.Allocated b = allocate(client, 4, SEGMENT);
            assertEquals(a.address() + SEGMENT, b.address());
            final Message.Reply second = client.request(5, new Message.CreateMr(b.address(), SEGMENT));
            assertEquals(ErrorCode.OK, second.status(), second::message);
            assertEquals(0, onEventLoop());

            // The start is in a's MR, the end in b's.
            final long start = b.address() - 4096;
            final Message.Reply straddles = client.request(6, new Message.CreateMr(start, 8192));
            assertEquals(ErrorCode.EINVAL, straddles.status());
            assertEquals(MessageType.CREATE_MR, straddles.type());
            assertEquals("buffer [" + Sizes.hex(start) + ", " + Sizes.hex(start + 8192) + ") straddles two MRs: " +
                "the chunk holding its start ends at " + Sizes.hex(b.address()) + "; split the buffer at " +
                Sizes.hex(b.address()), straddles.message());
            // One byte past the end of the last MR: nothing after it is even allocated.
            final Message.Reply pastTheEnd = client.request(7, new Message.CreateMr(b.address(), SEGMENT + 1));
            assertEquals(ErrorCode.EINVAL, pastTheEnd.status());
            assertTrue(pastTheEnd.message().contains("split the buffer at " + Sizes.hex(b.address() + SEGMENT)),
                pastTheEnd.message());
            final Message.Reply negative = client.request(8, new Message.CreateMr(a.address(), -1));
            assertEquals(ErrorCode.EINVAL, negative.status());
            assertTrue(negative.message().contains("the length not negative"), negative.message());
            final Message.Reply wraps = client.request(9, new Message.CreateMr(a.address(), Long.MAX_VALUE));
            assertEquals(ErrorCode.EINVAL, wraps.status());
            assertTrue(wraps.message().contains("the end must not wrap"), wraps.message());
            final Message.Reply outside = client.request(10, new Message.CreateMr(0x1000, 8));
            assertEquals(ErrorCode.ENXIO, outside.status());
            assertEquals(0, onEventLoop(), "none of them was answered on the event loop");

            // A miss: allocated, not registered; the worker registers it.
            final Message.Allocated c = allocate(client, 11, SEGMENT);
            final long mrs = fixture.counter(MrdCounter.MRS_CREATED);
            final Message.MrCreated third = assertInstanceOf(Message.MrCreated.class,
                client.request(12, new Message.CreateMr(c.address(), 64)));
            assertEquals(ErrorCode.OK, third.status(), third::message);
            assertEquals(c.address(), third.start());
            assertEquals(mrs + 1, fixture.counter(MrdCounter.MRS_CREATED));
            assertEquals(0, onEventLoop());
        }
    }

    @Test
    void anOverflowedCacheSendsEveryCreateToAWorker()
    {
        fixture = new ServerFixture(dir, BASE, context -> context.set(CACHE_CAPACITY, 2));
        try (RawClient client = fixture.connect())
        {
            client.hello("overflow");
            final List<Long> addresses = new ArrayList<>();
            final List<Message.Reply> replies = new ArrayList<>();
            long correlationId = 2;
            // Each allocation after the previous one's MR exists gets an MR of its own: one cache entry each.
            while (!fixture.daemon.controlFile().header().cacheOverflow())
            {
                assertTrue(addresses.size() < 8, "the cache of capacity 2 overflows within 8 MRs");
                final Message.Allocated next = allocate(client, correlationId++, SEGMENT);
                final Message.Reply created = client.request(correlationId++, new Message.CreateMr(next.address(), 64));
                assertEquals(ErrorCode.OK, created.status(), created::message);
                addresses.add(next.address());
                replies.add(created);
            }
            assertEquals(1, fixture.counter(MrdCounter.CACHE_OVERFLOWS));
            for (int i = 0; i < addresses.size(); i++)
            {
                final Message.Reply again = client.request(100 + i, new Message.CreateMr(addresses.get(i), 64));
                assertArrayEquals(RawClient.encode(1, replies.get(i)), RawClient.encode(1, again),
                    "MR " + i + " found by the worker's scan of the MR table");
            }
            assertEquals(0, onEventLoop(), "an overflowed cache is never answered on the event loop");
        }
    }

    @Test
    void externalMemoryIsAnsweredOnTheEventLoopAndNotCountedAsACreateRequest()
    {
        fixture = new ServerFixture(dir, BASE);
        final long length = 2 * Sizes.MIB;
        final int memfd = Posix.memfdCreate("mrd-cached-create-test", Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING);
        try (RawClient client = fixture.connect())
        {
            Posix.ftruncate(memfd, length);
            client.hello("external");
            final Message.Reply sendFd = client.request(2, new Message.RegExternal(length, 0));
            assertEquals(MessageType.SEND_FD, sendFd.type(), sendFd::message);
            client.sendFd(memfd);
            final Frame frame = client.receive();
            final Message.ExternalRegistered registered = assertInstanceOf(Message.ExternalRegistered.class,
                frame.message(), () -> frame.message().toString());
            final long requests = fixture.counter(MrdCounter.CREATE_REQUESTS);

            final Message.MrCreated created = assertInstanceOf(Message.MrCreated.class,
                client.request(3, new Message.CreateMr(registered.address() + 100, 1000)));
            assertEquals(registered.lkey(), created.lkey());
            assertEquals(1, onEventLoop());
            assertEquals(requests, fixture.counter(MrdCounter.CREATE_REQUESTS), "as a worker counts external memory");
            final Message.Reply beyond = client.request(4, new Message.CreateMr(registered.address(), length + 1));
            assertEquals(ErrorCode.EINVAL, beyond.status(), "the whole buffer must lie in the registration");
            assertEquals(1, onEventLoop());
        }
        finally
        {
            Posix.close(memfd);
        }
    }

    @Test
    void aCreateBeforeHelloIsAProtocolErrorEvenForAnExistingMr()
    {
        fixture = new ServerFixture(dir, BASE);
        final long address;
        try (RawClient client = fixture.connect())
        {
            client.hello("owner");
            address = allocate(client, 2, SEGMENT).address();
            assertEquals(ErrorCode.OK, client.request(3, new Message.CreateMr(address, 64)).status());
            try (RawClient stranger = fixture.connect())
            {
                final Message.Reply reply = stranger.request(1, new Message.CreateMr(address, 64));
                assertEquals(ErrorCode.EPROTO, reply.status());
                assertTrue(reply.message().contains("expected HELLO version " + FrameDescriptor.PROTOCOL_VERSION),
                    reply.message());
                stranger.awaitClosed();
            }
            assertEquals(0, onEventLoop());
            assertNotEquals(0, fixture.counter(MrdCounter.PROTOCOL_ERRORS));
        }
    }

    private long onEventLoop()
    {
        return fixture.counter(MrdCounter.CREATES_ON_EVENT_LOOP);
    }

    private static Message.Allocated allocate(final RawClient client, final long correlationId, final long length)
    {
        final Message.Allocated allocated = assertInstanceOf(Message.Allocated.class,
            client.request(correlationId, new Message.Alloc(length, 0)));
        assertEquals(ErrorCode.OK, allocated.status(), allocated::message);
        return allocated;
    }
}
