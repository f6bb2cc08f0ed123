package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.testing.VerbsHeader;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What IMPORT_PD shares and how a gone client's queues are destroyed, against the ibverbs stand-in built with
 * the emulated device's {@code mrdemu_destroy_by_handle} ({@code -DSTANDIN_DESTROY_BY_HANDLE}); and the offsets
 * read from {@code struct ibv_context} and {@code struct ibv_pd}, against the installed header.
 */
final class SharedDeviceTest
{
    @TempDir
    static Path buildDir;

    private static StandIn standIn;

    @BeforeAll
    static void compileStandIn() throws Exception
    {
        standIn = StandIn.withDestroyByHandle(buildDir);
    }

    @Test
    void readsCmdFdAndPdHandleAtTheInstalledHeadersOffsets() throws Exception
    {
        final Map<String, Long> c = VerbsHeader.evaluate(buildDir, List.of(
            "offsetof(struct ibv_context, ops)",
            "sizeof(struct ibv_context_ops)",
            "offsetof(struct ibv_context, cmd_fd)",
            "offsetof(struct ibv_context, async_fd)",
            "offsetof(struct ibv_context, num_comp_vectors)",
            "offsetof(struct ibv_pd, handle)",
            "sizeof(struct ibv_pd)"));
        final var context = SharedDevice.IBV_CONTEXT_HEAD;
        assertEquals(c.get("offsetof(struct ibv_context, ops)"), context.byteOffset(groupElement("ops")));
        assertEquals(c.get("sizeof(struct ibv_context_ops)"), context.select(groupElement("ops")).byteSize());
        for (final String field : List.of("cmd_fd", "async_fd", "num_comp_vectors"))
        {
            assertEquals(c.get("offsetof(struct ibv_context, " + field + ")"), context.byteOffset(groupElement(field)),
                "offsetof(struct ibv_context, " + field + ")");
        }
        assertEquals(c.get("offsetof(struct ibv_pd, handle)"), SharedDevice.IBV_PD.byteOffset(groupElement("handle")));
        assertEquals(c.get("sizeof(struct ibv_pd)"), SharedDevice.IBV_PD.byteSize());
    }

    @Test
    void sharesADuplicateOfTheCommandFileAndThePdHandle() throws Exception
    {
        final IbverbsRegistrar ibverbs =
            new IbverbsRegistrar(ProviderConfig.ibverbs().withLibraryPath(standIn.library()));
        final SharedDevice device = ibverbs.sharedDevice().orElseThrow();
        try
        {
            assertEquals("mrd_standin0", device.deviceName());
            assertEquals(7, device.pdHandle(), "the stand-in's ibv_pd.handle");
            final int copy = device.duplicateCommandFd();
            try
            {
                assertNotEquals(device.commandFd(), copy);
                assertTrue(Files.readSymbolicLink(Path.of("/proc/self/fd/" + copy)).toString()
                    .startsWith("/memfd:mrd-standin-cmd"), "a descriptor of the context's command file");
            }
            finally
            {
                Posix.close(copy);
            }
        }
        finally
        {
            ibverbs.close();
        }
        final MrdException closed = assertThrows(MrdException.class, device::duplicateCommandFd);
        assertEquals(ErrorCode.EBADF, closed.code());
        assertTrue(closed.getMessage().contains("the daemon is stopping"), closed.getMessage());
    }

    @Test
    void destroysAQueueByHandleThroughTheExtensionAndNamesTheHandleWhenTheDeviceRefuses() throws Throwable
    {
        final IbverbsRegistrar ibverbs =
            new IbverbsRegistrar(ProviderConfig.ibverbs().withLibraryPath(standIn.library()));
        try
        {
            final SharedDevice device = ibverbs.sharedDevice().orElseThrow();
            assertTrue(device.destroysByHandle());
            assertTrue(device.whyQueuesOutliveTheirClient().isEmpty());
            final int before = standIn.destroyed();
            device.destroyQueue(SharedDevice.QP, 42);
            assertEquals((2L << 32) | 42, standIn.lastDestroyed());
            device.destroyQueue(SharedDevice.CQ, 43);
            assertEquals((1L << 32) | 43, standIn.lastDestroyed());
            assertEquals(before + 2, standIn.destroyed());

            final MrdException refused = assertThrows(MrdException.class,
                () -> device.destroyQueue(SharedDevice.CQ, 0xBAD));
            assertEquals(ErrorCode.EINVAL, refused.code());
            assertEquals("EINVAL: mrdemu_destroy_by_handle(CQ handle 2989) on mrd_standin0 failed: EINVAL: " +
                "Invalid argument", refused.oneLine());
        }
        finally
        {
            ibverbs.close();
        }
    }
}
