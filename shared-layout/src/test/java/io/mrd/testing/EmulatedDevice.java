package io.mrd.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.fail;

/**
 * The emulated RDMA device ({@code emulator/}): a C library with libibverbs' ABI that daemons and secondaries load
 * in place of {@code libibverbs.so.1} through {@value #LIBRARY_ENV}, built here for the tests that need it.
 * <p>
 * The library is built by {@code emulator/build}, the one recipe that {@code scripts/mrd} uses too: into
 * {@code <project>/emulator/target/libmrdemu.so}, again only when a source is newer, one build at a time across
 * processes. It needs gcc and rdma-core's {@code <infiniband/verbs.h>}, which the script fetches into
 * {@code emulator/target} (no root) when the system lacks it. When neither can be had, the calling test is skipped
 * with the one line the script printed, unless {@code CI=true} or {@code MRD_REQUIRE_EMULATOR=1}, where it fails.
 * The tests' own C programs ({@link #testPrograms()}, {@link #verbsLayout()}, {@link VerbsHeader}) compile with
 * the same header, through {@link #cflags()}.
 */
public final class EmulatedDevice
{
    /** The variable mrd's ibverbs provider (daemon and secondary) loads libibverbs from. */
    public static final String LIBRARY_ENV = "MRD_IBVERBS_LIBRARY";
    /** How many devices the emulator lists (mrdemu0, mrdemu1, ...); 1 when unset. */
    public static final String DEVICES_ENV = "MRDEMU_DEVICES";
    /** The name of the first (by default only) emulated device. */
    public static final String DEVICE_NAME = "mrdemu0";

    private static final long BUILD_TIMEOUT_SECONDS = 180;

    /** emulator/build's exit status when gcc or the verbs header cannot be had (its one stderr line says why). */
    private static final int EQUIPMENT_UNAVAILABLE = 3;

    private static Path library;
    private static List<String> cflags;
    private static final Map<String, Path> testPrograms = new HashMap<>();
    private static Map<String, Long> layout;

    private EmulatedDevice()
    {
    }

    /**
     * @return {@code emulator/target/libmrdemu.so}, built if missing or older than its sources.
     */
    public static synchronized Path library()
    {
        if (null == library)
        {
            final List<String> printed = runBuildScript().lines().toList();
            library = Path.of(printed.getLast().strip());
        }
        return library;
    }

    /**
     * @return the gcc flags that find {@code <infiniband/verbs.h>} ({@code emulator/build --cflags}): none when the
     * system has it, else {@code -I} the copy fetched into {@code emulator/target}.
     */
    public static synchronized List<String> cflags()
    {
        if (null == cflags)
        {
            cflags = runBuildScript("--cflags").lines().map(String::strip).filter(line -> !line.isEmpty()).toList();
        }
        return cflags;
    }

    /**
     * @return {@code emulator/target/mrdemu_test}, the device's own tests ({@code emulator/test/mrdemu_test.c}),
     * linked with {@link #library()}: {@code --list} prints the cases, a case name runs it.
     */
    public static Path testProgram()
    {
        return testProgram("mrdemu_test");
    }

    /**
     * @return the device's test programs, {@code emulator/test/*_test.c}, each built as {@link #testProgram()}:
     * mrdemu_test (the core: objects, datapath, DMA engine) and surface_test (what the device reports, completion
     * channels, the extended CQ and QP, address handles, unsupported verbs), lineage_test (contexts across
     * processes, what adoption rests on) and devices_test (several devices, keys per device).
     */
    public static List<Path> testPrograms()
    {
        return List.of(testProgram("mrdemu_test"), testProgram("surface_test"), testProgram("lineage_test"),
            testProgram("devices_test"));
    }

    private static synchronized Path testProgram(final String name)
    {
        Path program = testPrograms.get(name);
        if (null == program)
        {
            final Path root = emulatorRoot();
            final Path lib = library();
            final List<Path> inputs = new ArrayList<>(files(root.resolve("test")));
            inputs.add(lib);
            inputs.add(root.resolve("src/mrdemu.h"));
            final List<String> command = new ArrayList<>(List.of(
                "gcc", "-O1", "-g", "-Wall", "-Werror", "-pthread"));
            command.addAll(cflags());
            command.addAll(List.of("-o", "{out}", root.resolve("test/" + name + ".c").toString(), lib.toString(),
                "-Wl,-rpath," + lib.getParent()));
            program = build(root.resolve("target/" + name), inputs, command);
            testPrograms.put(name, program);
        }
        return program;
    }

    /**
     * Offsets, sizes and constants of the installed {@code <infiniband/verbs.h>}, as the C compiler sees them, for
     * tests that check an FFM layout: {@code "ibv_mr.lkey"} is {@code offsetof(struct ibv_mr, lkey)},
     * {@code "sizeof.ibv_mr"} is {@code sizeof(struct ibv_mr)}, {@code "IBV_QP_STATE"} the value of that constant
     * (see {@code emulator/test/verbs_layout.c} for what is there).
     */
    public static synchronized Map<String, Long> verbsLayout()
    {
        if (null == layout)
        {
            final Path root = emulatorRoot();
            final List<String> command = new ArrayList<>(List.of("gcc", "-O0", "-Wall", "-Werror"));
            command.addAll(cflags());
            command.addAll(List.of("-o", "{out}", root.resolve("test/verbs_layout.c").toString()));
            final Path program = build(root.resolve("target/verbs_layout"), List.of(
                root.resolve("test/verbs_layout.c")), command);
            final Map<String, Long> values = new LinkedHashMap<>();
            for (final String line : run(List.of(program.toString())).split("\n"))
            {
                final String[] parts = line.trim().split(" ");
                if (2 == parts.length)
                {
                    values.put(parts[0], Long.parseLong(parts[1]));
                }
            }
            layout = Collections.unmodifiableMap(values);
        }
        return layout;
    }

