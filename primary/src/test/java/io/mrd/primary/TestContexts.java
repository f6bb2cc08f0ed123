package io.mrd.primary;

import io.mrd.layout.sys.Sizes;

import java.nio.file.Path;
import java.util.Optional;

import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.CACHE_CAPACITY;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.HUGE_DIR;
import static io.mrd.primary.DaemonSettings.LIST_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static io.mrd.primary.DaemonSettings.MAX_MRS;

/**
 * Contexts of daemons as the tests that start one in this JVM want them.
 */
public final class TestContexts
{
    private TestContexts()
    {
    }

    /**
     * @param base where its memory starts: each test class its own, so that classes run at once do not collide.
     * @return a daemon small enough for a test: on tmpfs, 64MiB in two lists, 64 MRs, a global cache of 1024.
     */
    public static DaemonContext small(final Path dir, final long base)
    {
        return new DaemonContext()
            .set(DIR, dir)
            .set(HUGE_DIR, Optional.of("none"))
            .set(BASE_VIRTADDR, base)
            .set(MAX_MEMORY, 64 * Sizes.MIB)
            .set(LIST_SIZE, 32 * Sizes.MIB)
            .set(MAX_MRS, 64)
            .set(CACHE_CAPACITY, 1024);
    }
}
