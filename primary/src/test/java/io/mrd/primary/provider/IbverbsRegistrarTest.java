package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.charset.StandardCharsets;
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
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * The libibverbs binding against {@code src/test/c/ibverbs_standin.c}, a library with libibverbs' symbols compiled
 * here from the installed {@code <infiniband/verbs.h>}: the real call path (dlopen, downcalls, errno capture) and
 * the real struct offsets, without a NIC.
 * <p>
 * Needs gcc and Debian's libibverbs-dev. Without them the tests are skipped, unless {@code CI=true} or
 * {@code MRD_REQUIRE_IBVERBS_STANDIN=1}, where they fail.
 */
@SuppressWarnings("restricted")
final class IbverbsRegistrarTest
{
    /** What the MR engine asks for local memory. */
    private static final int LOCAL_ACCESS = Access.LOCAL | Access.RELAXED_ORDERING;

    private static final Path HEADER = Path.of("/usr/include/infiniband/verbs.h");
    private static final int ENTRY_REG_MR = 1;
    private static final int ENTRY_REG_MR_IOVA2 = 2;

    @TempDir
    static Path buildDir;

    private static Path standIn;
    private static MethodHandle setDeviceCount;
    private static MethodHandle setRegErrno;
    private static MethodHandle liveMrs;
    private static MethodHandle livePds;
    private static MethodHandle liveContexts;
    private static MethodHandle liveDeviceLists;
    private static MethodHandle registrations;
    private static MethodHandle lastEntry;
    private static MethodHandle lastAccess;
    private static MethodHandle lastIova;
    private static MethodHandle mrLayout;

    private final List<Registrar> registrars = new ArrayList<>();
    private Arena memory;

