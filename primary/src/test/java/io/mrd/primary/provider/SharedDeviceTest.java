package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.QueueReporter;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.LiveObjects;
import io.mrd.testing.VerbsHeader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What IMPORT_PD shares and how a gone client's queues are destroyed: on the emulated device (a secondary's
 * import in this process stands for another process's), and with a library that lacks the destroy by handle
 * (a real libibverbs), whose context is faked; and the offsets read from {@code struct ibv_context} and
 * {@code struct ibv_pd}, against the installed header.
 */
final class SharedDeviceTest
{
    @TempDir
    Path buildDir;

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
    void aDuplicateOfTheCommandFileAndThePdHandleImportTheDaemonsDeviceAndPd() throws Exception
    {
        final Path library = EmulatedDevice.library();
        final IbverbsRegistrar ibverbs = new IbverbsRegistrar(ProviderConfig.ibverbs().withLibraryPath(library));
        final SharedDevice device = ibverbs.sharedDevice().orElseThrow();
        try
        {
            assertEquals(EmulatedDevice.DEVICE_NAME, device.deviceName());
            final int copy = device.duplicateCommandFd();
            assertNotEquals(device.commandFd(), copy);
            assertEquals(Files.readSymbolicLink(Path.of("/proc/self/fd/" + device.commandFd())),
                Files.readSymbolicLink(Path.of("/proc/self/fd/" + copy)), "a descriptor of the context's command file");
            // ibv_import_pd refuses a handle that names no live PD of the device: the import is the proof
            try (Verbs verbs = Verbs.importDevice(library.toString(), copy, device.pdHandle(), device.deviceName(),
                QueueReporter.NONE, DaemonLiveness.UNWATCHED))
            {
                assertEquals(device.pdHandle(), verbs.pdHandle());
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

    /**
     * What the control file records of a registration (docs/adoption.md) is enough for another context of the
     * device, made from a duplicate of the command file, to name the same MR with {@code ibv_import_mr}, and a
     * handle the device does not have is refused: the check a successor makes before it trusts a record.
     */
    @Test
    void anMrsDeviceHandleImportsTheSameMrInAnotherContextAndAForgedOneIsRefused() throws Throwable
    {
        final Path library = EmulatedDevice.library();
        final IbverbsRegistrar ibverbs = new IbverbsRegistrar(ProviderConfig.ibverbs().withLibraryPath(library));
        try (Arena arena = Arena.ofConfined())
        {
            final SharedDevice device = ibverbs.sharedDevice().orElseThrow();
            final MemorySegment buffer = arena.allocate(1 << 20, 4096);
            final Registration registration = ibverbs.register(buffer.address(), 1 << 20,
                Access.LOCAL_WRITE | Access.REMOTE_WRITE);
            assertTrue(registration.deviceHandle() >= 0, "a device handle: " + registration);

            final SymbolLookup verbs = SymbolLookup.libraryLookup(library, arena);
            final Linker linker = Linker.nativeLinker();
            final MethodHandle importDevice = linker.downcallHandle(verbs.find("ibv_import_device").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, JAVA_INT));
            final MethodHandle importPd = linker.downcallHandle(verbs.find("ibv_import_pd").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
            final MethodHandle importMr = linker.downcallHandle(verbs.find("ibv_import_mr").orElseThrow(),
                FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
            final MethodHandle unimportMr = linker.downcallHandle(verbs.find("ibv_unimport_mr").orElseThrow(),
                FunctionDescriptor.ofVoid(ADDRESS));
            final MethodHandle unimportPd = linker.downcallHandle(verbs.find("ibv_unimport_pd").orElseThrow(),
                FunctionDescriptor.ofVoid(ADDRESS));
            final MethodHandle closeDevice = linker.downcallHandle(verbs.find("ibv_close_device").orElseThrow(),
                FunctionDescriptor.of(JAVA_INT, ADDRESS));

            final MemorySegment context = (MemorySegment)importDevice.invokeExact(device.duplicateCommandFd());
            assertNotEquals(MemorySegment.NULL, context);
            final MemorySegment pd = (MemorySegment)importPd.invokeExact(context, device.pdHandle());
            assertNotEquals(MemorySegment.NULL, pd);
            final MemorySegment mr = ((MemorySegment)importMr.invokeExact(pd, registration.deviceHandle()))
                .reinterpret(IbverbsRegistrar.IBV_MR.byteSize());
            assertNotEquals(MemorySegment.NULL, mr);
            assertEquals(registration.address(), mr.get(ADDRESS, IbverbsRegistrar.IBV_MR.byteOffset(
                groupElement("addr"))).address());
            assertEquals(registration.length(), mr.get(JAVA_LONG, IbverbsRegistrar.IBV_MR.byteOffset(
                groupElement("length"))));
            assertEquals(registration.lkey(), mr.get(JAVA_INT, IbverbsRegistrar.IBV_MR.byteOffset(
                groupElement("lkey"))));
            assertEquals(registration.rkey(), mr.get(JAVA_INT, IbverbsRegistrar.IBV_MR.byteOffset(
                groupElement("rkey"))));
            assertEquals(registration.deviceHandle(), mr.get(JAVA_INT, IbverbsRegistrar.IBV_MR.byteOffset(
                groupElement("handle"))));
            unimportMr.invokeExact(mr);

            final MemorySegment forged = (MemorySegment)importMr.invokeExact(pd, registration.deviceHandle() + 1);
            assertEquals(MemorySegment.NULL, forged, "a handle no MR of the device has");
            ibverbs.deregister(registration);
            final MemorySegment stale = (MemorySegment)importMr.invokeExact(pd, registration.deviceHandle());
            assertEquals(MemorySegment.NULL, stale, "the handle of a deregistered MR");
            unimportPd.invokeExact(pd);
            assertEquals(0, (int)closeDevice.invokeExact(context));
        }
        finally
        {
            ibverbs.close();
        }
    }

    @Test
    void destroysByHandleTheQueuesAnotherContextCreatedAndNamesAHandleTheDeviceRefuses()
    {
        final Path library = EmulatedDevice.library();
        final IbverbsRegistrar ibverbs = new IbverbsRegistrar(ProviderConfig.ibverbs().withLibraryPath(library));
        try
        {
            final SharedDevice device = ibverbs.sharedDevice().orElseThrow();
            assertTrue(device.destroysByHandle());
            assertTrue(device.whyQueuesOutliveTheirClient().isEmpty());
            try (Verbs verbs = Verbs.importDevice(library.toString(), device.duplicateCommandFd(), device.pdHandle(),
                device.deviceName(), QueueReporter.NONE, DaemonLiveness.UNWATCHED))
            {
                final LiveObjects before = LiveObjects.of(library, verbs.context());
                final CompletionQueue cq = verbs.createCq(16);
                final QueuePair qp = verbs.createRcQp(cq, cq, QpCaps.of(8, 2));
                assertEquals(new LiveObjects(before.pds(), before.mrs(), before.cqs() + 1, before.qps() + 1),
                    LiveObjects.of(library, verbs.context()));

                assertEquals(ErrorCode.EBUSY, assertThrows(MrdException.class,
                    () -> device.destroyQueue(SharedDevice.CQ, cq.handle())).code(), "a QP still uses the CQ");
                device.destroyQueue(SharedDevice.QP, qp.handle());
                device.destroyQueue(SharedDevice.CQ, cq.handle());
                assertEquals(before, LiveObjects.of(library, verbs.context()));

                final MrdException refused = assertThrows(MrdException.class,
                    () -> device.destroyQueue(SharedDevice.QP, qp.handle()));
                assertEquals(ErrorCode.EINVAL, refused.code());
                assertEquals("EINVAL: mrdemu_destroy_by_handle(QP handle " + Integer.toUnsignedString(qp.handle()) +
                    ") on mrdemu0 failed: EINVAL: Invalid argument", refused.oneLine());
            }
        }
        finally
        {
            ibverbs.close();
        }
    }

    @Test
    void withoutTheExtensionTheQueuesOfAGoneClientAreSaidToLiveUntilTheDaemonRestarts()
    {
        final int memfd = Posix.memfdCreate("fake-cmd", Posix.MFD_CLOEXEC);
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment context = arena.allocate(SharedDevice.IBV_CONTEXT_HEAD);
            context.set(JAVA_INT, SharedDevice.IBV_CONTEXT_HEAD.byteOffset(groupElement("cmd_fd")), memfd);
            final MemorySegment pd = arena.allocate(SharedDevice.IBV_PD);
            pd.set(JAVA_INT, SharedDevice.IBV_PD.byteOffset(groupElement("handle")), 9);
            final SharedDevice device = new SharedDevice("mlx5_0", "libibverbs.so.1", name -> Optional.empty(),
                context, pd);
            assertEquals(9, device.pdHandle());
            assertEquals(memfd, device.commandFd());
            Posix.close(device.duplicateCommandFd());
            assertFalse(device.destroysByHandle(), "libibverbs has no destroy by handle");
            assertEquals("libibverbs.so.1 has no mrdemu_destroy_by_handle (libibverbs cannot destroy another " +
                "process's queue on a shared context): the queues of a secondary that ends without destroying them " +
                "live until the daemon restarts", device.whyQueuesOutliveTheirClient().orElseThrow());
            assertEquals(ErrorCode.EOPNOTSUPP,
                assertThrows(MrdException.class, () -> device.destroyQueue(SharedDevice.QP, 1)).code());

            context.set(JAVA_INT, SharedDevice.IBV_CONTEXT_HEAD.byteOffset(groupElement("cmd_fd")), -1);
            final MrdException noFile = assertThrows(MrdException.class, () -> new SharedDevice("mlx5_0",
                "libibverbs.so.1", name -> Optional.empty(), context, pd).duplicateCommandFd());
            assertEquals(ErrorCode.EOPNOTSUPP, noFile.code());
            assertTrue(noFile.getMessage().contains("has no command file (cmd_fd -1) to share"), noFile.getMessage());
        }
        finally
        {
            Posix.close(memfd);
        }
    }
}
