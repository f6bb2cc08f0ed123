package io.mrd.cli.secondaries;

import io.mrd.layout.Access;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.pool.BufferPool;
import io.mrd.secondary.pool.PoolContext;
import io.mrd.secondary.pool.PooledBuffer;

import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;

/**
 * A process that opens a {@link BufferPool} on the daemon in {@code args[0]}, acquires buffers of several
 * classes (and one above the largest), writes them, prints {@code pool holding <bytes>} and waits to be
 * killed: {@link BufferPoolDaemonTest} checks that the daemon frees the pool's memory with the process.
 */
public final class PoolHolder
{
    public static void main(final String[] args)
    {
        final MrdClient client = MrdClient.attach(Path.of(args[0]));
        final BufferPool pool = BufferPool.open(client, new PoolContext().access(Access.REMOTE_WRITE));
        final List<PooledBuffer> held = new ArrayList<>();
        for (final int size : new int[] {4096, 65536, 1 << 20, 3 << 20})
        {
            final PooledBuffer buffer = pool.acquire(size);
            buffer.segment().set(ValueLayout.JAVA_LONG, 0, size);
            held.add(buffer);
        }
        System.out.println("pool holding " + pool.allocatedBytes() + " in " + pool.slabs().size() + " slabs");
        System.out.flush();
        while (!held.isEmpty())
        {
            LockSupport.parkNanos(1_000_000_000L);
        }
    }
}
