package io.mrd.secondary.verbs;

import com.sun.management.ThreadMXBean;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.testing.LiveObjects;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.concurrent.TimeUnit;

import static io.mrd.secondary.verbs.OpenedDevice.LOCAL_WRITE;
import static io.mrd.secondary.verbs.OpenedDevice.REMOTE_READ;
import static io.mrd.secondary.verbs.OpenedDevice.REMOTE_WRITE;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The datapath on the emulated device, which checks every key as an HCA does: two RC queue pairs of one imported
 * PD connected to each other, moving bytes with SEND/RECV, RDMA WRITE and RDMA READ over several SGEs, the
 * statuses a stale lkey and a wrong rkey complete with, a full queue, and posting and polling without
 * allocating. The device is opened here (its DMA engine runs in this JVM, as in the daemon) and imported, as a
 * secondary imports the daemon's.
 */
final class VerbsDatapathTest
{
    private static final long DEADLINE_NS = TimeUnit.SECONDS.toNanos(10);

    private OpenedDevice device;
    private Verbs verbs;
    private Arena arena;
    private CompletionQueue cqA;
    private CompletionQueue cqB;
    private QueuePair a;
    private QueuePair b;
    private final WorkCompletions one = new WorkCompletions(1);

    record Wc(long wrId, int status, int opcode, int byteLength, int qpNum)
    {
    }

    @BeforeEach
    void connectTwoQueuePairs() throws Throwable
    {
        device = new OpenedDevice();
        verbs = device.importVerbs();
        arena = Arena.ofShared();
        cqA = verbs.createCq(64);
        cqB = verbs.createCq(64);
        a = verbs.createRcQp(cqA, cqA, QpCaps.of(16, 4));
        b = verbs.createRcQp(cqB, cqB, QpCaps.of(16, 4));
        a.connect(b.qpNum());
        b.connect(a.qpNum());
        assertEquals(b.qpNum(), a.peerQpNum());
    }

    @AfterEach
    void closeEverything() throws Exception
    {
        // The set-up may have stopped anywhere (a skip when the emulated device cannot be built): close what it made.
        if (null != verbs)
        {
            verbs.close();
            final LiveObjects after = device.live();
            assertEquals(0, after.qps(), "Verbs.close destroyed its queue pairs");
            assertEquals(0, after.cqs(), "and its completion queues");
        }
        if (null != arena)
        {
            arena.close();
        }
        if (null != device)
        {
            device.close();
        }
    }

    @Test
    void sendGathersThreeSgesAndTheReceiveScattersThemOverTwo() throws Throwable
    {
        final MemorySegment source = pattern(arena.allocate(12288, 4096), 1);
        final MemorySegment sink = arena.allocate(12288, 4096);
        final OpenedDevice.Mr sourceMr = device.register(source, LOCAL_WRITE);
        final OpenedDevice.Mr sinkMr = device.register(sink, LOCAL_WRITE);

        a.postRecv(7, new SgeList(4).add(sink.address(), 1000, sinkMr.lkey())
            .add(sink.address() + 4096, 8000, sinkMr.lkey()));
        final SgeList gather = new SgeList(4).add(source.address(), 100, sourceMr.lkey())
            .add(source.address() + 5000, 200, sourceMr.lkey()).add(source.address() + 9000, 900, sourceMr.lkey());
        assertEquals(1200, gather.totalLength());
        b.postSend(8, gather, true);

        assertEquals(new Wc(8, WorkCompletions.SUCCESS, WorkCompletions.OPCODE_SEND, 1200, b.qpNum()), next(cqB));
        assertEquals(new Wc(7, WorkCompletions.SUCCESS, WorkCompletions.OPCODE_RECV, 1200, a.qpNum()), next(cqA));
        // 1200 bytes: the first 1000 into the first receive SGE, the other 200 into the second
        final byte[] sent = new byte[1200];
        MemorySegment.copy(source, JAVA_BYTE, 0, sent, 0, 100);
        MemorySegment.copy(source, JAVA_BYTE, 5000, sent, 100, 200);
        MemorySegment.copy(source, JAVA_BYTE, 9000, sent, 300, 900);
        final byte[] received = new byte[1200];
        MemorySegment.copy(sink, JAVA_BYTE, 0, received, 0, 1000);
        MemorySegment.copy(sink, JAVA_BYTE, 4096, received, 1000, 200);
        assertEquals(java.util.Arrays.toString(sent), java.util.Arrays.toString(received));
    }

