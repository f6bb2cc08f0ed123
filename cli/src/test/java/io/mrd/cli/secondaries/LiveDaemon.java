package io.mrd.cli.secondaries;

import io.mrd.cli.LeftoverDaemon;
import io.mrd.cli.Mrd;
import io.mrd.cli.secondaries.SecondaryDriver.Result;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.ChildJvm;
import io.mrd.tools.ControlFileSnapshot;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * One test's daemon, run as a real {@code mrd start --foreground} process, and the processes the test starts
 * against it: {@link SecondaryDriver}s and {@code mrd} commands, all through {@link ChildJvm}. {@link #close()}
 * kills what is left, stops the daemon and removes its directory; it prints every process's output first,
 * so that a failed test's report (surefire's {@code -output.txt}) shows what each one did.
 */
final class LiveDaemon implements AutoCloseable
{
    /** Deadline of every wait: generous, the machine is shared; tests assert on results, not on speed. */
    static final Duration TIMEOUT = Duration.ofSeconds(90);

    private final String name;
    private final Path dir;
    private final Path sync;
    private final List<ChildJvm> children = new ArrayList<>();
    private final List<String> finishedOutputs = new ArrayList<>();
    private ChildJvm daemon;

    private LiveDaemon(final String name, final Path dir, final Path sync)
    {
        this.name = name;
        this.dir = dir;
        this.sync = sync;
    }

    /**
     * Starts {@code mrd start --foreground --dir <new directory> --huge-dir none --base-virtaddr BASE OPTIONS}
     * and waits until it serves. {@code --huge-dir none} keeps the tests off the machine's few hugepages,
     * which other test runs may be using.
     */
    static LiveDaemon start(final String name, final long baseVirtaddr, final String... options)
    {
        return start(name, baseVirtaddr, Map.of(), options);
    }

