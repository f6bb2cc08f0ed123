package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.rdma.RdmaExchange;
import io.mrd.cli.rdma.UnboundTransfers;
import io.mrd.layout.MrdCounter;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.Wait;
import io.mrd.testing.DeviceQueues;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.LiveObjects;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * mrd's keys on a device that checks every one (the emulated device, {@code --provider ibverbs} with
 * {@code MRD_IBVERBS_LIBRARY} in the daemon and every secondary), end to end with real processes:
 * <ul>
 *   <li>two {@link RdmaPeer}s ({@link RdmaExchange}) import the daemon's PD, connect RC queue pairs and for
 *       {@code -Dmrd.rdma.seconds} (default 10) move data both ways with SEND/RECV, RDMA WRITE and RDMA READ
 *       into each other's memory, lkeys from their MrCaches and the rkeys they traded, every byte checked at
 *       its target, their staging memory freed and allocated again four times a second;</li>
 *   <li>each peer posts, on purpose, work requests with the lkey and the rkey of memory it just freed
 *       ({@code StaleKeyProbe}): each must complete with a protection error and change no byte;</li>
 *   <li>a churner ({@link RdmaSidekick} churn) allocates and frees memory all along: memory free events and
 *       devGen bumps under the peers' traffic;</li>
 *   <li>a victim with RDMA work in flight is killed with SIGKILL: the daemon reclaims its memory and destroys its
 *       queues (no CQ or QP the victim created is left on the device), the peers go on.</li>
 * </ul>
 * Prints FIGURE lines; passes with at least 10,000 work requests a second, no wrong byte, no protection error on
 * a live key, every stale-key request refused, and no unbound transfer: the device never had to refuse a transfer
 * because an MR's page had been freed (a key of freed memory, which an HCA would have honoured; the emulated
 * device's {@code mrdemu_unbound_transfers} on the daemon's context).
 */
final class RdmaEndToEndTest
{
    static final Duration WAIT = Duration.ofSeconds(90);
    private static final Pattern NUMBER = Pattern.compile("(\\w+)=(-?\\d+)");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("rdma-e2e");

    @TempDir
    Path exchange;

    /** The daemon's context's unbound transfers, for failure messages; null until the observer attached. */
    private UnboundTransfers unboundTransfers;

