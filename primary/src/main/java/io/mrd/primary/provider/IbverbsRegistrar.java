package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.EmulatedDeviceAdvice;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RemoteAccess;
import io.mrd.layout.sys.LoadedLibrary;
import io.mrd.layout.sys.Sizes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The provider for real NICs: registrations are {@code ibv_reg_mr} on a protection domain of one RDMA device,
 * through an FFM binding of {@code libibverbs.so.1} (no JNI, no compile step; the library is loaded at start).
 * <p>
 * Everything that keeps it from working is found in the constructor: libibverbs missing, no device, the
 * {@code --device} asked for absent, the device or PD refusing to open. The daemon thus fails at start with one
 * line naming what is missing, never at the first registration.
 * <p>
 * verbs.h makes {@code ibv_reg_mr} a macro: with a flag of {@link Access#OPTIONAL_RANGE} (relaxed ordering, which
 * mrd asks for by default) compiled C calls the exported {@code ibv_reg_mr_iova2(pd, addr, length, addr, access)},
 * otherwise the exported {@code ibv_reg_mr}. This binding makes the same choice, so the kernel sees what it would
 * see from a C program; a libibverbs older than rdma-core 28 has no {@code ibv_reg_mr_iova2}, and then the optional
 * flags are dropped, as devices are allowed to ignore them.
 * <p>
 * A registration faults the range in first ({@link PagePopulator}: in parallel when it is large), so that
 * {@code ibv_reg_mr} pins pages that are present instead of faulting them in one by one on the calling thread.
 * A range longer than the device's {@code max_mr_size} ({@code ibv_query_device}, read at start and given as
 * {@link #maxRegionLength()}) is refused by the device; the engine splits ranges at that length.
 * <p>
 * Thread-safe: libibverbs allows registrations on one PD from any number of threads.
 */
@SuppressWarnings("restricted")
public final class IbverbsRegistrar implements Registrar
{
    public static final String NAME = ProviderConfig.IBVERBS;

    /**
     * {@code struct ibv_mr} as rdma-core's {@code <infiniband/verbs.h>} declares it (unchanged since OFED's libibverbs
     * 1.0; 48 bytes on LP64):
     * <pre>
     *   0                   1                   2                   3
     *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
     *  +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
     *  |             struct ibv_context *context                       |  0
     *  |                                                               |
     *  +---------------------------------------------------------------+
     *  |             struct ibv_pd *pd                                 |  8
     *  |                                                               |
     *  +---------------------------------------------------------------+
     *  |             void *addr                                        | 16
     *  |                                                               |
     *  +---------------------------------------------------------------+
     *  |             size_t length                                     | 24
     *  |                                                               |
     *  +---------------------------------------------------------------+
     *  |             uint32_t handle                                   | 32
     *  +---------------------------------------------------------------+
     *  |             uint32_t lkey                                     | 36
     *  +---------------------------------------------------------------+
     *  |             uint32_t rkey                                     | 40
     *  +---------------------------------------------------------------+
     *  |             (padding to 8-byte alignment)                     | 44
     *  +---------------------------------------------------------------+
     * </pre>
     * IbverbsRegistrarTest checks every offset against {@code offsetof} compiled from the installed header.
     */
    public static final StructLayout IBV_MR = MemoryLayout.structLayout(
        ADDRESS.withName("context"),
        ADDRESS.withName("pd"),
        ADDRESS.withName("addr"),
        JAVA_LONG.withName("length"),
        JAVA_INT.withName("handle"),
        JAVA_INT.withName("lkey"),
        JAVA_INT.withName("rkey"),
        MemoryLayout.paddingLayout(4)).withName("ibv_mr");

    /** {@code IBV_SYSFS_NAME_MAX}: the size of {@code struct ibv_device}'s name, NUL included. */
    static final int DEVICE_NAME_MAX = 64;
    /**
     * {@code sizeof(struct ibv_device_attr)}, what {@code ibv_query_device} fills; IbverbsRegistrarTest checks it
     * against the installed header.
     */
    static final int DEVICE_ATTR_SIZE = 232;
    /**
     * {@code offsetof(struct ibv_device_attr, max_mr_size)}: after {@code char fw_ver[64]}, {@code node_guid} and
     * {@code sys_image_guid}.
     */
    static final int DEVICE_ATTR_MAX_MR_SIZE = 80;

    private static final Logger LOG = LoggerFactory.getLogger(IbverbsRegistrar.class);
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(groupElement("errno"));
    private static final ThreadLocal<MemorySegment> CALL_STATE =
        ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    private static final VarHandle MR_ADDR = IBV_MR.varHandle(groupElement("addr"));
    private static final VarHandle MR_LENGTH = IBV_MR.varHandle(groupElement("length"));
    private static final VarHandle MR_HANDLE = IBV_MR.varHandle(groupElement("handle"));
    private static final VarHandle MR_LKEY = IBV_MR.varHandle(groupElement("lkey"));
    private static final VarHandle MR_RKEY = IBV_MR.varHandle(groupElement("rkey"));

    private final String library;
    private final String deviceName;
    private final Arena libraryArena;
    private final MethodHandle regMr;
    /** Absent before rdma-core 28 (IBVERBS_1.8). */
    private final MethodHandle regMrIova2;
    private final MethodHandle deregMr;
    private final MethodHandle deallocPd;
    private final MethodHandle closeDevice;
    private final MemorySegment context;
    private final MemorySegment pd;
    private final SharedDevice sharedDevice;
    /** The device's {@code max_mr_size}: the longest range one {@code ibv_reg_mr} takes. */
    private final long maxMrSize;
    private final PagePopulator populator;
    private final FaultInjection faults;
    private final PinnedBytes pinned;
    /** Live registrations by {@code struct ibv_mr *}: refuses a second deregistration instead of a double free. */
    private final Map<Long, Registration> live = new ConcurrentHashMap<>();
    private volatile boolean closed;

    /**
     * Loads libibverbs, opens the device and allocates the protection domain every registration will use.
     *
     * @param config {@code library()}, {@code deviceName}, {@code maxPinned}, {@code populateThreads} and fault
     *               injection apply.
     * @throws MrdException ENOENT when libibverbs cannot be loaded; ENOSYS when it lacks a symbol; ENODEV when
     *                      there is no device or not the one named; the errno of {@code ibv_open_device},
     *                      {@code ibv_query_device} or {@code ibv_alloc_pd} when they fail. Nothing stays open after
     *                      a failure.
     */
    public IbverbsRegistrar(final ProviderConfig config)
    {
        library = config.library();
        faults = new FaultInjection(config.failNth(), config.latencyNanos());
        pinned = new PinnedBytes(config.maxPinned());
        libraryArena = Arena.ofShared();
        MemorySegment openedContext = MemorySegment.NULL;
        MethodHandle close = null;
        try
        {
            final LoadedLibrary lookup = LoadedLibrary.open(library, libraryArena,
                "install rdma-core/libibverbs1 or use --provider soft",
                "point " + ProviderConfig.LIBRARY_ENV + " at libibverbs.so.1, or use --provider soft");
            final MethodHandle getDeviceList =
                bind(lookup, "ibv_get_device_list", FunctionDescriptor.of(ADDRESS, ADDRESS));
            final MethodHandle freeDeviceList =
                bind(lookup, "ibv_free_device_list", FunctionDescriptor.ofVoid(ADDRESS));
            final MethodHandle getDeviceName =
                bind(lookup, "ibv_get_device_name", FunctionDescriptor.of(ADDRESS, ADDRESS));
            final MethodHandle openDevice = bind(lookup, "ibv_open_device", FunctionDescriptor.of(ADDRESS, ADDRESS));
            close = bind(lookup, "ibv_close_device", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            final MethodHandle queryDevice =
                bind(lookup, "ibv_query_device", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
            final MethodHandle allocPd = bind(lookup, "ibv_alloc_pd", FunctionDescriptor.of(ADDRESS, ADDRESS));
            deallocPd = bind(lookup, "ibv_dealloc_pd", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            regMr = bind(lookup, "ibv_reg_mr", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
            regMrIova2 = lookup.bindOptional("ibv_reg_mr_iova2",
                FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT)).orElse(null);
            deregMr = bind(lookup, "ibv_dereg_mr", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            closeDevice = close;

            final Optional<String> wanted = config.deviceName();
            final String[] opened = new String[1];
            openedContext = openDevice(getDeviceList, freeDeviceList, getDeviceName, openDevice, wanted, opened);
            deviceName = opened[0];
            context = openedContext;
            maxMrSize = queryMaxMrSize(queryDevice, context, deviceName);

            final MemorySegment newPd = (MemorySegment)allocPd.invokeExact(CALL_STATE.get(), context);
            if (MemorySegment.NULL.equals(newPd))
            {
                final int errno = errno();
                throw new MrdException(ErrorCode.of(errno), "ibv_alloc_pd on RDMA device " + deviceName +
                    " failed: " + ErrorCode.describe(errno) + ": check the device with ibv_devinfo, or use " +
                    "--provider soft");
            }
            pd = newPd;
            sharedDevice = new SharedDevice(deviceName, library, lookup::find, context, pd);
            populator = new PagePopulator(config.populateThreads());
        }
        catch (final Throwable t)
        {
            if (null != close && !MemorySegment.NULL.equals(openedContext))
            {
                closeQuietly(close, openedContext);
            }
            libraryArena.close();
            throw rethrow(t);
        }
    }

    public String name()
    {
        return NAME;
    }

    /**
     * @return the name of the device registrations go to, as {@code ibv_get_device_name} gives it.
     */
    public String deviceName()
    {
        return deviceName;
    }

    /**
     * @return the device's {@code max_mr_size}, as {@code ibv_query_device} reported it at start.
     */
    public long maxRegionLength()
    {
        return maxMrSize;
    }

    /**
     * @return the library this provider loaded: a path, or a soname the loader resolved.
     */
    public String library()
    {
        return library;
    }

    /**
     * {@inheritDoc}
     *
     * @return keys and range as the {@code struct ibv_mr} reports them, except that the rkey is
     *         {@link RemoteAccess#rkey}'s ({@link Access#NO_RKEY} when {@code access} has no remote flag); the
     *         handle is the {@code struct ibv_mr *}.
     * @throws MrdException ENOMEM past --max-pinned or for an injected failure; otherwise the errno of
     *                      {@code ibv_reg_mr} as its code, named in the message (ENOMEM also names RLIMIT_MEMLOCK).
     */
    public Registration register(final long address, final long length, final int access)
    {
        SoftRegistrar.checkRange(address, length);
        if (closed)
        {
            throw new MrdException(ErrorCode.EINVAL, "the ibverbs provider is closed: the daemon is stopping");
        }
        faults.beforeRegister();
        pinned.reserve(length);
        final MemorySegment mr;
        final int errno;
        try
        {
            // Whatever population could not fault in, ibv_reg_mr refuses with its own errno, which names the cause;
            // a range the device refuses anyway (past max_mr_size: EINVAL) is not worth faulting in.
            if (length <= maxMrSize)
            {
                populator.populate(address, length);
            }
            final MemorySegment state = CALL_STATE.get();
            if (0 != (access & Access.OPTIONAL_RANGE) && null != regMrIova2)
            {
                mr = (MemorySegment)regMrIova2.invokeExact(
                    state, pd, MemorySegment.ofAddress(address), length, address, access);
            }
            else
            {
                final int flags = null == regMrIova2 ? access & ~Access.OPTIONAL_RANGE : access;
                mr = (MemorySegment)regMr.invokeExact(state, pd, MemorySegment.ofAddress(address), length, flags);
            }
            errno = errno();
        }
        catch (final Throwable t)
        {
            pinned.release(length);
            throw rethrow(t);
        }
        if (MemorySegment.NULL.equals(mr))
        {
            pinned.release(length);
            throw regFailure(errno, address, length, access);
        }
        final MemorySegment struct = mr.reinterpret(IBV_MR.byteSize());
        final Registration registration = new Registration(
            ((MemorySegment)MR_ADDR.get(struct, 0L)).address(),
            (long)MR_LENGTH.get(struct, 0L),
            (int)MR_LKEY.get(struct, 0L),
            RemoteAccess.rkey(access, (int)MR_RKEY.get(struct, 0L)),
            mr.address(),
            (int)MR_HANDLE.get(struct, 0L));
        live.put(mr.address(), registration);
        return registration;
    }

    /**
     * {@inheritDoc}
     *
     * @throws MrdException EINVAL when {@code registration} is not live here; the errno {@code ibv_dereg_mr}
     *                      returned otherwise, in which case the MR stays counted (and pinned) and {@link #close}
     *                      tries again.
     */
    public void deregister(final Registration registration)
    {
        final long handle = registration.handle();
        if (!live.remove(handle, registration))
        {
            throw new MrdException(ErrorCode.EINVAL, "registration lkey " +
                Sizes.hex(registration.lkey() & 0xFFFF_FFFFL) + " of " + Sizes.format(registration.length()) +
                " at " + Sizes.hex(registration.address()) + " is not live on " + deviceName +
                ": deregistered twice, or made by another provider");
        }
        final int result;
        try
        {
            result = (int)deregMr.invokeExact(CALL_STATE.get(), MemorySegment.ofAddress(handle));
        }
        catch (final Throwable t)
        {
            live.put(handle, registration);
            throw rethrow(t);
        }
        if (0 != result)
        {
            // rdma-core returns the errno; older libraries returned -1 and set errno.
            final int errno = result > 0 ? result : errno();
            live.put(handle, registration);
            throw new MrdException(ErrorCode.of(errno), "ibv_dereg_mr of " + Sizes.format(registration.length()) +
                " at " + Sizes.hex(registration.address()) + " on " + deviceName + " failed: " +
                ErrorCode.describe(errno));
        }
        pinned.release(registration.length());
    }

    public long pinnedBytes()
    {
        return pinned.get();
    }

    /**
     * @return the device and PD as secondaries import them.
     */
    public Optional<SharedDevice> sharedDevice()
    {
        return Optional.of(sharedDevice);
    }

    /**
     * @return live registrations.
     */
    public int liveCount()
    {
        return live.size();
    }

    /**
     * Deregisters what is still live (there should be nothing), then releases the PD, the device and the library.
     */
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        populator.close();
        sharedDevice.close();
        if (!live.isEmpty())
        {
            LOG.warn("ibverbs provider closed with {} registrations live on {}; deregistering them", live.size(),
                deviceName);
            for (final Registration registration : List.copyOf(live.values()))
            {
                try
                {
                    deregister(registration);
                }
                catch (final MrdException ex)
                {
                    LOG.warn("deregistering at close: {}", ex.oneLine());
                }
            }
        }
        try
        {
            final int result = (int)deallocPd.invokeExact(CALL_STATE.get(), pd);
            if (0 != result)
            {
                LOG.warn("ibv_dealloc_pd on {} failed: {}", deviceName,
                    ErrorCode.describe(result > 0 ? result : errno()));
            }
        }
        catch (final Throwable t)
        {
            LOG.warn("ibv_dealloc_pd on {} failed", deviceName, t);
        }
        closeQuietly(closeDevice, context);
        try
        {
            libraryArena.close();
        }
        catch (final IllegalStateException ex)
        {
            // A call still running on another thread keeps the library mapped; it goes with the process.
            LOG.warn("libibverbs stays loaded: {}", ex.getMessage());
        }
    }

    public String toString()
    {
        return "IbverbsRegistrar{device=" + deviceName + ", library=" + library + ", maxMrSize=" +
            Sizes.format(maxMrSize) + ", pinned=" + Sizes.format(pinned.get()) + ", live=" + live.size() + '}';
    }

    private static MethodHandle bind(final LoadedLibrary lookup, final String symbol,
        final FunctionDescriptor descriptor)
    {
        return lookup.bind(symbol, descriptor, "it is not libibverbs, or too old; install rdma-core's libibverbs1 " +
            "or use --provider soft");
    }

    /**
     * Lists the devices, opens the one asked for (else the first) and frees the list, which libibverbs allows once
     * the device is open.
     */
    private static MemorySegment openDevice(
        final MethodHandle getDeviceList,
        final MethodHandle freeDeviceList,
        final MethodHandle getDeviceName,
        final MethodHandle openDevice,
        final Optional<String> wanted,
        final String[] opened) throws Throwable
    {
        final MemorySegment list;
        final int count;
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment countOut = arena.allocate(JAVA_INT);
            list = (MemorySegment)getDeviceList.invokeExact(CALL_STATE.get(), countOut);
            if (MemorySegment.NULL.equals(list))
            {
                final int errno = errno();
                // ENOSYS: the kernel has no RDMA support loaded (no /sys/class/infiniband_verbs).
                throw new MrdException(ErrorCode.ENODEV, "no RDMA device found (ibv_get_device_list failed: " +
                    ErrorCode.describe(errno) + "): load the NIC's RDMA driver and ib_uverbs (e.g. modprobe " +
                    "mlx5_ib ib_uverbs), use " + EmulatedDeviceAdvice.EMULATED_DEVICE + ", or use --provider soft");
            }
            count = countOut.get(JAVA_INT, 0);
        }
        try
        {
            if (count <= 0)
            {
                throw new MrdException(ErrorCode.ENODEV, "no RDMA device found (ibv_get_device_list returned 0 " +
                    "devices): check ibv_devices, install ibverbs-providers and load the NIC's RDMA driver, use " +
                    EmulatedDeviceAdvice.EMULATED_DEVICE + ", or use --provider soft");
            }
            final MemorySegment devices = list.reinterpret(ADDRESS.byteSize() * count);
            final List<String> names = new ArrayList<>(count);
            MemorySegment chosen = MemorySegment.NULL;
            for (int i = 0; i < count; i++)
            {
                final MemorySegment device = devices.getAtIndex(ADDRESS, i);
                final MemorySegment name = (MemorySegment)getDeviceName.invokeExact(CALL_STATE.get(), device);
                final String deviceName = MemorySegment.NULL.equals(name) ? "?" :
                    name.reinterpret(DEVICE_NAME_MAX).getString(0);
                names.add(deviceName);
                if (MemorySegment.NULL.equals(chosen) && (wanted.isEmpty() || wanted.get().equals(deviceName)))
                {
                    chosen = device;
                    opened[0] = deviceName;
                }
            }
            if (MemorySegment.NULL.equals(chosen))
            {
                throw new MrdException(ErrorCode.ENODEV, "RDMA device '" + wanted.orElseThrow() +
                    "' not found; devices found: " + String.join(", ", names) + ": pass one of them to --device");
            }
            final MemorySegment context = (MemorySegment)openDevice.invokeExact(CALL_STATE.get(), chosen);
            if (MemorySegment.NULL.equals(context))
            {
                final int errno = errno();
                throw new MrdException(ErrorCode.of(errno), "ibv_open_device(" + opened[0] + ") failed: " +
                    ErrorCode.describe(errno) + ": check access to /dev/infiniband/uverbs*, or use --provider soft");
            }
            return context;
        }
        finally
        {
            freeDeviceList.invokeExact(CALL_STATE.get(), list);
        }
    }

    /**
     * @return {@code max_mr_size} of the opened device.
     * @throws MrdException with the errno {@code ibv_query_device} returned.
     */
    private static long queryMaxMrSize(final MethodHandle queryDevice, final MemorySegment context,
        final String deviceName) throws Throwable
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment attr = arena.allocate(DEVICE_ATTR_SIZE, 8);
            final int result = (int)queryDevice.invokeExact(CALL_STATE.get(), context, attr);
            if (0 != result)
            {
                // rdma-core returns the errno; older libraries returned -1 and set errno.
                final int errno = result > 0 ? result : errno();
                throw new MrdException(ErrorCode.of(errno), "ibv_query_device(" + deviceName + ") failed: " +
                    ErrorCode.describe(errno) + ": check the device with ibv_devinfo, or use --provider soft");
            }
            final long maxMrSize = attr.get(JAVA_LONG, DEVICE_ATTR_MAX_MR_SIZE);
            // Unsigned in C: past 2^63 (UINT64_MAX, as some devices report) is no limit a range could reach. A
            // device reporting 0 states no limit either; taken literally it would refuse every registration.
            return maxMrSize <= 0 ? Long.MAX_VALUE : maxMrSize;
        }
    }

    private MrdException regFailure(final int errno, final long address, final long length, final int access)
    {
        final String message = "ibv_reg_mr of " + Sizes.format(length) + " at " + Sizes.hex(address) + " (access " +
            Sizes.hex(access) + ") on " + deviceName + " failed: " + ErrorCode.describe(errno);
        if (ErrorCode.ENOMEM.errno() == errno)
        {
            return new MrdException(ErrorCode.ENOMEM, message + "; mrd has " + Sizes.format(pinned.get()) +
                " pinned and " + PinnedBytes.memlockAdvice());
        }
        if (ErrorCode.EFAULT.errno() == errno)
        {
            return new MrdException(ErrorCode.EFAULT, message + ": part of the range is not mapped");
        }
        return new MrdException(ErrorCode.of(errno), message);
    }

    private static void closeQuietly(final MethodHandle closeDevice, final MemorySegment context)
    {
        try
        {
            final int result = (int)closeDevice.invokeExact(CALL_STATE.get(), context);
            if (0 != result)
            {
                LOG.warn("ibv_close_device failed: {}", ErrorCode.describe(result > 0 ? result : errno()));
            }
        }
        catch (final Throwable t)
        {
            LOG.warn("ibv_close_device failed", t);
        }
    }

    private static RuntimeException rethrow(final Throwable t)
    {
        return switch (t)
        {
            case RuntimeException ex -> ex;
            case Error err -> throw err;
            default -> new IllegalStateException("libibverbs call", t);
        };
    }

    private static int errno()
    {
        return (int)ERRNO.get(CALL_STATE.get(), 0L);
    }
}
