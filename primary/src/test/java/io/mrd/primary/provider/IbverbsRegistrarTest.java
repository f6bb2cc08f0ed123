package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.EmulatorSettings;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
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
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import static io.mrd.layout.sys.Sizes.MIB;
import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The libibverbs binding against the emulated RDMA device ({@code emulator/}, built by {@link EmulatedDevice}), a
 * library with libibverbs' ABI compiled here from the installed {@code <infiniband/verbs.h>}: the real call path
 * (dlopen, downcalls, errno capture), the real struct offsets, and a device that checks what a kernel driver
 * checks at registration (unmapped memory, access flags, sizes), without a NIC.
 * <p>
 * Needs gcc and Debian's libibverbs-dev. Without them the tests are skipped, unless {@code CI=true} or
 * {@code MRD_REQUIRE_EMULATOR=1}, where they fail.
 */
@SuppressWarnings("restricted")
final class IbverbsRegistrarTest
{
    /** What every "no device" message says about the emulated device, spelled out as a user reads it. */
    private static final String EMULATED_DEVICE_ADVICE = "the emulated device (build it with 'scripts/mrd emulator', " +
        "which prints its path, emulator/target/libmrdemu.so, and set MRD_IBVERBS_LIBRARY to that path for the " +
        "daemon and every worker)";

    /** What the MR engine asks for local memory. */
    private static final int LOCAL_ACCESS = Access.LOCAL | Access.RELAXED_ORDERING;

    private static final Linker LINKER = Linker.nativeLinker();

    private static Path emulator;
    /** {@code int mrdemu_live_objects(struct ibv_context *ctx, uint32_t out[4])}: with NULL, this process's. */
    private static MethodHandle liveObjects;

    @TempDir
    static Path scratch;

    private final List<Registrar> registrars = new ArrayList<>();
    private Arena memory;

    @BeforeAll
    static void buildTheEmulator()
    {
        emulator = EmulatedDevice.library();
        // Loaded for good: the registrars under test dlopen the same file and so share its process-wide view.
        final SymbolLookup lookup = SymbolLookup.libraryLookup(emulator, Arena.global());
        liveObjects = LINKER.downcallHandle(lookup.find("mrdemu_live_objects").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
    }

    @BeforeEach
    void allocate()
    {
        memory = Arena.ofShared();
    }

    @AfterEach
    void closeEverything() throws Throwable
    {
        registrars.forEach(Registrar::close);
        memory.close();
        EmulatorSettings.reset();
        assertEquals(0, contextsOpen(), "devices left open");
    }

    @Test
    void mirrorsStructIbvMrAsTheInstalledHeaderLaysItOut()
    {
        for (final String field : List.of("context", "pd", "addr", "length", "handle", "lkey", "rkey"))
        {
            assertEquals(EmulatedDevice.layoutOf("ibv_mr." + field),
                IbverbsRegistrar.IBV_MR.byteOffset(groupElement(field)), "offsetof(struct ibv_mr, " + field + ")");
        }
        assertEquals(EmulatedDevice.layoutOf("sizeof.ibv_mr"), IbverbsRegistrar.IBV_MR.byteSize(),
            "sizeof(struct ibv_mr)");
    }

    @Test
    void registersAndReadsKeysAndRangeFromTheStructIbvMr() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        assertEquals(EmulatedDevice.DEVICE_NAME, ibverbs.deviceName());
        assertEquals("ibverbs", ibverbs.name());
        final MemorySegment buffer = memory.allocate(MIB, 4096);

        final Registration registration = ibverbs.register(buffer.address(), MIB, Access.LOCAL_WRITE |
            Access.REMOTE_READ);
        // The emulator's keys are mlx5 mkeys: (index << 8) | a variant that is never 0, and lkey == rkey.
        assertEquals(registration.lkey(), registration.rkey(), "lkey at offset 36, rkey at offset 40");
        assertNotEquals(0, registration.lkey() & 0xff, "variant of " + Integer.toHexString(registration.lkey()));
        assertEquals(buffer.address(), registration.address(), "addr at offset 16");
        assertEquals(MIB, registration.length(), "length at offset 24");
        assertTrue(0 != registration.handle(), "the handle is the struct ibv_mr *");
        assertEquals(1, liveMrs(), "one MR on the device");
        assertEquals(MIB, ibverbs.pinnedBytes());

        ibverbs.deregister(registration);
        assertEquals(0, liveMrs());
        assertEquals(0, ibverbs.pinnedBytes());
        assertEquals(0, ibverbs.liveCount());

        final Registration again = ibverbs.register(buffer.address(), MIB, Access.LOCAL_WRITE);
        assertNotEquals(registration.lkey(), again.lkey(), "a new registration never gets a key of an old one");
        assertEquals(Access.NO_RKEY, again.rkey(), "the device's rkey of a local-only MR grants nothing: not reported");
        ibverbs.deregister(again);
    }

