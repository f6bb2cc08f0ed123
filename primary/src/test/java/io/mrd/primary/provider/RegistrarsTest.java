package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;

import static io.mrd.layout.sys.Sizes.GIB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

/**
 * {@code --provider} and its settings: the default and an unknown name. The values refused before anything
 * starts are {@code DaemonContext.conclude()}'s (DaemonContextTest).
 */
final class RegistrarsTest
{
    @Test
    void theDefaultIsSoftWithNoLimitAndNoFaults()
    {
        final ProviderConfig config = ProviderConfig.defaults();
        assertEquals("soft", config.name());
        assertEquals(0, config.maxPinned());
        assertEquals(0, config.failNth());
        assertEquals(0, config.latencyNanos());
        try (Registrar registrar = Registrars.create(config))
        {
            assertInstanceOf(SoftRegistrar.class, registrar);
            assertEquals("soft", registrar.name());
            assertEquals(0, registrar.pinnedBytes());
        }
    }

    @Test
    void anUnknownProviderIsRefusedListingTheKnownOnes()
    {
        final MrdException ex = assertThrows(MrdException.class,
            () -> Registrars.create(ProviderConfig.defaults().withName("rxe")));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertEquals("EINVAL: unknown provider 'rxe': --provider takes one of soft, ibverbs", ex.oneLine());
    }

    @Test
    void printsEverySetting()
    {
        final ProviderConfig config = ProviderConfig.ibverbs().withMaxPinned(GIB).withDeviceName("mlx5_0")
            .withLibraryPath(Path.of("/opt/rdma/libibverbs.so.1")).withPopulateThreads(3);
        assertEquals("ProviderConfig{provider=ibverbs, maxPinned=1GiB, failNth=0, latencyNanos=0, device=mlx5_0, " +
            "library=/opt/rdma/libibverbs.so.1, populateThreads=3}", config.toString());
        assertEquals("/opt/rdma/libibverbs.so.1", config.library());
    }
}
