package io.mrd.cli.reliability;

import io.mrd.cli.Mrd;
import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.Access;
import io.mrd.layout.CacheEntryDescriptor;
import io.mrd.layout.ControlFile;
import io.mrd.layout.DeviceTable;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrRecord;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.HolderMessage;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrdClient;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.DeviceRegistrations;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.Wait;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The faults of an adoption (docs/adoption.md), each on the emulated device after a daemon with two MRs was
 * killed with -9: a successor killed mid-adoption leaves it to a third; a control file corrupted in the gap, or
 * handles in it that name other MRs, make the successor start afresh saying why; two successors at once, and the
 * lock's loser names the winner; a descriptor planted with the holder is refused. Nothing is served that should
 * not be: a successor either adopts the very MRs (the device's registration count unchanged) or none.
 */
final class AdoptionFaultTest
{
    private static final Duration WAIT = Duration.ofSeconds(60);

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private final Path dir = daemons.newDirectory("adoption-fault");
    private final Path library = EmulatedDevice.library();
    private final Map<String, String> env = Map.of(EmulatedDevice.LIBRARY_ENV, library.toString());
    private long base;
    private long killedEpoch;
    private List<ControlFileSnapshot.Mr> killedMrs;
    private MrdClient client;
    /** The client's import of the daemon's device: its context counts the daemon's registrations. */
    private MemorySegment context;

    @Test
    void aSuccessorKilledMidAdoptionLeavesItToAThirdDaemon() throws Exception
    {
        killADaemonWithTwoMrs();
        final long registrations = DeviceRegistrations.of(library, context);
        final ChildJvm second = successorProcess("adoption-second").start();
        second.awaitLine(line -> line.contains("adopting the previous daemon's state"), WAIT);
        second.kill();
        final LiveDaemon third = successor("adoption-third");
        final ControlFileSnapshot after = third.snapshot();
        assertEquals(killedMrs, LiveDaemon.active(after), "the third daemon adopted the same MRs");
        assertEquals(0, DeviceRegistrations.of(library, context) - registrations, "and registered none again");
        // the killed daemon's epoch, or the second's had it served before the kill landed
        assertNotEquals(0, after.header().adoptedEpoch(), "the lineage names what it adopted");
        assertNotEquals(after.header().epoch(), after.header().adoptedEpoch());
        third.assertHealthy("after the third daemon adopted");
    }

    @Test
    void aControlFileCorruptedInTheGapMeansStartingAfreshAndTheLogSaysWhy() throws Exception
    {
        killADaemonWithTwoMrs();
        try (ControlFile ctl = ControlFile.openReadWrite(dir.resolve(ControlFile.FILE_NAME)))
        {
            // an MR record whose live-segment count is not its bitmap's: the MR table is not one daemon's writing
            final MrRecord mr = new MrRecord().wrap(ctl.buffer(), ctl.layout().mrOffset(killedMrs.get(0).index()));
            mr.msN(mr.msN() + 5);
        }
        final LiveDaemon successor = successor("adoption-corrupt");
        successor.process().awaitLine(line -> line.contains("cannot be adopted") &&
            line.contains("fails mrd check") && line.contains("msN"), WAIT);
        assertAfresh(successor);
    }

    @Test
    void aDaemonKilledInsideAWriteSectionIsAdoptedWithItsGlobalCacheRebuilt() throws Exception
    {
        killADaemonWithTwoMrs();
        final long devGen;
        try (ControlFile ctl = ControlFile.openReadWrite(dir.resolve(ControlFile.FILE_NAME)))
        {
            // killed inside a write section: the seqlock odd, the cache it was changing torn (an entry's lkey)
            devGen = ctl.header().devGen();
            final long seq = ctl.buffer().getLongVolatile(HeaderDescriptor.SEQ_OFFSET);
            ctl.buffer().putLongVolatile(HeaderDescriptor.SEQ_OFFSET, seq | 1);
            final int entry = ctl.layout().cacheOffset() + CacheEntryDescriptor.ENTRY_LENGTH;
            ctl.buffer().putInt(entry + CacheEntryDescriptor.LKEY_OFFSET, 0x5eed);
        }
        final long registrations = DeviceRegistrations.of(library, context);
        final LiveDaemon successor = successor("adoption-torn");
        successor.process().awaitLine(line -> line.contains("died inside a write section"), WAIT);
        final ControlFileSnapshot after = successor.snapshot();
        assertEquals(killedEpoch, after.header().adoptedEpoch(), "adopted");
        assertEquals(killedMrs, LiveDaemon.active(after), "the same MRs");
        assertTrue(after.header().devGen() > devGen, "devGen bumped: every local cache flushes");
        assertEquals(0, DeviceRegistrations.of(library, context) - registrations);
        successor.assertHealthy("after rebuilding the torn cache");
    }

    @Test
    void handlesThatNameOtherMrsAreRefusedAndTheSuccessorStartsAfresh() throws Exception
    {
        killADaemonWithTwoMrs();
        try (ControlFile ctl = ControlFile.openReadWrite(dir.resolve(ControlFile.FILE_NAME)))
        {
            // each record names the other MR: both handles are live MRs of the PD, so only the import's check of
            // range and keys against the record can tell; each one's entry of the MR key table says the same (mrd
            // check, which the successor runs first, compares the two)
            final int a = killedMrs.get(0).index();
            final int b = killedMrs.get(1).index();
            final MrRecord first = new MrRecord().wrap(ctl.buffer(), ctl.layout().mrOffset(a));
            final MrRecord second = new MrRecord().wrap(ctl.buffer(), ctl.layout().mrOffset(b));
            final int handle = first.deviceHandle();
            first.deviceHandle(second.deviceHandle());
            second.deviceHandle(handle);
            final DeviceTable keys = new DeviceTable(ctl.buffer(), ctl.layout());
            keys.keys(a, 0, keys.lkey(a, 0), keys.rkey(a, 0), first.deviceHandle());
            keys.keys(b, 0, keys.lkey(b, 0), keys.rkey(b, 0), second.deviceHandle());
        }
        final LiveDaemon successor = successor("adoption-forged");
        successor.process().awaitLine(line -> line.contains("failed") && line.contains("not the predecessor's MR") &&
            line.contains("starting afresh"), WAIT);
        assertAfresh(successor);
    }

    @Test
    void twoSuccessorsAtOnceTheLockDecidesAndTheLoserNamesTheWinner() throws Exception
    {
        killADaemonWithTwoMrs();
        final List<ChildJvm> both = new ArrayList<>();
        both.add(successorProcess("adoption-racer-a").start());
        both.add(successorProcess("adoption-racer-b").start());
        ChildJvm winner = null;
        ChildJvm loser = null;
        long winnerPid = 0;
        for (final ChildJvm racer : both)
        {
            final String line = racer.awaitLine(l -> l.startsWith("mrd started:") || l.contains("EBUSY"), WAIT);
            if (line.startsWith("mrd started:"))
            {
                winner = racer;
                // "mrd started: pid N, dir D": the daemon's own pid, which the lock file names
                winnerPid = Long.parseLong(line.replaceAll("^mrd started: pid (\\d+).*$", "$1"));
            }
            else
            {
                loser = racer;
            }
        }
        assertTrue(null != winner && null != loser, "one started, one was refused");
        assertNotEquals(0, loser.awaitExit(WAIT), "the loser exits with an error");
        assertTrue(loser.output().contains("already running") && loser.output().contains("pid " + winnerPid),
            "the loser names the winner, pid " + winnerPid + ": " + loser.output());
        winner.awaitLine(line -> line.contains("adopted epoch " + Long.toHexString(killedEpoch)), WAIT);
        winner.close();
    }

    @Test
    void aDescriptorPlantedWithTheHolderIsRefusedAndTheSuccessorAdoptsTheRealOnes() throws Exception
    {
        killADaemonWithTwoMrs();
        final Path holderLogFile = dir.resolve(RunDirectoryPath.HOLD_LOG_FILE);
        Wait.await("the holder noticed the daemon's death: no daemon owns it now", WAIT,
            () -> Files.readString(holderLogFile).contains("the daemon's connection ended"));
        final int planted = Posix.memfdCreate("planted", Posix.MFD_CLOEXEC);
        try (UnixSocket socket = UnixSocket.connect(dir.resolve(RunDirectoryPath.HOLD_SOCKET_FILE));
            Arena arena = Arena.ofConfined())
        {
            final MemorySegment frame = arena.allocate(HolderMessage.LENGTH);
            HolderMessage.encode(frame, new HolderMessage.Frame(HolderMessage.DEPOSIT, HolderMessage.FLAG_COMMAND_FD,
                1, 42));
            socket.writeFully(frame, 0, HolderMessage.LENGTH);
            socket.sendFd(planted, (byte)HolderMessage.DEPOSIT);
            socket.receiveTimeout(10_000);
            assertEquals(0, socket.read(arena.allocate(1), 0, 1), "the holder hangs up on the deposit");
        }
        finally
        {
            Posix.close(planted);
        }
        final long registrations = DeviceRegistrations.of(library, context);
        final LiveDaemon successor = successor("adoption-planted");
        assertEquals(killedEpoch, successor.snapshot().header().adoptedEpoch(), "it adopted the real daemon");
        assertEquals(killedMrs, LiveDaemon.active(successor.snapshot()));
        assertEquals(0, DeviceRegistrations.of(library, context) - registrations);
        final String holderLog = Files.readString(holderLogFile);
        assertTrue(holderLog.contains("refused a deposit"), holderLog);
        successor.assertHealthy("after the planted deposit");
    }

    @Test
    void aSecondaryThatDiesInTheGapIsReclaimedOnceTheSuccessorsGracePeriodHasPassed() throws Exception
    {
        final LiveDaemon daemon = daemons.launch("adoption-fault").in(dir).env(env)
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", "60000");
        base = daemon.baseVirtaddr();
        final Path signals = Files.createDirectories(dir.resolve("signals"));
        final Map<String, String> rides = new java.util.HashMap<>(env);
        rides.put(ClientContext.MRD_ADOPTION_WAIT_MS, "60000");
        final ChildJvm secondary = ChildJvm.start("gap-victim", ReliabilitySecondary.class.getName(),
            List.of("hold", dir.toString(), "gap-victim", signals.toString()), rides, List.of());
        secondary.awaitLine(line -> line.startsWith("holding "), WAIT);
        daemon.awaitHolder();
        assertTrue(!LiveDaemon.active(daemon.snapshot()).isEmpty(), LiveDaemon.describe(daemon.snapshot()));
        assertEquals(137, daemon.kill());
        secondary.kill();
        final LiveDaemon successor = daemons.launch("adoption-after-victim").in(dir).baseVirtaddr(base).env(env)
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", "1000");
        successor.process().awaitLine(line -> line.contains("reclaiming 1 of 1 client"), WAIT);
        successor.awaitSnapshot("the dead secondary's memory and MRs reclaimed", s -> LiveDaemon.active(s).isEmpty() &&
            s.lists().stream().allMatch(list -> list.allocations().isEmpty()));
        successor.assertHealthy("after reclaiming a secondary that died in the gap");
    }

    /** The successor started afresh: no lineage, no MR, nothing registered. */
    private void assertAfresh(final LiveDaemon successor)
    {
        final ControlFileSnapshot after = successor.snapshot();
        assertEquals(0, after.header().adoptedEpoch(), "started afresh");
        assertNotEquals(killedEpoch, after.header().epoch());
        assertEquals(List.of(), LiveDaemon.active(after), "no MR of the killed daemon's is served");
        successor.assertHealthy("after starting afresh");
    }

    private void killADaemonWithTwoMrs()
    {
        final LiveDaemon daemon = daemons.launch("adoption-fault").in(dir).env(env)
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", "60000");
        base = daemon.baseVirtaddr();
        client = MrdClient.attach(new ClientContext().dir(dir).name("fault").ibverbsLibrary(library.toString()));
        final MemorySegment plain = client.allocate(4 * Sizes.MIB);
        assertTrue(client.newCache().lkey(plain.address(), 4096) != 0);
        assertTrue(client.allocateRegistered(2 * Sizes.MIB, Access.REMOTE_WRITE).rkey() != 0);
        context = client.verbs().context();
        daemon.awaitHolder();
        final ControlFileSnapshot before = daemon.snapshot();
        killedEpoch = before.header().epoch();
        killedMrs = LiveDaemon.active(before);
        assertEquals(2, killedMrs.size());
        assertEquals(137, daemon.kill());
    }

    /** The client, lost with its daemon, goes last: its import of the device is what the counts are read through. */
    @AfterEach
    void closeClient()
    {
        if (null != client)
        {
            client.close();
        }
    }

    private LiveDaemon successor(final String name)
    {
        return daemons.launch(name).in(dir).baseVirtaddr(base).env(env)
            .start("--provider", "ibverbs", "--max-memory", "256MiB", "--adoption-grace", "60000");
    }

    private ChildJvm.Launch successorProcess(final String name)
    {
        return ChildJvm.launch(name, Mrd.class.getName()).env(env).args(List.of("start", "--foreground", "--dir",
            dir.toString(), "--huge-dir", "none", "--base-virtaddr", Sizes.hex(base), "--provider", "ibverbs",
            "--max-memory", "256MiB", "--adoption-grace", "60000"));
    }
}
