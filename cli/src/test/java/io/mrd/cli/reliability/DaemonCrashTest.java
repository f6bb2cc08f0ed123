package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.layout.ControlFile;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.ChildJvm;
import io.mrd.tools.RunDirectoryReader;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The daemon's end seen by its secondaries: killed with {@code kill -9} (secondaries detect it within 2 s and
 * never return an lkey after that; {@code mrd start} on the same directory recovers it and the same secondary
 * processes attach again, to the new epoch), frozen with SIGSTOP (the heartbeat alone gives it away within
 * 2 s), and stopped with SIGTERM (every MR deregistered, nothing pinned, files removed).
 */
final class DaemonCrashTest
{
    /** The bound on detection. */
    static final long DETECTION_MS = 2_000;
    static final Duration WAIT = Duration.ofSeconds(60);
    private static final Pattern DEAD = Pattern.compile("dead detected=(\\d+) lastLkey=(\\d+)");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("crash-daemon");

    @TempDir
    Path signals;

    @Test
    void killNineIsDetectedWithinTwoSecondsAndANewDaemonAdoptsTheDirectory() throws IOException
    {
        ChildJvm a = null;
        ChildJvm b = null;
        try
        {
            final long oldEpoch;
            final long oldPid;
            final long base;
            final long killedAtMs;
            try (LiveDaemon daemon = daemons.launch("crash-daemon").in(dir).start("--max-memory", "256MiB"))
            {
                oldEpoch = daemon.controlFile().header().epoch();
                oldPid = daemon.pid();
                base = daemon.baseVirtaddr();
                a = watcher("watcher-a", "reattach");
                b = watcher("watcher-b", "reattach");
                startWatching(a, b);
                daemon.awaitHolder();
                killedAtMs = System.currentTimeMillis();
                assertEquals(137, daemon.kill(), "killed by SIGKILL");
            }
            final long latencyA = detection(a, killedAtMs);
            final long latencyB = detection(b, killedAtMs);
            assertNothingAfterDeath(a);
            assertNothingAfterDeath(b);

            final MrdRunner.Result stale = MrdRunner.mrd("status", "--dir", dir.toString());
            assertEquals(1, stale.exit(), stale.toString());
            assertTrue(stale.both().contains("stale files of pid " + oldPid), stale.toString());
            assertTrue(stale.both().contains("its descriptor holder keeps its registrations"), stale.toString());

            // At the killed daemon's address: the watchers' old mappings must not stand in the new daemon's way.
            final MrdRunner.Result start = MrdRunner.mrd("start", "--dir", dir.toString(), "--huge-dir", "none",
                "--base-virtaddr", Sizes.hex(base), "--max-memory", "256MiB");
            assertEquals(0, start.exit(), start.toString());
            final long newEpoch;
            try (ControlFile ctl = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
            {
                newEpoch = ctl.header().epoch();
                assertNotEquals(oldPid, ctl.header().pid());
            }
            assertNotEquals(oldEpoch, newEpoch, "a new daemon has a new epoch");
            // The killed daemon's holder kept its memory: the new one adopts its state (docs/adoption.md); it logs
            // so right after it has written its pid, which is when 'mrd start' returns.
            Wait.await("the new daemon's log says it adopted epoch " + Long.toHexString(oldEpoch), WAIT,
                () -> readLog().contains("adopted epoch " + Long.toHexString(oldEpoch)));

            for (final ChildJvm watcher : List.of(a, b))
            {
                final String line = watcher.awaitLine(l -> l.startsWith("reattached "), WAIT);
                assertTrue(line.startsWith("reattached epoch=" + Sizes.hex(newEpoch) + " old=" + Sizes.hex(oldEpoch)),
                    line);
                assertTrue(line.endsWith(" verified"), line);
                System.out.println("FIGURE crash-daemon " + line);
            }
            assertEquals(0, MrdRunner.mrd("check", "--dir", dir.toString()).exit());
            Signals.send(signals, "watcher-a", "exit");
            Signals.send(signals, "watcher-b", "exit");
            assertEquals(0, a.awaitExit(WAIT), a::output);
            assertEquals(0, b.awaitExit(WAIT), b::output);
            final MrdRunner.Result stop = MrdRunner.mrd("stop", "--dir", dir.toString());
            assertEquals(0, stop.exit(), stop.toString());
            System.out.println("FIGURE crash-daemon kill9 detectionMs=" + latencyA + "," + latencyB);
        }
        finally
        {
            if (null != a)
            {
                a.close();
            }
            if (null != b)
            {
                b.close();
            }
        }
    }

    @Test
    void aFrozenDaemonIsDetectedByItsHeartbeatWithinTwoSeconds() throws Exception
    {
        try (LiveDaemon daemon = daemons.launch("crash-daemon").in(dir).start("--max-memory", "256MiB");
            ChildJvm a = watcher("watcher-a", "stay");
            ChildJvm b = watcher("watcher-b", "stay"))
        {
            startWatching(a, b);
            final long stoppedAtMs = System.currentTimeMillis();
            daemon.freeze();
            final long latencyA;
            final long latencyB;
            try
            {
                latencyA = detection(a, stoppedAtMs);
                latencyB = detection(b, stoppedAtMs);
                assertTrue(a.output().contains("heartbeat"), a::output);
            }
            finally
            {
                daemon.thaw();
            }
            assertNothingAfterDeath(a);
            assertNothingAfterDeath(b);
            Signals.send(signals, "watcher-a", "exit");
            Signals.send(signals, "watcher-b", "exit");
            assertEquals(0, a.awaitExit(WAIT), a::output);
            assertEquals(0, b.awaitExit(WAIT), b::output);
            Wait.await("the frozen watchers' memory reclaimed after SIGCONT", WAIT,
                () -> daemon.counters(MrdCounter.CLIENTS_CONNECTED, MrdCounter.BYTES_ALLOCATED), LiveDaemon::allZero);
            daemon.assertHealthy("after SIGSTOP and SIGCONT");
            System.out.println("FIGURE crash-daemon sigstop detectionMs=" + latencyA + "," + latencyB);
        }
    }

    @Test
    void sigtermDeregistersEveryMrUnpinsEverythingAndRemovesTheFiles() throws IOException
    {
        try (LiveDaemon daemon = daemons.launch("crash-daemon").in(dir).start("--max-memory", "256MiB");
            ChildJvm a = holder("holder-a");
            ChildJvm b = holder("holder-b"))
        {
            a.awaitLine(l -> l.startsWith("holding "), WAIT);
            b.awaitLine(l -> l.startsWith("holding "), WAIT);
            final long active = daemon.counter(MrdCounter.MRS_ACTIVE);
            final long pinned = daemon.counter(MrdCounter.BYTES_PINNED);
            final long locked = daemon.lockedKib();
            assertTrue(active >= 4 && pinned > 0 && locked > 0, "MRs " + active + ", pinned " + pinned + ", VmLck " + locked);

            final int exit = daemon.terminate();
            final String output = daemon.process().output();
            assertTrue(output.contains("released all MRs: 0 pinned bytes left"), output);
            // The test's mapping of the control file outlives the file: these are the daemon's last words.
            assertEquals(0, daemon.counter(MrdCounter.MRS_ACTIVE));
            assertEquals(0, daemon.counter(MrdCounter.BYTES_PINNED));
            assertEquals(0, daemon.counter(MrdCounter.BYTES_ALLOCATED));
            assertEquals(daemon.counter(MrdCounter.MRS_CREATED), daemon.counter(MrdCounter.MRS_DEREGISTERED),
                "every MR created was deregistered");
            assertEquals(HeaderDescriptor.HEARTBEAT_CLOSED, daemon.controlFile().header().heartbeatMs());
            assertFalse(Files.exists(dir.resolve(ControlFile.FILE_NAME)), "control file removed");
            assertFalse(Files.exists(dir.resolve(RunDirectoryPath.SOCKET_FILE)), "socket removed");
            try (Stream<Path> mem = Files.exists(dir.resolve(RunDirectoryPath.MEM_DIR)) ?
                Files.list(dir.resolve(RunDirectoryPath.MEM_DIR)) : Stream.empty())
            {
                assertEquals(List.of(), mem.toList(), "backing files removed");
            }
            assertFalse(RunDirectoryReader.isLocked(dir), "lock released");
            for (final ChildJvm holder : List.of(a, b))
            {
                final String gone = holder.awaitLine(l -> l.startsWith("daemon gone: "), WAIT);
                assertEquals(0, holder.awaitExit(WAIT), holder::output);
                System.out.println("FIGURE crash-daemon sigterm holder " + gone);
            }
            System.out.println("FIGURE crash-daemon sigterm exit=" + exit + " mrsBefore=" + active + " pinnedBefore=" +
                pinned + " VmLckKiBBefore=" + locked + " created=" + daemon.counter(MrdCounter.MRS_CREATED) +
                " deregistered=" + daemon.counter(MrdCounter.MRS_DEREGISTERED));
        }
    }

    private ChildJvm watcher(final String name, final String after)
    {
        return ChildJvm.start(name, ReliabilitySecondary.class.getName(),
            List.of("watch", dir.toString(), name, signals.toString(), after), Map.of(),
            List.of("-XX:ErrorFile=" + signals.resolve("hs_err_pid%p.log")));
    }

    private ChildJvm holder(final String name)
    {
        return ChildJvm.start(name, ReliabilitySecondary.class.getName(),
            List.of("hold", dir.toString(), name, signals.toString()), Map.of(),
            List.of("-XX:ErrorFile=" + signals.resolve("hs_err_pid%p.log")));
    }

    private static void startWatching(final ChildJvm a, final ChildJvm b)
    {
        a.awaitLine(l -> l.startsWith("watching "), WAIT);
        b.awaitLine(l -> l.startsWith("watching "), WAIT);
    }

    /**
     * @return ms from the fault to the watcher's detection; asserts it is within {@link #DETECTION_MS} and that
     * the watcher's last lkey came before it.
     */
    private static long detection(final ChildJvm watcher, final long faultAtMs)
    {
        final String line = watcher.awaitLine(l -> l.startsWith("dead "), WAIT);
        final Matcher m = DEAD.matcher(line);
        assertTrue(m.find(), line);
        final long detected = Long.parseLong(m.group(1));
        final long lastLkey = Long.parseLong(m.group(2));
        final long latency = detected - faultAtMs;
        assertTrue(latency <= DETECTION_MS, "detected " + latency + " ms after the fault: " + line);
        assertTrue(lastLkey <= detected, line);
        System.out.println("FIGURE crash-daemon detection " + latency + " ms (last lkey " + (lastLkey - faultAtMs) +
            " ms after the fault): " + line);
        return latency;
    }

    private static void assertNothingAfterDeath(final ChildJvm watcher)
    {
        final String line = watcher.awaitLine(l -> l.startsWith("after-death "), WAIT);
        assertTrue(line.startsWith("after-death returned=0 refused=10002 other=0"), line);
    }

    private String readLog() throws IOException
    {
        return Files.readString(dir.resolve(RunDirectoryPath.LOG_FILE));
    }
}
