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
import java.util.concurrent.TimeUnit;

/**
 * Work requests posted on purpose with the keys of memory that was just freed, on a loopback pair of queue
 * pairs of one peer (a protection error moves a queue pair to the error state, as on a NIC, so each probe gets
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
 */
final class StaleKeyProbe
{
    private static final long SIZE = RdmaExchange.SEGMENT;
    private static final long CANARY_SEQ = -2;
    private static final long DEADLINE_NS = TimeUnit.SECONDS.toNanos(10);

    private final MrdClient client;
    private final MrCache cache;
    private final Verbs verbs;
    private final MemorySegment window;
    private final CompletionQueue cq;
    private final WorkCompletions one = new WorkCompletions(1);
    private final SgeList sges = new SgeList(1);
    private long round;

    long probes;
    long refused;
    long targetsChecked;
    /** The status a stale-key request completed with instead of a protection error, if one did. */
    String notRefused = "";

    StaleKeyProbe(final MrdClient client, final MrCache cache, final Verbs verbs, final MemorySegment window)
    {
        this.client = client;
        this.cache = cache;
        this.verbs = verbs;
        this.window = window;
        this.cq = verbs.createCq(16);
    }

    void run(final int id)
    {
        round++;
        final MemorySegment x = client.allocate(SIZE, Access.REMOTE_WRITE | Access.REMOTE_READ);
        final long stale = cache.keyPair(x);
        final long xAddress = x.address();
        client.free(x);
        final MemorySegment again = client.allocate(SIZE, Access.REMOTE_WRITE | Access.REMOTE_READ);
        try
        {
            WordPattern.fill(again, 0, 4096, id, CANARY_SEQ, round);
            WordPattern.fill(window, RdmaExchange.CANARY, RdmaExchange.CANARY_LENGTH, id, CANARY_SEQ, round);
            final int windowRkey = KeyPair.rkey(cache.keyPair(window));
            final long liveSource = window.address() + RdmaExchange.READABLE;
            final int liveLkey = KeyPair.lkey(cache.keyPair(liveSource, 4096));

            // a stale lkey as the source, a live target
            sges.clear().add(xAddress, 4096, KeyPair.lkey(stale));
            final boolean lkeyRefused = protectionError(sges, window.address() + RdmaExchange.CANARY, windowRkey) &&
                WordPattern.wrongBytes(window, RdmaExchange.CANARY, RdmaExchange.CANARY_LENGTH, id, CANARY_SEQ, round) == 0;
            probes++;

            // a live source, a stale rkey at the target
            sges.clear().add(liveSource, 4096, liveLkey);
            boolean rkeyRefused = protectionError(sges, xAddress, KeyPair.rkey(stale));
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
            client.free(again);
        }
    }

    /**
     * Posts one RDMA WRITE on a fresh loopback pair and says whether it completed with a protection error.
     */
    private boolean protectionError(final SgeList source, final long remoteAddress, final int rkey)
    {
        final QueuePair a = verbs.createRcQp(cq, cq, QpCaps.of(2, 1));
        final QueuePair b = verbs.createRcQp(cq, cq, QpCaps.of(2, 1));
        try
        {
            a.connect(b.qpNum());
            b.connect(a.qpNum());
            a.postSend(round, Opcode.RDMA_WRITE, source, remoteAddress, rkey, true);
            final long deadline = System.nanoTime() + DEADLINE_NS;
            while (cq.poll(one) == 0)
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
        finally
        {
            a.close();
            b.close();
            // what the error state flushed, if anything, is not wanted
            while (cq.poll(one) > 0)
            {
                Thread.onSpinWait();
            }
        }
    }
}
