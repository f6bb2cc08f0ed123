package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.cli.secondaries.SecondaryDriver.Result;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Files;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Deaths (issue 4, item 4): a secondary killed with kill -9 has its memory reclaimed; after the daemon is
 * killed a secondary's next slow-path lookup raises the daemon-dead error within 2 s; a request to a stopped
 * daemon fails at once with a clear error.
 */
final class ProcessDeathTest
{
    /** The bound on noticing a dead daemon (the client's watchdog: 100 ms period, 1 s stale limit). */
    private static final long DETECTION_LIMIT_MS = 2_000;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    private LiveDaemon daemon;

    @BeforeEach
    void startDaemon()
    {
        daemon = daemons.start("death", "--max-memory", "128MiB");
    }

    @Test
    void killedSecondarysMemoryIsReclaimed()
    {
        final Secondary victim = Secondary.start(daemon, "victim",
            "attach name=victim",
            "alloc a 8MiB",
            "alloc b 4MiB",
            "lkey a 64 #a",
            "lkey b+1MiB 64 #b",
            "signal " + daemon.syncFile("victim-ready"),
            "await " + daemon.syncFile("never") + " 0");
        final Secondary survivor = Secondary.start(daemon, "survivor",
            "attach name=survivor",
            "await " + daemon.syncFile("victim-ready"),
            "alloc s 2MiB #alloc",
            "lkey s 64 #s",
            "signal " + daemon.syncFile("survivor-ready") + " #ready",
            "await " + daemon.syncFile("victim-gone"),
            "lkey s 64 #s-again",
            "newcache",
            "lkey s+4096 64 #s-cold",
            "close");
        final int victimId = Integer.parseInt(victim.awaitOk("1").get("clientId"));
        final String survivorLkey = survivor.awaitOk("s").get("lkey");
        survivor.awaitOk("ready");
        final ControlFileSnapshot before = daemon.snapshot();
        assertEquals(14 * Sizes.MIB, before.counter(MrdCounter.BYTES_ALLOCATED), LiveDaemon.describe(before));
        assertEquals(2, LiveDaemon.active(before).size(), LiveDaemon.describe(before));
        assertEquals(2, before.clients().size(), LiveDaemon.describe(before));

        victim.kill();

        final ControlFileSnapshot after = daemon.awaitSnapshot("the victim's memory and MR to be reclaimed", s ->
            s.counter(MrdCounter.BYTES_ALLOCATED) == 2 * Sizes.MIB && s.mrs().size() == 1 && s.clients().size() == 1);
        final ControlFileSnapshot.Mr left = after.mrs().getFirst();
        assertTrue(left.active(), LiveDaemon.describe(after));
        assertEquals(survivorLkey, Sizes.hex(left.lkey() & 0xFFFF_FFFFL), "only the survivor's MR is left");
        for (final ControlFileSnapshot.MemsegList list : after.lists())
        {
            for (final ControlFileSnapshot.Allocated range : list.allocations())
            {
                assertTrue(range.owner() != victimId, "segments still owned by the dead client: " + range);
            }
        }
        assertTrue(after.counter(MrdCounter.MRS_DEREGISTERED) >= 1, "the victim's MR was deregistered");
        daemon.assertHealthy("after the victim's reclaim");

        daemon.signal("victim-gone");
        assertEquals(survivorLkey, survivor.awaitOk("s-again").get("lkey"), "the survivor's MR is untouched");
        assertEquals(survivorLkey, survivor.awaitOk("s-cold").get("lkey"));
        survivor.awaitDone();

        daemon.awaitSnapshot("every byte back", s ->
            s.counter(MrdCounter.BYTES_ALLOCATED) == 0 && s.mrs().isEmpty() && s.clients().isEmpty());
        final MrdRunner.Result status = daemon.mrdProcess("status");
        assertEquals(0, status.exit(), status::toString);
        assertTrue(status.both().contains("0B in use"), status::toString);
        daemon.assertHealthy("with every byte back");
    }

