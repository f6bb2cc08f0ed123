package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.ExternalMemory;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;
import io.mrd.secondary.pool.BufferPool;
import io.mrd.secondary.pool.MrdByteBuf;
import io.mrd.secondary.pool.MrdByteBufAllocator;
import io.mrd.secondary.pool.PoolContext;
import io.mrd.secondary.pool.PooledBuffer;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.Opcode;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.SgeList;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.secondary.verbs.WorkCompletions;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.Wait;
import io.netty.buffer.ByteBuf;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The loss rule ({@code DaemonLiveness}) with a real daemon process on the emulated device: after {@code kill -9},
 * once the client has noticed, every call that hands out a key, needs the daemon or uses its device throws
 * {@link DaemonDeadException}, the same exception from every part of the client, and every close succeeds in
 * the order the README gives (buffers, pool, queue pairs, CQ, client); the client's
 * {@link io.mrd.secondary.DaemonEventListener} hears of the loss.
 */
final class LossRuleTest
{
    private static final Duration WAIT = Duration.ofSeconds(30);

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private final Path dir = daemons.newDirectory("loss-rule");

    @Test
    void afterTheDaemonIsKilledEveryCallThrowsDaemonDeadExceptionAndEveryCloseSucceeds() throws Exception
    {
        final Path library = EmulatedDevice.library();
        final LiveDaemon daemon = daemons.launch("loss-rule").in(dir)
            .env(Map.of(EmulatedDevice.LIBRARY_ENV, library.toString()))
            .start("--provider", "ibverbs", "--max-memory", "256MiB");
        final CompletableFuture<DaemonDeadException> lost = new CompletableFuture<>();
        final MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name("loss-rule")
            .ibverbsLibrary(library.toString()).daemonEventListener((reason, noticedAtMs) -> lost.complete(reason)));
        final MemorySegment plain = client.allocate(2 * Sizes.MIB);
        final MemorySegment spare = client.allocate(2 * Sizes.MIB);
        final RegisteredMemory registered = client.allocateRegistered(2 * Sizes.MIB, Access.REMOTE_WRITE);
        final ExternalMemory external = client.registerExternal(Sizes.MIB);
        final MrCache cache = client.newCache();
        final int lkey = cache.lkey(plain.address(), 4096);
        final Verbs verbs = client.verbs();
        final CompletionQueue cq = verbs.createCq(16);
        final QueuePair a = verbs.createRcQp(cq, cq, QpCaps.of(8, 1));
        final QueuePair b = verbs.createRcQp(cq, cq, QpCaps.of(8, 1));
        final QueuePair unconnected = verbs.createRcQp(cq, cq, QpCaps.of(8, 1));
        a.connect(b.qpNum());
        b.connect(a.qpNum());
        final SgeList sges = new SgeList(1).add(plain.address(), 64, lkey);
        final WorkCompletions completions = new WorkCompletions(16);
        b.postRecv(1, sges);
        a.postSend(2, sges, true);
        Wait.await("the SEND and its RECV complete before the kill", WAIT,
            () -> cq.poll(completions) > 0 || cq.poll(completions) > 0);
        final BufferPool pool = BufferPool.open(client, new PoolContext());
        final PooledBuffer held = pool.acquire(4096);
        final MrdByteBufAllocator allocator = new MrdByteBufAllocator(pool);
        final ByteBuf netty = allocator.directBuffer(4096);
        assertEquals(held.lkey(), MrdByteBuf.of(netty).lkey(), "one slab, one MR: the same lkey before the kill");

        assertEquals(137, daemon.kill(), "killed by SIGKILL");
        Wait.await("the client noticed the daemon's death", WAIT, client::isBroken);
        final DaemonDeadException heard = lost.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        assertTrue(heard.getMessage().contains("pid " + daemon.pid()), "the listener heard: " + heard.getMessage());

