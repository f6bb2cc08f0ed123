package io.mrd.secondary.pool;

import io.mrd.secondary.DaemonLiveness;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;

/**
 * Where a {@link BufferPool}'s slabs come from and go back to: a client's registered allocations
 * ({@link #of(MrdClient)}), or, in tests and benchmarks, any memory with keys made up for it.
 * <p>
 * The pool calls it without holding any of its locks: an allocation is a round trip to the daemon and a free
 * deregisters, and neither may stall the threads that acquire and release buffers meanwhile.
 */
public interface SlabSource
{
    /**
     * @param length bytes wanted (a multiple of 2 MiB); the memory may be larger.
     * @param access {@link io.mrd.layout.Access} flags of its MR.
     * @return the memory and its keys.
     */
    SlabMemory allocate(long length, int access);

    /**
     * Gives the memory back; its keys are invalid afterwards.
     */
    void free(SlabMemory memory);

    /**
     * @return the check of the daemon behind the keys, which the pool makes before it hands out a buffer or a key
     *         (the loss rule, {@link DaemonLiveness}); {@link DaemonLiveness#UNWATCHED} when no daemon stands
     *         behind them.
     */
    default DaemonLiveness liveness()
    {
        return DaemonLiveness.UNWATCHED;
    }

    /**
     * @return a source of {@link MrdClient#allocateRegistered} memory: one round trip per slab, keys in the
     *         reply, and the daemon frees it with the client if the process dies.
     */
    static SlabSource of(final MrdClient client)
    {
        return new SlabSource()
        {
            public SlabMemory allocate(final long length, final int access)
            {
                final RegisteredMemory memory = client.allocateRegistered(length, access);
                final long[] keys = memory.keysByDevice();
                return new SlabMemory(memory.segment(), KeyPair.lkey(keys[0]), KeyPair.rkey(keys[0]), keys);
            }

            public void free(final SlabMemory memory)
            {
                client.free(memory.segment());
            }

            public DaemonLiveness liveness()
            {
                return client.liveness();
            }

            public String toString()
            {
                return "SlabSource[" + client + "]";
            }
        };
    }
}