    /**
     * Two ways to meet the dead daemon: a secondary that keeps looking up (each lookup misses its empty cache),
     * and one whose first lookup after the kill must ask the daemon for a new MR.
     */
    @Test
    void afterTheDaemonIsKilledTheNextSlowPathLookupSaysItIsDead()
    {
        final String killed = daemon.syncFile("killed").toString();
        final Secondary looper = Secondary.start(daemon, "looper",
            "attach name=looper",
            "alloc a 2MiB",
            "lkey a 64 #a",
            "signal " + daemon.syncFile("looper-ready"),
            "loop-lkey a 64 60000 #loop",
            "lkey a 64 #after");
        final Secondary prober = Secondary.start(daemon, "prober",
            "attach name=prober",
            "await " + daemon.syncFile("looper-ready"),
            "alloc b 2MiB #b",
            "signal " + daemon.syncFile("prober-ready") + " #ready",
            "await " + killed,
            "lkey b 64 #probe",
            "lkey b 64 #again",
            "alloc c 2MiB #alloc");
        looper.awaitOk("loop.start");
        prober.awaitOk("ready");
        final long daemonPid = daemon.pid();
        // No MR covers b yet: the prober's lookup has to take the slow path to the daemon.
        final long b = prober.awaitOk("b").number("addr");
        final ControlFileSnapshot s = daemon.snapshot();
        assertTrue(LiveDaemon.active(s).stream().noneMatch(mr -> b >= mr.start() && b < mr.end()),
            LiveDaemon.describe(s));

        final long killedAtMs = System.currentTimeMillis();
        daemon.kill();
        daemon.signal("killed");

        final Result loop = looper.await("loop");
        assertDaemonDead(loop, daemonPid);
        assertTrue(Long.parseLong(loop.get("iterations")) > 0, loop.toString());
        final long loopDetectionMs = Long.parseLong(loop.get("at")) - killedAtMs;
        final Result probe = prober.await("probe");
        assertDaemonDead(probe, daemonPid);
        final long probeMs = TimeUnit.NANOSECONDS.toMillis(Long.parseLong(probe.get("ns")));
        System.out.printf("daemon death noticed by the looping secondary %d ms after kill -9; the prober's " +
            "lookup took %d ms (%d ms after the kill)%n", loopDetectionMs, probeMs,
            Long.parseLong(probe.get("at")) - killedAtMs);
        assertTrue(loopDetectionMs <= DETECTION_LIMIT_MS,
            "a secondary looking up noticed the dead daemon " + loopDetectionMs + " ms after kill -9, more than " +
            DETECTION_LIMIT_MS + " ms: " + loop);
        assertTrue(probeMs <= DETECTION_LIMIT_MS,
            "the slow-path lookup after the kill took " + probeMs + " ms to fail: " + probe);

        // And nothing from the dead epoch afterwards, neither from a local cache nor from a request.
        assertDaemonDead(looper.await("after"), daemonPid);
        assertDaemonDead(prober.await("again"), daemonPid);
        assertDaemonDead(prober.await("alloc"), daemonPid);
        looper.awaitDone();
        prober.awaitDone();
    }