    /**
     * @param name a key of {@link #verbsLayout()}.
     * @return its value; fails the test naming the key when verbs_layout.c does not print it.
     */
    public static long layoutOf(final String name)
    {
        final Long value = verbsLayout().get(name);
        if (null == value)
        {
            fail(name + " is not printed by emulator/test/verbs_layout.c: add it there");
        }
        return value;
    }

    /**
     * @return the environment a daemon or secondary needs to run on the emulated device.
     */
    public static Map<String, String> environment()
    {
        return Map.of(LIBRARY_ENV, library().toString());
    }

    /**
     * @return {@code <project>/emulator}, from Surefire's {@code mrd.project.root} or the first parent of the
     * working directory that has it.
     */
    public static Path emulatorRoot()
    {
        final String configured = System.getProperty("mrd.project.root");
        if (null != configured && Files.isRegularFile(Path.of(configured, "emulator/src/mrdemu.c")))
        {
            return Path.of(configured, "emulator").toAbsolutePath();
        }
        for (Path dir = Path.of("").toAbsolutePath(); null != dir; dir = dir.getParent())
        {
            if (Files.isRegularFile(dir.resolve("emulator/src/mrdemu.c")))
            {
                return dir.resolve("emulator");
            }
        }
        throw new IllegalStateException("emulator/src/mrdemu.c not found above " + Path.of("").toAbsolutePath() +
            ": run the tests from the mrd checkout");
    }

    /**
     * Runs {@code emulator/build ARGS} and returns what it printed on stdout; skips (or, where the device is
     * required, fails) the calling test with the script's one line when the equipment cannot be had.
     */
    private static String runBuildScript(final String... args)
    {
        final List<String> command = new ArrayList<>();
        command.add(emulatorRoot().resolve("build").toString());
        command.addAll(List.of(args));
        final Finished finished = execute(command);
        if (EQUIPMENT_UNAVAILABLE == finished.exitCode())
        {
            final List<String> errors = finished.stderr().lines().toList();
            Equipment.unavailable(errors.isEmpty() ? "emulator/build exited with " + EQUIPMENT_UNAVAILABLE :
                errors.getLast(), required(), "CI=true or MRD_REQUIRE_EMULATOR=1");
        }
        if (0 != finished.exitCode())
        {
            fail(String.join(" ", command) + " failed (exit " + finished.exitCode() + "):\n" + finished.stderr());
        }
        return finished.stdout();
    }

    /**
     * @return whether a test that needs the device must fail rather than skip without it: in CI, which installs
     * everything the device needs, and wherever {@code MRD_REQUIRE_EMULATOR=1}.
     */
    static boolean required()
    {
        return "true".equalsIgnoreCase(System.getenv("CI")) || "1".equals(System.getenv("MRD_REQUIRE_EMULATOR"));
    }

    private static Path build(final Path output, final List<Path> inputs, final List<String> command)
    {
        try
        {
            Files.createDirectories(output.getParent());
            try (FileChannel lockFile = FileChannel.open(output.getParent().resolve(".build.lock"),
                StandardOpenOption.CREATE, StandardOpenOption.WRITE);
                FileLock ignored = lockFile.lock())
            {
                if (upToDate(output, inputs))
                {
                    return output;
                }
                final Path temporary = output.resolveSibling(output.getFileName() + ".tmp" + ProcessHandle.current()
                    .pid());
                final List<String> resolved = command.stream()
                    .map(arg -> arg.replace("{out}", temporary.toString())).toList();
                run(resolved);
                Files.move(temporary, output, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                return output;
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("building " + output, ex);
        }
    }

    private static boolean upToDate(final Path output, final List<Path> inputs) throws IOException
    {
        if (!Files.exists(output))
        {
            return false;
        }
        final FileTime built = Files.getLastModifiedTime(output);
        for (final Path input : inputs)
        {
            if (Files.getLastModifiedTime(input).compareTo(built) > 0)
            {
                return false;
            }
        }
        return true;
    }

    private static List<Path> files(final Path dir)
    {
        try (Stream<Path> paths = Files.list(dir))
        {
            return paths.filter(Files::isRegularFile).sorted().toList();
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    private static String run(final List<String> command)
    {
        final Finished finished = execute(command);
        if (0 != finished.exitCode())
        {
            fail(String.join(" ", command) + " failed (exit " + finished.exitCode() + "):\n" + finished.stdout() +
                finished.stderr());
        }
        return finished.stdout();
    }

    /** What a command printed on each stream, and how it exited. */
    private record Finished(int exitCode, String stdout, String stderr)
    {
    }

    /**
     * Runs {@code command} to its end, at most {@value #BUILD_TIMEOUT_SECONDS} s (then the test fails); stderr is
     * read from a file so that neither stream can fill its pipe while the other is read.
     */
    private static Finished execute(final List<String> command)
    {
        try
        {
            final Path stderr = Files.createTempFile("emulator-build", ".err");
            try
            {
                final Process process = new ProcessBuilder(command).redirectError(stderr.toFile()).start();
                final String stdout = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                if (!process.waitFor(BUILD_TIMEOUT_SECONDS, TimeUnit.SECONDS))
                {
                    process.destroyForcibly();
                    fail(String.join(" ", command) + " did not finish within " + BUILD_TIMEOUT_SECONDS + " s");
                }
                return new Finished(process.exitValue(), stdout, Files.readString(stderr, StandardCharsets.UTF_8));
            }
            finally
            {
                Files.deleteIfExists(stderr);
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot run " + command.getFirst(), ex);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted running " + command.getFirst(), ex);
        }
    }
}
