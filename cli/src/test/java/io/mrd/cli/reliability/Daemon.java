package io.mrd.cli.reliability;

import io.mrd.cli.Mrd;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.testing.ChildJvm;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A daemon run by {@code mrd start --foreground} as a child process (so a test can kill it), on tmpfs only
 * ({@code --huge-dir none}: the tests must pass without hugepages), in ChildJvm's light JVM (Serial collector,
 * C1 only, {@code -Xmx256m}) unless started with {@link #DEPLOYED_JVM}. The test reads the daemon's control file
 * through its own read-only mapping, which stays valid after the daemon unlinks the file: counters can be read
 * even after the daemon is gone.
 */
final class Daemon implements AutoCloseable
{
    static final Duration START_TIMEOUT = Duration.ofSeconds(90);
    static final Duration STOP_TIMEOUT = Duration.ofSeconds(60);

    /**
     * JVM flags for a daemon that must run as deployed, where what it leaves resident is measured: the JVM's own
     * choice on a host of two or more CPUs (G1 and both JIT compilers) and a host's default heap (a quarter of
     * 16 GiB), in place of ChildJvm's. The daemon's HeapPolicy acts through G1.
     */
    static final List<String> DEPLOYED_JVM = List.of("-XX:-UseSerialGC", "-XX:+UseG1GC", "-XX:TieredStopAtLevel=4",
        "-Xmx4g");

    final Path dir;
    final ChildJvm process;
    final ControlFile ctl;

    private Daemon(final Path dir, final ChildJvm process, final ControlFile ctl)
    {
        this.dir = dir;
        this.process = process;
        this.ctl = ctl;
    }

    /**
     * Starts a daemon in {@code dir} and waits until it is ready.
     *
     * @param jvmFlags extra JVM flags (e.g. {@code -XX:+ExitOnOutOfMemoryError}).
     * @param args     extra {@code mrd start} options.
     */
    static Daemon start(final Path dir, final List<String> jvmFlags, final String... args)
    {
        return start(dir, Map.of(), jvmFlags, args);
    }

    /**
     * @param env the daemon's extra environment (e.g. {@code MRD_IBVERBS_LIBRARY} for the emulated device).
     */
    static Daemon start(final Path dir, final Map<String, String> env, final List<String> jvmFlags,
        final String... args)
    {
        final List<String> command = new ArrayList<>(List.of("start", "--foreground", "--dir", dir.toString(),
            "--huge-dir", "none"));
        command.addAll(List.of(args));
        final ChildJvm child = ChildJvm.start("mrd-daemon", Mrd.class.getName(), command, env, jvmFlags);
        try
        {
            child.awaitLine(line -> line.startsWith("mrd started:"), START_TIMEOUT);
            return new Daemon(dir, child, ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)));
        }
        catch (final RuntimeException | AssertionError ex)
        {
            child.close();
            throw ex;
        }
    }

    static Daemon start(final Path dir, final String... args)
    {
        return start(dir, List.of(), args);
    }

    long pid()
    {
        return process.pid();
    }

    boolean isAlive()
    {
        return process.process().isAlive();
    }

    long counter(final MrdCounter counter)
    {
        return ctl.counter(counter);
    }

    long fdCount()
    {
        return Proc.fdCount(pid());
    }

    long rssKib()
    {
        return Proc.statusKib(pid(), "VmRSS");
    }

    long lockedKib()
    {
        return Proc.statusKib(pid(), "VmLck");
    }

    Path socket()
    {
        return dir.resolve(RunDirectoryPath.SOCKET_FILE);
    }

    /**
     * @return {@code mrd status} run now.
     */
    Cli.Result status()
    {
        return Cli.run("status", "--dir", dir.toString());
    }

    /**
     * @return {@code mrd check} run now.
     */
    Cli.Result check()
    {
        return Cli.run("check", "--dir", dir.toString());
    }

    /**
     * Fails with the daemon's output unless it is alive and {@code mrd status} and {@code mrd check} exit 0.
     */
    void assertHealthy(final String when)
    {
        if (!isAlive())
        {
            throw new AssertionError("the daemon died " + when + "; its output:\n" + process.output());
        }
        final Cli.Result status = status();
        if (status.exitCode() != 0)
        {
            throw new AssertionError("mrd status " + when + ": " + status + "\ndaemon output:\n" + process.output());
        }
        final Cli.Result check = check();
        if (check.exitCode() != 0)
        {
            throw new AssertionError("mrd check " + when + ": " + check);
        }
    }

    /**
     * SIGTERM, then waits for the process to exit.
     *
     * @return its exit code.
     */
    int terminate()
    {
        process.process().destroy();
        return process.awaitExit(STOP_TIMEOUT);
    }

    public void close()
    {
        ctl.close();
        if (isAlive())
        {
            process.process().destroy();
            try
            {
                process.awaitExit(STOP_TIMEOUT);
            }
            catch (final AssertionError ex)
            {
                // awaitExit killed it
            }
        }
        process.close();
    }

}
