package io.mrd.cli;

import io.mrd.layout.ControlFile;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.tools.RunDirectoryReader;
import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.MrdRunner;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The acceptance sequence with real processes: start, status, a second start refused naming the pid,
 * stop, status not running, kill -9 and recovery.
 */
final class DaemonLifecycleTest
{
    private static final Pattern STARTED_PID = Pattern.compile("mrd started: pid (\\d+)");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    /** The run directory of this test's daemons. */
    private final Path dir = daemons.newDirectory("lifecycle");

    @BeforeEach
    void noDaemon()
    {
        assertFalse(RunDirectoryReader.isLocked(dir));
    }

    @Test
    void startStatusSecondStartStopStatus()
    {
        final MrdRunner.Result start = MrdRunner.mrdProcess("start", "--dir", dir.toString(), "--max-memory", "64MiB");
        assertEquals(0, start.exit(), start.both());
        final long pid = pidOf(start.both());
        assertTrue(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "daemon pid alive");

        final MrdRunner.Result status = MrdRunner.mrdProcess("status", "--dir", dir.toString());
        assertEquals(0, status.exit(), status.both());
        assertTrue(status.both().contains("pid          " + pid), status.both());
        assertTrue(status.both().contains("heartbeat"), status.both());
        assertTrue(status.both().contains("0B in use of 64MiB"), status.both());

        final MrdRunner.Result second = MrdRunner.mrdProcess("start", "--dir", dir.toString());
        assertEquals(1, second.exit(), second.both());
        assertTrue(second.both().contains("already running") && second.both().contains("pid " + pid),
            second.both());

        final MrdRunner.Result stop = MrdRunner.mrdProcess("stop", "--dir", dir.toString());
        assertEquals(0, stop.exit(), stop.both());
        // mrd stop returns once the daemon has exited; a zombie is reaped by its new parent (init) a moment later
        Wait.await("pid " + pid + " reaped after mrd stop", Duration.ofSeconds(10),
            () -> ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), alive -> !alive);
        assertFalse(Files.exists(dir.resolve(ControlFile.FILE_NAME)), "control file removed");
        assertFalse(Files.exists(dir.resolve("mem").resolve("list-0")), "backing file removed");

        final MrdRunner.Result after = MrdRunner.mrdProcess("status", "--dir", dir.toString());
        assertEquals(1, after.exit(), after.both());
        assertTrue(after.both().contains("not running"), after.both());
    }

    @Test
    void recoversAfterKillNine() throws IOException
    {
        final long firstPid;
        final long firstEpoch;
        try (LiveDaemon daemon = daemons.launch("lifecycle").in(dir).start("--max-memory", "64MiB"))
        {
            firstPid = daemon.pid();
            firstEpoch = daemon.controlFile().header().epoch();
            daemon.kill();
        }
        assertFalse(RunDirectoryReader.isLocked(dir), "the kernel released the dead daemon's lock");
        assertTrue(Files.exists(dir.resolve(ControlFile.FILE_NAME)), "a killed daemon leaves its control file");

        final MrdRunner.Result stale = MrdRunner.mrdProcess("status", "--dir", dir.toString());
        assertEquals(1, stale.exit(), stale.both());
        assertTrue(stale.both().contains("stale files of pid " + firstPid), stale.both());

        final MrdRunner.Result start = MrdRunner.mrdProcess("start", "--dir", dir.toString(), "--max-memory", "64MiB");
        assertEquals(0, start.exit(), start.both());
        final long pid = pidOf(start.both());
        assertNotEquals(firstPid, pid);
        try (ControlFile ctl = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
        {
            assertEquals(pid, ctl.header().pid());
            assertNotEquals(firstEpoch, ctl.header().epoch(), "a new daemon has a new epoch");
        }
        final String log = Files.readString(dir.resolve(RunDirectoryPath.LOG_FILE));
        assertTrue(log.contains("recovered stale directory") && log.contains("pid " + firstPid), log);

        assertEquals(0, MrdRunner.mrdProcess("status", "--dir", dir.toString()).exit());
        assertEquals(0, MrdRunner.mrdProcess("stop", "--dir", dir.toString()).exit());
    }

    @Test
    void badArgumentsGiveOneLineAndUsageExit()
    {
        final MrdRunner.Result size = MrdRunner.mrdProcess("start", "--dir", dir.toString(), "--max-memory", "lots");
        assertEquals(2, size.exit(), size.both());
        assertTrue(size.both().contains("'lots' is not a size"), size.both());

        final MrdRunner.Result base = MrdRunner.mrdProcess("start", "--foreground", "--dir", dir.toString(),
            "--base-virtaddr", "0x1234");
        assertEquals(2, base.exit(), base.both());
        assertTrue(base.both().contains("--base-virtaddr 0x1234 must be a multiple of 1GiB"), base.both());

        final MrdRunner.Result stop = MrdRunner.mrdProcess("stop", "--dir", dir.toString());
        assertEquals(1, stop.exit(), stop.both());
        assertTrue(stop.both().contains("no daemon running in " + dir), stop.both());
    }

    private static long pidOf(final String output)
    {
        final Matcher matcher = STARTED_PID.matcher(output);
        assertTrue(matcher.find(), "no pid in: " + output);
        return Long.parseLong(matcher.group(1));
    }
}
