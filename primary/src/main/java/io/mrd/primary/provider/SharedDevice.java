package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.Optional;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The daemon's RDMA device as its secondaries import it, the way DPDK's mlx5 shares a device with its
 * {@code cmd_fd} and {@code pd_handle} arguments: a secondary passes a duplicate of the verbs context's command
 * file ({@code ibv_context.cmd_fd}) to {@code ibv_import_device}, then this PD's {@code ibv_pd.handle} to
 * {@code ibv_import_pd}, and so posts with mrd's lkeys to queues of its own in mrd's protection domain.
 * <p>
 * A shared context keeps what any importer created until the last holder closes it, and the daemon holds it
 * for its whole life: the queues of a secondary that died would live that long. The emulated device exports
 * {@code int mrdemu_destroy_by_handle(struct ibv_context *, int kind, uint32_t handle)}, standing for the
 * kernel's uverbs destroy method on the shared command file, and the daemon destroys a gone client's queues
 * through it; libibverbs has no such call, so with a real device they live until the daemon restarts.
 * <p>
 * Made by {@link IbverbsRegistrar} once its PD is allocated; valid until the registrar closes. Thread-safe.
 */
@SuppressWarnings("restricted")
public final class SharedDevice
{
    /** {@code mrdemu_destroy_by_handle}'s kind of a completion queue. */
    public static final int CQ = 1;
    /** {@code mrdemu_destroy_by_handle}'s kind of a queue pair. */
    public static final int QP = 2;
    /** The emulated device's extension that destroys a queue by handle. */
    public static final String DESTROY_BY_HANDLE = "mrdemu_destroy_by_handle";
    /** The emulated device's extension naming the process that created a live queue of a handle. */
    public static final String HANDLE_CREATOR = "mrdemu_handle_creator";

    /**
     * The head of {@code struct ibv_context} as rdma-core's {@code <infiniband/verbs.h>} declares it, up to the
     * command file (the rest, a mutex and a pointer, is not read here):
     * <pre>
     *   0                   1                   2                   3
     *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
     *  +---------------------------------------------------------------+
     *  |             struct ibv_device *device                         |   0
     *  |                                                               |
     *  +---------------------------------------------------------------+
     *  |             struct ibv_context_ops ops (32 pointers)          |   8
     *  |                             ...                               |
     *  +---------------------------------------------------------------+
     *  |             int cmd_fd                                        | 264
     *  +---------------------------------------------------------------+
     *  |             int async_fd                                      | 268
     *  +---------------------------------------------------------------+
     *  |             int num_comp_vectors                              | 272
     *  +---------------------------------------------------------------+
     * </pre>
     * SharedDeviceTest checks the offsets against {@code offsetof} compiled from the installed header.
     */
    public static final StructLayout IBV_CONTEXT_HEAD = MemoryLayout.structLayout(
        ADDRESS.withName("device"),
        MemoryLayout.sequenceLayout(32, ADDRESS).withName("ops"),
        JAVA_INT.withName("cmd_fd"),
        JAVA_INT.withName("async_fd"),
        JAVA_INT.withName("num_comp_vectors")).withName("ibv_context");

    /**
     * {@code struct ibv_pd}: the context (8 bytes) then the handle the kernel, or the emulated device, knows the
     * PD by (4 bytes, padded to 16).
     */
    public static final StructLayout IBV_PD = MemoryLayout.structLayout(
        ADDRESS.withName("context"),
        JAVA_INT.withName("handle"),
        MemoryLayout.paddingLayout(4)).withName("ibv_pd");

    private static final long CMD_FD_OFFSET = IBV_CONTEXT_HEAD.byteOffset(groupElement("cmd_fd"));
    private static final long PD_HANDLE_OFFSET = IBV_PD.byteOffset(groupElement("handle"));

    private final String deviceName;
    private final String library;
    private final MemorySegment context;
    private final int commandFd;
    private final int pdHandle;
    /** Null when the library has no destroy by handle (a real libibverbs). */
    private final MethodHandle destroyByHandle;
    /** Null when the library cannot say who created a queue (a real libibverbs). */
    private final MethodHandle handleCreator;
    /** Read side: a call into the context; write side: closing it. */
    private final ReentrantReadWriteLock use = new ReentrantReadWriteLock();
    private volatile boolean closed;