    @Test
    void registersWithTheOptionalRelaxedOrderingFlagAsTheVerbsHeaderMacroPassesIt() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        final MemorySegment buffer = memory.allocate(MIB, 4096);
        assertTrue(0 != (LOCAL_ACCESS & Access.OPTIONAL_RANGE), "the default asks for relaxed ordering");
        final Registration registration = ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS);
        assertEquals(1, liveMrs());
        ibverbs.deregister(registration);
    }

    @Test
    void aFailedRegistrationNamesTheErrnoAndLeavesNothingBehind() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        final MemorySegment buffer = memory.allocate(MIB, 4096);

        // Longer than the device's max_mr_size (1 TiB): a driver's EINVAL.
        final MrdException tooLong = assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), 2L << 40, LOCAL_ACCESS));
        assertEquals(ErrorCode.EINVAL, tooLong.code());
        assertTrue(tooLong.getMessage().startsWith("ibv_reg_mr of 2TiB at "), tooLong.getMessage());
        assertTrue(tooLong.getMessage().endsWith("failed: EINVAL: Invalid argument"), tooLong.getMessage());

        // Remote write without local write: the verbs specification's EINVAL.
        final MrdException einval = assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), MIB, Access.REMOTE_WRITE));
        assertEquals(ErrorCode.EINVAL, einval.code());
        assertTrue(einval.getMessage().contains("EINVAL: Invalid argument"), einval.getMessage());
        assertTrue(einval.getMessage().contains(EmulatedDevice.DEVICE_NAME), einval.getMessage());

        // Memory that is not mapped any more.
        final MemorySegment hole = Posix.map(MIB, Posix.PROT_READ, Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
        Posix.munmap(hole.address(), MIB);
        final MrdException efault = assertThrows(MrdException.class,
            () -> ibverbs.register(hole.address(), MIB, Access.LOCAL_WRITE));
        assertEquals(ErrorCode.EFAULT, efault.code());
        assertTrue(efault.getMessage().endsWith(": part of the range is not mapped"), efault.getMessage());

        assertEquals(0, ibverbs.pinnedBytes());
        assertEquals(0, ibverbs.liveCount());
        assertEquals(0, liveMrs());
    }

    @Test
    void mirrorsStructIbvDeviceAttrUpToMaxMrSize()
    {
        assertEquals(EmulatedDevice.layoutOf("sizeof.ibv_device_attr"), IbverbsDevice.DEVICE_ATTR_SIZE,
            "sizeof(struct ibv_device_attr)");
        assertEquals(EmulatedDevice.layoutOf("ibv_device_attr.max_mr_size"), IbverbsDevice.DEVICE_ATTR_MAX_MR_SIZE,
            "offsetof(struct ibv_device_attr, max_mr_size)");
    }

    @Test
    void maxRegionLengthIsTheDevicesMaxMrSizeAndTheDeviceRefusesLongerRanges() throws Throwable
    {
        assertEquals(1L << 40, registrar(config()).maxRegionLength(), "the emulator's default max_mr_size, 1 TiB");

        EmulatorSettings.maxMrSize(4 * MIB);
        final IbverbsRegistrar ibverbs;
        try
        {
            ibverbs = registrar(config());
        }
        finally
        {
            EmulatorSettings.maxMrSize(0);
        }
        assertEquals(4 * MIB, ibverbs.maxRegionLength(), "what ibv_query_device reported at start");
        final MemorySegment buffer = memory.allocate(8 * MIB, 4096);
        ibverbs.deregister(ibverbs.register(buffer.address(), 4 * MIB, LOCAL_ACCESS));
        final MrdException tooLong = assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), 4 * MIB + 4096, LOCAL_ACCESS));
        assertEquals(ErrorCode.EINVAL, tooLong.code(), tooLong.getMessage());
        assertEquals(0, ibverbs.pinnedBytes());
        assertEquals(0, liveMrs());
    }

    /**
     * The emulated device pins nothing, so what is resident after a registration is what the populator faulted
     * in before {@code ibv_reg_mr}.
     */
    @Test
    void aLargeRangeIsFaultedInBeforeIbvRegMr() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config().withPopulateThreads(2));
        final long length = 64 * MIB;
        final int fd = Posix.memfdCreate("ibverbs-populate-test", Posix.MFD_CLOEXEC);
        final MemorySegment shared;
        try
        {
            Posix.ftruncate(fd, length);
            shared = Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
        }
        finally
        {
            Posix.close(fd);
        }
        try
        {
            assertEquals(0, PagePopulatorTest.residentPages(shared.address(), length), "a fresh memfd has no page");
            final Registration registration = ibverbs.register(shared.address(), length, LOCAL_ACCESS);
            assertEquals(length / PageLocks.PAGE_SIZE, PagePopulatorTest.residentPages(shared.address(), length));
            ibverbs.deregister(registration);
        }
        finally
        {
            Posix.munmap(shared.address(), length);
        }
    }

    @Test
    void refusesASecondDeregistrationWithoutCallingTheLibrary() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        final MemorySegment buffer = memory.allocate(MIB, 4096);
        final Registration registration = ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS);
        ibverbs.deregister(registration);
        final MrdException twice = assertThrows(MrdException.class, () -> ibverbs.deregister(registration));
        assertEquals(ErrorCode.EINVAL, twice.code());
        assertEquals(0, liveMrs(), "no double free reached the library");
    }

    @Test
    void maxPinnedAndFaultInjectionApplyAsForSoft()
    {
        final IbverbsRegistrar ibverbs = registrar(config().withMaxPinned(2 * MIB).withFailNth(2));
        final MemorySegment buffer = memory.allocate(4 * MIB, 4096);
        final Registration first = ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS);
        assertEquals("injected failure of registration #2 (--fail-nth)", assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address() + MIB, MIB, LOCAL_ACCESS)).getMessage());
        final MrdException over = assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address() + MIB, 2 * MIB, LOCAL_ACCESS));
        assertEquals(ErrorCode.ENOMEM, over.code());
        assertTrue(over.getMessage().contains("over --max-pinned 2MiB"), over.getMessage());
        assertEquals(MIB, ibverbs.pinnedBytes());
        ibverbs.deregister(first);
    }

    @Test
    void concurrentRegistrationsGetDistinctMrsAndAllAreReleased() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        final int threads = 8;
        final int perThread = 50;
        final MemorySegment buffer = memory.allocate(threads * perThread * 4096L, 4096);
        final CountDownLatch go = new CountDownLatch(1);
        final ExecutorService pool = Executors.newFixedThreadPool(threads);
        try
        {
            final List<Future<List<Registration>>> futures = new ArrayList<>();
            for (int t = 0; t < threads; t++)
            {
                final long base = buffer.address() + t * perThread * 4096L;
                futures.add(pool.submit(() ->
                {
                    go.await();
                    final List<Registration> mine = new ArrayList<>();
                    for (int i = 0; i < perThread; i++)
                    {
                        mine.add(ibverbs.register(base + i * 4096L, 4096, LOCAL_ACCESS));
                    }
                    mine.forEach(ibverbs::deregister);
                    return mine;
                }));
            }
            go.countDown();
            final Set<Integer> keys = new HashSet<>();
            for (final Future<List<Registration>> f : futures)
            {
                f.get(60, TimeUnit.SECONDS).forEach(r -> keys.add(r.lkey()));
            }
            assertEquals(threads * perThread, keys.size());
            assertEquals(0, ibverbs.pinnedBytes());
            assertEquals(0, liveMrs());
        }
        finally
        {
            pool.shutdownNow();
        }
    }

    @Test
    void picksTheDeviceNamedByDevice() throws Throwable
    {
        EmulatorSettings.devices(3);
        assertEquals("mrdemu2", registrar(config().withDeviceName("mrdemu2")).deviceName());
        assertEquals("mrdemu0", registrar(config()).deviceName(), "the first without --device");
    }

    @Test
    void aMissingDeviceFailsAtStartListingTheDevicesFound() throws Throwable
    {
        EmulatorSettings.devices(2);
        final MrdException ex = assertThrows(MrdException.class,
            () -> new IbverbsRegistrar(config().withDeviceName("nope")));
        assertEquals(ErrorCode.ENODEV, ex.code());
        assertEquals("ENODEV: RDMA device 'nope' not found; devices found: mrdemu0, mrdemu1: pass one of " +
            "them to --device", ex.oneLine());
    }

    @Test
    void noDeviceFailsAtStartWithOneLine() throws Throwable
    {
        EmulatorSettings.devices(0);
        final MrdException ex = assertThrows(MrdException.class, () -> Registrars.create(config()));
        assertEquals(ErrorCode.ENODEV, ex.code());
        assertTrue(ex.getMessage().startsWith(
            "no RDMA device found (ibv_get_device_list returned 0 devices): "), ex.getMessage());
        assertTrue(ex.getMessage().endsWith("use " + EMULATED_DEVICE_ADVICE + ", or use --provider soft"),
            ex.getMessage());
        assertFalse(ex.oneLine().contains("\n"));
    }

    @Test
    void aLibraryThatDoesNotExistFailsAtStartWithOneLine()
    {
        final Path missing = scratch.resolve("no-such-libibverbs.so.1");
        final MrdException ex = assertThrows(MrdException.class,
            () -> Registrars.create(ProviderConfig.ibverbs().withLibraryPath(missing)));
        assertEquals(ErrorCode.ENOENT, ex.code());
        assertEquals("ENOENT: " + missing + " not found: install rdma-core/libibverbs1 or use --provider soft",
            ex.oneLine());

        // A bare soname goes through the loader's search path, as the default libibverbs.so.1 does.
        final MrdException bySoname = assertThrows(MrdException.class,
            () -> Registrars.create(ProviderConfig.ibverbs().withLibraryPath(Path.of("libibverbs-mrd-absent.so.1"))));
        assertEquals("ENOENT: libibverbs-mrd-absent.so.1 not found: install rdma-core/libibverbs1 or use " +
            "--provider soft", bySoname.oneLine());
    }

    @Test
    void aLibraryWithoutTheSymbolsFailsAtStartNamingTheSymbol()
    {
        final Path notVerbs = Path.of("/lib/x86_64-linux-gnu/libm.so.6");
        Assumptions.assumeTrue(Files.exists(notVerbs));
        final MrdException ex = assertThrows(MrdException.class,
            () -> Registrars.create(ProviderConfig.ibverbs().withLibraryPath(notVerbs)));
        assertEquals(ErrorCode.ENOSYS, ex.code());
        assertTrue(ex.getMessage().contains("has no ibv_get_device_list"), ex.getMessage());
    }

    @Test
    void closeDeregistersWhatIsStillLiveThenReleasesPdAndDevice() throws Throwable
    {
        final IbverbsRegistrar ibverbs = new IbverbsRegistrar(config());
        final MemorySegment buffer = memory.allocate(MIB, 4096);
        ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS);
        assertEquals(1, live()[0], "the PD");
        assertEquals(1, liveMrs());
        assertEquals(1, contextsOpen());
        ibverbs.close();
        ibverbs.close();
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS)).code());
        // closeEverything checks the device is closed.
    }

    @Test
    void theFactoryBuildsTheIbverbsProvider()
    {
        assertInstanceOf(IbverbsRegistrar.class, registrarFromFactory());
    }

    /**
     * The installed libibverbs itself, where there is one: it either opens a device or, on a host without one,
     * fails at start with the one-line ENODEV reason.
     */
    @Test
    void theRealLibraryOpensADeviceOrSaysThereIsNone()
    {
        final Registrar real;
        try
        {
            real = new IbverbsRegistrar(ProviderConfig.ibverbs().withLibraryPath(null));
        }
        catch (final MrdException ex)
        {
            Assumptions.assumeTrue(ErrorCode.ENOENT != ex.code(), "no libibverbs.so.1 installed");
            assertEquals(ErrorCode.ENODEV, ex.code(), ex.oneLine());
            assertTrue(ex.getMessage().startsWith("no RDMA device found"), ex.oneLine());
            assertTrue(ex.getMessage().contains("use " + EMULATED_DEVICE_ADVICE), ex.oneLine());
            assertFalse(ex.oneLine().contains("\n"));
            return;
        }
        real.close();
    }

    private Registrar registrarFromFactory()
    {
        final Registrar registrar = Registrars.create(config());
        registrars.add(registrar);
        return registrar;
    }

    private IbverbsRegistrar registrar(final ProviderConfig config)
    {
        final IbverbsRegistrar registrar = new IbverbsRegistrar(config);
        registrars.add(registrar);
        return registrar;
    }

    private static ProviderConfig config()
    {
        return ProviderConfig.ibverbs().withLibraryPath(emulator);
    }

    /** PDs, MRs, CQs, QPs live on the devices this process has open. */
    private static int[] live() throws Throwable
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment out = arena.allocate(JAVA_INT, 4);
            final int ignored = (int)liveObjects.invokeExact(MemorySegment.NULL, out);
            return out.toArray(JAVA_INT);
        }
    }

    private static int liveMrs() throws Throwable
    {
        return live()[1];
    }

    private static int contextsOpen() throws Throwable
    {
        try (Arena arena = Arena.ofConfined())
        {
            return (int)liveObjects.invokeExact(MemorySegment.NULL, arena.allocate(JAVA_INT, 4));
        }
    }
}
