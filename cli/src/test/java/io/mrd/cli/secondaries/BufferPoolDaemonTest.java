package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.Access;
import io.mrd.layout.MrdCounter;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.pool.BufferPool;
import io.mrd.secondary.pool.PoolContext;
import io.mrd.secondary.pool.PooledBuffer;
import io.mrd.secondary.pool.SlabMemory;
import io.mrd.testing.ChildJvm;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link BufferPool} over a real daemon process: the keys a pooled buffer carries are the ones the daemon
 * registered (a lookup in a cache agrees, and without asking the daemon), the pool's close gives every slab
 * back, and a process killed with -9 while its pool holds memory loses it to the daemon's reclaim.
 */
final class BufferPoolDaemonTest
{
    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    @Test
    void pooledBuffersCarryTheDaemonsKeysAndCloseFreesTheSlabs()
    {
        final LiveDaemon daemon = daemons.start("pool", "--max-memory", "128MiB");
        try (MrdClient client = MrdClient.attach(daemon.dir()))
        {
            final BufferPool pool = BufferPool.open(client, new PoolContext()
                .access(Access.REMOTE_WRITE | Access.REMOTE_READ));
            final List<PooledBuffer> buffers = new ArrayList<>();
            for (final int size : new int[] {100, 4096, 5000, 65536, 1 << 20, 1 << 20, 1 << 20, 3 << 20})
            {
                buffers.add(pool.acquire(size));
            }
            final MrCache cache = client.newCache();
            for (final PooledBuffer buffer : buffers)
            {
                assertEquals(buffer.keyPair(), cache.keyPair(buffer.address(), buffer.capacity()),
                    "the daemon's keys for " + buffer);
                assertNotEquals(Access.NO_RKEY, buffer.rkey(), "remote access: an rkey");
            }
            assertEquals(0, cache.createRequests(), "every lookup was answered in the process");
            final ControlFileSnapshot held = daemon.snapshot();
            assertEquals(pool.allocatedBytes(), held.counter(MrdCounter.BYTES_ALLOCATED),
                "the daemon allocated exactly the pool's slabs: " + LiveDaemon.describe(held));
            for (final SlabMemory slab : pool.slabs())
            {
                assertTrue(LiveDaemon.active(held).stream().anyMatch(mr -> mr.lkey() == slab.lkey() &&
                    mr.start() <= slab.segment().address() &&
                    slab.segment().address() + slab.segment().byteSize() <= mr.end()),
                    "an ACTIVE MR holds the slab at " + Long.toHexString(slab.segment().address()));
            }
            buffers.forEach(PooledBuffer::release);
            pool.close();
            daemon.awaitSnapshot("the pool's slabs to be freed and deregistered", s ->
                s.counter(MrdCounter.BYTES_ALLOCATED) == 0 && s.mrs().isEmpty());
        }
        daemon.assertHealthy("after the pool's close");
    }

    @Test
    void aProcessKilledWhileItsPoolHoldsMemoryLosesItToTheDaemon()
    {
        final LiveDaemon daemon = daemons.start("pool-kill", "--max-memory", "128MiB");
        try (ChildJvm holder = ChildJvm.start("pool-holder", PoolHolder.class, List.of(daemon.dir().toString())))
        {
            final String line = holder.awaitLine(l -> l.startsWith("pool holding "), LiveDaemon.TIMEOUT);
            final long bytes = Long.parseLong(line.split(" ")[2]);
            assertEquals(5L << 21, bytes, "4 KiB, 64 KiB, 1 MiB slabs and a 4 MiB allocation: " + line);
            daemon.awaitSnapshot("the pool's memory while the holder lives", s ->
                s.counter(MrdCounter.BYTES_ALLOCATED) == bytes && s.clients().size() == 1);
            holder.kill();
            daemon.awaitSnapshot("the killed holder's memory to be freed", s ->
                s.counter(MrdCounter.BYTES_ALLOCATED) == 0 && s.mrs().isEmpty() && s.clients().isEmpty());
        }
        daemon.assertHealthy("after the holder's kill");
    }
}
