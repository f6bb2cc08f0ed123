package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.BaseAddresses;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Stream;

import static io.mrd.primary.DaemonSettings.REGISTRATION_LATENCY;
import static io.mrd.primary.server.ServerFixture.SEGMENT;
import static io.mrd.primary.server.ServerFixture.await;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Many clients and requests at once, with slow registrations (20 ms each): creates for one range coalesce,
 * clients that vanish with requests in flight leave nothing behind, and connections opened and dropped in
 * bulk leave no fds behind.
 */
class ConcurrencyTest
{
    private static final long BASE = BaseAddresses.next();

    @TempDir
    Path dir;

    private ServerFixture fixture;

    @BeforeEach
    void start()
    {
        fixture = new ServerFixture(dir, BASE, context -> context.set(REGISTRATION_LATENCY, 20_000L));
    }

    @AfterEach
    void stop()
    {
        fixture.close();
    }

    @Test
    void concurrentCreatesForOneRangeMakeOneMr()
    {
        final long address;
        try (RawClient owner = fixture.connect())
        {
            owner.hello("owner");
            address = assertInstanceOf(Message.Allocated.class, owner.request(2, new Message.Alloc(4 * SEGMENT, 0)))
                .address();
            final List<RawClient> clients = new ArrayList<>();
            try
            {
                for (int c = 0; c < 4; c++)
                {
                    final RawClient client = fixture.connect();
                    clients.add(client);
                    client.hello("creator-" + c);
                }
                for (final RawClient client : clients)
                {
                    for (int i = 0; i < 8; i++)
                    {
                        client.send(100 + i, new Message.CreateMr(address + i * (SEGMENT / 2), 64));
                    }
                }
                final Set<Integer> lkeys = new HashSet<>();
                for (final RawClient client : clients)
                {
                    final Set<Long> ids = new HashSet<>();
                    for (int i = 0; i < 8; i++)
                    {
                        final Frame frame = client.receive();
                        ids.add(frame.correlationId());
                        final Message.MrCreated created = assertInstanceOf(Message.MrCreated.class, frame.message());
                        assertEquals(ErrorCode.OK, created.status(), created::message);
                        lkeys.add(created.lkey());
                    }
                    assertEquals(8, ids.size());
                }
                assertEquals(1, lkeys.size(), "one MR for the whole chunk");
                assertEquals(1, fixture.counter(MrdCounter.MRS_CREATED));
            }
            finally
            {
                clients.forEach(RawClient::close);
            }
        }
        await("owner's memory reclaimed", () -> fixture.daemon.memory().bytesAllocated() == 0);
    }

    @Test
    void clientsThatVanishWithRequestsInFlightLeaveNothingBehind()
    {
        for (int c = 0; c < 6; c++)
        {
            try (RawClient client = fixture.connect())
            {
                client.hello("vanishing-" + c);
                final Message.Allocated a = assertInstanceOf(Message.Allocated.class,
                    client.request(2, new Message.Alloc(SEGMENT, 0)));
                // slow creates and more allocations still queued or running when the connection goes
                client.send(3, new Message.CreateMr(a.address(), 64));
                client.send(4, new Message.Alloc(2 * SEGMENT, 0));
                client.send(5, new Message.CreateMr(a.address() + 100, 64));
                client.send(6, new Message.Alloc(SEGMENT, 0));
            }
        }
        await("every vanished client reclaimed", () -> fixture.daemon.server().connectedClients() == 0 &&
            fixture.daemon.memory().bytesAllocated() == 0 && fixture.counter(MrdCounter.MRS_ACTIVE) == 0);
        assertEquals(0, fixture.counter(MrdCounter.BYTES_PINNED));
        try (RawClient client = fixture.connect())
        {
            client.hello("after");
            assertEquals(ErrorCode.OK, client.request(2, new Message.Alloc(16 * SEGMENT, 0)).status());
        }
    }

    @Test
    void connectionsOpenedAndDroppedInBulkLeaveNoFdsBehind() throws IOException
    {
        final long before = openFds();
        for (int i = 0; i < 500; i++)
        {
            try (RawClient client = fixture.connect())
            {
                if (i % 2 == 0)
                {
                    client.hello("bulk-" + i);
                }
            }
        }
        await("all bulk connections closed and reclaimed", () -> fixture.daemon.server().openConnections() == 0 &&
            fixture.daemon.server().connectedClients() == 0);
        final long after = openFds();
        assertTrue(after <= before + 16, "fds before " + before + ", after " + after);
        try (RawClient client = fixture.connect())
        {
            client.hello("after-bulk");
            assertEquals(ErrorCode.OK, client.request(2, new Message.Alloc(Sizes.MIB, 0)).status());
        }
    }

    private static long openFds() throws IOException
    {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd")))
        {
            return fds.count();
        }
    }
}
