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

    private static final Logger LOG = LoggerFactory.getLogger(IbverbsRegistrar.class);

    private static final VarHandle MR_ADDR = IBV_MR.varHandle(groupElement("addr"));
    private static final VarHandle MR_LENGTH = IBV_MR.varHandle(groupElement("length"));
    private static final VarHandle MR_HANDLE = IBV_MR.varHandle(groupElement("handle"));
    private static final VarHandle MR_LKEY = IBV_MR.varHandle(groupElement("lkey"));
    private static final VarHandle MR_RKEY = IBV_MR.varHandle(groupElement("rkey"));

    private final IbverbsDevice device;
    private final String deviceName;
    private final MemorySegment pd;
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
        this(config, IbverbsDevice.open(config));
    }

    private IbverbsRegistrar(final ProviderConfig config, final IbverbsDevice device)
    {
        this.device = device;
        this.deviceName = device.deviceName();
        this.pd = device.pd();
        this.maxMrSize = device.maxMrSize();
        this.faults = new FaultInjection(config.failNth(), config.latencyNanos());
        this.pinned = new PinnedBytes(config.maxPinned());
        this.populator = new PagePopulator(config.populateThreads());
    }

    /**
     * A successor's provider: imports the device of its predecessor's command file and the PD of that handle, on
     * which {@link #adopt} then names the predecessor's MRs.
     *
     * @param commandFd the predecessor's command file, from the descriptor holder; the context's from here on.
     * @throws MrdException the errno of {@code ibv_import_device} or {@code ibv_import_pd}, as for the constructor
     *                      otherwise.
     */
    public static IbverbsRegistrar adopting(final ProviderConfig config, final int commandFd, final int pdHandle)
    {
        return new IbverbsRegistrar(config, IbverbsDevice.adopt(config, commandFd, pdHandle));
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
        return device.library();
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
            final MemorySegment state = IbverbsDevice.callState();
            if (0 != (access & Access.OPTIONAL_RANGE) && null != device.regMrIova2)
            {
                mr = (MemorySegment)device.regMrIova2.invokeExact(
                    state, pd, MemorySegment.ofAddress(address), length, address, access);
            }
            else
            {
                final int flags = null == device.regMrIova2 ? access & ~Access.OPTIONAL_RANGE : access;
                mr = (MemorySegment)device.regMr.invokeExact(state, pd, MemorySegment.ofAddress(address), length, flags);
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
        final Registration registration = registrationOf(mr, access);
        live.put(mr.address(), registration);
        return registration;
    }

    /**
     * {@inheritDoc}
     * <p>
     * {@code ibv_import_mr} on the imported PD: the device says what MR the handle names now, and it must be the
     * one recorded, range and keys, or it is not the predecessor's (a handle is an index any process of the
     * context can have reused). Nothing is registered, pinned again or counted by the device.
     *
     * @throws MrdException EINVAL when the device knows no MR of that handle in this PD, or it differs from the
     *                      record (the message names what); ENOSYS without {@code ibv_import_mr}.
     */
    public Registration adopt(final Registration recorded, final int access)
    {
        final MemorySegment mr = device.importMr(recorded.deviceHandle());
        if (MemorySegment.NULL.equals(mr))
        {
            final int errno = IbverbsDevice.errno();
            throw new MrdException(ErrorCode.of(errno), "ibv_import_mr(handle " + recorded.deviceHandle() + ") on " +
                deviceName + " failed: " + ErrorCode.describe(errno) + ": the predecessor's MR of " +
                Sizes.format(recorded.length()) + " at " + Sizes.hex(recorded.address()) + " is gone");
        }
        final Registration imported = registrationOf(mr, access);
        if (imported.address() != recorded.address() || imported.length() != recorded.length() ||
            imported.lkey() != recorded.lkey() || imported.rkey() != recorded.rkey())
        {
            // the struct is this process's copy: deregistering would destroy whatever MR the handle names now
            device.unimportMr(mr);
            throw new MrdException(ErrorCode.EINVAL, "MR handle " + recorded.deviceHandle() + " on " + deviceName +
                " is " + Sizes.format(imported.length()) + " at " + Sizes.hex(imported.address()) + " lkey " +
                Sizes.hex(imported.lkey() & 0xFFFF_FFFFL) + ", but the control file records " +
                Sizes.format(recorded.length()) + " at " + Sizes.hex(recorded.address()) + " lkey " +
                Sizes.hex(recorded.lkey() & 0xFFFF_FFFFL) + ": not the predecessor's MR");
        }
        pinned.adopt(imported.length());
        live.put(mr.address(), imported);
        return imported;
    }

    private static Registration registrationOf(final MemorySegment mr, final int access)
    {
        final MemorySegment struct = mr.reinterpret(IBV_MR.byteSize());
        return new Registration(
            ((MemorySegment)MR_ADDR.get(struct, 0L)).address(),
            (long)MR_LENGTH.get(struct, 0L),
            (int)MR_LKEY.get(struct, 0L),
            RemoteAccess.rkey(access, (int)MR_RKEY.get(struct, 0L)),
            mr.address(),
            (int)MR_HANDLE.get(struct, 0L));
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
            result = (int)device.deregMr.invokeExact(IbverbsDevice.callState(), MemorySegment.ofAddress(handle));
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
        return Optional.of(device.sharedDevice());
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
        device.sharedDevice().close();
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
        device.close();
    }

    public String toString()
    {
        return "IbverbsRegistrar{device=" + deviceName + ", library=" + device.library() + ", maxMrSize=" +
            Sizes.format(maxMrSize) + ", pinned=" + Sizes.format(pinned.get()) + ", live=" + live.size() + '}';
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

    private static RuntimeException rethrow(final Throwable t)
    {
        return IbverbsDevice.rethrow(t);
    }

    private static int errno()
    {
        return IbverbsDevice.errno();
    }
}
