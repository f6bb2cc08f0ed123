package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.Access;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.DaemonEventListener;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.Opcode;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.SgeList;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.secondary.verbs.WorkCompletions;
import io.mrd.testing.DeviceRegistrations;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.Wait;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A successor adopts what a daemon killed with -9 left (docs/adoption.md), on the emulated device: the same
 * control file with the lineage in its header, every MR with the same range, keys and device handle, every
 * allocation with its owner, and not one registration made again (the device's own count); a new client gets an
 * id above the old ones; what the old clients held is reclaimed once the successor's grace period has passed.
 */
final class AdoptionTest
{
    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private final Path dir = daemons.newDirectory("adoption");
    private final Path library = EmulatedDevice.library();

    /** What the predecessor left: its epoch, base address, MRs and allocations, as its control file showed them. */
    private record Left(long epoch, long baseVirtaddr, List<ControlFileSnapshot.Mr> mrs,
        List<ControlFileSnapshot.Allocated> allocations, int clientId, MrdClient client, MemorySegment context)
    {
    }

    @Test
    void aSuccessorAdoptsEveryMrAndAllocationAndRegistersNothingAgain() throws Exception
    {
        final Left left = killAPredecessorWithRegistrations();
        final long registrationsBefore = DeviceRegistrations.of(library, left.context());

        final LiveDaemon successor = startSuccessor(left, "60000");

        final ControlFileSnapshot after = successor.snapshot();
        assertEquals(left.epoch(), after.header().adoptedEpoch(), "the header names the epoch it adopted");
        assertNotEquals(left.epoch(), after.header().epoch(), "the successor's epoch is its own");
        assertEquals(successor.pid(), after.header().pid());
        assertEquals(left.mrs(), LiveDaemon.active(after), "every MR kept: range, keys, device handle, owner");
        assertEquals(left.allocations(), allocations(after), "every allocation kept, with its owner");
        assertEquals(0, DeviceRegistrations.of(library, left.context()) - registrationsBefore,
            "the device counts no registration made by the successor");
        successor.process().awaitLine(line -> line.contains("adopted epoch " + Long.toHexString(left.epoch()) +
            " in ") && line.contains("2 MRs"), WAIT);
        successor.assertHealthy("after adopting");

        // This JVM maps the old client's memory at the daemon's addresses: it goes before another can attach.
        left.client().close();
        try (MrdClient next = MrdClient.attach(new ClientContext().dir(dir).name("after")
            .ibverbsLibrary(library.toString())))
        {
            assertTrue(next.clientId() > left.clientId(), "a new client's id " + next.clientId() +
                " is above the adopted client's " + left.clientId());
            final MemorySegment more = next.allocate(2 * Sizes.MIB);
            assertTrue(next.newCache().lkey(more.address(), 4096) != 0, "the successor registers new memory");
        }
        successor.assertHealthy("after a new client came and went");
    }

    @Test
    void whatNoClientComesBackForIsReclaimedOnceTheGracePeriodHasPassed() throws Exception
    {
        final Left left = killAPredecessorWithRegistrations();
        final LiveDaemon successor = startSuccessor(left, "1000");
        successor.awaitSnapshot("the adopted client's memory and MRs reclaimed after 1 s of grace",
            s -> allocations(s).isEmpty() && LiveDaemon.active(s).isEmpty());
        successor.process().awaitLine(line -> line.contains("grace period of 1000 ms is over"), WAIT);
        successor.assertHealthy("after reclaiming the adopted client");
        left.client().close();
    }

    /**
     * A client with an adoption wait rides through the gap: its keys and RDMA on them go on while no daemon runs,
     * a request made in the gap waits and is answered by the successor, which the client resumes with as the same
     * client (its id, its memory: not reclaimed after the successor's grace period, its caches not flushed), and
     * its listener hears the daemon go away and be adopted, with the time in the gap.
     */
    @Test
    void aClientRidesThroughTheGapAndResumesWithTheSuccessorAsItself() throws Exception
    {
        final LiveDaemon predecessor = daemons.launch("adoption").in(dir)
            .env(Map.of(EmulatedDevice.LIBRARY_ENV, library.toString()))
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", "60000");
        final CompletableFuture<String> away = new CompletableFuture<>();
        final CompletableFuture<Long> adopted = new CompletableFuture<>();
        final CompletableFuture<DaemonDeadException> lost = new CompletableFuture<>();
        final MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name("rides")
            .ibverbsLibrary(library.toString()).adoptionWaitMs(60_000).daemonEventListener(new DaemonEventListener()
            {
                public void onDaemonLost(final DaemonDeadException reason, final long noticedAtMs)
                {
                    lost.complete(reason);
                }

                public void onDaemonAway(final String reason, final long noticedAtMs)
                {
                    away.complete(reason);
                }

                public void onDaemonAdopted(final long epoch, final long gapMs)
                {
                    adopted.complete(gapMs);
                }
            }));
        final int clientId = client.clientId();
        final MemorySegment source = client.allocate(4 * Sizes.MIB);
        final MrCache cache = client.newCache();
        final int lkey = cache.lkey(source.address(), 4096);
        final RegisteredMemory target = client.allocateRegistered(2 * Sizes.MIB, Access.REMOTE_WRITE);
        final Verbs verbs = client.verbs();
        final CompletionQueue cq = verbs.createCq(16);
        final QueuePair a = verbs.createRcQp(cq, cq, QpCaps.of(8, 1));
        final QueuePair b = verbs.createRcQp(cq, cq, QpCaps.of(8, 1));
        a.connect(b.qpNum());
        b.connect(a.qpNum());
        final WorkCompletions completions = new WorkCompletions(4);
        rdmaWrite(a, cq, completions, source, lkey, target, "before the kill", 0);
        predecessor.awaitHolder();
        final long registrationsBefore = DeviceRegistrations.of(library, verbs.context());

        assertEquals(137, predecessor.kill(), "killed by SIGKILL");
        away.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        assertEquals(lkey, cache.lkey(source.address(), 4096), "a lookup in the gap returns the key");
        rdmaWrite(a, cq, completions, source, cache.lkey(source.address(), 4096), target, "in the gap", 4096);
        final CompletableFuture<MemorySegment> request = CompletableFuture.supplyAsync(
            () -> client.allocate(2 * Sizes.MIB));
        Thread.sleep(300);
        assertFalse(request.isDone(), "a request in the gap waits: no daemon runs to answer it");
        assertFalse(client.isBroken(), "in the gap the client is not lost");

        final LiveDaemon successor = daemons.launch("adoption-successor").in(dir)
            .baseVirtaddr(predecessor.baseVirtaddr()).env(Map.of(EmulatedDevice.LIBRARY_ENV, library.toString()))
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", "1000");
        final long gapMs = adopted.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        assertTrue(gapMs > 0, "the gap lasted " + gapMs + " ms");
        final MemorySegment more = request.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
        assertEquals(clientId, client.clientId(), "the same client");
        successor.process().awaitLine(line -> line.contains("grace period of 1000 ms is over: reclaiming 0 of"), WAIT);
        final ControlFileSnapshot after = successor.snapshot();
        assertTrue(allocations(after).stream().filter(x -> x.owner() == clientId).count() >= 3,
            "the resumed client keeps its memory after the grace period: " + LiveDaemon.describe(after));
        assertEquals(lkey, cache.lkey(source.address(), 4096), "the same key: no flush");
        assertTrue(cache.lkey(more.address(), 4096) != 0, "the successor registers new memory for it");
        rdmaWrite(a, cq, completions, source, lkey, target, "after the adoption", 8192);
        assertEquals(1, DeviceRegistrations.of(library, verbs.context()) - registrationsBefore,
            "the successor registered only the new memory");
        assertFalse(lost.isDone(), "never lost");
        successor.assertHealthy("after the client resumed");
        a.close();
        b.close();
        cq.close();
        client.close();
    }

    /** RDMA WRITEs {@code text} from {@code source} to {@code target} at {@code offset} and checks it arrived. */
    private static void rdmaWrite(final QueuePair qp, final CompletionQueue cq, final WorkCompletions completions,
        final MemorySegment source, final int lkey, final RegisteredMemory target, final String text, final long offset)
    {
        final byte[] bytes = text.getBytes(StandardCharsets.US_ASCII);
        MemorySegment.copy(bytes, 0, source, ValueLayout.JAVA_BYTE, 0, bytes.length);
        qp.postSend(offset, Opcode.RDMA_WRITE, new SgeList(1).add(source.address(), bytes.length, lkey),
            target.segment().address() + offset, target.rkey(), true);
        Wait.await("the RDMA WRITE " + text + " completes", WAIT, () -> cq.poll(completions) > 0);
        assertEquals(0, completions.status(0), "completed " + completions.statusNameOf(0));
        final byte[] arrived = new byte[bytes.length];
        MemorySegment.copy(target.segment(), ValueLayout.JAVA_BYTE, offset, arrived, 0, arrived.length);
        assertEquals(text, new String(arrived, StandardCharsets.US_ASCII), "the bytes arrived");
    }

    /**
     * Starts a daemon on the emulated device with a client that allocates, registers (one MR by lookup, one with
     * remote access at allocation), waits until the holder holds the descriptors, and kills the daemon with -9.
     */
    private Left killAPredecessorWithRegistrations() throws IOException
    {
        final LiveDaemon predecessor = daemons.launch("adoption").in(dir)
            .env(Map.of(EmulatedDevice.LIBRARY_ENV, library.toString()))
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", "60000");
        final MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name("before")
            .ibverbsLibrary(library.toString()));
        final MemorySegment plain = client.allocate(4 * Sizes.MIB);
        final MrCache cache = client.newCache();
        assertTrue(cache.lkey(plain.address(), 4096) != 0);
        final RegisteredMemory remote = client.allocateRegistered(2 * Sizes.MIB, Access.REMOTE_WRITE);
        assertTrue(remote.rkey() != 0);
        final Path holderLog = dir.resolve(RunDirectoryPath.HOLD_LOG_FILE);
        Wait.await("the descriptor holder holds the device and the lists", WAIT,
            () -> Files.exists(holderLog) && Files.readString(holderLog).contains("holding"));
        final ControlFileSnapshot before = predecessor.snapshot();
        final List<ControlFileSnapshot.Mr> mrs = LiveDaemon.active(before);
        assertEquals(2, mrs.size(), LiveDaemon.describe(before));
        assertTrue(mrs.stream().allMatch(mr -> mr.deviceHandle() != MrDescriptor.NO_DEVICE_HANDLE));
        // the client's import of the device: its context counts the registrations of the daemon's context
        final MemorySegment context = client.verbs().context();
        assertEquals(137, predecessor.kill(), "killed by SIGKILL");
        return new Left(before.header().epoch(), predecessor.baseVirtaddr(), mrs, allocations(before),
            client.clientId(), client, context);
    }

    private LiveDaemon startSuccessor(final Left left, final String graceMs)
    {
        return daemons.launch("adoption-successor").in(dir).baseVirtaddr(left.baseVirtaddr())
            .env(Map.of(EmulatedDevice.LIBRARY_ENV, library.toString()))
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", graceMs);
    }

    private static List<ControlFileSnapshot.Allocated> allocations(final ControlFileSnapshot snapshot)
    {
        return snapshot.lists().stream().flatMap(list -> list.allocations().stream()).toList();
    }
}