    @Test
    void rdmaWriteAndReadMoveBytesThroughThePeersRkey() throws Throwable
    {
        final MemorySegment local = pattern(arena.allocate(8192, 4096), 2);
        final MemorySegment remote = pattern(arena.allocate(8192, 4096), 3);
        final OpenedDevice.Mr localMr = device.register(local, LOCAL_WRITE);
        final OpenedDevice.Mr remoteMr = device.register(remote, LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ);
        assertEquals(remoteMr.lkey(), remoteMr.rkey(), "lkey == rkey, as mlx5's mkeys");

        b.postSend(1, Opcode.RDMA_WRITE, new SgeList(4).add(local.address(), 512, localMr.lkey())
            .add(local.address() + 4096, 512, localMr.lkey()), remote.address() + 1024, remoteMr.rkey(), true);
        assertEquals(new Wc(1, WorkCompletions.SUCCESS, WorkCompletions.OPCODE_RDMA_WRITE, 0, b.qpNum()),
            withoutLength(next(cqB)));
        assertEquals(local.asSlice(0, 512).mismatch(remote.asSlice(1024, 512)), -1);
        assertEquals(local.asSlice(4096, 512).mismatch(remote.asSlice(1536, 512)), -1);

        b.postSend(2, Opcode.RDMA_READ, new SgeList(4).add(local.address() + 6000, 2000, localMr.lkey()),
            remote.address() + 5000, remoteMr.rkey(), true);
        final Wc read = next(cqB);
        assertEquals(WorkCompletions.SUCCESS, read.status(), WorkCompletions.statusName(read.status()));
        assertEquals(WorkCompletions.OPCODE_RDMA_READ, read.opcode());
        assertEquals(remote.asSlice(5000, 2000).mismatch(local.asSlice(6000, 2000)), -1);
    }

    @Test
    void aStaleLkeyCompletesWithALocalProtectionErrorAndMovesNoByte() throws Throwable
    {
        final MemorySegment freed = pattern(arena.allocate(4096, 4096), 4);
        final MemorySegment target = pattern(arena.allocate(4096, 4096), 5);
        final byte[] canary = target.toArray(JAVA_BYTE);
        final OpenedDevice.Mr stale = device.register(freed, LOCAL_WRITE);
        final OpenedDevice.Mr targetMr = device.register(target, LOCAL_WRITE | REMOTE_WRITE);
        device.deregister(stale);
        final OpenedDevice.Mr again = device.register(freed, LOCAL_WRITE);
        assertNotEquals(stale.lkey(), again.lkey(), "the same memory registered again gets another key");

        b.postSend(9, Opcode.RDMA_WRITE, new SgeList(1).add(freed.address(), 4096, stale.lkey()), target.address(),
            targetMr.rkey(), true);
        final Wc refused = next(cqB);
        assertEquals(WorkCompletions.LOC_PROT_ERR, refused.status(), WorkCompletions.statusName(refused.status()));
        assertEquals(9, refused.wrId());
        assertEquals(-1, MemorySegment.ofArray(canary).mismatch(target), "no byte of the target changed");

        // the queue pair is in the error state now, as a NIC's: what follows is flushed
        b.postSend(10, Opcode.RDMA_WRITE, new SgeList(1).add(freed.address(), 64, again.lkey()), target.address(),
            targetMr.rkey(), true);
        assertEquals(WorkCompletions.WR_FLUSH_ERR, next(cqB).status());
    }

    @Test
    void aWrongRkeyCompletesWithARemoteAccessErrorAndMovesNoByte() throws Throwable
    {
        final MemorySegment local = pattern(arena.allocate(4096, 4096), 6);
        final MemorySegment target = pattern(arena.allocate(4096, 4096), 7);
        final MemorySegment localOnly = pattern(arena.allocate(4096, 4096), 8);
        final byte[] canary = target.toArray(JAVA_BYTE);
        final OpenedDevice.Mr localMr = device.register(local, LOCAL_WRITE);
        final OpenedDevice.Mr targetMr = device.register(target, LOCAL_WRITE | REMOTE_WRITE);
        final OpenedDevice.Mr noRemote = device.register(localOnly, LOCAL_WRITE);

        b.postSend(11, Opcode.RDMA_WRITE, new SgeList(1).add(local.address(), 4096, localMr.lkey()),
            target.address(), targetMr.rkey() ^ 0x100, true);
        final Wc wrong = next(cqB);
        assertEquals(WorkCompletions.REM_ACCESS_ERR, wrong.status(), WorkCompletions.statusName(wrong.status()));
        assertEquals(-1, MemorySegment.ofArray(canary).mismatch(target), "no byte of the target changed");

        // an MR without remote access is not a target, whatever its key (a fresh pair: the first is in error)
        final QueuePair c = verbs.createRcQp(cqB, cqB, QpCaps.of(4, 1));
        final QueuePair d = verbs.createRcQp(cqA, cqA, QpCaps.of(4, 1));
        c.connect(d.qpNum());
        d.connect(c.qpNum());
        final byte[] untouched = localOnly.toArray(JAVA_BYTE);
        c.postSend(12, Opcode.RDMA_WRITE, new SgeList(1).add(local.address(), 64, localMr.lkey()),
            localOnly.address(), noRemote.lkey(), true);
        assertEquals(WorkCompletions.REM_ACCESS_ERR, next(cqB).status());
        assertEquals(-1, MemorySegment.ofArray(untouched).mismatch(localOnly));
    }

