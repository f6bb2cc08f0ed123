package io.mrd.testing;

import io.mrd.layout.sys.Posix;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.abort;

/**
 * What a test needs from outside the JVM (root, a program of the host, free hugepages, the emulated device), and
 * the one rule for when it is missing: the test is skipped with one line naming what is missing and how to get it,
 * except where the run says the equipment must be there, and then it fails. {@code .ci/run} installs everything and
 * says so ({@code CI=true}, {@code MRD_REQUIRE_TOOLS}, {@code MRD_REQUIRE_HUGEPAGES=1}), so that nothing CI can run
 * is skipped there.
 * <p>
 * Call these first in a test or its set-up; a set-up that stops here leaves fields unset, so every
 * {@code @AfterEach} closes only what was made.
 */
public final class Equipment
{
    /** Comma-separated programs whose absence fails a test instead of skipping it. */
    public static final String REQUIRE_TOOLS_ENV = "MRD_REQUIRE_TOOLS";
    /** {@code 1}: a test that needs free hugepages fails without them instead of skipping. */
    public static final String REQUIRE_HUGEPAGES_ENV = "MRD_REQUIRE_HUGEPAGES";

    private static final Path FREE_HUGEPAGES = Path.of("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages");

    private Equipment()
    {
    }

    /**
     * Skips the calling test with {@code why}, or fails it when {@code required} (with {@code requiredBy} saying
     * which setting requires it).
     */
    public static void unavailable(final String why, final boolean required, final String requiredBy)
    {
        if (required)
        {
            fail(why + " (required here: " + requiredBy + ")");
        }
        abort(why);
    }

    /**
     * @param name a program looked up in {@code $PATH}.
     * @return its path; the test skips without it, or fails when {@value #REQUIRE_TOOLS_ENV} names it.
     */
    public static Path program(final String name)
    {
        return find(name, System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
    }

    /**
     * @param name a program of the system ({@code /usr/bin}, {@code /bin}), for a test that runs it as another
     *             user: {@code $PATH} may find a per-user copy (a pyenv shim under {@code /root}) that other users
     *             cannot execute.
     * @return its path; skipped or failed as {@link #program} says.
     */
    public static Path systemProgram(final String name)
    {
        return find(name, "/usr/bin:/bin");
    }

    private static Path find(final String name, final String path)
    {
        for (final String dir : path.split(":"))
        {
            final Path candidate = Path.of(dir.isEmpty() ? "." : dir, name);
            if (Files.isExecutable(candidate))
            {
                return candidate;
            }
        }
        final String required = System.getenv().getOrDefault(REQUIRE_TOOLS_ENV, "");
        final boolean isRequired = Arrays.asList(required.split(",")).contains(name);
        unavailable(name + " is not installed (looked in " + path + "): skipped (install it, or set " +
            REQUIRE_TOOLS_ENV + "=" + name + " to make this a failure)", isRequired, REQUIRE_TOOLS_ENV + "=" + required);
        throw new AssertionError("unreachable");
    }

    /**
     * Root, for a test that runs a peer as another uid or drops a capability; CI runs as root, so there it fails.
     */
    public static void root(final String what)
    {
        if (0 != Posix.getuid())
        {
            unavailable("needs root to " + what + " (uid " + Posix.getuid() + ")",
                "true".equalsIgnoreCase(System.getenv("CI")), "CI=true, which runs as root");
        }
    }

    /**
     * @param pages free 2 MiB hugepages the test needs.
     * @param how   how to get them (e.g. {@code "run 'scripts/setup-hugepages 64' as root"}).
     */
    public static void freeHugePages(final long pages, final String how)
    {
        final long free = freeHugePages();
        if (free < pages)
        {
            unavailable("needs " + pages + " free 2 MiB hugepages, the kernel has " + free + ": " + how,
                "1".equals(System.getenv(REQUIRE_HUGEPAGES_ENV)), REQUIRE_HUGEPAGES_ENV + "=1");
        }
    }

    /**
     * @return whether a missing hugetlbfs pool fails the test ({@value #REQUIRE_HUGEPAGES_ENV}{@code =1}).
     */
    public static boolean hugePagesRequired()
    {
        return "1".equals(System.getenv(REQUIRE_HUGEPAGES_ENV));
    }

    /**
     * @return the kernel's free 2 MiB hugepages; 0 without a pool.
     */
    public static long freeHugePages()
    {
        try
        {
            return Files.isReadable(FREE_HUGEPAGES) ? Long.parseLong(Files.readString(FREE_HUGEPAGES).trim()) : 0;
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }
}
