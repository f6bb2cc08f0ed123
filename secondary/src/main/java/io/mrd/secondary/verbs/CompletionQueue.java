package io.mrd.secondary.verbs;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.secondary.DaemonLiveness;

import java.lang.foreign.MemorySegment;

/**
 * A completion queue of the imported device ({@code ibv_create_cq}), made by {@link Verbs#createCq}. Polling
 * calls the device's {@code poll_cq} through the context's ops, as verbs.h's inline {@code ibv_poll_cq} does,
 * into a {@link WorkCompletions} the caller reuses: no allocation, no system call on a device whose rings are
 * in user memory (mlx5, the emulated device). Pollers of one CQ may be several threads, each with its own
 * {@link WorkCompletions}; {@link #close()} comes after the last poll.
 */
public final class CompletionQueue implements AutoCloseable
{
    private final Verbs verbs;
    private final MemorySegment cq;
    private final MemorySegment pollCq;
    private final int handle;
    private final int depth;
    private final DaemonLiveness liveness;
    boolean closed;

    CompletionQueue(
        final Verbs verbs, final MemorySegment cq, final MemorySegment pollCq, final DaemonLiveness liveness)
    {
        this.verbs = verbs;
        this.liveness = liveness;
        this.cq = cq;
        this.pollCq = pollCq;
        this.handle = cq.get(java.lang.foreign.ValueLayout.JAVA_INT, IbvStructs.CQ_HANDLE);
        this.depth = cq.get(java.lang.foreign.ValueLayout.JAVA_INT, IbvStructs.CQ_CQE);
    }

    /**
     * Takes up to {@code completions.capacity()} completions.
     *
     * @return how many were written to {@code completions}, 0 when there are none.
     * @throws MrdException EBADF once closed; {@code DaemonDeadException} once the daemon is lost; EIO when the
     *                      device fails the poll (the CQ overran).
     */
    public int poll(final WorkCompletions completions)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.EBADF, "poll of CQ handle " + handle + ", which is closed");
        }
        liveness.requireAlive();
        final int n;
        try
        {
            n = (int)VerbsLibrary.POLL_CQ.invokeExact(pollCq, cq, completions.capacity(), completions.segment());
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        if (n < 0)
        {
            throw new MrdException(ErrorCode.EIO, "ibv_poll_cq(CQ handle " + handle + ") on " + verbs.deviceName() +
                " failed with " + n + ": the CQ overran or the device is gone");
        }
        return n;
    }

    /** @return {@code ibv_cq.handle}, what the daemon knows this CQ by. */
    public int handle()
    {
        return handle;
    }

    /** @return completions it holds at most ({@code ibv_cq.cqe}, at least what was asked). */
    public int depth()
    {
        return depth;
    }

    /**
     * Destroys the CQ ({@code ibv_destroy_cq}) after telling the daemon. Idempotent.
     *
     * @throws MrdException EBUSY while a queue pair of this {@link Verbs} uses it.
     */
    public void close()
    {
        verbs.destroy(this);
    }

    MemorySegment struct()
    {
        return cq;
    }

    public String toString()
    {
        return "CompletionQueue[handle " + handle + ", depth " + depth + (closed ? ", closed" : "") + "]";
    }
}
