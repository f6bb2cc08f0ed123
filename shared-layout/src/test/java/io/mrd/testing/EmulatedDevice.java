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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.abort;

/**
 * The emulated RDMA device ({@code emulator/}): a C library with libibverbs' ABI that daemons and secondaries load
 * in place of {@code libibverbs.so.1} through {@value #LIBRARY_ENV}, built here for the tests that need it.
 * <p>
 * The library is compiled into {@code <project>/emulator/target/libmrdemu.so} with
 * {@code gcc -O2 -Wall -Werror -shared -fPIC -pthread} the first time a test asks for it in a build, and again only
 * when a source is newer; concurrent test JVMs share one build (a file lock, then an atomic rename). It needs gcc
 * and Debian's libibverbs-dev ({@code <infiniband/verbs.h>}); without them the calling test is skipped with one
 * line naming what is missing, unless {@code CI=true} or {@code MRD_REQUIRE_EMULATOR=1}, where it fails.
 */
public final class EmulatedDevice
{
    /** The variable mrd's ibverbs provider (daemon and secondary) loads libibverbs from. */
    public static final String LIBRARY_ENV = "MRD_IBVERBS_LIBRARY";
    /** How many devices the emulator lists (mrdemu0, mrdemu1, ...); 1 when unset. */
    public static final String DEVICES_ENV = "MRDEMU_DEVICES";
    /** The name of the first (by default only) emulated device. */
    public static final String DEVICE_NAME = "mrdemu0";

    private static final Path HEADER = Path.of("/usr/include/infiniband/verbs.h");
    private static final long BUILD_TIMEOUT_SECONDS = 180;

    private static Path library;
    private static Path testProgram;
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
            final Path root = emulatorRoot();
            final List<Path> sources = files(root.resolve("src"));
            final List<String> command = new ArrayList<>(List.of(
                "gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-pthread", "-o", "{out}"));
            sources.stream().filter(p -> p.toString().endsWith(".c")).forEach(p -> command.add(p.toString()));
            library = build(root.resolve("target/libmrdemu.so"), sources, command);
        }
        return library;
    }

    /**
     * @return {@code emulator/target/mrdemu_test}, the device's own tests ({@code emulator/test/mrdemu_test.c}),
     * linked with {@link #library()}: {@code --list} prints the cases, a case name runs it.
     */
    public static synchronized Path testProgram()
    {
        if (null == testProgram)
        {
            final Path root = emulatorRoot();
            final Path lib = library();
            final List<Path> inputs = new ArrayList<>(files(root.resolve("test")));
            inputs.add(lib);
            inputs.add(root.resolve("src/mrdemu.h"));
            testProgram = build(root.resolve("target/mrdemu_test"), inputs, List.of(
                "gcc", "-O1", "-g", "-Wall", "-Werror", "-pthread", "-o", "{out}",
                root.resolve("test/mrdemu_test.c").toString(), lib.toString(),
                "-Wl,-rpath," + lib.getParent()));
        }
        return testProgram;
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
            final Path program = build(root.resolve("target/verbs_layout"), List.of(
                root.resolve("test/verbs_layout.c")), List.of(
                "gcc", "-O0", "-Wall", "-Werror", "-o", "{out}", root.resolve("test/verbs_layout.c").toString()));
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

    private static void requireToolchain()
    {
        final boolean haveHeader = Files.isRegularFile(HEADER);
        final boolean haveGcc = onPath("gcc");
        if (haveHeader && haveGcc)
        {
            return;
        }
        final String missing = (haveHeader ? "" : HEADER + " (apt-get install libibverbs-dev) ") +
            (haveGcc ? "" : "gcc (apt-get install gcc)");
        if ("true".equalsIgnoreCase(System.getenv("CI")) || "1".equals(System.getenv("MRD_REQUIRE_EMULATOR")))
        {
            fail("the emulated RDMA device cannot be built, missing " + missing.trim());
        }
        abort("emulated RDMA device not built, missing " + missing.trim());
    }

    private static Path build(final Path output, final List<Path> inputs, final List<String> command)
    {
        requireToolchain();
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
        try
        {
            final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
            final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!process.waitFor(BUILD_TIMEOUT_SECONDS, TimeUnit.SECONDS))
            {
                process.destroyForcibly();
                fail(String.join(" ", command) + " did not finish within " + BUILD_TIMEOUT_SECONDS + " s");
            }
            if (0 != process.exitValue())
            {
                fail(String.join(" ", command) + " failed (exit " + process.exitValue() + "):\n" + output);
            }
            return output;
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

    private static boolean onPath(final String program)
    {
        final String path = System.getenv().getOrDefault("PATH", "/usr/bin:/bin");
        for (final String dir : path.split(":"))
        {
            if (Files.isExecutable(Path.of(dir.isEmpty() ? "." : dir, program)))
            {
                return true;
            }
        }
        return false;
    }
}
