package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.ProcMaps;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link MrdClient} against {@link FakeDaemon}: attach, same-address memory, the cache's create path, fd
 * passing, timeouts, and every way of noticing the daemon is gone.
 */
final class MrdClientTest
{
    private static final Duration DEADLINE = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    private FakeDaemon daemon;
    private MrdClient client;

    @AfterEach
    void tearDown() throws Exception
    {
        if (null != client)
        {
            client.close();
        }
        if (null != daemon)
        {
            daemon.close();
        }
    }

    private MrdClient attach()
    {
        return MrdClient.attach(new ClientContext().dir(dir).name("test").requestTimeoutMs(2_000)
            .environment(Map.of()));
    }

    @Test
    void noDaemonIsConnectionRefusedWithWhatToDo()
    {
        final MrdException ex = assertThrows(MrdException.class, this::attach);
        assertEquals(ErrorCode.ECONNREFUSED, ex.code());
        assertTrue(ex.getMessage().contains("start one with 'mrd start --dir " + dir + "'"), ex.getMessage());
    }

    @Test
    void staleOrClosedHeartbeatIsNoDaemon() throws Exception
    {
        daemon = new FakeDaemon(dir);
        daemon.freezeHeartbeat();
        daemon.header.heartbeatMs(System.currentTimeMillis() - 60_000);
        final MrdException stale = assertThrows(MrdException.class, this::attach);
        assertEquals(ErrorCode.ECONNREFUSED, stale.code());
        assertTrue(stale.getMessage().contains("heartbeat"), stale.getMessage());

        daemon.closeHeartbeat();
        final MrdException closed = assertThrows(MrdException.class, this::attach);
        assertEquals(ErrorCode.ECONNREFUSED, closed.code());
        assertTrue(closed.getMessage().contains("heartbeat closed"), closed.getMessage());
        assertTrue(ProcMaps.isFree(FakeDaemon.BASE, FakeDaemon.BASE + FakeDaemon.LIST_LENGTH),
            "a failed attach leaves no reservation");
    }

    @Test
    void allocatesAtTheDaemonsAddressAndLooksUp() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = attach();
        assertEquals(7, client.clientId());
        assertEquals(daemon.epoch, client.epoch());

        final MemorySegment memory = client.allocate(3 * Sizes.MIB);
        assertEquals(FakeDaemon.BASE, memory.address());
        assertEquals(4 * Sizes.MIB, memory.byteSize());
        memory.set(JAVA_LONG, 4096, 0xC0FFEEL);
        assertEquals(0xC0FFEEL, daemon.backing.get(JAVA_LONG, 4096), "the daemon sees what the client wrote");