    @Test
    void aFullSendQueueIsEnomemNamingTheDepth() throws Throwable
    {
        final MemorySegment local = arena.allocate(4096, 4096);
        final MemorySegment remote = arena.allocate(4096, 4096);
        final OpenedDevice.Mr localMr = device.register(local, LOCAL_WRITE);
        final OpenedDevice.Mr remoteMr = device.register(remote, LOCAL_WRITE | REMOTE_WRITE);
        final SgeList sges = new SgeList(1).add(local.address(), 8, localMr.lkey());
        final int depth = b.caps().maxSendWr();
        final MrdException full = assertThrows(MrdException.class, () ->
        {
            for (int i = 0; i <= depth; i++)
            {
                // unsignaled: their slots free only when a later signaled completion is polled
                b.postSend(i, Opcode.RDMA_WRITE, sges, remote.address(), remoteMr.rkey(), false);
            }
        });
        assertEquals(ErrorCode.ENOMEM, full.code());
        assertTrue(full.getMessage().endsWith("the queue is full (" + depth + " work requests): poll completions " +
            "before posting more"), full.getMessage());
        assertTrue(full.getMessage().startsWith("ibv_post_send(QP " + b.qpNum() + ", wr_id " + depth +
            ", RDMA_WRITE to 0x"), full.getMessage());
    }

    @Test
    void postingAndPollingAllocateNothing() throws Throwable
    {
        final MemorySegment local = pattern(arena.allocate(4096, 4096), 9);
        final MemorySegment remote = arena.allocate(4096, 4096);
        final OpenedDevice.Mr localMr = device.register(local, LOCAL_WRITE);
        final OpenedDevice.Mr remoteMr = device.register(remote, LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ);
        final SgeList sges = new SgeList(4);
        final WorkCompletions completions = new WorkCompletions(16);
        roundTrips(20_000, sges, completions, local, localMr, remote, remoteMr); // warm up the JIT
        final ThreadMXBean threads = (ThreadMXBean)ManagementFactory.getThreadMXBean();
        final long before = threads.getCurrentThreadAllocatedBytes();
        roundTrips(20_000, sges, completions, local, localMr, remote, remoteMr);
        final long allocated = threads.getCurrentThreadAllocatedBytes() - before;
        assertTrue(allocated < 4096, "20,000 posts and their polls allocated " + allocated + " bytes");
    }

    @Test
    void aCompletionQueueInUseIsNotDestroyed()
    {
        final MrdException busy = assertThrows(MrdException.class, () -> cqA.close());
        assertEquals(ErrorCode.EBUSY, busy.code());
        assertTrue(busy.getMessage().endsWith("close the queue pair first"), busy.getMessage());
        a.close();
        a.close();
        cqA.close();
        assertEquals(ErrorCode.EBADF, assertThrows(MrdException.class, () -> cqA.poll(one)).code());
        assertEquals(ErrorCode.EBADF, assertThrows(MrdException.class,
            () -> a.postRecv(1, new SgeList(1))).code());
    }

    private void roundTrips(
        final int n, final SgeList sges, final WorkCompletions completions, final MemorySegment local,
        final OpenedDevice.Mr localMr, final MemorySegment remote, final OpenedDevice.Mr remoteMr)
    {
        for (int i = 0; i < n; i++)
        {
            sges.clear().add(local.address(), 64, localMr.lkey()).add(local.address() + 128, 64, localMr.lkey());
            b.postSend(i, (i & 1) == 0 ? Opcode.RDMA_WRITE : Opcode.RDMA_READ, sges, remote.address(),
                remoteMr.rkey(), true);
            int got = 0;
            final long deadline = System.nanoTime() + DEADLINE_NS;
            while (got == 0)
            {
                got = cqB.poll(completions);
                if (System.nanoTime() - deadline > 0)
                {
                    fail("no completion of wr " + i);
                }
            }
            if (completions.status(0) != WorkCompletions.SUCCESS || completions.wrId(0) != i)
            {
                fail("wr " + i + ": " + completions.statusNameOf(0));
            }
        }
    }

    private Wc next(final CompletionQueue cq)
    {
        Wait.await("a completion on " + cq, Duration.ofNanos(DEADLINE_NS), () -> cq.poll(one) != 0);
        return new Wc(one.wrId(0), one.status(0), one.opcode(0), one.byteLength(0), one.qpNum(0));
    }

    private static Wc withoutLength(final Wc wc)
    {
        return new Wc(wc.wrId(), wc.status(), wc.opcode(), 0, wc.qpNum());
    }

    private static MemorySegment pattern(final MemorySegment memory, final int seed)
    {
        for (long i = 0; i < memory.byteSize(); i += 8)
        {
            memory.set(JAVA_LONG, i, seed * 0x9E37_79B9_7F4A_7C15L + i);
        }
        return memory;
    }
}
