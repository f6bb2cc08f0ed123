package io.mrd.cli;

import io.mrd.layout.ControlFile;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.testing.ChildJvm;
import io.mrd.tools.RunDirectoryReader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
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

    @TempDir
    Path dir;

    @BeforeEach
    void noDaemon()
    {
        assertFalse(RunDirectoryReader.isLocked(dir));
    }

    @AfterEach
    void stopLeftovers()
    {
        LeftoverDaemon.kill(dir);
    }

    @Test
    void startStatusSecondStartStopStatus()
    {
        final MrdProcess.Result start = MrdProcess.run("start", "--dir", dir.toString(), "--max-memory", "64MiB");
        assertEquals(0, start.exitCode(), start.output());
        final long pid = pidOf(start.output());
        assertTrue(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "daemon pid alive");

        final MrdProcess.Result status = MrdProcess.run("status", "--dir", dir.toString());
        assertEquals(0, status.exitCode(), status.output());
        assertTrue(status.output().contains("pid          " + pid), status.output());
        assertTrue(status.output().contains("heartbeat"), status.output());
        assertTrue(status.output().contains("0B in use of 64MiB"), status.output());

        final MrdProcess.Result second = MrdProcess.run("start", "--dir", dir.toString());
        assertEquals(1, second.exitCode(), second.output());
        assertTrue(second.output().contains("already running") && second.output().contains("pid " + pid),
            second.output());

        final MrdProcess.Result stop = MrdProcess.run("stop", "--dir", dir.toString());
        assertEquals(0, stop.exitCode(), stop.output());
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "daemon gone after stop");
        assertFalse(Files.exists(dir.resolve(ControlFile.FILE_NAME)), "control file removed");
        assertFalse(Files.exists(dir.resolve("mem").resolve("list-0")), "backing file removed");

        final MrdProcess.Result after = MrdProcess.run("status", "--dir", dir.toString());
        assertEquals(1, after.exitCode(), after.output());
        assertTrue(after.output().contains("not running"), after.output());
    }

    @Test
    void recoversAfterKillNine() throws IOException
    {
        final long firstPid;
        final long firstEpoch;
        try (ChildJvm daemon = MrdProcess.startForeground(dir, "--max-memory", "64MiB"))
        {
            firstPid = daemon.pid();
            try (ControlFile ctl = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
            {
                firstEpoch = ctl.header().epoch();
            }
            daemon.kill();
        }
        assertFalse(RunDirectoryReader.isLocked(dir), "the kernel released the dead daemon's lock");
        assertTrue(Files.exists(dir.resolve(ControlFile.FILE_NAME)), "a killed daemon leaves its control file");

        final MrdProcess.Result stale = MrdProcess.run("status", "--dir", dir.toString());
        assertEquals(1, stale.exitCode(), stale.output());
        assertTrue(stale.output().contains("stale files of pid " + firstPid), stale.output());

        final MrdProcess.Result start = MrdProcess.run("start", "--dir", dir.toString(), "--max-memory", "64MiB");
        assertEquals(0, start.exitCode(), start.output());
        final long pid = pidOf(start.output());
        assertNotEquals(firstPid, pid);
        try (ControlFile ctl = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
        {
            assertEquals(pid, ctl.header().pid());
            assertNotEquals(firstEpoch, ctl.header().epoch(), "a new daemon has a new epoch");
        }
        final String log = Files.readString(dir.resolve(RunDirectoryPath.LOG_FILE));
        assertTrue(log.contains("recovered stale directory") && log.contains("pid " + firstPid), log);

        assertEquals(0, MrdProcess.run("status", "--dir", dir.toString()).exitCode());
        assertEquals(0, MrdProcess.run("stop", "--dir", dir.toString()).exitCode());
    }

    @Test
    void badArgumentsGiveOneLineAndUsageExit()
    {
        final MrdProcess.Result size = MrdProcess.run("start", "--dir", dir.toString(), "--max-memory", "lots");
        assertEquals(2, size.exitCode(), size.output());
        assertTrue(size.output().contains("'lots' is not a size"), size.output());

        final MrdProcess.Result base = MrdProcess.run("start", "--foreground", "--dir", dir.toString(),
            "--base-virtaddr", "0x1234");
        assertEquals(2, base.exitCode(), base.output());
        assertTrue(base.output().contains("--base-virtaddr 0x1234 must be a multiple of 1GiB"), base.output());

        final MrdProcess.Result stop = MrdProcess.run("stop", "--dir", dir.toString());
        assertEquals(1, stop.exitCode(), stop.output());
        assertTrue(stop.output().contains("no daemon running in " + dir), stop.output());
    }

    private static long pidOf(final String output)
    {
        final Matcher matcher = STARTED_PID.matcher(output);
        assertTrue(matcher.find(), "no pid in: " + output);
        return Long.parseLong(matcher.group(1));
    }
}
