package io.mrd.cli;

import io.mrd.testing.ChildJvm;
import io.mrd.tools.RunDirectoryReader;

import java.nio.file.Path;
import java.time.Duration;

/**
 * A daemon a test started with {@code mrd start} in the background: a grandchild, not a {@link ChildJvm}, known
 * only by the lock it holds and the pid its control file names.
 */
public final class LeftoverDaemon
{
    private static final Duration TIMEOUT = Duration.ofSeconds(30);

    private LeftoverDaemon()
    {
    }

    /**
     * Kills the daemon holding {@code dir}'s lock, if any, and waits until the lock is free.
     */
    public static void kill(final Path dir)
    {
        if (RunDirectoryReader.isLocked(dir))
        {
            RunDirectoryReader.readSummary(dir).flatMap(s -> ProcessHandle.of(s.pid()))
                .ifPresent(ProcessHandle::destroyForcibly);
            ChildJvm.await("the daemon left in " + dir + " to die", TIMEOUT, () -> !RunDirectoryReader.isLocked(dir));
        }
    }
}
