package io.mrd.primary.provider;

import io.mrd.testing.VerbsHeader;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The ibverbs stand-in ({@code src/test/c/ibverbs_standin.c}) built with the emulated device's
 * {@code mrdemu_destroy_by_handle}, and its controls, for the tests of device sharing (provider and server).
 * Skips the calling test (fails in CI) without gcc and verbs.h, as {@link VerbsHeader} does.
 */
@SuppressWarnings("restricted")
public final class StandIn
{
    private final Path library;
    private final MethodHandle lastDestroyed;
    private final MethodHandle destroyed;

    private StandIn(final Path library)
    {
        this.library = library;
        final SymbolLookup lookup = SymbolLookup.libraryLookup(library, Arena.global());
        lastDestroyed = Linker.nativeLinker().downcallHandle(lookup.find("standin_last_destroyed").orElseThrow(),
            FunctionDescriptor.of(JAVA_LONG));
        destroyed = Linker.nativeLinker().downcallHandle(lookup.find("standin_destroyed").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT));
    }

    /**
     * Compiles the stand-in with {@code -DSTANDIN_DESTROY_BY_HANDLE} into {@code dir} and loads it for good.
     */
    public static StandIn withDestroyByHandle(final Path dir) throws Exception
    {
        VerbsHeader.evaluate(dir, List.of("sizeof(struct ibv_pd)"));
        final Path library = dir.resolve("libibverbs-standin-destroy.so");
        final Path source = Files.exists(Path.of("src/test/c/ibverbs_standin.c")) ?
            Path.of("src/test/c/ibverbs_standin.c").toAbsolutePath() :
            Path.of(System.getProperty("mrd.project.root", "."), "primary/src/test/c/ibverbs_standin.c");
        final Process gcc = new ProcessBuilder("gcc", "-O2", "-Wall", "-Werror", "-shared", "-fPIC",
            "-DSTANDIN_DESTROY_BY_HANDLE", "-o", library.toString(), source.toString()).redirectErrorStream(true)
            .start();
        final String output = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(gcc.waitFor(120, TimeUnit.SECONDS), "gcc did not finish");
        assertEquals(0, gcc.exitValue(), "gcc failed:\n" + output);
        return new StandIn(library);
    }

    public Path library()
    {
        return library;
    }

    /**
     * @return the last {@code mrdemu_destroy_by_handle} as {@code (kind << 32) | handle}.
     */
    public long lastDestroyed() throws Throwable
    {
        return (long)lastDestroyed.invokeExact();
    }

    /**
     * @return how many queues {@code mrdemu_destroy_by_handle} destroyed since load.
     */
    public int destroyed() throws Throwable
    {
        return (int)destroyed.invokeExact();
    }
}
