package io.mrd.cli.secondaries;

// README.md's datapath example ("Moving bytes with mrd's keys") is the code between the two markers, verbatim:
// RdmaReadmeExampleTest runs this program against a daemon on the emulated device and fails when the README
// shows anything else.
// README-BEGIN
import io.mrd.layout.Access;
import io.mrd.layout.MrdException;
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
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

public final class RdmaReadmeExample
{
    public static void main(final String[] args)
    {
        // A daemon started with --provider ibverbs; MRD_IBVERBS_LIBRARY, if set, is the same here.
        try (MrdClient client = MrdClient.attach(Path.of(args[0])))
        {
            // Memory a peer may write and read: its MR has an rkey as well as an lkey.
            final MemorySegment memory = client.allocate(2L << 20, Access.REMOTE_WRITE | Access.REMOTE_READ);
            final MemorySegment source = memory.asSlice(0, 4096);
            final MemorySegment target = memory.asSlice(1 << 20, 4096);
            source.set(JAVA_LONG, 0, 42L);
            final MrCache cache = client.newCache();
            final long keys = cache.keyPair(memory); // both keys, in one lookup that allocates nothing

            // The daemon's protection domain, imported here: queues in it take mrd's keys.
            final Verbs verbs = client.verbs();
            final CompletionQueue cq = verbs.createCq(64);
            final QueuePair qp = verbs.createRcQp(cq, cq, QpCaps.of(32, 4));
            final QueuePair peer = verbs.createRcQp(cq, cq, QpCaps.of(32, 4));
            // The peer is usually another process: trade qp_num, address and rkey with it, then connect.
            qp.connect(peer.qpNum());
            peer.connect(qp.qpNum());

            // Reused for every post: posting and polling allocate nothing.
            final SgeList sges = new SgeList(4).add(source.address(), 4096, KeyPair.lkey(keys));
            final WorkCompletions completions = new WorkCompletions(16);
            qp.postSend(1, Opcode.RDMA_WRITE, sges, target.address(), KeyPair.rkey(keys), true);
            while (cq.poll(completions) == 0)
            {
                Thread.onSpinWait();
            }
            System.out.printf("wr %d: %s, target holds %d%n", completions.wrId(0), completions.statusNameOf(0),
                target.get(JAVA_LONG, 0));
            client.free(memory);
        } // closes the queues, then the imported PD and device, then detaches
        catch (final MrdException ex)
        {
            System.err.println(ex.oneLine()); // e.g. "EOPNOTSUPP: IMPORT_PD needs the daemon's RDMA device, ..."
            System.exit(1);
        }
    }
}
// README-END