    /**
     * A daemon that hangs (SIGSTOP) keeps its socket open: only the heartbeat tells. The client's watchdog
     * must declare it dead within the 2 s, failing the request in flight instead of letting it wait
     * for the 5 s request timeout.
     */
    @Test
    void aHungDaemonIsDeclaredDeadByItsHeartbeatWithinTwoSeconds() throws Exception
    {
        final Secondary looper = Secondary.start(daemon, "looper",
            "attach name=looper",
            "alloc a 2MiB",
            "lkey a 64 #a",
            "signal " + daemon.syncFile("looper-ready"),
            "loop-lkey a 64 60000 #loop");
        final Secondary prober = Secondary.start(daemon, "prober",
            "attach name=prober",
            "await " + daemon.syncFile("looper-ready"),
            "alloc b 2MiB #b",
            "signal " + daemon.syncFile("prober-ready") + " #ready",
            "await " + daemon.syncFile("frozen"),
            "lkey b 64 #probe");
        looper.awaitOk("loop.start");
        prober.awaitOk("ready");
        final long daemonPid = daemon.pid();
        try
        {
            final long frozenAtMs = System.currentTimeMillis();
            daemon.freeze();
            daemon.signal("frozen");

            final Result loop = looper.await("loop");
            assertDaemonDead(loop, daemonPid);
            assertTrue(loop.message().contains("heartbeat"), "the heartbeat told: " + loop);
            final long detectionMs = Long.parseLong(loop.get("at")) - frozenAtMs;
            final Result probe = prober.await("probe");
            assertDaemonDead(probe, daemonPid);
            final long probeMs = TimeUnit.NANOSECONDS.toMillis(Long.parseLong(probe.get("ns")));
            System.out.printf("hung daemon declared dead by the looping secondary %d ms after SIGSTOP; the " +
                "prober's CREATE_MR failed after %d ms%n", detectionMs, probeMs);
            assertTrue(detectionMs <= DETECTION_LIMIT_MS, "a hung daemon was noticed " + detectionMs +
                " ms after SIGSTOP, more than " + DETECTION_LIMIT_MS + " ms: " + loop);
            assertTrue(probeMs <= DETECTION_LIMIT_MS, "a request to a hung daemon failed after " + probeMs +
                " ms, more than " + DETECTION_LIMIT_MS + " ms: " + probe);
        }
        finally
        {
            // SIGKILL ends a stopped process too; the SIGTERM of the cleanup would wait for a SIGCONT.
            daemon.kill();
        }
        looper.awaitDone();
        prober.awaitDone();
    }

    @Test
    void requestsToAStoppedDaemonFailAtOnceWithAClearError()
    {
        final Secondary client = Secondary.start(daemon, "client",
            "attach name=client",
            "alloc a 2MiB",
            "lkey a 64 #a",
            "signal " + daemon.syncFile("client-ready") + " #ready",
            "await " + daemon.syncFile("stopped"),
            "alloc b 2MiB #alloc",
            "lkey a 64 #lkey",
            "newcache #newcache");
        client.awaitOk("a");
        client.awaitOk("ready");

        final MrdRunner.Result stop = daemon.mrdProcess("stop");
        assertEquals(0, stop.exit(), () -> "mrd stop with a client attached:\n" + stop);
        // mrd stop sends SIGTERM: the JVM exits with 128 + 15 after the daemon's shutdown hook has run.
        final int exit = daemon.process().awaitExit(LiveDaemon.TIMEOUT);
        assertEquals(0, exit, "a stopped daemon exits 0");
        assertFalse(Files.exists(daemon.dir().resolve(ControlFile.FILE_NAME)), "the stopped daemon removed its files");
        daemon.signal("stopped");

        for (final String label : List.of("alloc", "lkey", "newcache"))
        {
            final Result result = client.await(label);
            assertDaemonDead(result, daemon.pid());
            assertTrue(result.message().contains("stopped"), "says the daemon stopped: " + result);
        }
        client.awaitDone();

        // A client attaching after the stop is refused at once, told what to do.
        final Secondary late = Secondary.start(daemon, "late", "attach #attach");
        final Result refused = late.awaitError("attach", "ECONNREFUSED");
        assertTrue(refused.message().contains("no daemon running in " + daemon.dir()), refused.toString());
        assertTrue(refused.message().contains("mrd start --dir " + daemon.dir()), refused.toString());
        late.awaitDone();
        assertFalse(Files.exists(daemon.dir().resolve("mrd.sock")), "the stopped daemon removed its socket");
    }

    private static void assertDaemonDead(final Result result, final long daemonPid)
    {
        assertFalse(result.ok(), "must fail: " + result);
        assertEquals("DaemonDeadException", result.type(), result.toString());
        assertEquals("ECONNRESET", result.code(), result.toString());
        assertTrue(result.message().contains("daemon pid " + daemonPid), result.toString());
        assertTrue(result.fields().get("lkey") == null, "no lkey of the dead daemon: " + result);
    }
}
