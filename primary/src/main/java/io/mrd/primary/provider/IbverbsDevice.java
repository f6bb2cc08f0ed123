package io.mrd.primary.provider;

import io.mrd.layout.EmulatedDeviceAdvice;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.LoadedLibrary;
import io.mrd.layout.sys.Posix;
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
import java.util.Optional;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The RDMA device and protection domain the {@code ibverbs} provider registers on, through an FFM binding of
 * {@code libibverbs.so.1}: either opened ({@code ibv_open_device}, {@code ibv_alloc_pd}), or, for a successor
 * daemon, imported from the predecessor's command file ({@code ibv_import_device}) with the PD its records name
 * ({@code ibv_import_pd}), so that the predecessor's MRs can be named by handle ({@link #importMr}).
 * <p>
 * Everything that keeps it from working is found in the factory: libibverbs missing, no device, the device asked
 * for absent, the device or PD refusing to open or import. Nothing stays open after a failure. Thread-safe.
 */
@SuppressWarnings("restricted")
final class IbverbsDevice
{
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
    /** {@code struct ibv_context}'s first field, its {@code struct ibv_device *}. */
    private static final StructLayout CONTEXT_DEVICE = MemoryLayout.structLayout(ADDRESS.withName("device"));

    private static final Logger LOG = LoggerFactory.getLogger(IbverbsDevice.class);
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(groupElement("errno"));
    private static final ThreadLocal<MemorySegment> CALL_STATE =
        ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));

    final MethodHandle regMr;
    /** Absent before rdma-core 28 (IBVERBS_1.8). */
    final MethodHandle regMrIova2;
    final MethodHandle deregMr;
    private final MethodHandle importMr;
    private final MethodHandle unimportMr;
    private final MethodHandle deallocPd;
    private final MethodHandle closeDevice;
    private final String library;
    private final String deviceName;
    private final Arena libraryArena;
    private final MemorySegment context;
    private final MemorySegment pd;
    private final long maxMrSize;
    private final SharedDevice sharedDevice;
    /** Every device libibverbs listed when this one was opened, in its order; empty for an imported one. */
    private final List<String> listed;

    private IbverbsDevice(final ProviderConfig config, final Optional<Adopted> adopted)
    {
        library = config.library();
        libraryArena = Arena.ofShared();
        MemorySegment openedContext = MemorySegment.NULL;
        MethodHandle close = null;
        try
        {
            final LoadedLibrary lookup = LoadedLibrary.open(library, libraryArena,
                "install rdma-core/libibverbs1 or use --provider soft",
                "point " + ProviderConfig.LIBRARY_ENV + " at libibverbs.so.1, or use --provider soft");
            // Bound first, whether opening or importing: a library that lacks it is no libibverbs at all.
            final MethodHandle getDeviceList =
                bind(lookup, "ibv_get_device_list", FunctionDescriptor.of(ADDRESS, ADDRESS));
            final MethodHandle getDeviceName =
                bind(lookup, "ibv_get_device_name", FunctionDescriptor.of(ADDRESS, ADDRESS));
            close = bind(lookup, "ibv_close_device", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            final MethodHandle queryDevice =
                bind(lookup, "ibv_query_device", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
            deallocPd = bind(lookup, "ibv_dealloc_pd", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            regMr = bind(lookup, "ibv_reg_mr", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
            regMrIova2 = lookup.bindOptional("ibv_reg_mr_iova2",
                FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_INT)).orElse(null);
            deregMr = bind(lookup, "ibv_dereg_mr", FunctionDescriptor.of(JAVA_INT, ADDRESS));
            importMr = lookup.bindOptional("ibv_import_mr", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT))
                .orElse(null);
            unimportMr = lookup.bindOptional("ibv_unimport_mr", FunctionDescriptor.ofVoid(ADDRESS)).orElse(null);
            closeDevice = close;

            final String[] opened = new String[1];
            final List<String> names = new ArrayList<>();
            if (adopted.isPresent())
            {
                openedContext = importDevice(lookup, adopted.get().commandFd(), getDeviceName, opened);
            }
            else
            {
                openedContext = openDevice(lookup, getDeviceList, getDeviceName, config.deviceName(), opened, names);
            }
            deviceName = opened[0];
            listed = List.copyOf(names);
            context = openedContext;
            maxMrSize = queryMaxMrSize(queryDevice, context, deviceName);
            pd = adopted.isPresent() ? importPd(lookup, adopted.get().pdHandle()) : allocPd(lookup);
            sharedDevice = new SharedDevice(deviceName, library, lookup::find, context, pd);
        }
        catch (final Throwable t)
        {
            if (null != close && !MemorySegment.NULL.equals(openedContext))
            {
                closeQuietly(close, openedContext);
            }
            else if (adopted.isPresent())
            {
                Posix.close(adopted.get().commandFd());
            }
            libraryArena.close();
            throw rethrow(t);
        }
    }

    /**
     * What a successor imports: the predecessor's command file (a descriptor the device context takes over) and
     * its PD's handle.
     */
    record Adopted(int commandFd, int pdHandle)
    {
    }

    /**
     * Opens the device {@code config.deviceName()} names (else the first) and allocates a PD.
     */
    static IbverbsDevice open(final ProviderConfig config)
    {
        return new IbverbsDevice(config, Optional.empty());
    }

    /**
     * Opens every device {@code --device} names, in its order, each with a PD: one name, a comma-separated list,
     * or {@value ProviderConfig#ALL_DEVICES} (every device libibverbs lists, in its order); the first when unset.
     *
     * @throws MrdException EINVAL for an empty name, a name given twice or more than
     *                      {@value ProviderConfig#MAX_DEVICES} devices; as {@link #open} for each device. Those
     *                      already opened are closed again.
     */
    static List<IbverbsDevice> openAll(final ProviderConfig config)
    {
        final List<String> wanted = DeviceSelection.names(config.deviceName());
        final List<IbverbsDevice> opened = new ArrayList<>();
        try
        {
            if (wanted.isEmpty() || DeviceSelection.isAll(wanted))
            {
                opened.add(open(config.withDeviceName(null)));
                if (DeviceSelection.isAll(wanted))
                {
                    final List<String> every = opened.getFirst().listed;
                    DeviceSelection.checkCount(every.size(), "'" + ProviderConfig.ALL_DEVICES + "' (" +
                        String.join(", ", every) + ")");
                    for (final String name : every.subList(1, every.size()))
                    {
                        opened.add(open(config.withDeviceName(name)));
                    }
                }
            }
            else
            {
                for (final String name : wanted)
                {
                    opened.add(open(config.withDeviceName(name)));
                }
            }
            return List.copyOf(opened);
        }
        catch (final RuntimeException ex)
        {
            for (final IbverbsDevice device : opened)
            {
                device.close();
            }
            throw ex;
        }
    }

    /**
     * Imports the device of a predecessor's command file and its PD. The descriptor is the context's from here on
     * (closed with it, or here on failure).
     */
    static IbverbsDevice adopt(final ProviderConfig config, final int commandFd, final int pdHandle)
    {
        return new IbverbsDevice(config, Optional.of(new Adopted(commandFd, pdHandle)));
    }

    String deviceName()
    {
        return deviceName;
    }

    String library()
    {
        return library;
    }

    long maxMrSize()
    {
        return maxMrSize;
    }

    MemorySegment pd()
    {
        return pd;
    }

    SharedDevice sharedDevice()
    {
        return sharedDevice;
    }

    /**
     * {@code ibv_import_mr(pd, handle)}: the predecessor's MR of that handle, as a {@code struct ibv_mr *} of this
     * process, or NULL with {@link #errno()} set (EINVAL for a handle the device does not know in this PD).
     *
     * @throws MrdException ENOSYS when the library has no {@code ibv_import_mr} (rdma-core older than 32).
     */
    MemorySegment importMr(final int handle)
    {
        if (null == importMr)
        {
            throw new MrdException(ErrorCode.ENOSYS, library + " has no ibv_import_mr (rdma-core 32 and later " +
                "have it): a successor cannot adopt the registrations");
        }
        try
        {
            return (MemorySegment)importMr.invokeExact(CALL_STATE.get(), pd, handle);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * {@code ibv_unimport_mr}: frees this process's struct of an imported MR, leaving the MR itself alone.
     */
    void unimportMr(final MemorySegment mr)
    {
        if (null == unimportMr)
        {
            return;
        }
        try
        {
            unimportMr.invokeExact(CALL_STATE.get(), mr);
        }
        catch (final Throwable t)
        {
            throw rethrow(t);
        }
    }

    /**
     * Releases the PD, the device and the library.
     */
    void close()
    {
        sharedDevice.close();
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

    static MemorySegment callState()
    {
        return CALL_STATE.get();
    }

    static int errno()
    {
        return (int)ERRNO.get(CALL_STATE.get(), 0L);
    }

    static RuntimeException rethrow(final Throwable t)
    {
        return switch (t)
        {
            case RuntimeException ex -> ex;
            case Error err -> throw err;
            default -> new IllegalStateException("libibverbs call", t);
        };
    }

    private static MethodHandle bind(final LoadedLibrary lookup, final String symbol,
        final FunctionDescriptor descriptor)
    {
        return lookup.bind(symbol, descriptor, "it is not libibverbs, or too old; install rdma-core's libibverbs1 " +
            "or use --provider soft");
    }

    private MemorySegment allocPd(final LoadedLibrary lookup) throws Throwable
    {
        final MethodHandle allocPd = bind(lookup, "ibv_alloc_pd", FunctionDescriptor.of(ADDRESS, ADDRESS));
        final MemorySegment newPd = (MemorySegment)allocPd.invokeExact(CALL_STATE.get(), context);
        if (MemorySegment.NULL.equals(newPd))
        {
            final int errno = errno();
            throw new MrdException(ErrorCode.of(errno), "ibv_alloc_pd on RDMA device " + deviceName + " failed: " +
                ErrorCode.describe(errno) + ": check the device with ibv_devinfo, or use --provider soft");
        }
        return newPd;
    }

    private MemorySegment importPd(final LoadedLibrary lookup, final int pdHandle) throws Throwable
    {
        final MethodHandle importPd = bind(lookup, "ibv_import_pd", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
        final MemorySegment imported = (MemorySegment)importPd.invokeExact(CALL_STATE.get(), context, pdHandle);
        if (MemorySegment.NULL.equals(imported))
        {
            final int errno = errno();
            throw new MrdException(ErrorCode.of(errno), "ibv_import_pd(handle " + pdHandle + ") on " + deviceName +
                " failed: " + ErrorCode.describe(errno) + ": the predecessor's PD is gone");
        }
        return imported;
    }

    /**
     * {@code ibv_import_device(commandFd)}: the descriptor is the context's once it succeeds.
     */
    private static MemorySegment importDevice(final LoadedLibrary lookup, final int commandFd,
        final MethodHandle getDeviceName, final String[] opened) throws Throwable
    {
        final MethodHandle importDevice = bind(lookup, "ibv_import_device", FunctionDescriptor.of(ADDRESS, JAVA_INT));
        final MemorySegment context = (MemorySegment)importDevice.invokeExact(CALL_STATE.get(), commandFd);
        if (MemorySegment.NULL.equals(context))
        {
            final int errno = errno();
            throw new MrdException(ErrorCode.of(errno), "ibv_import_device of the predecessor's command file failed: " +
                ErrorCode.describe(errno) + ": its device context is gone");
        }
        final MemorySegment device = context.reinterpret(CONTEXT_DEVICE.byteSize()).get(ADDRESS, 0);
        final MemorySegment name = (MemorySegment)getDeviceName.invokeExact(CALL_STATE.get(), device);
        opened[0] = MemorySegment.NULL.equals(name) ? "?" : name.reinterpret(DEVICE_NAME_MAX).getString(0);
        return context;
    }

    /**
     * Lists the devices, opens the one asked for (else the first) and frees the list, which libibverbs allows once
     * the device is open.
     */
    private static MemorySegment openDevice(final LoadedLibrary lookup, final MethodHandle getDeviceList,
        final MethodHandle getDeviceName, final Optional<String> wanted, final String[] opened,
        final List<String> names) throws Throwable
    {
        final MethodHandle freeDeviceList = bind(lookup, "ibv_free_device_list", FunctionDescriptor.ofVoid(ADDRESS));
        final MethodHandle openDevice = bind(lookup, "ibv_open_device", FunctionDescriptor.of(ADDRESS, ADDRESS));
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
}