    @BeforeAll
    static void compileStandIn() throws Exception
    {
        final Path source = source();
        final boolean required = "true".equalsIgnoreCase(System.getenv("CI")) ||
            "1".equals(System.getenv("MRD_REQUIRE_IBVERBS_STANDIN"));
        final boolean haveHeader = Files.isRegularFile(HEADER);
        final boolean haveGcc = onPath("gcc");
        if (!haveHeader || !haveGcc)
        {
            final String missing = (haveHeader ? "" : HEADER + " (apt-get install libibverbs-dev) ") +
                (haveGcc ? "" : "gcc (apt-get install gcc)");
            if (required)
            {
                fail("the ibverbs stand-in cannot be built, missing " + missing);
            }
            Assumptions.abort("ibverbs stand-in not built, missing " + missing);
        }
        standIn = buildDir.resolve("libibverbs-standin.so");
        final Process gcc = new ProcessBuilder("gcc", "-O2", "-Wall", "-shared", "-fPIC", "-o", standIn.toString(),
            source.toString()).redirectErrorStream(true).start();
        final String output = new String(gcc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(gcc.waitFor(120, TimeUnit.SECONDS), "gcc did not finish");
        assertEquals(0, gcc.exitValue(), "gcc failed:\n" + output);

        // Loaded for good: the registrars under test dlopen the same file and so share the stand-in's counters.
        final SymbolLookup lookup = SymbolLookup.libraryLookup(standIn, Arena.global());
        setDeviceCount = bind(lookup, "standin_set_device_count", FunctionDescriptor.ofVoid(JAVA_INT));
        setRegErrno = bind(lookup, "standin_set_reg_errno", FunctionDescriptor.ofVoid(JAVA_INT));
        liveMrs = bind(lookup, "standin_live_mrs", FunctionDescriptor.of(JAVA_INT));
        livePds = bind(lookup, "standin_live_pds", FunctionDescriptor.of(JAVA_INT));
        liveContexts = bind(lookup, "standin_live_contexts", FunctionDescriptor.of(JAVA_INT));
        liveDeviceLists = bind(lookup, "standin_live_device_lists", FunctionDescriptor.of(JAVA_INT));
        registrations = bind(lookup, "standin_registrations", FunctionDescriptor.of(JAVA_INT));
        lastEntry = bind(lookup, "standin_last_entry", FunctionDescriptor.of(JAVA_INT));
        lastAccess = bind(lookup, "standin_last_access", FunctionDescriptor.of(JAVA_INT));
        lastIova = bind(lookup, "standin_last_iova", FunctionDescriptor.of(JAVA_LONG));
        mrLayout = bind(lookup, "standin_mr_layout", FunctionDescriptor.of(JAVA_LONG, JAVA_INT));
    }

    @BeforeEach
    void allocate()
    {
        memory = Arena.ofShared();
    }

    @AfterEach
    void restoreTheStandIn() throws Throwable
    {
        registrars.forEach(Registrar::close);
        memory.close();
        setRegErrno.invokeExact(0);
        setDeviceCount.invokeExact(1);
        assertEquals(0, (int)liveMrs.invokeExact(), "MRs left registered");
        assertEquals(0, (int)livePds.invokeExact(), "PDs left allocated");
        assertEquals(0, (int)liveContexts.invokeExact(), "devices left open");
        assertEquals(0, (int)liveDeviceLists.invokeExact(), "device lists not freed");
    }

    @Test
    void mirrorsStructIbvMrAsTheInstalledHeaderLaysItOut() throws Throwable
    {
        final String[] fields = {"context", "pd", "addr", "length", "handle", "lkey", "rkey"};
        for (int i = 0; i < fields.length; i++)
        {
            assertEquals((long)mrLayout.invokeExact(i), IbverbsRegistrar.IBV_MR.byteOffset(groupElement(fields[i])),
                "offsetof(struct ibv_mr, " + fields[i] + ")");
        }
        assertEquals((long)mrLayout.invokeExact(fields.length), IbverbsRegistrar.IBV_MR.byteSize(),
            "sizeof(struct ibv_mr)");
    }

    @Test
    void registersAndReadsKeysAndRangeFromTheStructIbvMr() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        assertEquals("mrd_standin0", ibverbs.deviceName());
        assertEquals("ibverbs", ibverbs.name());
        final MemorySegment buffer = memory.allocate(MIB, 4096);

        final int n = (int)registrations.invokeExact() + 1;
        final int access = Access.LOCAL_WRITE | Access.REMOTE_READ;
        final Registration registration = ibverbs.register(buffer.address(), MIB, access);
        assertEquals(0x1000 + n, registration.lkey(), "lkey at offset 36");
        assertEquals(0x2000 + n, registration.rkey(), "rkey at offset 40");
        assertEquals(buffer.address(), registration.address(), "addr at offset 16");
        assertEquals(MIB, registration.length(), "length at offset 24");
        assertTrue(0 != registration.handle(), "the handle is the struct ibv_mr *");
        assertEquals(ENTRY_REG_MR, (int)lastEntry.invokeExact(), "no optional flag: plain ibv_reg_mr");
        assertEquals(access, (int)lastAccess.invokeExact());
        final Registration local = ibverbs.register(buffer.address(), MIB, Access.LOCAL_WRITE);
        assertEquals(Access.NO_RKEY, local.rkey(), "the device's rkey of a local-only MR grants nothing: not reported");
        assertEquals(Access.LOCAL_WRITE, (int)lastAccess.invokeExact(), "the access goes to ibv_reg_mr as given");
        ibverbs.deregister(local);
        assertEquals(1, (int)liveMrs.invokeExact());
        assertEquals(MIB, ibverbs.pinnedBytes());

        ibverbs.deregister(registration);
        assertEquals(0, (int)liveMrs.invokeExact());
        assertEquals(0, ibverbs.pinnedBytes());
        assertEquals(0, ibverbs.liveCount());
    }