    /**
     * @param env the daemon's extra environment (e.g. {@code MRD_IBVERBS_LIBRARY} for the emulated device).
     */
    static LiveDaemon start(
        final String name, final long baseVirtaddr, final Map<String, String> env, final String... options)
    {
        final LiveDaemon live;
        try
        {
            // tmpfs when there is one: the daemon's memory lists are files in DIR/mem.
            final Path shm = Path.of("/dev/shm");
            final Path root = Files.isDirectory(shm) && Files.isWritable(shm) ? shm :
                Path.of(System.getProperty("java.io.tmpdir"));
            live = new LiveDaemon(name, Files.createTempDirectory(root, "mrd-" + name + "-"),
                Files.createTempDirectory("mrd-sync-" + name + "-"));
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        final List<String> args = new ArrayList<>(List.of("start", "--foreground", "--dir", live.dir.toString(),
            "--huge-dir", "none", "--base-virtaddr", Sizes.hex(baseVirtaddr)));
        args.addAll(List.of(options));
        try
        {
            live.daemon = ChildJvm.start("mrd-daemon-" + name, Mrd.class.getName(), args, env, List.of());
            live.daemon.awaitLine(line -> line.startsWith("mrd started:"), TIMEOUT);
            return live;
        }
        catch (final RuntimeException | AssertionError ex)
        {
            live.close();
            throw ex;
        }
    }

    Path dir()
    {
        return dir;
    }

    long pid()
    {
        return daemon.pid();
    }

    ChildJvm process()
    {
        return daemon;
    }

    /**
     * @return a path for a sync file between this test and its processes (outside the run directory).
     */
    Path syncFile(final String fileName)
    {
        return sync.resolve(fileName);
    }

    /**
     * Creates a sync file that drivers {@code await}.
     */
    void signal(final String fileName)
    {
        SecondaryDriver.writeAtomically(syncFile(fileName), System.currentTimeMillis() + "\n");
    }

    /**
     * Starts a {@link SecondaryDriver} on this daemon's directory.
     */
    Secondary secondary(final String secondaryName, final String... commands)
    {
        final List<String> args = new ArrayList<>();
        args.add(dir.toString());
        args.addAll(List.of(commands));
        return new Secondary(secondaryName, track(ChildJvm.start(secondaryName, SecondaryDriver.class.getName(), args,
            Map.of(), List.of())));
    }

    /**
     * Starts {@code mrd ARGS} and returns at once (for long commands such as {@code mrd worker}); {@code
     * --dir} is not added.
     */
    ChildJvm startMrd(final String processName, final String... args)
    {
        return track(ChildJvm.start(processName, Mrd.class.getName(), List.of(args), Map.of(), List.of()));
    }

    /**
     * Runs {@code mrd COMMAND --dir DIR ARGS} to its end.
     */
    Outcome mrd(final String command, final String... args)
    {
        final List<String> all = new ArrayList<>(List.of(command, "--dir", dir.toString()));
        all.addAll(List.of(args));
        try (ChildJvm child = ChildJvm.start("mrd-" + command, Mrd.class.getName(), all, Map.of(), List.of()))
        {
            final int exit = child.awaitExit(TIMEOUT);
            final Outcome outcome = new Outcome(exit, child.output());
            finishedOutputs.add("mrd " + String.join(" ", all) + " -> exit " + exit + "\n" + outcome.output());
            return outcome;
        }
    }

    /**
     * The exit code and output of a finished {@code mrd} command.
     */
    record Outcome(int exitCode, String output)
    {
    }

    /**
     * {@code mrd check}: the control file's invariants hold (exit 0).
     */
    void assertCheckPasses()
    {
        final Outcome check = mrd("check");
        assertEquals(0, check.exitCode(), "mrd check failed:\n" + check.output());
    }

    /**
     * @return the control file as it is now, read under its seqlock (the daemon must not have removed it).
     */
    ControlFileSnapshot snapshot()
    {
        try (ControlFile ctl = ControlFile.openReadOnly(dir.resolve(ControlFile.FILE_NAME)))
        {
            return ControlFileSnapshot.read(ctl);
        }
    }

    /**
     * Waits until the control file shows {@code condition}; the failure names the last state seen.
     */
    ControlFileSnapshot awaitSnapshot(final String what, final Predicate<ControlFileSnapshot> condition)
    {
        final ControlFileSnapshot[] last = new ControlFileSnapshot[1];
        try
        {
            ChildJvm.await(what, TIMEOUT, () -> condition.test(last[0] = snapshot()));
            return last[0];
        }
        catch (final AssertionError ex)
        {
            throw new AssertionError(ex.getMessage() + "; last seen: " + describe(last[0]), ex);
        }
    }

    /**
     * @return what the tests look at in a snapshot, in one line.
     */
    static String describe(final ControlFileSnapshot s)
    {
        if (null == s)
        {
            return "nothing";
        }
        final StringBuilder text = new StringBuilder()
            .append("bytes allocated ").append(s.counter(MrdCounter.BYTES_ALLOCATED))
            .append(", clients ").append(s.clients().size())
            .append(", MRs [");
        for (final ControlFileSnapshot.Mr mr : s.mrs())
        {
            text.append(' ').append(mr.stateName()).append(" lkey ").append(Sizes.hex(mr.lkey() & 0xFFFF_FFFFL))
                .append(" [").append(Sizes.hex(mr.start())).append(", ").append(Sizes.hex(mr.end())).append(')');
        }
        return text.append(" ]").toString();
    }

    /**
     * @return the ACTIVE MRs of a snapshot.
     */
    static List<ControlFileSnapshot.Mr> active(final ControlFileSnapshot s)
    {
        return s.mrs().stream().filter(ControlFileSnapshot.Mr::active).toList();
    }

    /**
     * kill -9 of the daemon.
     */
    void killDaemon()
    {
        daemon.kill();
    }

    private ChildJvm track(final ChildJvm child)
    {
        synchronized (children)
        {
            children.add(child);
        }
        return child;
    }

    /**
     * Kills the processes the test started, stops the daemon (SIGTERM, kill -9 if it does not exit), waits
     * until the kernel released its lock, and removes the directories.
     */
    public void close()
    {
        final StringBuilder report = new StringBuilder("==== ").append(name).append(": outputs\n");
        finishedOutputs.forEach(output -> report.append("---- ").append(output).append('\n'));
        synchronized (children)
        {
            for (final ChildJvm child : children)
            {
                if (child.process().isAlive())
                {
                    child.kill();
                }
                report.append("---- pid ").append(child.pid()).append('\n').append(child.output()).append('\n');
                child.close();
            }
        }
        if (null != daemon)
        {
            if (daemon.process().isAlive())
            {
                daemon.process().destroy();
                try
                {
                    if (!daemon.process().waitFor(30, TimeUnit.SECONDS))
                    {
                        daemon.kill();
                    }
                }
                catch (final InterruptedException ex)
                {
                    Thread.currentThread().interrupt();
                    daemon.kill();
                }
            }
            report.append("---- daemon ").append(daemon.pid()).append('\n').append(daemon.output()).append('\n');
            daemon.close();
        }
        System.out.println(report);
        // A daemon the test started some other way ('mrd start' in the background).
        LeftoverDaemon.kill(dir);
        deleteRecursively(dir);
        deleteRecursively(sync);
    }

    private static void deleteRecursively(final Path path)
    {
        if (!Files.exists(path))
        {
            return;
        }
        try (Stream<Path> files = Files.walk(path))
        {
            files.sorted(Comparator.reverseOrder()).forEach(file ->
            {
                try
                {
                    Files.deleteIfExists(file);
                }
                catch (final IOException ignore)
                {
                    // a leftover in a temporary directory is harmless
                }
            });
        }
        catch (final IOException ignore)
        {
            // idem
        }
    }

    /**
     * A running {@link SecondaryDriver} and its results.
     */
    static final class Secondary
    {
        private final String name;
        private final ChildJvm jvm;

        Secondary(final String name, final ChildJvm jvm)
        {
            this.name = name;
            this.jvm = jvm;
        }

        ChildJvm jvm()
        {
            return jvm;
        }

        /**
         * Waits for the result labelled {@code label}.
         */
        Result await(final String label)
        {
            final String line = jvm.awaitLine(l -> l.startsWith(SecondaryDriver.PREFIX + label + " "), TIMEOUT);
            return Result.parse(line).orElseThrow();
        }

        /**
         * Waits for the result labelled {@code label} and checks it succeeded.
         */
        Result awaitOk(final String label)
        {
            final Result result = await(label);
            assertTrue(result.ok(), name + " " + label + " failed: " + result + "\n" + jvm.output());
            return result;
        }

        /**
         * Waits for the result labelled {@code label} and checks it failed with {@code code}.
         */
        Result awaitError(final String label, final String code)
        {
            final Result result = await(label);
            assertTrue(!result.ok() && code.equals(result.fields().get("code")),
                name + " " + label + " should have failed with " + code + ": " + result + "\n" + jvm.output());
            return result;
        }

        /**
         * @return every result printed so far.
         */
        List<Result> results()
        {
            return jvm.lines().stream().flatMap(l -> Result.parse(l).stream()).toList();
        }

        /**
         * Waits until the driver ran its last command and exited with status 0.
         */
        void awaitDone()
        {
            await(SecondaryDriver.END_LABEL);
            assertEquals(0, jvm.awaitExit(TIMEOUT), name + " exit status; output:\n" + jvm.output());
        }

        void kill()
        {
            jvm.kill();
        }

        String output()
        {
            return jvm.output();
        }
    }
}
