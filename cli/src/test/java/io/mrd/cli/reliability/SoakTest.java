package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.cli.fixture.Proc;
import io.mrd.layout.MrdCounter;
import io.mrd.testing.ChildJvm;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The soak: 4 secondary processes ({@link SoakWorker}) × 2 threads of random ALLOC / lookup / FREE /
 * REG_EXTERNAL / DEREG_EXTERNAL against one daemon, every lkey verified by the worker against the control
 * file, with {@code mrd check} looping beside them. Then: no invariant violation, no wrong lkey, no unexpected
 * failure; once the workers have exited, nothing allocated, nothing pinned (the daemon's counters and the
 * kernel's VmLck), no MR left, no external mapping left, the daemon's fds back to their baseline and its RSS
 * within 256 MiB of it. Its heap is bounded by construction: -Xmx256m and -XX:+ExitOnOutOfMemoryError (an
 * OOM anywhere kills it, and the test fails).
 * <p>
 * 60 s in CI; longer with {@code -Dmrd.soak.seconds=N} or {@code MRD_SOAK_SECONDS=N} (see RELIABILITY.md).
 */
final class SoakTest
{
    static final long DEFAULT_SECONDS = 60;
    static final int WORKERS = 4;
    static final int THREADS = 2;
    static final long RSS_SLACK_KIB = 256 * 1024;
    private static final Pattern RESULT = Pattern.compile("SOAK-RESULT name=(\\S+) lkeys=(\\d+) verified=(\\d+) " +
        "shared=(\\d+) raced=(\\d+) wrong=(\\d+) unexpected=(\\d+) allocs=(\\d+) frees=(\\d+) externals=(\\d+) " +
        "straddles=(\\d+) enomem=(\\d+)");

    /**
     * A daemon started with these options is taken for dead only after 10 s without a heartbeat (default 1 s):
     * on a loaded CI machine a starved heartbeat is not what the soak is about; DaemonCrashTest checks detection.
     */
    static final List<String> SLOW_MACHINE = List.of("--heartbeat-interval", "1000");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("soak");

    /**
     * @return {@code first} followed by {@code more}, as {@code mrd start} arguments.
     */
    static String[] with(final List<String> first, final String... more)
    {
        final List<String> all = new java.util.ArrayList<>(first);
        all.addAll(List.of(more));
        return all.toArray(String[]::new);
    }

    /**
     * @return the soak length: {@code -Dmrd.soak.seconds}, else {@code $MRD_SOAK_SECONDS}, else 60.
     */
    static long soakSeconds()
    {
        final String property = System.getProperty("mrd.soak.seconds");
        final String env = System.getenv("MRD_SOAK_SECONDS");
        final String value = null != property && !property.isBlank() ? property :
            null != env && !env.isBlank() ? env : null;
        return null == value ? DEFAULT_SECONDS : Long.parseLong(value.trim());
    }

    @Test
    void fourSecondariesOfTwoThreadsLeaveNothingBehind()
    {
        final long seconds = soakSeconds();
        final long seed = System.nanoTime();
        System.out.println("FIGURE soak seconds=" + seconds + " (mrd.soak.seconds=" +
            System.getProperty("mrd.soak.seconds") + ", MRD_SOAK_SECONDS=" + System.getenv("MRD_SOAK_SECONDS") +
            ") seed=" + seed);
        try (LiveDaemon daemon = daemons.launch("soak").in(dir).jvmFlags(List.of("-XX:+ExitOnOutOfMemoryError"))
            .start(with(SLOW_MACHINE, "--max-memory", "1GiB", "--list-size", "256MiB", "--max-external", "1GiB")))
        {
            // Warm-up: one short worker, so that the baseline is taken after the daemon loaded and compiled its
            // request paths and opened what it keeps open.
            final List<String> warmUp = runWorkers(daemon, 1, 1, 3, seed - 1);
            awaitQuiet(daemon, "the warm-up worker's");
            daemon.awaitHolder();
            final long baseFds = daemon.fdCount();
            final long baseRss = daemon.rssKib();
            final long baseMrs = daemon.counter(MrdCounter.MRS_CREATED);
            System.out.println("FIGURE soak baseline fds=" + baseFds + " rssKiB=" + baseRss + " warmUp=" + warmUp);

            final long start = System.nanoTime();
            final List<String> results = runWorkers(daemon, WORKERS, THREADS, seconds, seed);
            final long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);

            long lkeys = 0;
            long verified = 0;
            long shared = 0;
            long raced = 0;
            long wrong = 0;
            long unexpected = 0;
            long allocs = 0;
            long frees = 0;
            long externals = 0;
            long straddles = 0;
            long enomem = 0;
            for (final String line : results)
            {
                final Matcher m = RESULT.matcher(line);
                assertTrue(m.find(), line);
                lkeys += Long.parseLong(m.group(2));
                verified += Long.parseLong(m.group(3));
                shared += Long.parseLong(m.group(4));
                raced += Long.parseLong(m.group(5));
                wrong += Long.parseLong(m.group(6));
                unexpected += Long.parseLong(m.group(7));
                allocs += Long.parseLong(m.group(8));
                frees += Long.parseLong(m.group(9));
                externals += Long.parseLong(m.group(10));
                straddles += Long.parseLong(m.group(11));
                enomem += Long.parseLong(m.group(12));
            }
            assertEquals(0, wrong, "wrong lkeys: " + results);
            assertEquals(0, unexpected, "unexpected failures: " + results);
            assertEquals(lkeys, verified, "every lkey verified");
            assertTrue(allocs > 0 && frees > 0 && externals > 0 && lkeys > 0, results::toString);

            awaitQuiet(daemon, "the workers'");
            Wait.await("the daemon's fds back to their baseline of " + baseFds, Duration.ofSeconds(30),
                daemon::fdCount, fds -> fds <= baseFds);
            final long endFds = daemon.fdCount();
            final long endRss = daemon.rssKib();
            assertTrue(endRss < baseRss + RSS_SLACK_KIB, "daemon RSS " + endRss + " KiB after the soak, baseline " +
                baseRss + " KiB");
            daemon.assertHealthy("after the soak");
            System.out.println("FIGURE soak workers=" + WORKERS + "x" + THREADS + " elapsedMs=" + elapsedMs +
                " lkeys=" + lkeys + " verified=" + verified + " shared=" + shared + " raced=" + raced + " wrong=" +
                wrong + " unexpected=" + unexpected + " allocs=" + allocs + " frees=" + frees + " externals=" +
                externals + " straddles=" + straddles + " enomem=" + enomem + " mrsCreated=" +
                (daemon.counter(MrdCounter.MRS_CREATED) - baseMrs) + " memoryEvents=" +
                daemon.counter(MrdCounter.MEMORY_EVENTS) + " devGen=" + daemon.counter(MrdCounter.DEV_GEN) +
                " requests=" + daemon.counter(MrdCounter.REQUESTS));
            System.out.println("FIGURE soak end fds=" + endFds + " (baseline " + baseFds + ") rssKiB=" + endRss +
                " (baseline " + baseRss + ", peak VmHWM " + Proc.statusKib(daemon.pid(), "VmHWM") + ") pinned=" +
                daemon.counter(MrdCounter.BYTES_PINNED) + " VmLckKiB=" + daemon.lockedKib() + " allocated=" +
                daemon.counter(MrdCounter.BYTES_ALLOCATED) + " mrsActive=" + daemon.counter(MrdCounter.MRS_ACTIVE));
            System.out.println("FIGURE soak heap " + HeapInfo.of(daemon.pid()));
        }
    }

    /**
     * Runs {@code count} workers to their end with {@code mrd check} looping beside them.
     *
     * @return their SOAK-RESULT lines.
     */
    private List<String> runWorkers(final LiveDaemon daemon, final int count, final int threads, final long seconds,
        final long seed)
    {
        final List<ChildJvm> workers = new ArrayList<>();
        try
        {
            for (int i = 0; i < count; i++)
            {
                workers.add(ChildJvm.start("soak-" + i, SoakWorker.class.getName(), List.of(dir.toString(),
                    "soak-" + i, String.valueOf(threads), String.valueOf(seconds), String.valueOf(seed + i)),
                    Map.of(), List.of("-XX:ErrorFile=" + dir.resolve("hs_err_pid%p.log"))));
            }
            long checks = 0;
            long maxFds = 0;
            long maxRss = 0;
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds + 180);
            while (workers.stream().anyMatch(w -> w.process().isAlive()))
            {
                if (System.nanoTime() > deadline)
                {
                    fail("soak workers still running " + (seconds + 180) + " s after starting");
                }
                if (!daemon.isAlive())
                {
                    fail("the daemon died during the soak; its output:\n" + daemon.process().output());
                }
                final MrdRunner.Result check = daemon.check();
                checks++;
                if (check.exit() != 0)
                {
                    fail("mrd check during the soak (run " + checks + "): " + check);
                }
                maxFds = Math.max(maxFds, daemon.fdCount());
                maxRss = Math.max(maxRss, daemon.rssKib());
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
            }
            final List<String> results = new ArrayList<>();
            for (final ChildJvm worker : workers)
            {
                final int exit = worker.awaitExit(Duration.ofSeconds(30));
                final String line = worker.lines().stream().filter(l -> l.startsWith("SOAK-RESULT")).findFirst()
                    .orElseThrow(() -> new AssertionError("no SOAK-RESULT; output:\n" + worker.output()));
                assertEquals(0, exit, () -> "worker exit " + exit + "; output:\n" + worker.output());
                results.add(line);
            }
            System.out.println("FIGURE soak run workers=" + count + " checks=" + checks + " (all exit 0) maxFds=" +
                maxFds + " maxRssKiB=" + maxRss);
            return results;
        }
        finally
        {
            workers.forEach(ChildJvm::close);
        }
    }

    /**
     * Waits until the workers are gone and the daemon has released all they held.
     */
    static void awaitQuiet(final LiveDaemon daemon, final String whose)
    {
        Wait.await(whose + " connections closed", Duration.ofSeconds(30),
            () -> daemon.counter(MrdCounter.CLIENTS_CONNECTED), connected -> connected == 0);
        Wait.await(whose + " memory, MRs and pins released (allocated " + "/pinned/active/VmLck)",
            Duration.ofSeconds(30), () -> daemon.counter(MrdCounter.BYTES_ALLOCATED) == 0 &&
                daemon.counter(MrdCounter.BYTES_PINNED) == 0 && daemon.counter(MrdCounter.MRS_ACTIVE) == 0 &&
                daemon.lockedKib() == 0);
        Wait.await(whose + " external mappings removed", Duration.ofSeconds(30),
            () -> Proc.mapsContaining(daemon.pid(), "memfd:"), List::isEmpty);
    }
}
