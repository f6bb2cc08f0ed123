package io.mrd.cli.rdma;

import io.mrd.layout.Access;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.Future;

/**
 * The rotation of an exchange's staging memory: its spare, asked for on the {@link DaemonRequests} thread, and
 * what the rotations counted. A rotation takes the spare as the staging memory, frees the old one and asks for
 * the next spare: the old MR goes with the free (memory with remote access never shares an MR), so the next
 * spare, often at the old one's address, has a new key. The free is done before the spare is allocated, and so
 * before the datapath posts from it.
 */
final class StagingRotation
{
    private final DaemonRequests requests;
    private final long size;
    private Future<MemorySegment> spare;
    private long lastFreed;
    long rotations;
    long rotationsSameAddress;

    StagingRotation(final DaemonRequests requests, final long size)
    {
        this.requests = requests;
        this.size = size;
        this.spare = requests.allocate(size, Access.REMOTE_READ);
    }

    /** @return true once the spare came, so that {@link #rotate} waits for no daemon. */
    boolean ready()
    {
        return spare.isDone();
    }

    /**
     * @param staging the staging memory, in which no work request is in flight.
     * @return the new staging memory: the spare, which must be {@link #ready()}.
     */
    MemorySegment rotate(final MemorySegment staging)
    {
        final MemorySegment next = DaemonRequests.take(spare);
        rotations++;
        if (next.address() == lastFreed)
        {
            rotationsSameAddress++;
        }
        lastFreed = staging.address();
        requests.free(staging);
        spare = requests.allocate(size, Access.REMOTE_READ);
        return next;
    }
}
