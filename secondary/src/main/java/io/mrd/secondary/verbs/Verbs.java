package io.mrd.secondary.verbs;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.Posix;
import io.mrd.secondary.DaemonLiveness;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import static io.mrd.secondary.verbs.IbvStructs.*;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The daemon's RDMA device and protection domain, imported into this process: what {@code MrdClient.verbs()}
 * returns, and where this process creates the completion queues and RC queue pairs whose work requests use
 * mrd's lkeys (valid only in the PD that registered them, the daemon's).
 * <p>
 * The import is DPDK mlx5's: the daemon sends a descriptor of its context's command file ({@code cmd_fd}) and
 * its PD's handle (IMPORT_PD); {@code ibv_import_device} makes a context of this process on the same device
 * and {@code ibv_import_pd} the same PD. Every queue is reported to the daemon ({@link QueueReporter}), which
 * destroys what a process leaves when it dies. {@link #close()} destroys what is still open, then
 * {@code ibv_unimport_pd} and {@code ibv_close_device}.
 * <pre>{@code
 * Verbs verbs = client.verbs();
 * CompletionQueue cq = verbs.createCq(256);
 * QueuePair qp = verbs.createRcQp(cq, cq, QpCaps.of(128, 4));
 * qp.connect(peerQpNum);
 * qp.postSend(1, Opcode.RDMA_WRITE, new SgeList(4).add(buffer.address(), 4096, lkey), peerAddress, peerRkey, true);
 * }</pre>
 * Creation and destruction are thread-safe; posting and polling follow {@link QueuePair} and
 * {@link CompletionQueue}. Once the daemon is lost, creating, connecting, posting and polling throw
 * {@code DaemonDeadException} and closing goes on working (the loss rule, {@link DaemonLiveness}). Keys of a
 * restarted daemon's device are refused by it: a new epoch needs a new client, hence a new import.
 */
public final class Verbs implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(Verbs.class);
    private static final int IBV_QPT_RC = 2;
    private static final int IBV_MTU_1024 = 3;
    private static final int IBV_LINK_LAYER_ETHERNET = 2;

    private final VerbsLibrary library;
    private final String deviceName;
    private final int pdHandle;
    private final QueueReporter reporter;
    private final DaemonLiveness liveness;
    private final MemorySegment context;
    private final MemorySegment pd;
    private final int portLid;
    private final int activeMtu;
    private final int linkLayer;
    private final Set<QueuePair> qps = new LinkedHashSet<>();
    private final Set<CompletionQueue> cqs = new LinkedHashSet<>();
    private boolean closed;

    private Verbs(
        final VerbsLibrary library, final String deviceName, final int pdHandle, final QueueReporter reporter,
        final DaemonLiveness liveness, final MemorySegment context, final MemorySegment pd)
    {
        this.library = library;
        this.deviceName = deviceName;
        this.pdHandle = pdHandle;
        this.reporter = reporter;
        this.liveness = liveness;
        this.context = context;
        this.pd = pd;
        final int[] port = queryPort(library, context);
        this.portLid = port[0];
        this.activeMtu = port[1];
        this.linkLayer = port[2];
    }

    /**
     * Imports a device and PD: what {@code MrdClient.verbs()} does with the daemon's IMPORT_PD reply.
     *
     * @param library    the libibverbs to use (the daemon's {@code MRD_IBVERBS_LIBRARY}).
     * @param commandFd  a descriptor of the device's command file; the context owns it from here (closed when
     *                   the import fails).
     * @param pdHandle   {@code ibv_pd.handle} of the daemon's PD.
     * @param deviceName for messages.
     * @param reporter   how queues are reported to the daemon.
     * @param liveness   the client's check of its daemon ({@code MrdClient.liveness()}), which creating, connecting,
     *                   posting and polling make first: the loss rule ({@link DaemonLiveness}).
     * @throws MrdException ENOENT/ENOSYS when the library is missing or older than rdma-core 32; the errno of
     *                      {@code ibv_import_device} or {@code ibv_import_pd}.
     */
    public static Verbs importDevice(
        final String library, final int commandFd, final int pdHandle, final String deviceName,
        final QueueReporter reporter, final DaemonLiveness liveness)
    {
        final VerbsLibrary verbs;
        try
        {
            verbs = VerbsLibrary.load(library);
        }
        catch (final MrdException ex)
        {
            Posix.close(commandFd);
            throw ex;
        }
        final MemorySegment context;
        try
        {
            context = (MemorySegment)verbs.importDevice.invokeExact(VerbsLibrary.callState(), commandFd);
        }
        catch (final Throwable t)
        {
            Posix.close(commandFd);
            throw VerbsLibrary.rethrow(t);
        }
        if (MemorySegment.NULL.equals(context))
        {
            final int errno = VerbsLibrary.errno();
            Posix.close(commandFd);
            throw new MrdException(ErrorCode.of(errno), "ibv_import_device(fd " + commandFd + ", the command file " +
                "of " + deviceName + ") with " + library + " failed: " + ErrorCode.describe(errno) + ": the " +
                "daemon and this process must use the same library (MRD_IBVERBS_LIBRARY); a real device needs " +
                "Linux 5.11 or newer");
        }
        final MemorySegment ctx = context.reinterpret(IBV_CONTEXT.byteSize());
        try
        {
            final MemorySegment pd = (MemorySegment)verbs.importPd.invokeExact(VerbsLibrary.callState(), ctx,
                pdHandle);
            if (MemorySegment.NULL.equals(pd))
            {
                final int errno = VerbsLibrary.errno();
                throw new MrdException(ErrorCode.of(errno), "ibv_import_pd(handle " + pdHandle + ") on " +
                    deviceName + " failed: " + ErrorCode.describe(errno) + ": the daemon's PD is gone (did it " +
                    "restart?): attach again");
            }
            try
            {
                return new Verbs(verbs, deviceName, pdHandle, reporter, liveness, ctx,
                    pd.reinterpret(IBV_PD.byteSize()));
            }
            catch (final RuntimeException ex)
            {
                verbs.unimportPd.invokeExact(VerbsLibrary.callState(), pd);
                throw ex;
            }
        }
        catch (final Throwable t)
        {
            closeDevice(verbs, ctx, deviceName);
            throw VerbsLibrary.rethrow(t);
        }
    }

    /**
     * Creates a completion queue ({@code ibv_create_cq}) and reports it to the daemon.
     *
     * @param depth completions it must hold: at least the work requests of every queue that completes to it.
     * @throws MrdException EINVAL for a depth below 1; the errno of {@code ibv_create_cq}; the daemon's refusal.
     */
    public synchronized CompletionQueue createCq(final int depth)
    {
        checkOpen("createCq");
        liveness.requireAlive();
        if (depth < 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "a CQ of depth " + depth + ": give it at least 1");
        }
        final MemorySegment cq;
        try
        {
            cq = (MemorySegment)library.createCq.invokeExact(VerbsLibrary.callState(), context, depth,
                MemorySegment.NULL, MemorySegment.NULL, 0);
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        if (MemorySegment.NULL.equals(cq))
        {
            final int errno = VerbsLibrary.errno();
            throw new MrdException(ErrorCode.of(errno), "ibv_create_cq(depth " + depth + ") on " + deviceName +
                " failed: " + ErrorCode.describe(errno));
        }
        final CompletionQueue queue = new CompletionQueue(this, cq.reinterpret(IBV_CQ.byteSize()),
            context.get(ADDRESS, CONTEXT_POLL_CQ), liveness);
        try
        {
            reporter.report(Message.Queues.ADD, Message.Queues.CQ, queue.handle());
        }
        catch (final RuntimeException ex)
        {
            destroyCq(queue);
            throw ex;
        }
        cqs.add(queue);
        return queue;
    }

    /**
     * Creates a reliable-connected queue pair in the daemon's PD ({@code ibv_create_qp}) and reports it.
     *
     * @throws MrdException EINVAL when a CQ is closed or of another import; the errno of {@code ibv_create_qp}
     *                      (EINVAL for capacities beyond the device's); the daemon's refusal.
     */
    public synchronized QueuePair createRcQp(
        final CompletionQueue sendCq, final CompletionQueue recvCq, final QpCaps caps)
    {
        checkOpen("createRcQp");
        liveness.requireAlive();
        for (final CompletionQueue cq : List.of(sendCq, recvCq))
        {
            if (!cqs.contains(cq))
            {
                throw new MrdException(ErrorCode.EINVAL, cq + " is closed or was made by another Verbs: create " +
                    "the queue pair's CQs with this one");
            }
        }
        final MemorySegment qp;
        final QpCaps granted;
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment attr = arena.allocate(IBV_QP_INIT_ATTR);
            attr.set(ADDRESS, INIT_SEND_CQ, sendCq.struct());
            attr.set(ADDRESS, INIT_RECV_CQ, recvCq.struct());
            attr.set(JAVA_INT, INIT_MAX_SEND_WR, caps.maxSendWr());
            attr.set(JAVA_INT, INIT_MAX_RECV_WR, caps.maxRecvWr());
            attr.set(JAVA_INT, INIT_MAX_SEND_SGE, caps.maxSendSge());
            attr.set(JAVA_INT, INIT_MAX_RECV_SGE, caps.maxRecvSge());
            attr.set(JAVA_INT, INIT_QP_TYPE, IBV_QPT_RC);
            qp = (MemorySegment)library.createQp.invokeExact(VerbsLibrary.callState(), pd, attr);
            if (MemorySegment.NULL.equals(qp))
            {
                final int errno = VerbsLibrary.errno();
                throw new MrdException(ErrorCode.of(errno), "ibv_create_qp(RC, " + caps + ") on " + deviceName +
                    " failed: " + ErrorCode.describe(errno) + (errno == ErrorCode.EINVAL.errno() ?
                    ": ask for fewer work requests or SGEs (ibv_devinfo -v shows the device's limits)" : ""));
            }
            granted = new QpCaps(attr.get(JAVA_INT, INIT_MAX_SEND_WR), attr.get(JAVA_INT, INIT_MAX_RECV_WR),
                attr.get(JAVA_INT, INIT_MAX_SEND_SGE), attr.get(JAVA_INT, INIT_MAX_RECV_SGE));
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        final QueuePair pair = new QueuePair(this, qp.reinterpret(IBV_QP.byteSize()), context, sendCq, recvCq,
            granted, liveness);
        try
        {
            reporter.report(Message.Queues.ADD, Message.Queues.QP, pair.handle());
        }
        catch (final RuntimeException ex)
        {
            destroyQp(pair);
            throw ex;
        }
        qps.add(pair);
        return pair;
    }

    /** @return the device's name, as the daemon opened it. */
    public String deviceName()
    {
        return deviceName;
    }

    /** @return the daemon's PD's handle. */
    public int pdHandle()
    {
        return pdHandle;
    }

    /** @return port 1's LID (0 when the device does not say), what {@link QueuePair#connect} addresses. */
    public int portLid()
    {
        return portLid;
    }

    /** @return port 1's active MTU ({@code enum ibv_mtu}), the path MTU of every connection. */
    public int activeMtu()
    {
        return activeMtu;
    }

    /**
     * @return the imported {@code struct ibv_context *}, for a device's own extensions (the emulated device's
     * {@code mrdemu_live_objects}); valid until {@link #close()}.
     */
    public MemorySegment context()
    {
        return context;
    }

    /**
     * @return a symbol of the loaded library that libibverbs does not have (a device extension), if present.
     */
    public Optional<MemorySegment> extension(final String symbol)
    {
        return library.find(symbol);
    }

    /**
     * Destroys every queue pair, then every completion queue still open (telling the daemon), unimports the PD
     * and closes the imported context. Idempotent. Call it after every thread stopped posting and polling.
     */
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        for (final QueuePair qp : new ArrayList<>(qps))
        {
            destroy(qp);
        }
        for (final CompletionQueue cq : new ArrayList<>(cqs))
        {
            destroy(cq);
        }
        closed = true;
        try
        {
            library.unimportPd.invokeExact(VerbsLibrary.callState(), pd);
        }
        catch (final Throwable t)
        {
            LOG.warn("ibv_unimport_pd on {} failed", deviceName, t);
        }
        closeDevice(library, context, deviceName);
    }

    public String toString()
    {
        return "Verbs[" + deviceName + ", pd handle " + pdHandle + ", " + qps.size() + " QPs, " + cqs.size() +
            " CQs" + (closed ? ", closed" : "") + "]";
    }

    VerbsLibrary library()
    {
        return library;
    }

    boolean linkLayerIsEthernet()
    {
        return linkLayer == IBV_LINK_LAYER_ETHERNET;
    }

    synchronized void destroy(final QueuePair qp)
    {
        if (qp.closed || !qps.remove(qp))
        {
            return;
        }
        // Removed from the daemon's list first: were it told after, a death in between would leave it a
        // handle the device may already have given to someone else's new queue.
        unreport(Message.Queues.QP, qp.handle());
        destroyQp(qp);
    }

    synchronized void destroy(final CompletionQueue cq)
    {
        if (cq.closed || !cqs.contains(cq))
        {
            return;
        }
        for (final QueuePair qp : qps)
        {
            if (qp.sendCq() == cq || qp.recvCq() == cq)
            {
                throw new MrdException(ErrorCode.EBUSY, cq + " is used by " + qp + ": close the queue pair first");
            }
        }
        cqs.remove(cq);
        unreport(Message.Queues.CQ, cq.handle());
        destroyCq(cq);
    }

    private void unreport(final int kind, final int handle)
    {
        try
        {
            reporter.report(Message.Queues.REMOVE, kind, handle);
        }
        catch (final RuntimeException ex)
        {
            // The daemon is gone or never knew it: destroying it here is all that is left to do.
            LOG.debug("reporting the destruction of {} handle {}: {}", kind == Message.Queues.CQ ? "CQ" : "QP",
                handle, ex.toString());
        }
    }

    private void destroyQp(final QueuePair qp)
    {
        qp.closed = true;
        final int result;
        try
        {
            result = (int)library.destroyQp.invokeExact(VerbsLibrary.callState(), qp.struct());
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        if (0 != result)
        {
            LOG.warn("ibv_destroy_qp({}) on {} failed: {}", qp, deviceName,
                ErrorCode.describe(VerbsLibrary.failure(result)));
        }
    }

    private void destroyCq(final CompletionQueue cq)
    {
        cq.closed = true;
        final int result;
        try
        {
            result = (int)library.destroyCq.invokeExact(VerbsLibrary.callState(), cq.struct());
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        if (0 != result)
        {
            LOG.warn("ibv_destroy_cq({}) on {} failed: {}", cq, deviceName,
                ErrorCode.describe(VerbsLibrary.failure(result)));
        }
    }

    private void checkOpen(final String what)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.EBADF, what + " on " + this + ": it is closed");
        }
    }

    /**
     * @return port 1's LID, active MTU and link layer; 0, 1024 and unknown when the device does not say.
     */
    private static int[] queryPort(final VerbsLibrary library, final MemorySegment context)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment attr = arena.allocate(PORT_ATTR_ROOM, 8);
            final int result = (int)library.queryPort.invokeExact(VerbsLibrary.callState(), context, (byte)1, attr);
            if (0 != result)
            {
                LOG.debug("ibv_query_port(1) failed: {}", ErrorCode.describe(VerbsLibrary.failure(result)));
                return new int[]{0, IBV_MTU_1024, 0};
            }
            final int mtu = attr.get(JAVA_INT, PORT_ACTIVE_MTU);
            return new int[]{attr.get(JAVA_SHORT, PORT_LID) & 0xFFFF, mtu >= 1 && mtu <= 5 ? mtu : IBV_MTU_1024,
                attr.get(JAVA_BYTE, PORT_LINK_LAYER)};
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
    }

    private static void closeDevice(final VerbsLibrary library, final MemorySegment context, final String device)
    {
        try
        {
            final int result = (int)library.closeDevice.invokeExact(VerbsLibrary.callState(), context);
            if (0 != result)
            {
                LOG.warn("ibv_close_device on {} failed: {}", device, ErrorCode.describe(VerbsLibrary.failure(result)));
            }
        }
        catch (final Throwable t)
        {
            LOG.warn("ibv_close_device on {} failed", device, t);
        }
    }
}
