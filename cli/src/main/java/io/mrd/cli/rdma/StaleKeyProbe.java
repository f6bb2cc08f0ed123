package io.mrd.cli.rdma;

import io.mrd.layout.Access;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.Opcode;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.SgeList;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.secondary.verbs.WorkCompletions;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * Work requests posted on purpose with the keys of memory that was just freed, on a loopback pair of queue
 * pairs of one peer (a protection error moves a queue pair to the error state, as on a NIC, so each request gets
 * a fresh pair and the data pair is never touched):
 * <ol>
 *   <li>memory X is allocated with remote access, its keys taken from the MrCache, and freed (a memory free
 *       event: its MR goes); memory X' of the same size is allocated (often at X's address, with a new MR) and
 *       filled with a canary;</li>
 *   <li>an RDMA WRITE whose SGE is X's address with X's stale lkey, into the canary region of this peer's
 *       window (live rkey): must complete with a protection error and leave the canary as it was;</li>
 *   <li>an RDMA WRITE from live memory to X's address with X's stale rkey: must complete with a protection
 *       error, and when X' sits at that address, leave X''s canary as it was.</li>
 * </ol>
 * {@link #refused} counts the probes that did both; {@link #targetsChecked} those whose target could be read.
 * Step 1, the loopback pairs (each reported to the daemon) and their end are made on the {@link DaemonRequests}
 * thread; the work requests are posted on the datapath thread, once that is {@link #ready()}.
 */
final class StaleKeyProbe
{
    private static final long SIZE = RdmaExchange.SEGMENT;
    private static final long CANARY_SEQ = -2;
    private static final long DEADLINE_NS = TimeUnit.SECONDS.toNanos(10);

    private final DaemonRequests requests;
    private final MrCache cache;
    private final Verbs verbs;
    private final MemorySegment window;
    private final CompletionQueue cq;
    private final WorkCompletions one = new WorkCompletions(1);
    private final SgeList sges = new SgeList(1);
    private long round;
    private Future<Target> next;

    long probes;
    long refused;
    long targetsChecked;
    /** The status a stale-key request completed with instead of a protection error, if one did. */
    String notRefused = "";

    /** Step 1's outcome: X's address and its keys, taken before X was freed, X', and two connected pairs. */
    private record Target(long xAddress, long stale, MemorySegment again, QueuePair[] pairs)
    {
    }

    StaleKeyProbe(final DaemonRequests requests, final MrCache cache, final Verbs verbs, final MemorySegment window)
    {
        this.requests = requests;
        this.cache = cache;
        this.verbs = verbs;
        this.window = window;
        this.cq = verbs.createCq(16);
        this.next = requests.submit(this::target);
    }

    /** @return true when step 1 of the next probe is done, so that {@link #run} waits for no daemon. */
    boolean ready()
    {
        return next.isDone();
    }

    /** Step 1 and the pairs, on the requests' thread. */
    private Target target(final MrdClient client, final MrCache requestCache)
    {
        final MemorySegment x = client.allocate(SIZE, Access.REMOTE_WRITE | Access.REMOTE_READ);
        final long stale = requestCache.keyPair(x);
        client.free(x);
        final MemorySegment again = client.allocate(SIZE, Access.REMOTE_WRITE | Access.REMOTE_READ);
        final QueuePair[] pairs = new QueuePair[4];
        for (int i = 0; i < pairs.length; i += 2)
        {
            pairs[i] = verbs.createRcQp(cq, cq, QpCaps.of(2, 1));
            pairs[i + 1] = verbs.createRcQp(cq, cq, QpCaps.of(2, 1));
            pairs[i].connect(pairs[i + 1].qpNum());
            pairs[i + 1].connect(pairs[i].qpNum());
        }
        return new Target(x.address(), stale, again, pairs);
    }

    /** Steps 2 and 3 of a target that is {@link #ready()}; then asks for the next one. */
    void run(final int id)
    {
        round++;
        final Target target = DaemonRequests.take(next);
        final long xAddress = target.xAddress();
        final long stale = target.stale();
        final MemorySegment again = target.again();
        try
        {
            WordPattern.fill(again, 0, 4096, id, CANARY_SEQ, round);
            WordPattern.fill(window, RdmaExchange.CANARY, RdmaExchange.CANARY_LENGTH, id, CANARY_SEQ, round);
            final int windowRkey = KeyPair.rkey(cache.keyPair(window));
            final long liveSource = window.address() + RdmaExchange.READABLE;
            final int liveLkey = KeyPair.lkey(cache.keyPair(liveSource, 4096));

            // a stale lkey as the source, a live target
            sges.clear().add(xAddress, 4096, KeyPair.lkey(stale));
            final boolean lkeyRefused = protectionError(target.pairs()[0], 1, sges, window.address() + RdmaExchange.CANARY, windowRkey) &&
                WordPattern.wrongBytes(window, RdmaExchange.CANARY, RdmaExchange.CANARY_LENGTH, id, CANARY_SEQ, round) == 0;
            probes++;

            // a live source, a stale rkey at the target
            sges.clear().add(liveSource, 4096, liveLkey);
            boolean rkeyRefused = protectionError(target.pairs()[2], 2, sges, xAddress, KeyPair.rkey(stale));
            if (again.address() == xAddress)
            {
                targetsChecked++;
                rkeyRefused &= WordPattern.wrongBytes(again, 0, 4096, id, CANARY_SEQ, round) == 0;
            }
            probes++;
            refused += (lkeyRefused ? 1 : 0) + (rkeyRefused ? 1 : 0);
        }
        finally
        {
            requests.execute(() ->
            {
                for (final QueuePair qp : target.pairs())
                {
                    qp.close();
                }
            });
            requests.free(again);
            next = requests.submit(this::target);
        }
    }

    /**
     * Posts one RDMA WRITE on a fresh loopback pair and says whether it completed with a protection error.
     * The pairs of earlier probes are destroyed on the requests' thread, and what that flushes may come first:
     * only this request's completion counts.
     */
    private boolean protectionError(
        final QueuePair qp, final int which, final SgeList source, final long remoteAddress, final int rkey)
    {
        final long wrId = round << 1 | (which - 1);
        qp.postSend(wrId, Opcode.RDMA_WRITE, source, remoteAddress, rkey, true);
        final long deadline = System.nanoTime() + DEADLINE_NS;
        while (cq.poll(one) == 0 || one.wrId(0) != wrId)
        {
            if (System.nanoTime() - deadline > 0)
            {
                throw new IllegalStateException("a stale-key probe did not complete within 10 s");
            }
            Thread.onSpinWait();
        }
        final int status = one.status(0);
        if (status != WorkCompletions.LOC_PROT_ERR && status != WorkCompletions.REM_ACCESS_ERR)
        {
            notRefused = WorkCompletions.statusName(status);
            return false;
        }
        return true;
    }
}
