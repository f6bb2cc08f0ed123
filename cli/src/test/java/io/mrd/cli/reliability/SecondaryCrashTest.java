package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.MrdCounter;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.Wait;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * A secondary killed with {@code kill -9} in the middle of its ALLOC / CREATE_MR traffic, five times over,
 * while two other secondaries work beside it: each time the daemon stays up, reclaims exactly what the victim
 * held (BYTES_ALLOCATED comes back to what the survivors hold), {@code mrd status} and {@code mrd check} exit
 * 0, and the survivors go on, every one of their lkeys verified against the control file.
 * <p>
 * The victim ({@link ReliabilitySecondary} {@code churn}) runs two threads that do nothing but ALLOC, CREATE_MR
 * (registrations slowed to 3 ms by the daemon's fault injection), FREE and REG_EXTERNAL, so it has requests in
 * flight nearly all the time (it prints the fraction, "busy"); the moment of the kill is random: after a random
 * number (30 to 300) of further daemon requests.
 */
final class SecondaryCrashTest
{
    static final int ROUNDS = 5;
    static final Duration WAIT = Duration.ofSeconds(60);
    private static final Pattern HOLDING = Pattern.compile("holding=(\\d+)");
    private static final Pattern PROGRESS = Pattern.compile("^progress ok=(\\d+) errors=(\\d+)");
    private static final Pattern BUSY = Pattern.compile("busy=([0-9.]+)");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("crash-secondary");

    @TempDir
    Path signals;

    @Test
    void aSecondaryKilledInTheMiddleOfItsRequestsLeavesNothingBehind()
    {
        final long seed = System.nanoTime();
        final Random random = new Random(seed);
        System.out.println("FIGURE crash-secondary seed=" + seed);
        try (LiveDaemon daemon = daemons.launch("crash-secondary").in(dir).start(SoakTest.with(SoakTest.SLOW_MACHINE,
                "--max-memory", "512MiB", "--list-size", "128MiB", "--registration-latency", "3000"));
            ChildJvm a = secondary("steady", "survivor-a");
            ChildJvm b = secondary("steady", "survivor-b"))
        {
            a.awaitLine(l -> l.startsWith("ready"), WAIT);
            b.awaitLine(l -> l.startsWith("ready"), WAIT);
            for (int round = 1; round <= ROUNDS; round++)
            {
                final String name = "victim-" + round;
                final long okA;
                final long okB;
                final long victimBytes;
                final long victimMrs;
                final String busy;
                try (ChildJvm victim = ChildJvm.start(name, ReliabilitySecondary.class.getName(),
                    List.of("churn", dir.toString(), name, "2"), Map.of(), errorFile()))
                {
                    victim.awaitLine(l -> l.startsWith("churning ops="), WAIT);
                    final long requests = daemon.counter(MrdCounter.REQUESTS);
                    final long more = 30 + random.nextInt(271);
                    Wait.await("the victim's requests to reach the daemon", WAIT,
                        () -> daemon.counter(MrdCounter.REQUESTS) >= requests + more || !victim.process().isAlive());
                    assertTrue(victim.process().isAlive(), () -> name + " died by itself: " + victim.output());
                    // What it holds just before the kill, from the control file (its client id by its name).
                    final ControlFileSnapshot before = daemon.snapshot();
                    final int victimId = before.clients().stream().filter(c -> c.name().equals(name)).findFirst()
                        .orElseThrow(() -> new AssertionError(name + " not in the client table")).id();
                    victimBytes = before.lists().stream().flatMap(l -> l.allocations().stream())
                        .filter(x -> x.owner() == victimId).mapToLong(x -> x.end() - x.start()).sum();
                    victimMrs = before.mrs().stream().filter(m -> m.active() && m.owner() == victimId).count();
                    okA = lastProgress(a);
                    okB = lastProgress(b);
                    busy = lastMatch(victim, BUSY);
                    victim.kill();
                    assertEquals(137, victim.process().exitValue(), "killed by SIGKILL");
                }

                Wait.await("the victim's connection to be reclaimed", WAIT,
                    () -> daemon.counter(MrdCounter.CLIENTS_CONNECTED), connected -> connected == 2);
                final long holdA = quiesce(a, "survivor-a", round);
                final long holdB = quiesce(b, "survivor-b", round);
                Wait.await("allocated bytes back to the survivors' " + (holdA + holdB), WAIT,
                    () -> daemon.counter(MrdCounter.BYTES_ALLOCATED), allocated -> allocated == holdA + holdB);
                daemon.assertHealthy("after killing " + name);
                System.out.println("FIGURE crash-secondary round=" + round + " victimHeldBytes=" + victimBytes +
                    " victimMrs=" + victimMrs + " victimBusy=" + busy + " allocatedAfter=" +
                    daemon.counter(MrdCounter.BYTES_ALLOCATED) + " survivorsHold=" + (holdA + holdB) +
                    " pinnedAfter=" + daemon.counter(MrdCounter.BYTES_PINNED));

                Signals.send(signals, "survivor-a", "resume " + round);
                Signals.send(signals, "survivor-b", "resume " + round);
                final int r = round;
                a.awaitLine(l -> l.startsWith("ack resume " + r), WAIT);
                b.awaitLine(l -> l.startsWith("ack resume " + r), WAIT);
                Wait.await("the survivors to go on after " + name, WAIT,
                    () -> lastProgress(a) > okA + 100 && lastProgress(b) > okB + 100);
            }

            Signals.send(signals, "survivor-a", "exit");
            Signals.send(signals, "survivor-b", "exit");
            for (final ChildJvm survivor : List.of(a, b))
            {
                final String exit = survivor.awaitLine(l -> l.startsWith("exit "), WAIT);
                assertEquals(0, survivor.awaitExit(WAIT), survivor::output);
                assertTrue(exit.endsWith("errors=0"), exit);
                System.out.println("FIGURE crash-secondary survivor " + exit);
            }
            Wait.await("everything released", WAIT, () -> daemon.counter(MrdCounter.BYTES_ALLOCATED) == 0 &&
                daemon.counter(MrdCounter.BYTES_PINNED) == 0 && daemon.counter(MrdCounter.MRS_ACTIVE) == 0 &&
                daemon.lockedKib() == 0);
            daemon.assertHealthy("at the end");
            System.out.println("FIGURE crash-secondary end requests=" + daemon.counter(MrdCounter.REQUESTS) +
                " mrsCreated=" + daemon.counter(MrdCounter.MRS_CREATED) + " clientsTotal=" +
                daemon.counter(MrdCounter.CLIENTS_TOTAL));
        }
    }

    private ChildJvm secondary(final String mode, final String name)
    {
        return ChildJvm.start(name, ReliabilitySecondary.class.getName(),
            List.of(mode, dir.toString(), name, signals.toString()), Map.of(), errorFile());
    }

    private List<String> errorFile()
    {
        return List.of("-XX:ErrorFile=" + signals.resolve("hs_err_pid%p.log"));
    }

    /**
     * Has the survivor free its transient memory and say what it still holds.
     */
    private long quiesce(final ChildJvm survivor, final String name, final int round)
    {
        Signals.send(signals, name, "quiesce " + round);
        final String ack = survivor.awaitLine(l -> l.startsWith("ack quiesce " + round + " "), WAIT);
        final Matcher m = HOLDING.matcher(ack);
        assertTrue(m.find(), ack);
        assertTrue(ack.endsWith("errors=0"), () -> ack + "\n" + survivor.output());
        return Long.parseLong(m.group(1));
    }

    static long lastProgress(final ChildJvm child)
    {
        long ok = -1;
        for (final String line : child.lines())
        {
            final Matcher m = PROGRESS.matcher(line);
            if (m.find())
            {
                if (!"0".equals(m.group(2)))
                {
                    throw new AssertionError("a survivor failed: " + line + "\n" + child.output());
                }
                ok = Long.parseLong(m.group(1));
            }
        }
        return ok;
    }

    static String lastMatch(final ChildJvm child, final Pattern pattern)
    {
        String found = "?";
        for (final String line : child.lines())
        {
            final Matcher m = pattern.matcher(line);
            if (m.find())
            {
                found = m.group(1);
            }
        }
        return found;
    }
}
