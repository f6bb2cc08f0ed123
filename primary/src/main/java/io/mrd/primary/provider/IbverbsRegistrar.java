package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RemoteAccess;
import io.mrd.layout.sys.Sizes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The provider for real NICs: registrations are {@code ibv_reg_mr} on a protection domain of each RDMA device
 * {@code --device} names, through an FFM binding of {@code libibverbs.so.1} (no JNI, no compile step; the library
 * is loaded at start). One {@link DeviceRegistrar} per device makes the calls; this class decides what one
 * registration is on several devices:
 * <ol>
 *   <li>the range is counted against {@code --max-pinned} once and populated once ({@link PagePopulator}: in
 *   parallel when it is large), so that each {@code ibv_reg_mr} pins pages already present, and 8 devices do not
 *   fault the range in 8 times (Mooncake registers on NIC 0 and deregisters to pre-touch: N + 1 pin walks);</li>
 *   <li>it is registered on every device, in parallel across devices (one task per device after the first, on
 *   {@link #pool}; the first on the calling thread): each is the kernel's pin walk of the same resident pages;</li>
 *   <li>if any device fails, the MRs already made on the others are deregistered before the error is thrown,
 *   and the count released: nothing stays pinned or registered (NCCL's failure path frees its handle without
 *   deregistering the MRs of the earlier devices; Mooncake left NIC 0 registered).</li>
 * </ol>
 * Everything that keeps it from working is found in the constructor: libibverbs missing, no device, a
 * {@code --device} asked for absent, a device or PD refusing to open. The daemon thus fails at start with one
 * line naming what is missing, never at the first registration.
 * <p>
 * A range longer than the smallest {@code max_mr_size} of the devices ({@code ibv_query_device}, read at start
 * and given as {@link #maxRegionLength()}) is refused; the engine splits ranges at that length.
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

    private final List<DeviceRegistrar> devices;
    private final String deviceNames;
    /** The smallest {@code max_mr_size} of the devices: the longest range one registration takes on all. */
    private final long maxMrSize;
    private final PagePopulator populator;
    private final FaultInjection faults;
    private final PinnedBytes pinned;
    /** Registers on devices 1 and up while the calling thread registers on device 0; null with one device. */
    private final ExecutorService pool;
    /** Live registrations by device 0's {@code struct ibv_mr *}: refuses a second deregistration. */
    private final Map<Long, Registration> live = new ConcurrentHashMap<>();
    /** Of a live registration whose deregistration failed on some device: the devices whose MR is gone. */
    private final Map<Long, BitSet> partlyDeregistered = new ConcurrentHashMap<>();
    private volatile boolean closed;

    /**
     * Loads libibverbs, opens each device {@code --device} names and allocates the protection domain every
     * registration on it will use.
     *
     * @param config {@code library()}, {@code deviceName}, {@code maxPinned}, {@code populateThreads} and fault
     *               injection apply.
     * @throws MrdException ENOENT when libibverbs cannot be loaded; ENOSYS when it lacks a symbol; ENODEV when
     *                      there is no device or not one named; EINVAL for a device named twice or more than
     *                      {@value ProviderConfig#MAX_DEVICES}; the errno of {@code ibv_open_device},
     *                      {@code ibv_query_device} or {@code ibv_alloc_pd} when they fail. Nothing stays open
     *                      after a failure.
     */
    public IbverbsRegistrar(final ProviderConfig config)
    {
        this(config, IbverbsDevice.openAll(config));
    }

    private IbverbsRegistrar(final ProviderConfig config, final List<IbverbsDevice> opened)
    {
        final List<DeviceRegistrar> registrars = new ArrayList<>(opened.size());
        long smallest = Long.MAX_VALUE;
        for (final IbverbsDevice device : opened)
        {
            registrars.add(new DeviceRegistrar(device, registrars.size()));
            smallest = Math.min(smallest, device.maxMrSize());
        }
        this.devices = List.copyOf(registrars);
        this.deviceNames = String.join(",", registrars.stream().map(DeviceRegistrar::name).toList());
        this.maxMrSize = smallest;
        this.faults = new FaultInjection(config);
        this.pinned = new PinnedBytes(config.maxPinned());
        this.populator = new PagePopulator(config.populateThreads());
        this.pool = opened.size() < 2 ? null : registrationPool(opened.size() - 1);
    }

    /**
     * A successor's provider: imports the device of its predecessor's command file and the PD of that handle, on
     * which {@link #adopt} then names the predecessor's MRs. One device: a daemon of several devices is not
     * adopted (docs/multi-device.md).
     *
     * @param commandFd the predecessor's command file, from the descriptor holder; the context's from here on.
     * @throws MrdException the errno of {@code ibv_import_device} or {@code ibv_import_pd}, as for the constructor
     *                      otherwise.
     */
    public static IbverbsRegistrar adopting(final ProviderConfig config, final int commandFd, final int pdHandle)
    {
        return new IbverbsRegistrar(config, List.of(IbverbsDevice.adopt(config, commandFd, pdHandle)));
    }

    private static ExecutorService registrationPool(final int threads)
    {
        final AtomicInteger next = new AtomicInteger(1);
        // Platform threads: a registration is a long native call, which would pin a virtual thread's carrier.
        return Executors.newFixedThreadPool(Math.min(threads, Runtime.getRuntime().availableProcessors()), task ->
        {
            final Thread thread = new Thread(task, "mrd-register-" + next.getAndIncrement());
            thread.setDaemon(true);
            return thread;
        });
    }

    public String name()
    {
        return NAME;
    }

    /**
     * @return the name of device 0, as {@code ibv_get_device_name} gives it.
     */
    public String deviceName()
    {
        return devices.getFirst().name();
    }

    /**
     * @return the names of the devices registrations go to, in device order.
     */
    public List<String> deviceNames()
    {
        return devices.stream().map(DeviceRegistrar::name).toList();
    }

    /**
     * @return the smallest {@code max_mr_size} of the devices, as {@code ibv_query_device} reported them at start.
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
        return devices.getFirst().device().library();
    }

    /**
     * {@inheritDoc}
     *
     * @return keys and range as device 0's {@code struct ibv_mr} reports them, the other devices' MRs in
     *         {@link Registration#furtherDevices()}; each rkey is {@link RemoteAccess#rkey}'s
     *         ({@link Access#NO_RKEY} when {@code access} has no remote flag); the handle is the
     *         {@code struct ibv_mr *}.
     * @throws MrdException ENOMEM past --max-pinned or for an injected failure; otherwise the errno of the first
     *                      device's {@code ibv_reg_mr} that failed, named in the message with the device (ENOMEM
     *                      also names RLIMIT_MEMLOCK). Whatever other devices registered is deregistered first.
     */
    public Registration register(final long address, final long length, final int access)
    {
        SoftRegistrar.checkRange(address, length);
        if (closed)
        {
            throw new MrdException(ErrorCode.EINVAL, "the ibverbs provider is closed: the daemon is stopping");
        }
        final long attempt = faults.beforeRegister();
        pinned.reserve(length);
        final Registration registration;
        try
        {
            populate(address, length, attempt);
            registration = registerOnEveryDevice(address, length, access, attempt);
        }
        catch (final RuntimeException ex)
        {
            pinned.release(length);
            throw ex;
        }
        live.put(registration.id(), registration);
        faults.registered(registration.id(), attempt);
        return registration;
    }

    /**
     * {@inheritDoc}
     * <p>
     * Refuses only at an injected {@link FaultPoint.Step#PUBLISH} of one of the registration's devices.
     */
    public void beforePublish(final Registration registration)
    {
        faults.beforePublish(registration.id(), registration.deviceCount());
    }

    /**
     * Step 1, once for every device. Whatever population could not fault in, {@code ibv_reg_mr} refuses with its
     * own errno, which names the cause; a range the devices refuse anyway (past max_mr_size: EINVAL) is not worth
     * faulting in.
     */
    private void populate(final long address, final long length, final long attempt)
    {
        faults.at(FaultPoint.Step.POPULATE, attempt, 0);
        if (length <= maxMrSize)
        {
            populator.populate(address, length);
        }
    }

    /**
     * Steps 2 and 3 on the devices the access places the range on ({@link Access#isOn}): the first of them on
     * this thread, the others on the pool; then, when any failed, the undo of those that did not. Every task is
     * waited for before the undo, so that none registers after it.
     */
    private Registration registerOnEveryDevice(final long address, final long length, final int access,
        final long attempt)
    {
        final List<Future<Registration.DeviceMr>> tasks = new ArrayList<>(devices.size());
        int first = -1;
        for (int d = 0; d < devices.size(); d++)
        {
            final int device = d;
            if (!Access.isOn(access, d))
            {
                tasks.add(null);
            }
            else if (first < 0)
            {
                first = d;
                tasks.add(null);
            }
            else
            {
                tasks.add(pool.submit(() -> registerOn(device, address, length, access, attempt)));
            }
        }
        final Registration.DeviceMr[] made = new Registration.DeviceMr[devices.size()];
        RuntimeException failure = null;
        try
        {
            made[first] = registerOn(first, address, length, access, attempt);
        }
        catch (final RuntimeException ex)
        {
            failure = ex;
        }
        for (int d = first + 1; d < devices.size(); d++)
        {
            try
            {
                made[d] = null == tasks.get(d) ? null : awaitUninterruptibly(tasks.get(d));
            }
            catch (final RuntimeException ex)
            {
                failure = firstOf(failure, ex);
            }
        }
        if (null != failure)
        {
            undo(address, length, made, failure);
            throw failure;
        }
        for (int d = 0; d < made.length; d++)
        {
            made[d] = null == made[d] ? Registration.DeviceMr.NOT_PLACED : made[d];
        }
        return new Registration(address, length, made[0].lkey(), made[0].rkey(), made[0].handle(),
            made[0].deviceHandle(), List.of(made).subList(1, made.length));
    }

    private Registration.DeviceMr registerOn(
        final int device, final long address, final long length, final int access, final long attempt)
    {
        faults.at(FaultPoint.Step.REGISTER, attempt, device);
        final Registration.DeviceMr mr = devices.get(device).register(address, length, access, pinned.get());
        try
        {
            faults.at(FaultPoint.Step.REGISTERED, attempt, device);
        }
        catch (final RuntimeException ex)
        {
            deregisterQuietly(device, address, length, mr, ex);
            throw ex;
        }
        return mr;
    }

    /**
     * The error of the lowest-numbered device that failed is the one thrown: the same fault gives the same
     * message whatever the order the threads ran in. The others are suppressed into it.
     */
    private static RuntimeException firstOf(final RuntimeException first, final RuntimeException next)
    {
        if (null == first)
        {
            return next;
        }
        first.addSuppressed(next);
        return first;
    }

    private static Registration.DeviceMr awaitUninterruptibly(final Future<Registration.DeviceMr> task)
    {
        boolean interrupted = false;
        try
        {
            while (true)
            {
                try
                {
                    return task.get();
                }
                catch (final InterruptedException ex)
                {
                    // The task runs on: leaving now would leave its MR registered and unknown.
                    interrupted = true;
                }
                catch (final ExecutionException ex)
                {
                    throw IbverbsDevice.rethrow(ex.getCause());
                }
            }
        }
        finally
        {
            if (interrupted)
            {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Step 3: deregisters what the devices that succeeded made. A deregistration that fails here leaves that MR
     * registered (the device refused to let go): it is logged and suppressed into the failure.
     */
    private void undo(final long address, final long length, final Registration.DeviceMr[] made,
        final RuntimeException failure)
    {
        for (int d = 0; d < made.length; d++)
        {
            if (null != made[d])
            {
                deregisterQuietly(d, address, length, made[d], failure);
            }
        }
    }

    private void deregisterQuietly(final int device, final long address, final long length,
        final Registration.DeviceMr mr, final RuntimeException failure)
    {
        try
        {
            devices.get(device).deregister(address, length, mr);
        }
        catch (final RuntimeException ex)
        {
            LOG.error("undoing the registration of {} at {} on {} failed: {}", Sizes.format(length),
                Sizes.hex(address), devices.get(device).describe(), ex.toString());
            failure.addSuppressed(ex);
        }
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
        final Registration.DeviceMr mr = devices.getFirst().adopt(
            recorded.address(), recorded.length(), recorded.on(0), access);
        final Registration imported = new Registration(recorded.address(), recorded.length(), mr.lkey(), mr.rkey(),
            mr.handle(), mr.deviceHandle());
        pinned.adopt(imported.length());
        live.put(imported.handle(), imported);
        return imported;
    }

    /**
     * {@inheritDoc}
     * <p>
     * Every device's MR is deregistered, each tried whatever the others did.
     *
     * @throws MrdException EINVAL when {@code registration} is not live here; the errno of the first
     *                      {@code ibv_dereg_mr} that failed otherwise, in which case the registration stays counted
     *                      (and pinned) with the MRs still registered, and {@link #close} tries those again.
     */
    public void deregister(final Registration registration)
    {
        if (!live.remove(registration.id(), registration))
        {
            throw new MrdException(ErrorCode.EINVAL, "registration lkey " +
                Sizes.hex(registration.lkey() & 0xFFFF_FFFFL) + " of " + Sizes.format(registration.length()) +
                " at " + Sizes.hex(registration.address()) + " is not live on " + deviceNames +
                ": deregistered twice, or made by another provider");
        }
        final BitSet gone = partlyDeregistered.getOrDefault(registration.id(), new BitSet());
        RuntimeException failure = null;
        for (int d = 0; d < registration.deviceCount(); d++)
        {
            if (gone.get(d) || !registration.on(d).isPlaced())
            {
                continue;
            }
            try
            {
                devices.get(d).deregister(registration.address(), registration.length(), registration.on(d));
                gone.set(d);
            }
            catch (final RuntimeException ex)
            {
                failure = firstOf(failure, ex);
            }
        }
        if (null != failure)
        {
            // Another try (close's) deregisters only the MRs still registered: the others' structs are freed.
            partlyDeregistered.put(registration.id(), gone);
            live.put(registration.id(), registration);
            throw failure;
        }
        partlyDeregistered.remove(registration.id());
        pinned.release(registration.length());
    }

    public long pinnedBytes()
    {
        return pinned.get();
    }

    /**
     * @return device 0 and its PD as secondaries import them.
     */
    public Optional<SharedDevice> sharedDevice()
    {
        return Optional.of(devices.getFirst().device().sharedDevice());
    }

    /**
     * @return every device and its PD, in device order.
     */
    public List<SharedDevice> sharedDevices()
    {
        return devices.stream().map(device -> device.device().sharedDevice()).toList();
    }

    /**
     * @return live registrations.
     */
    public int liveCount()
    {
        return live.size();
    }

    /**
     * Deregisters what is still live (there should be nothing), then releases the PDs, the devices and the
     * library.
     */
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        closed = true;
        populator.close();
        if (null != pool)
        {
            pool.shutdown();
        }
        for (final DeviceRegistrar device : devices)
        {
            device.device().sharedDevice().close();
        }
        if (!live.isEmpty())
        {
            LOG.warn("ibverbs provider closed with {} registrations live on {}; deregistering them", live.size(),
                deviceNames);
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
        for (final DeviceRegistrar device : devices)
        {
            device.device().close();
        }
    }

    public String toString()
    {
        return "IbverbsRegistrar{devices=" + deviceNames + ", library=" + library() + ", maxMrSize=" +
            Sizes.format(maxMrSize) + ", pinned=" + Sizes.format(pinned.get()) + ", live=" + live.size() + '}';
    }
}
