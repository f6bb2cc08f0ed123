package io.mrd.secondary.verbs;

import io.mrd.layout.EmulatedDeviceAdvice;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.LoadedLibrary;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.VarHandle;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The FFM binding of libibverbs that the datapath uses: the exported functions that set queues up (import,
 * create, modify, destroy), each capturing {@code errno}, and the three calls verbs.h makes inline through
 * {@code context->ops} ({@link #POST_SEND}, {@link #POST_RECV}, {@link #POLL_CQ}): handles without a target,
 * called with the function pointer read from the context, as the inline functions do.
 * <p>
 * A library is loaded once per process and stays loaded (queues of any number of clients may use it); the
 * same path as the daemon's {@code MRD_IBVERBS_LIBRARY}, so both sides use the same device, real or emulated.
 */
@SuppressWarnings("restricted")
final class VerbsLibrary
{
    private static final Linker LINKER = Linker.nativeLinker();
    private static final StructLayout CAPTURE_LAYOUT = Linker.Option.captureStateLayout();
    private static final VarHandle ERRNO = CAPTURE_LAYOUT.varHandle(groupElement("errno"));
    private static final ThreadLocal<MemorySegment> CALL_STATE =
        ThreadLocal.withInitial(() -> Arena.ofAuto().allocate(CAPTURE_LAYOUT));
    private static final Map<String, VerbsLibrary> LOADED = new ConcurrentHashMap<>();

    /**
     * {@code int (*post_send)(struct ibv_qp *, struct ibv_send_wr *, struct ibv_send_wr **)}, and
     * {@code post_recv} alike. Critical: they neither block nor call back (a driver writes the ring and rings
     * the doorbell), so the thread-state transitions of an ordinary downcall are skipped.
     */
    static final MethodHandle POST_SEND = LINKER.downcallHandle(
        FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, ADDRESS), Linker.Option.critical(false));
    static final MethodHandle POST_RECV = POST_SEND;
    /** {@code int (*poll_cq)(struct ibv_cq *, int num_entries, struct ibv_wc *)}: reads the CQ's ring. */
    static final MethodHandle POLL_CQ = LINKER.downcallHandle(
        FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, ADDRESS), Linker.Option.critical(false));

    final String library;
    private final LoadedLibrary lookup;
    final MethodHandle importDevice;
    final MethodHandle importPd;
    final MethodHandle unimportPd;
    final MethodHandle closeDevice;
    final MethodHandle createCq;
    final MethodHandle destroyCq;
    final MethodHandle createQp;
    final MethodHandle modifyQp;
    final MethodHandle destroyQp;
    /** The exported {@code ibv_query_port}, filling the older, shorter struct (a prefix of ibv_port_attr). */
    final MethodHandle queryPort;

    private VerbsLibrary(final String library, final LoadedLibrary lookup)
    {
        this.library = library;
        this.lookup = lookup;
        importDevice = bind(lookup, "ibv_import_device", FunctionDescriptor.of(ADDRESS, JAVA_INT));
        importPd = bind(lookup, "ibv_import_pd", FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT));
        unimportPd = bind(lookup, "ibv_unimport_pd", FunctionDescriptor.ofVoid(ADDRESS));
        closeDevice = bind(lookup, "ibv_close_device", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        createCq = bind(lookup, "ibv_create_cq",
            FunctionDescriptor.of(ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        destroyCq = bind(lookup, "ibv_destroy_cq", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        createQp = bind(lookup, "ibv_create_qp", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
        modifyQp = bind(lookup, "ibv_modify_qp", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
        destroyQp = bind(lookup, "ibv_destroy_qp", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        queryPort = bind(lookup, "ibv_query_port", FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_BYTE, ADDRESS));
    }

    /**
     * @param library a path (containing '/') or a soname the loader resolves, as {@code MRD_IBVERBS_LIBRARY}.
     * @throws MrdException ENOENT when it cannot be loaded; ENOSYS when it lacks a symbol (rdma-core older than
     *                      32 has no {@code ibv_import_device}).
     */
    static VerbsLibrary load(final String library)
    {
        final VerbsLibrary loaded = LOADED.get(library);
        if (null != loaded)
        {
            return loaded;
        }
        synchronized (LOADED)
        {
            // global: queues of this process may use the library until it exits
            final String remedy = "point " + EmulatedDeviceAdvice.LIBRARY_ENV + " at the libibverbs.so.1 the daemon " +
                "uses, use " + EmulatedDeviceAdvice.EMULATED_DEVICE + ", or install rdma-core's libibverbs1";
            return LOADED.computeIfAbsent(library, name ->
                new VerbsLibrary(name, LoadedLibrary.open(name, Arena.global(), remedy, remedy)));
        }
    }

    /**
     * @return the symbol, for extensions a test or tool binds itself ({@code mrdemu_live_objects}).
     */
    java.util.Optional<MemorySegment> find(final String symbol)
    {
        return lookup.find(symbol);
    }

    static MemorySegment callState()
    {
        return CALL_STATE.get();
    }

    static int errno()
    {
        return (int)ERRNO.get(CALL_STATE.get(), 0L);
    }

    /**
     * @return the errno a call returned or set: rdma-core returns it (positive), older libraries -1 and errno.
     */
    static int failure(final int result)
    {
        return result > 0 ? result : errno();
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

    private MethodHandle bind(final LoadedLibrary lookup, final String symbol, final FunctionDescriptor descriptor)
    {
        return lookup.bind(symbol, descriptor, "importing the daemon's device needs rdma-core 32 or newer " +
            "(and Linux 5.11 or newer for a real device's cmd_fd)");
    }
}