    @Test
    void twoPeersMoveDataWithMrdsKeysWhileMemoryIsFreedAndAVictimWithWorkInFlightIsKilled()
    {
        final long seconds = Long.getLong("mrd.rdma.seconds", 10);
        final Path library = EmulatedDevice.library();
        final Map<String, String> env = Map.of(EmulatedDevice.LIBRARY_ENV, library.toString());
        try (LiveDaemon daemon = daemons.launch("rdma-e2e").in(dir).env(env).start(SoakTest.with(
                SoakTest.SLOW_MACHINE, "--provider", "ibverbs", "--max-memory", "512MiB", "--list-size", "128MiB"));
            ChildJvm churn = sidekick(env, "churn", "churn");
            ChildJvm a = peer(env, "peer-a", "peer-b", seconds);
            ChildJvm b = peer(env, "peer-b", "peer-a", seconds);
            MrdClient observer = MrdClient.attach(new ClientContext().dir(dir).name("observer")
                .ibverbsLibrary(library.toString())))
        {
            churn.awaitLine(l -> l.startsWith("churning"), WAIT);
            a.awaitLine(l -> l.startsWith("connected"), WAIT);
            b.awaitLine(l -> l.startsWith("connected"), WAIT);
            final long devGenAtStart = daemon.controlFile().header().devGen();
            // the observer's own import counts no object: it reads the device's count
            final Verbs device = observer.verbs();
            unboundTransfers = new UnboundTransfers(device);

            killAVictimWithWorkInFlight(daemon, env, library, device, a, b);

            final Map<String, Long> resultA = result(a, seconds);
            final Map<String, Long> resultB = result(b, seconds);
            Signals.send(exchange, "churn", "exit");
            final String churned = churn.awaitLine(l -> l.startsWith("churned "), WAIT);
            assertEquals(0, churn.awaitExit(WAIT), churn::output);
            final long devGenBumps = daemon.controlFile().header().devGen() - devGenAtStart;
            Wait.await("every allocation freed and every MR deregistered", WAIT,
                () -> daemon.counters(MrdCounter.BYTES_ALLOCATED, MrdCounter.MRS_ACTIVE), LiveDaemon::allZero);
            final LiveObjects atEnd = LiveObjects.of(library, device.context());
            final long unbound = unboundTransfers.read();
            assertEquals(new LiveObjects(1, 0, 0, 0), atEnd, "the device holds the daemon's PD and nothing else");
            daemon.assertHealthy("at the end");

            final Map<String, Long> total = new HashMap<>();
            for (final Map<String, Long> result : List.of(resultA, resultB))
            {
                result.forEach((key, value) -> total.merge(key, value, Long::sum));
            }
            System.out.println("FIGURE rdma-e2e seconds=" + seconds + " wrs=" + total.get("wrs") + " bytesVerified=" +
                total.get("bytesVerified") + " wrongBytes=" + total.get("wrongBytes") + " liveProtectionErrors=" +
                total.get("liveProtectionErrors") + " otherErrors=" + total.get("otherErrors"));
            System.out.println("FIGURE rdma-e2e staleKeyRequests=" + total.get("staleProbes") + " staleKeyRefused=" +
                total.get("staleRefused") + " staleTargetsChecked=" + total.get("staleTargetsChecked") +
                " stagingRotations=" + total.get("rotations") + " rotationsAtTheSameAddress=" +
                total.get("rotationsSameAddress") + " devGenBumps=" + devGenBumps + " churner " + churned);
            System.out.println("FIGURE rdma-e2e liveObjectsAtEnd pds=" + atEnd.pds() + " mrs=" + atEnd.mrs() +
                " cqs=" + atEnd.cqs() + " qps=" + atEnd.qps());
            System.out.println("FIGURE rdma-e2e unboundTransfers daemonContext=" + unbound + " peers=" +
                total.get("unboundTransfers"));

            assertEquals(0, total.get("wrongBytes"), "wrong bytes at a target");
            assertEquals(0, total.get("liveProtectionErrors"), () -> "protection errors on live keys: " +
                a.output() + b.output());
            assertEquals(0, total.get("otherErrors"), "other work completion errors");
            assertEquals(0, unbound, () -> "transfers the device refused because an MR's page was freed (a key of " +
                "freed memory): " + a.output() + b.output());
            assertEquals(0, total.get("unboundTransfers"), "unbound transfers the peers saw");
            assertTrue(total.get("wrs") >= 10_000 * seconds, "work requests: " + total.get("wrs"));
            assertTrue(total.get("bytesVerified") > 0);
            assertTrue(total.get("staleProbes") > 0, "stale-key requests were posted");
            assertEquals(total.get("staleProbes"), total.get("staleRefused"), "every stale-key request refused");
            assertTrue(total.get("rotations") > 0 && total.get("rotationsSameAddress") > 0,
                "staging memory was freed and allocated again at the same address");
            assertTrue(devGenBumps > 0, "memory free events bumped devGen");
        }
    }

    /**
     * Starts the victim, waits until its queues are busy, kills it, and checks that the daemon destroyed its
     * queues and freed its memory while the peers went on. The victim's queues are counted by their creator:
     * each peer's StaleKeyProbe creates and destroys a loopback pair of QPs several times a second, so the
     * device's total changes under the test's feet.
     */
    private void killAVictimWithWorkInFlight(
        final LiveDaemon daemon, final Map<String, String> env, final Path library, final Verbs device,
        final ChildJvm a, final ChildJvm b)
    {
        final int victimId;
        final long victimPid;
        final long victimBytes;
        final long wrsA;
        final long wrsB;
        final DeviceQueues withVictim;
        Wait.await("the peers to move data", WAIT, () -> progress(a) > 1000 && progress(b) > 1000 ||
            a.output().contains("\nerror ") || b.output().contains("\nerror "));
        assertMovingData(a, b);
        try (ChildJvm victim = sidekick(env, "victim", "victim"))
        {
            victim.awaitLine(l -> l.startsWith("victim running ops=") && !l.endsWith("ops=0"), WAIT);
            assertMovingData(a, b);
            victimPid = victim.pid();
            withVictim = DeviceQueues.of(library, device.context());
            assertEquals(1, withVictim.cqsOf(victimPid), () -> "the victim's CQ; victim pid " + victimPid + ", " +
                withVictim + tail(a) + tail(b));
            assertEquals(2, withVictim.qpsOf(victimPid), () -> "the victim's two QPs; victim pid " + victimPid + ", " +
                withVictim + tail(a) + tail(b));
            final ControlFileSnapshot before = daemon.snapshot();
            victimId = before.clients().stream().filter(c -> c.name().equals("victim")).findFirst()
                .orElseThrow(() -> new AssertionError("victim not in the client table")).id();
            victimBytes = before.lists().stream().flatMap(l -> l.allocations().stream())
                .filter(x -> x.owner() == victimId).mapToLong(x -> x.end() - x.start()).sum();
            wrsA = progress(a);
            wrsB = progress(b);
            victim.kill();
            assertEquals(137, victim.process().exitValue(), "killed by SIGKILL");
        }
        Wait.await("the victim's queues destroyed by the daemon", WAIT, () ->
        {
            final DeviceQueues now = DeviceQueues.of(library, device.context());
            return now.cqsOf(victimPid) == 0 && now.qpsOf(victimPid) == 0;
        });
        Wait.await("the victim's memory freed", WAIT, () -> daemon.snapshot().lists().stream()
            .flatMap(l -> l.allocations().stream()).noneMatch(x -> x.owner() == victimId));
        daemon.assertHealthy("after killing the victim");
        Wait.await("the peers to go on", WAIT, () -> progress(a) > wrsA + 1000 && progress(b) > wrsB + 1000);
        assertMovingData(a, b);
        System.out.println("FIGURE rdma-e2e victim killed heldBytes=" + victimBytes + " queuesDestroyed=" +
            (withVictim.cqsOf(victimPid) + withVictim.qpsOf(victimPid)) + " peersWrsBefore=" + (wrsA + wrsB) +
            " peersWrsAfter=" + (progress(a) + progress(b)));
    }