    @Test
    void optionalAccessFlagsGoThroughIbvRegMrIova2AsTheVerbsHeaderMacroDoes() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        final MemorySegment buffer = memory.allocate(MIB, 4096);
        final Registration registration = ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS);
        assertEquals(ENTRY_REG_MR_IOVA2, (int)lastEntry.invokeExact());
        assertEquals(LOCAL_ACCESS, (int)lastAccess.invokeExact(), "relaxed ordering passed through");
        assertEquals(buffer.address(), (long)lastIova.invokeExact(), "iova is the address, as the macro passes it");
        ibverbs.deregister(registration);
    }

    @Test
    void aFailedRegistrationNamesTheErrnoAndLeavesNothingBehind() throws Throwable
    {
        final IbverbsRegistrar ibverbs = registrar(config());
        final MemorySegment buffer = memory.allocate(MIB, 4096);

        setRegErrno.invokeExact(ErrorCode.ENOMEM.errno());
        final MrdException enomem = assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS));
        assertEquals(ErrorCode.ENOMEM, enomem.code());
        assertTrue(enomem.getMessage().contains("failed: ENOMEM: Cannot allocate memory"), enomem.getMessage());
        assertTrue(enomem.getMessage().contains("RLIMIT_MEMLOCK is "), enomem.getMessage());

        setRegErrno.invokeExact(ErrorCode.EACCES.errno());
        final MrdException eacces = assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), MIB, Access.LOCAL_WRITE));
        assertEquals(ErrorCode.EACCES, eacces.code());
        assertTrue(eacces.getMessage().contains("EACCES: Permission denied"), eacces.getMessage());
        assertTrue(eacces.getMessage().contains("mrd_standin0"), eacces.getMessage());

        setRegErrno.invokeExact(0);
        // The stand-in fails this length whatever the controls say.
        assertEquals(ErrorCode.ENOMEM, assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), 0xDEAD000L, Access.LOCAL_WRITE)).code());

        assertEquals(0, ibverbs.pinnedBytes());
        assertEquals(0, ibverbs.liveCount());
        assertEquals(0, (int)liveMrs.invokeExact());
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
        assertEquals(0, (int)liveMrs.invokeExact(), "no double free reached the library");
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
            assertEquals(0, (int)liveMrs.invokeExact());
        }
        finally
        {
            pool.shutdownNow();
        }
    }

    @Test
    void picksTheDeviceNamedByDevice() throws Throwable
    {
        setDeviceCount.invokeExact(3);
        assertEquals("mrd_standin2", registrar(config().withDeviceName("mrd_standin2")).deviceName());
        assertEquals("mrd_standin0", registrar(config()).deviceName(), "the first without --device");
    }

    @Test
    void aMissingDeviceFailsAtStartListingTheDevicesFound() throws Throwable
    {
        setDeviceCount.invokeExact(2);
        final MrdException ex = assertThrows(MrdException.class,
            () -> new IbverbsRegistrar(config().withDeviceName("nope")));
        assertEquals(ErrorCode.ENODEV, ex.code());
        assertEquals("ENODEV: RDMA device 'nope' not found; devices found: mrd_standin0, mrd_standin1: pass one of " +
            "them to --device", ex.oneLine());
    }

    @Test
    void noDeviceFailsAtStartWithOneLine() throws Throwable
    {
        setDeviceCount.invokeExact(0);
        final MrdException ex = assertThrows(MrdException.class, () -> Registrars.create(config()));
        assertEquals(ErrorCode.ENODEV, ex.code());
        assertTrue(ex.getMessage().startsWith(
            "no RDMA device found (ibv_get_device_list returned 0 devices): "), ex.getMessage());
        assertTrue(ex.getMessage().endsWith("or use --provider soft"), ex.getMessage());
        assertFalse(ex.oneLine().contains("\n"));
    }

    @Test
    void aLibraryThatDoesNotExistFailsAtStartWithOneLine()
    {
        final Path missing = buildDir.resolve("no-such-libibverbs.so.1");
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
        assertEquals(1, (int)livePds.invokeExact());
        assertEquals(1, (int)liveContexts.invokeExact());
        ibverbs.close();
        ibverbs.close();
        assertEquals(ErrorCode.EINVAL, assertThrows(MrdException.class,
            () -> ibverbs.register(buffer.address(), MIB, LOCAL_ACCESS)).code());
        // restoreTheStandIn checks MRs, PD, device and device list are all released.
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
        return ProviderConfig.ibverbs().withLibraryPath(standIn);
    }

    private static Path source()
    {
        final Path inModule = Path.of("src/test/c/ibverbs_standin.c");
        if (Files.exists(inModule))
        {
            return inModule.toAbsolutePath();
        }
        return Path.of(System.getProperty("mrd.project.root", "."), "primary/src/test/c/ibverbs_standin.c");
    }

    private static boolean onPath(final String program)
    {
        try
        {
            final Process p = new ProcessBuilder(program, "--version").redirectErrorStream(true).start();
            p.getInputStream().transferTo(java.io.OutputStream.nullOutputStream());
            return p.waitFor(30, TimeUnit.SECONDS) && 0 == p.exitValue();
        }
        catch (final IOException | InterruptedException ex)
        {
            return false;
        }
    }

    private static MethodHandle bind(final SymbolLookup lookup, final String name, final FunctionDescriptor descriptor)
    {
        return Linker.nativeLinker().downcallHandle(lookup.find(name).orElseThrow(), descriptor);
    }
}