        final MrCache cache = client.newCache();
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(memory.address() + 4096, 4096));
        assertEquals(1, cache.createRequests());
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(memory.asSlice(0, 64)));
        assertEquals(1, cache.mruHits(2), "the second lookup was the MRU slot's");

        final MrCache other = client.newCache();
        assertEquals(FakeDaemon.LOW_LKEY, other.lkey(memory.address(), 1));
        assertEquals(1, other.globalHits());
        assertEquals(0, other.createRequests());
        assertEquals(1, daemon.creates.get());

        // The daemon registered two adjacent MRs: a buffer across their boundary has no lkey.
        final long boundary = FakeDaemon.BASE + FakeDaemon.LIST_LENGTH / 2;
        final MrdException straddle = assertThrows(MrdException.class, () -> cache.lkey(boundary - 64, 128));
        assertEquals(ErrorCode.EINVAL, straddle.code());
        assertEquals(FakeDaemon.HIGH_LKEY, cache.lkey(boundary, 128));
        // The high half's MR has remote access: both keys come through the global cache, the low half has no rkey.
        assertEquals(KeyPair.pack(FakeDaemon.HIGH_LKEY, FakeDaemon.HIGH_RKEY), other.keyPair(boundary, 128));
        assertEquals(KeyPair.pack(FakeDaemon.LOW_LKEY, Access.NO_RKEY), other.keyPair(memory.address(), 8));

        final MrdException outside = assertThrows(MrdException.class, () -> cache.lkey(0x10_0000L, 8));
        assertEquals(ErrorCode.ENXIO, outside.code());
        assertTrue(outside.getMessage().contains("outside managed memory"), outside.getMessage());

        // FREE: unmapped here (back to the reservation), devGen moved, so local caches flush.
        client.free(memory);
        assertFalse(ProcMaps.covering(FakeDaemon.BASE).perms().startsWith("rw"), "freed memory stays reserved only");
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(FakeDaemon.BASE, 8));
        assertEquals(1, cache.flushes());
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> client.free(memory)).code());
    }

    @Test
    void allocationAccessIsWhatTheOwnerAskedForAndNoMore() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = attach();
        final MemorySegment remote = client.allocate(Sizes.MIB, Access.REMOTE_WRITE | Access.REMOTE_READ);
        assertEquals(FakeDaemon.BASE, remote.address());

        final MrdException unknown = assertThrows(MrdException.class, () -> client.allocate(Sizes.MIB, 0x10));
        assertEquals(ErrorCode.EINVAL, unknown.code());
        assertTrue(unknown.getMessage().contains("unknown bits 0x10"), unknown.getMessage());

        // A daemon that grants remote access to memory allocated for local access is not trusted with it.
        daemon.grantedAccess = Access.LOCAL_WRITE | Access.REMOTE_WRITE;
        final MrdException lie = assertThrows(MrdException.class, () -> client.allocate(Sizes.MIB));
        assertEquals(ErrorCode.EPROTO, lie.code());
        assertTrue(lie.getMessage().contains("for access local-write with access local-write,remote-write"),
            lie.getMessage());
        assertFalse(client.isBroken());

        final ExternalMemory external = client.registerMemfd(Sizes.MIB, Access.REMOTE_READ);
        assertEquals(Access.LOCAL_WRITE | Access.REMOTE_READ, external.access());
        assertEquals(FakeDaemon.EXTERNAL_LKEY, external.rkey());
        assertEquals(Access.NO_RKEY, client.registerExternal(Sizes.MIB).rkey(), "local by default");
    }

    @Test
    void registersExternalMemoryByPassingItsDescriptor() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = attach();
        final ExternalMemory memory = client.registerExternal(Sizes.MIB);
        assertEquals(FakeDaemon.EXTERNAL_BASE, memory.address());
        assertEquals(FakeDaemon.EXTERNAL_LKEY, memory.lkey());
        memory.segment().set(JAVA_LONG, 64, 0x5EC0DAL);
        assertEquals(0x5EC0DAL, daemon.external.get(JAVA_LONG, 64), "the daemon maps the same memfd");

        assertEquals(ErrorCode.EBADF, assertThrows(MrdException.class, () -> client.registerExternal(1 << 20, 4096L))
            .code());
        assertFalse(client.isBroken(), "a bad descriptor is refused before the exchange starts");

        // The connection is in order after the exchange.
        assertEquals(FakeDaemon.BASE, client.allocate(1).address());
        client.deregisterExternal(memory);
        assertFalse(ProcMaps.covering(FakeDaemon.EXTERNAL_BASE).perms().startsWith("rw"));
    }

    @Test
    void unansweredRequestTimesOutNamingIt() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = MrdClient.attach(new ClientContext().dir(dir).requestTimeoutMs(300).environment(Map.of()));
        daemon.answerCreates = false;
        final MrCache cache = client.newCache();
        final MrdException ex = assertThrows(MrdException.class, () -> cache.lkey(FakeDaemon.BASE, 8));
        assertEquals(ErrorCode.ETIMEDOUT, ex.code());
        assertTrue(ex.getMessage().contains("CREATE_MR(" + Sizes.hex(FakeDaemon.BASE) + ", 8)"), ex.getMessage());
        assertFalse(client.isBroken());
        daemon.answerCreates = true;
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(FakeDaemon.BASE, 8));
    }

    @Test
    void closedConnectionMeansDeadEvenForCachedEntries() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = attach();
        final MrCache cache = client.newCache();
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(FakeDaemon.BASE, 8));

        daemon.dropConnections();
        Wait.await("the client to see the connection closed", DEADLINE, client::isBroken);
        final DaemonDeadException ex = assertThrows(DaemonDeadException.class, () -> cache.lkey(FakeDaemon.BASE, 8));
        assertEquals(ErrorCode.ECONNRESET, ex.code());
        assertTrue(ex.getMessage().contains("daemon pid " + FakeDaemon.PID), ex.getMessage());
        assertTrue(ex.getMessage().contains("closed the connection"), ex.getMessage());
        assertTrue(ex.getMessage().contains("re-attach"), ex.getMessage());
        assertThrows(DaemonDeadException.class, () -> client.allocate(1));
    }

    @Test
    void theListenerHearsOfTheLossOnceOnAThreadOfItsOwnAndNeverOfTheClientsClose() throws Exception
    {
        daemon = new FakeDaemon(dir);
        final LinkedBlockingQueue<String> heard = new LinkedBlockingQueue<>();
        final AtomicLong noticed = new AtomicLong();
        final DaemonEventListener listener = (reason, noticedAtMs) ->
        {
            noticed.set(noticedAtMs);
            heard.add(Thread.currentThread().getName() + " " + reason.code() + " " + reason.getMessage());
        };
        client = MrdClient.attach(new ClientContext().dir(dir).name("test").environment(Map.of())
            .daemonEventListener(listener));
        final long before = System.currentTimeMillis();
        daemon.dropConnections();
        final String event = heard.poll(DEADLINE.toMillis(), TimeUnit.MILLISECONDS);
        assertNotNull(event, "no daemon-lost event within " + DEADLINE);
        assertTrue(event.startsWith("mrd-daemon-events ECONNRESET daemon pid " + FakeDaemon.PID), event);
        assertTrue(noticed.get() >= before && noticed.get() <= System.currentTimeMillis(),
            "noticed at " + noticed.get() + ", the connections dropped at " + before);
        assertThrows(DaemonDeadException.class, () -> client.allocate(1));
        client.close();
        assertNull(heard.poll(200, TimeUnit.MILLISECONDS), "told twice, or of the close");

        try (MrdClient closedByItsOwner = MrdClient.attach(new ClientContext().dir(dir).name("test")
            .environment(Map.of()).daemonEventListener(listener)))
        {
            assertFalse(closedByItsOwner.isBroken());
        }
        assertNull(heard.poll(200, TimeUnit.MILLISECONDS), "a client's own close is no loss of its daemon");
        client = null;
    }

    @Test
    void watchdogNoticesAFrozenHeartbeat() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = attach();
        final MrCache cache = client.newCache();
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(FakeDaemon.BASE, 8));

        daemon.freezeHeartbeat();
        Wait.await("the watchdog to see the heartbeat frozen", DEADLINE, client::isBroken);
        final DaemonDeadException ex = assertThrows(DaemonDeadException.class, () -> cache.lkey(FakeDaemon.BASE, 8));
        assertTrue(ex.getMessage().contains("died (heartbeat"), ex.getMessage());
    }

    /**
     * The thread whose lookup threw may go straight on to a request; the watchdog fails the connection before it
     * trips the caches, so that request never reaches a daemon that is only frozen and would answer it later.
     */
    @Test
    void onceTheWatchdogMarksTheDaemonDeadNoRequestLeaves() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = attach();
        final MrCache cache = client.newCache();
        assertEquals(FakeDaemon.LOW_LKEY, cache.lkey(FakeDaemon.BASE, 8));
        final int allocsBefore = daemon.allocs.get();

        daemon.freezeHeartbeat();
        Wait.await("the watchdog to mark the daemon dead", Duration.ofSeconds(30), () ->
        {
            try
            {
                cache.lkey(FakeDaemon.BASE, 8);
                return false;
            }
            catch (final DaemonDeadException ex)
            {
                return true;
            }
        });
        assertThrows(DaemonDeadException.class, () -> client.allocate(FakeDaemon.SEGMENT));
        assertEquals(allocsBefore, daemon.allocs.get(), "an ALLOC reached the daemon after the watch marked it dead");
    }

    @Test
    void slowPathChecksTheHeartbeatItself() throws Exception
    {
        daemon = new FakeDaemon(dir);
        // A watchdog that never gets to look: only the slow path can notice.
        client = MrdClient.attach(new ClientContext().dir(dir).watchdogIntervalMs(3_600_000)
            .environment(Map.of()));
        final MrCache cache = client.newCache();
        daemon.freezeHeartbeat();
        daemon.header.heartbeatMs(System.currentTimeMillis() - 60_000);
        assertThrows(DaemonDeadException.class, () -> cache.lkey(FakeDaemon.BASE, 8));
        assertEquals(0, daemon.creates.get(), "no request went to a dead daemon");
    }

    @Test
    void epochOfTheWelcomeMustMatchTheControlFile() throws Exception
    {
        daemon = new FakeDaemon(dir);
        daemon.welcomeEpoch = 12345;
        final MrdException ex = assertThrows(MrdException.class, this::attach);
        assertEquals(ErrorCode.ESTALE, ex.code());
        assertTrue(ProcMaps.isFree(FakeDaemon.BASE, FakeDaemon.BASE + FakeDaemon.LIST_LENGTH));
    }

    @Test
    void takenRangeNamesItAndTheFlag() throws Exception
    {
        daemon = new FakeDaemon(dir);
        final MemorySegment squatter = Posix.reserve(FakeDaemon.EXTERNAL_BASE + Sizes.MIB, Sizes.MIB);
        try
        {
            final MrdException ex = assertThrows(MrdException.class, this::attach);
            assertEquals(ErrorCode.EEXIST, ex.code());
            assertTrue(ex.getMessage().contains("--base-virtaddr"), ex.getMessage());
            assertTrue(ex.getMessage().contains(Sizes.hex(FakeDaemon.EXTERNAL_BASE)), ex.getMessage());
            assertTrue(ProcMaps.isFree(FakeDaemon.BASE, FakeDaemon.BASE + FakeDaemon.LIST_LENGTH),
                "the list's reservation is undone");
        }
        finally
        {
            Posix.munmap(squatter.address(), squatter.byteSize());
        }
    }

    @Test
    void closeIsIdempotentAndUnmapsEverything() throws Exception
    {
        daemon = new FakeDaemon(dir);
        client = attach();
        final MrCache cache = client.newCache();
        client.allocate(1);
        client.close();
        client.close();
        assertTrue(ProcMaps.isFree(FakeDaemon.BASE, FakeDaemon.BASE + FakeDaemon.LIST_LENGTH));
        assertTrue(ProcMaps.isFree(FakeDaemon.EXTERNAL_BASE, FakeDaemon.EXTERNAL_BASE + FakeDaemon.EXTERNAL_LENGTH));
        assertEquals(ErrorCode.EBADF, assertThrows(MrdException.class, () -> cache.lkey(FakeDaemon.BASE, 8)).code());
        client = null;
    }

    @Test
    void contextResolvesFromTheEnvironment()
    {
        final ClientContext context = new ClientContext().environment(Map.of(
            "MRD_DIR", "/tmp/some-mrd", "MRD_CLIENT_NAME", "worker-1", "MRD_REQUEST_TIMEOUT_MS", "750")).conclude();
        assertEquals(Path.of("/tmp/some-mrd"), context.dir());
        assertEquals("worker-1", context.name());
        assertEquals(750, context.requestTimeoutMs());
        assertEquals(ClientContext.DEFAULT_ATTACH_TIMEOUT_MS, context.attachTimeoutMs());
        assertTrue(context.toString().contains("/tmp/some-mrd"));

        assertEquals(Path.of("/run/user/1/mrd"),
            new ClientContext().environment(Map.of("XDG_RUNTIME_DIR", "/run/user/1")).conclude().dir());
        assertEquals(Path.of("/explicit"), new ClientContext().dir(Path.of("/explicit"))
            .environment(Map.of("MRD_DIR", "/tmp/x")).conclude().dir());
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class, () -> new ClientContext()
            .environment(Map.of("MRD_REQUEST_TIMEOUT_MS", "soon")).conclude()).code());
    }
}
