package io.mrd.bench.multi;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.function.Predicate;
import java.util.stream.Stream;

/**
 * A real daemon for one benchmark part: {@code mrd start --foreground} in a child JVM, with its run directory
 * in a fresh temporary directory on tmpfs ({@link #RUN_BASE_PROPERTY}, default {@code /dev/shm}, else
 * {@code /tmp}), so that the daemon's memory (its run directory's {@code mem/} unless {@code --huge-dir} names
 * a hugetlbfs mount) is the file system the C references map from. Closing stops it (SIGTERM, then SIGKILL)
 * and removes the directory.
 */
final class BenchDaemon implements AutoCloseable
{
    /** The system property naming where daemons' run directories go; scripts/bench passes its tmpfs dir. */
    static final String RUN_BASE_PROPERTY = "mrd.bench.shm";
    /**
     * The system property naming the emulated device's library (scripts/bench builds it with emulator/build);
     * unset: the parts on the emulated device fail and their rows show so.
     */
    static final String EMULATOR_PROPERTY = "mrd.bench.emulator";
    static final Duration START_TIMEOUT = Duration.ofSeconds(90);

    private final Path dir;
    private final Child process;
    private boolean killed;

    private BenchDaemon(final Path dir, final Child process)
    {
        this.dir = dir;
        this.process = process;
    }

    /**
     * @param log  the daemon's output.
     * @param args {@code mrd start} options besides {@code --foreground --dir}.
     * @throws IllegalStateException with the daemon's output when it does not start.
     */
    static BenchDaemon start(final Path log, final List<String> args)
    {
        return start(log, args, Map.of());
    }

    /**
     * @param env variables for the daemon's environment, such as {@code MRD_IBVERBS_LIBRARY}.
     */
    static BenchDaemon start(final Path log, final List<String> args, final Map<String, String> env)
    {
        final Path dir = createRunDirectory();
        try
        {
            return startIn(dir, log, args, env);
        }
        catch (final RuntimeException ex)
        {
            deleteQuietly(dir);
            throw ex;
        }
    }

    /**
     * Starts a daemon in an existing run directory, such as the successor of one {@link #kill killed} there;
     * returns once it serves. Closing it removes the directory.
     */
    static BenchDaemon startIn(final Path dir, final Path log, final List<String> args, final Map<String, String> env)
    {
        final List<String> command = new ArrayList<>(List.of("start", "--foreground", "--dir", dir.toString()));
        command.addAll(args);
        System.out.println("bench: starting the daemon in " + dir + ": mrd " + String.join(" ", command));
        final Child process = Child.start("daemon", log, List.of("-Xmx512m"), "io.mrd.cli.Mrd", command, env);
        try
        {
            process.awaitLine(line -> line.startsWith("mrd started:"), START_TIMEOUT);
        }
        catch (final RuntimeException ex)
        {
            process.close();
            throw new IllegalStateException("the daemon did not start: " + ex.getMessage(), ex);
        }
        return new BenchDaemon(dir, process);
    }

    /**
     * @return the run directory, which secondaries attach to.
     */
    Path dir()
    {
        return dir;
    }

    /** @return the CPU time the daemon has used so far, in seconds ({@link Child#cpuSeconds}). */
    double cpuSeconds()
    {
        return process.cpuSeconds();
    }

    /** @return the daemon's minor page faults so far ({@link Child#minorFaults}). */
    long minorFaults()
    {
        return process.minorFaults();
    }

    /**
     * @return the first line of the daemon's output matching {@code predicate}, waiting for it.
     */
    String awaitLine(final Predicate<String> predicate)
    {
        return process.awaitLine(predicate, START_TIMEOUT);
    }

    /**
     * SIGKILL: the daemon crashes and leaves its run directory as it was, for a successor ({@link #startIn}).
     */
    void kill()
    {
        killed = true;
        process.kill();
    }

    /**
     * Waits for the daemon to exit by itself, as it does after handing over to a successor.
     */
    int awaitExit()
    {
        return process.awaitExit(START_TIMEOUT);
    }

    /**
     * Stops the daemon (SIGTERM, then SIGKILL) and removes its run directory; a daemon that was {@link #kill
     * killed} leaves the directory to its successor, whose close removes it.
     */
    public void close()
    {
        process.stop(Duration.ofSeconds(20));
        process.close();
        if (!killed)
        {
            deleteQuietly(dir);
        }
    }

    /**
     * @return where daemons' run directories go, and so their memory: the file system the C reference of a fresh
     * 2 MiB {@code mlock} maps from.
     */
    static Path runBase()
    {
        final Path shm = Path.of(System.getProperty(RUN_BASE_PROPERTY, "/dev/shm"));
        return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of("/tmp");
    }

    /**
     * @return the emulated device's library, for {@code MRD_IBVERBS_LIBRARY} of the daemons and clients of the
     * parts on the emulated device.
     * @throws IllegalStateException when {@value #EMULATOR_PROPERTY} names no built library.
     */
    static Path emulatedDevice()
    {
        final String library = System.getProperty(EMULATOR_PROPERTY, "").strip();
        if (library.isEmpty() || !Files.isRegularFile(Path.of(library)))
        {
            throw new IllegalStateException("the emulated device is not built (-D" + EMULATOR_PROPERTY + "=" +
                library + "): run emulator/build");
        }
        return Path.of(library);
    }

    private static Path createRunDirectory()
    {
        // A Unix socket path must stay under 108 bytes: the results directory may be too deep.
        final Path base = runBase();
        try
        {
            return Files.createTempDirectory(base, "mrd-bench-");
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot create a run directory under " + base, ex);
        }
    }

    static void deleteQuietly(final Path dir)
    {
        try (Stream<Path> files = Files.walk(dir))
        {
            for (final Path file : files.sorted(Comparator.reverseOrder()).toList())
            {
                Files.deleteIfExists(file);
            }
        }
        catch (final IOException ignore)
        {
            // A stopped daemon has removed its memory files already; what is left is small, and the next run
            // makes a directory of its own.
        }
    }
}
