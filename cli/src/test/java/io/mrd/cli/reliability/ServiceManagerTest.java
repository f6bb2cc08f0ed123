package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.layout.sys.UnixDatagram;
import io.mrd.testing.EmulatedDevice;
import io.mrd.tools.DaemonSummary;
import io.mrd.tools.RunDirectoryReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The daemon under a service manager ({@code NOTIFY_SOCKET}, as {@code scripts/mrd.service}'s {@code Type=notify}
 * gives it), with this test as the manager: a datagram socket of its own. {@code mrd restart} as the unit's
 * {@code ExecReload}: the new daemon makes itself the main process and asks for the handover only once the
 * manager has confirmed it (a barrier), so the old daemon's exit is never the unit's main process ending; a
 * manager that never confirms leaves the old daemon serving, and the main process again.
 */
final class ServiceManagerTest
{
    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final Pattern MAINPID = Pattern.compile("(?m)^MAINPID=(\\d+)$");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    @TempDir
    Path managerDir;

    private final Path dir = daemons.newDirectory("notified");
    private final Path library = EmulatedDevice.library();

    @Test
    void restartMakesTheNewDaemonTheMainProcessBeforeTheOldOneHandsOver() throws Exception
    {
        try (UnixDatagram manager = UnixDatagram.bind(managerDir.resolve("notify")))
        {
            final Map<String, String> env = env();
            final LiveDaemon old = daemons.launch("notified").in(dir).env(env)
                .start("--provider", "ibverbs", "--max-memory", "256MiB");
            final String ready = receive(manager).text();
            assertTrue(ready.contains("READY=1"), ready);
            assertEquals(old.pid(), mainPid(ready), ready);

            final CompletableFuture<MrdRunner.Result> restart = restart(env, old);
            final String main = receive(manager).text();
            final long successor = mainPid(main);
            assertNotEquals(old.pid(), successor, main);
            final UnixDatagram.Datagram barrier = receive(manager);
            assertEquals("BARRIER=1", barrier.text());
            assertEquals(1, barrier.fds().length, "the barrier carries one descriptor");
            // Not confirmed yet: nothing has asked the old daemon to hand over.
            assertTrue(old.isAlive(), "the old daemon serves until the manager has read the new main pid");
            assertEquals(old.pid(), runningPid(), "the old daemon still holds the directory");
            assertEquals(0, MrdRunner.mrd("status", "--dir", dir.toString()).exit());
            Posix.close(barrier.fds()[0]);

            final MrdRunner.Result result = restart.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertEquals(0, result.exit(), result.toString());
            assertEquals(0, old.process().awaitExit(WAIT), "the old daemon exits 0 once it has handed over");
            final String servingAgain = receive(manager).text();
            assertTrue(servingAgain.contains("READY=1"), servingAgain);
            assertEquals(successor, mainPid(servingAgain), servingAgain);
            assertEquals(successor, runningPid(), "the main pid the manager was given is the daemon serving");
            assertEquals(0, MrdRunner.mrd("stop", "--dir", dir.toString()).exit());
        }
    }

    @Test
    void aManagerThatNeverConfirmsLeavesTheOldDaemonServingAndTheMainProcess() throws Exception
    {
        try (UnixDatagram manager = UnixDatagram.bind(managerDir.resolve("notify")))
        {
            final Map<String, String> env = env();
            final LiveDaemon old = daemons.launch("unconfirmed").in(dir).env(env)
                .start("--provider", "ibverbs", "--max-memory", "256MiB");
            assertEquals(old.pid(), mainPid(receive(manager).text()));

            final CompletableFuture<MrdRunner.Result> restart = restart(env, old);
            final long successor = mainPid(receive(manager).text());
            final UnixDatagram.Datagram unconfirmed = receive(manager);
            assertEquals("BARRIER=1", unconfirmed.text());
            // kept open: the take-over gives up after ServiceManager.BARRIER_TIMEOUT_MS and gives the pid back
            final String back = receive(manager).text();
            assertEquals(old.pid(), mainPid(back), "the main pid goes back to the daemon that serves on: " + back);
            final UnixDatagram.Datagram backBarrier = receive(manager);
            closeAll(backBarrier.fds());
            closeAll(unconfirmed.fds());

            final MrdRunner.Result result = restart.get(WAIT.toMillis(), TimeUnit.MILLISECONDS);
            assertEquals(1, result.exit(), result.toString());
            assertTrue(result.err().contains("did not confirm MAINPID=" + successor), result.toString());
            assertTrue(old.isAlive(), "the old daemon serves on");
            assertEquals(old.pid(), runningPid());
            old.assertHealthy("after a take-over the manager never confirmed");
            assertEquals(0, MrdRunner.mrd("stop", "--dir", dir.toString()).exit());
        }
    }

    private Map<String, String> env()
    {
        return Map.of(EmulatedDevice.LIBRARY_ENV, library.toString(), "NOTIFY_SOCKET",
            managerDir.resolve("notify").toString());
    }

    private CompletableFuture<MrdRunner.Result> restart(final Map<String, String> env, final LiveDaemon old)
    {
        return CompletableFuture.supplyAsync(() -> MrdRunner.mrdProcess(env, List.of("restart", "--dir",
            dir.toString(), "--huge-dir", "none", "--base-virtaddr", Sizes.hex(old.baseVirtaddr()), "--provider",
            "ibverbs", "--max-memory", "256MiB")));
    }

    private long runningPid()
    {
        return RunDirectoryReader.readSummary(dir).map(DaemonSummary::pid).orElse(0L);
    }

    private static UnixDatagram.Datagram receive(final UnixDatagram manager)
    {
        final UnixDatagram.Datagram datagram = manager.receive((int)WAIT.toMillis());
        assertNotNull(datagram, "no notification within " + WAIT);
        return datagram;
    }

    private static long mainPid(final String notification)
    {
        final Matcher m = MAINPID.matcher(notification);
        assertTrue(m.find(), "no MAINPID in " + notification);
        return Long.parseLong(m.group(1));
    }

    private static void closeAll(final int[] fds)
    {
        for (final int fd : fds)
        {
            Posix.close(fd);
        }
    }
}