    private ChildJvm peer(final Map<String, String> env, final String name, final String peer, final long seconds)
    {
        return ChildJvm.start(name, RdmaPeer.class.getName(), List.of(dir.toString(), name, peer,
            exchange.toString(), String.valueOf(seconds)), env, errorFile());
    }

    private ChildJvm sidekick(final Map<String, String> env, final String mode, final String name)
    {
        return ChildJvm.start(name, RdmaSidekick.class.getName(), List.of(mode, dir.toString(), name,
            exchange.toString()), env, errorFile());
    }

    private List<String> errorFile()
    {
        return List.of("-XX:ErrorFile=" + exchange.resolve("hs_err_pid%p.log"));
    }

    private static Map<String, Long> result(final ChildJvm peer, final long seconds)
    {
        final String line = peer.awaitLine(l -> l.startsWith("result "), WAIT.plusSeconds(seconds));
        assertEquals(0, peer.awaitExit(WAIT), peer::output);
        System.out.println("FIGURE rdma-e2e " + line);
        return numbers(line);
    }

    /**
     * Fails with the peers' errors (a work completion with an error status, a wrong byte) if they printed any:
     * a queue pair in the error state ends its peer's traffic too, so both are shown.
     */
    private void assertMovingData(final ChildJvm a, final ChildJvm b)
    {
        final StringBuilder errors = new StringBuilder();
        for (final ChildJvm peer : List.of(a, b))
        {
            for (final String line : peer.lines())
            {
                if (line.startsWith("error ") || (line.startsWith("result ") && !line.endsWith("firstError=none")))
                {
                    errors.append("\n").append(line);
                }
            }
            if (!peer.process().isAlive() && peer.lines().stream().noneMatch(l -> l.startsWith("result ")))
            {
                errors.append("\na peer ended early:").append(tail(peer));
            }
        }
        if (!errors.isEmpty())
        {
            throw new AssertionError("the peers failed (unbound transfers on the daemon's context: " +
                (null == unboundTransfers ? "?" : unboundTransfers.read()) + "):" + errors + tail(a) + tail(b));
        }
    }

    /**
     * @return what a peer printed besides its progress, for a failure's message.
     */
    private static String tail(final ChildJvm peer)
    {
        final List<String> lines = peer.lines().stream().filter(l -> !l.startsWith("progress ")).toList();
        return "\n--- " + String.join("\n", lines.subList(Math.max(0, lines.size() - 40), lines.size()));
    }

    private static long progress(final ChildJvm peer)
    {
        long wrs = 0;
        for (final String line : peer.lines())
        {
            if (line.startsWith("progress "))
            {
                wrs = numbers(line).getOrDefault("wrs", 0L);
            }
        }
        return wrs;
    }

    private static Map<String, Long> numbers(final String line)
    {
        final Map<String, Long> values = new HashMap<>();
        final Matcher m = NUMBER.matcher(line);
        while (m.find())
        {
            values.put(m.group(1), Long.parseLong(m.group(2)));
        }
        return values;
    }
}