    SharedDevice(
        final String deviceName, final String library, final SymbolLookup lookup, final MemorySegment context,
        final MemorySegment pd)
    {
        this.deviceName = deviceName;
        this.library = library;
        this.context = context;
        this.commandFd = context.reinterpret(IBV_CONTEXT_HEAD.byteSize()).get(JAVA_INT, CMD_FD_OFFSET);
        this.pdHandle = pd.reinterpret(IBV_PD.byteSize()).get(JAVA_INT, PD_HANDLE_OFFSET);
        this.destroyByHandle = lookup.find(DESTROY_BY_HANDLE).map(symbol -> Linker.nativeLinker().downcallHandle(
            symbol, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT))).orElse(null);
        this.handleCreator = lookup.find(HANDLE_CREATOR).map(symbol -> Linker.nativeLinker().downcallHandle(
            symbol, FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT))).orElse(null);
    }

    /**
     * @return the device's name, as {@code ibv_get_device_name} gave it.
     */
    public String deviceName()
    {
        return deviceName;
    }

    /**
     * @return the PD's {@code ibv_pd.handle}, what {@code ibv_import_pd} takes.
     */
    public int pdHandle()
    {
        return pdHandle;
    }

    /**
     * @return the daemon's {@code struct ibv_context *} of the device: what the emulated device's own counts of
     * a context take ({@code mrdemu_live_objects}), for the tests that hold mrd to them.
     */
    public MemorySegment context()
    {
        return context;
    }

    /**
     * @return the context's {@code cmd_fd} (owned by the context: never close it).
     */
    public int commandFd()
    {
        return commandFd;
    }

    /**
     * @return a new descriptor of the context's command file, close-on-exec, for one secondary: the caller sends
     * it and closes it. A duplicate, so that the number sent can never be one the context has closed meanwhile.
     * @throws MrdException EBADF once the provider is closed (the daemon is stopping); the errno of
     *                      {@code fcntl} (EMFILE) otherwise.
     */
    public int duplicateCommandFd()
    {
        use.readLock().lock();
        try
        {
            return duplicateCommandFdLocked();
        }
        finally
        {
            use.readLock().unlock();
        }
    }

    private int duplicateCommandFdLocked()
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.EBADF, "the RDMA device " + deviceName + " is closed: the daemon is " +
                "stopping");
        }
        if (commandFd < 0)
        {
            throw new MrdException(ErrorCode.EOPNOTSUPP, "the RDMA device " + deviceName + " opened by " + library +
                " has no command file (cmd_fd " + commandFd + ") to share: its secondaries cannot import it");
        }
        return Posix.dupCloexec(commandFd);
    }

    /**
     * @return true when {@link #destroyQueue} can destroy a queue some other process created.
     */
    public boolean destroysByHandle()
    {
        return null != destroyByHandle;
    }

    /**
     * @return why a gone client's queues cannot be destroyed, for the log; empty when they can.
     */
    public Optional<String> whyQueuesOutliveTheirClient()
    {
        return null != destroyByHandle ? Optional.empty() : Optional.of(library + " has no " + DESTROY_BY_HANDLE +
            " (libibverbs cannot destroy another process's queue on a shared context): the queues of a " +
            "secondary that ends without destroying them live until the daemon restarts");
    }

    /**
     * Destroys a queue some client created in the shared context, by handle.
     *
     * @param kind {@link #CQ} or {@link #QP}.
     * @throws MrdException EOPNOTSUPP when the library cannot ({@link #destroysByHandle()}); EBADF once closed;
     *                      the errno the device returned (EINVAL for a handle it does not know, EBUSY for a CQ
     *                      a QP still uses).
     */
    public void destroyQueue(final int kind, final int handle)
    {
        use.readLock().lock();
        try
        {
            destroyQueueLocked(kind, handle);
        }
        finally
        {
            use.readLock().unlock();
        }
    }

    private void destroyQueueLocked(final int kind, final int handle)
    {
        if (null == destroyByHandle)
        {
            throw new MrdException(ErrorCode.EOPNOTSUPP, whyQueuesOutliveTheirClient().orElseThrow());
        }
        if (closed)
        {
            throw new MrdException(ErrorCode.EBADF, "the RDMA device " + deviceName + " is closed");
        }
        final int result;
        try
        {
            result = (int)destroyByHandle.invokeExact(context, kind, handle);
        }
        catch (final Throwable t)
        {
            throw new IllegalStateException(DESTROY_BY_HANDLE + " binding", t);
        }
        if (0 != result)
        {
            final int errno = Math.abs(result);
            throw new MrdException(ErrorCode.of(errno), DESTROY_BY_HANDLE + "(" + (kind == CQ ? "CQ" : "QP") +
                " handle " + Integer.toUnsignedString(handle) + ") on " + deviceName + " failed: " +
                ErrorCode.describe(errno));
        }
    }

    /**
     * Checks that a live queue of that handle was created by process {@code pid}: a handle is a table index any
     * client can name, so the daemon keeps (and later destroys) only what the reporter created itself.
     *
     * @throws MrdException EPERM naming both processes when another created it; EINVAL when no live queue has
     *                      that handle; nothing when the library cannot say (a real device: then the daemon never
     *                      destroys by handle either).
     */
    public void requireCreatedBy(final int kind, final int handle, final int pid)
    {
        if (null == handleCreator || closed)
        {
            return;
        }
        final int creator;
        use.readLock().lock();
        try
        {
            creator = closed ? -1 : (int)handleCreator.invokeExact(context, kind, handle);
        }
        catch (final Throwable t)
        {
            throw new IllegalStateException(HANDLE_CREATOR + " binding", t);
        }
        finally
        {
            use.readLock().unlock();
        }
        final String queue = (kind == CQ ? "CQ" : "QP") + " handle " + Integer.toUnsignedString(handle);
        if (creator < 0)
        {
            throw new MrdException(ErrorCode.EINVAL, queue + " names no live queue of " + deviceName +
                ": report a queue after creating it and remove it before destroying it");
        }
        if (creator != pid)
        {
            throw new MrdException(ErrorCode.EPERM, queue + " was created by process " + creator + ", not by " +
                pid + ": report only the queues this process created");
        }
    }

    /**
     * Called by the registrar before it closes the context: waits for the calls in progress (an event loop or
     * the reclaimer a stopping server gave up waiting for), so that none dups a recycled descriptor number or
     * calls into a freed context.
     */
    void close()
    {
        use.writeLock().lock();
        try
        {
            closed = true;
        }
        finally
        {
            use.writeLock().unlock();
        }
    }

    public String toString()
    {
        return "SharedDevice{device=" + deviceName + ", cmdFd=" + commandFd + ", pdHandle=" + pdHandle +
            ", destroyByHandle=" + (null != destroyByHandle) + '}';
    }
}