        final Map<String, Runnable> calls = new LinkedHashMap<>();
        calls.put("MrCache.lkey", () -> cache.lkey(plain.address(), 4096));
        calls.put("MrCache.keyPair", () -> cache.keyPair(plain.address(), 4096));
        calls.put("RegisteredMemory.lkey", registered::lkey);
        calls.put("RegisteredMemory.rkey", registered::rkey);
        calls.put("RegisteredMemory.keyPair", registered::keyPair);
        calls.put("ExternalMemory.lkey", external::lkey);
        calls.put("ExternalMemory.rkey", external::rkey);
        calls.put("MrdClient.allocate", () -> client.allocate(2 * Sizes.MIB));
        calls.put("MrdClient.allocateRegistered", () -> client.allocateRegistered(2 * Sizes.MIB, Access.LOCAL));
        calls.put("MrdClient.free", () -> client.free(spare));
        calls.put("MrdClient.registerExternal", () -> client.registerExternal(Sizes.MIB));
        calls.put("MrdClient.deregisterExternal", () -> client.deregisterExternal(external));
        calls.put("MrdClient.newCache", client::newCache);
        calls.put("MrdClient.verbs", client::verbs);
        calls.put("Verbs.createCq", () -> verbs.createCq(16));
        calls.put("Verbs.createRcQp", () -> verbs.createRcQp(cq, cq, QpCaps.of(8, 1)));
        calls.put("QueuePair.connect", () -> unconnected.connect(a.qpNum()));
        calls.put("QueuePair.postSend", () -> a.postSend(3, Opcode.RDMA_WRITE, sges, registered.segment().address(),
            0, true));
        calls.put("QueuePair.postRecv", () -> b.postRecv(4, sges));
        calls.put("CompletionQueue.poll", () -> cq.poll(completions));
        calls.put("BufferPool.acquire", () -> pool.acquire(4096));
        calls.put("PooledBuffer.lkey", held::lkey);
        calls.put("PooledBuffer.rkey", held::rkey);
        calls.put("PooledBuffer.keyPair", held::keyPair);
        calls.put("MrdByteBufAllocator.directBuffer", () -> allocator.directBuffer(4096));
        calls.put("MrdByteBuf.lkey", () -> MrdByteBuf.of(netty).lkey());
        final List<String> wrong = new ArrayList<>();
        calls.forEach((name, call) ->
        {
            try
            {
                call.run();
                wrong.add(name + " returned");
            }
            catch (final DaemonDeadException expected)
            {
                assertTrue(expected.getMessage().contains("pid " + daemon.pid()), expected.getMessage());
            }
            catch (final RuntimeException ex)
            {
                wrong.add(name + " threw " + ex);
            }
        });
        assertEquals(List.of(), wrong, "calls after the loss that did not throw DaemonDeadException");
        plain.set(ValueLayout.JAVA_BYTE, 0, (byte)7);
        assertEquals(7, plain.get(ValueLayout.JAVA_BYTE, 0), "the memory stays mapped until the client's close");

        final Map<String, Runnable> closes = new LinkedHashMap<>();
        closes.put("PooledBuffer.release", held::release);
        closes.put("ByteBuf.release", netty::release);
        closes.put("BufferPool.close", pool::close);
        closes.put("QueuePair.close", () ->
        {
            a.close();
            b.close();
            unconnected.close();
        });
        closes.put("CompletionQueue.close", cq::close);
        closes.put("MrdClient.close", client::close);
        final List<String> failed = new ArrayList<>();
        closes.forEach((name, close) ->
        {
            try
            {
                close.run();
            }
            catch (final RuntimeException ex)
            {
                failed.add(name + " threw " + ex);
            }
        });
        assertEquals(List.of(), failed, "closes after the loss that failed");
        assertTrue(pool.isClosed(), "the pool is closed");
        System.out.println("FIGURE loss-rule calls=" + calls.size() + " allThrewDaemonDeadException closes=" +
            closes.size() + " allSucceeded");
    }
}
