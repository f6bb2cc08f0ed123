package io.mrd.secondary.verbs;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static io.mrd.secondary.verbs.IbvStructs.*;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * A reliable-connected queue pair in the daemon's protection domain ({@code ibv_create_qp}, {@code IBV_QPT_RC}),
 * made by {@link Verbs#createRcQp}: its work requests may use the lkeys of mrd's memory, and reach memory of
 * the peer whose rkey it was given.
 * <p>
 * {@link #connect} moves it RESET → INIT → RTR → RTS towards a peer queue pair of the same device (every
 * secondary imports the daemon's one device, so a peer is named by its {@link #qpNum()} alone). Posting calls
 * the device's {@code post_send} / {@code post_recv} through the context's ops, as verbs.h's inline
 * {@code ibv_post_send} / {@code ibv_post_recv} do, with one native work request kept per queue pair and
 * refilled each time: a post allocates nothing. The device copies the request and its SGE list before the call
 * returns; the memory the SGEs name must stay registered and untouched until the completion.
 * <p>
 * One thread posts sends and one posts receives at a time (they may be two); {@link #close()} after both
 * stopped. Once the daemon is lost, connecting and posting throw {@code DaemonDeadException}
 * ({@link DaemonLiveness}).
 */
public final class QueuePair implements AutoCloseable
{
    private static final int IBV_SEND_SIGNALED = 1 << 1;
    private static final int QPS_INIT = 1;
    private static final int QPS_RTR = 2;
    private static final int QPS_RTS = 3;
    private static final int IBV_QP_STATE = 1;
    private static final int IBV_QP_ACCESS_FLAGS = 1 << 3;
    private static final int IBV_QP_PKEY_INDEX = 1 << 4;
    private static final int IBV_QP_PORT = 1 << 5;
    private static final int IBV_QP_AV = 1 << 7;
    private static final int IBV_QP_PATH_MTU = 1 << 8;
    private static final int IBV_QP_TIMEOUT = 1 << 9;
    private static final int IBV_QP_RETRY_CNT = 1 << 10;
    private static final int IBV_QP_RNR_RETRY = 1 << 11;
    private static final int IBV_QP_RQ_PSN = 1 << 12;
    private static final int IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13;
    private static final int IBV_QP_MIN_RNR_TIMER = 1 << 15;
    private static final int IBV_QP_SQ_PSN = 1 << 16;
    private static final int IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17;
    private static final int IBV_QP_DEST_QPN = 1 << 20;
    /** What the peer may do to this side: write and read the memory its rkeys name (each MR still checks). */
    private static final int REMOTE_ACCESS = 1 | 2 | 4;
    /** RDMA READs outstanding per queue pair, each way (mlx5's limit). */
    private static final int RD_ATOMIC = 16;
    private static final int PORT = 1;

    private final Verbs verbs;
    private final MemorySegment qp;
    private final MemorySegment postSend;
    private final MemorySegment postRecv;
    private final CompletionQueue sendCq;
    private final CompletionQueue recvCq;
    private final QpCaps caps;
    private final int handle;
    private final int qpNum;
    private final DaemonLiveness liveness;
    private final MemorySegment sendWr = Arena.ofAuto().allocate(IBV_SEND_WR);
    private final MemorySegment recvWr = Arena.ofAuto().allocate(IBV_RECV_WR);
    private final MemorySegment badSendWr = Arena.ofAuto().allocate(ADDRESS);
    private final MemorySegment badRecvWr = Arena.ofAuto().allocate(ADDRESS);
    private int peerQpNum = -1;
    boolean closed;

    QueuePair(
        final Verbs verbs, final MemorySegment qp, final MemorySegment context, final CompletionQueue sendCq,
        final CompletionQueue recvCq, final QpCaps caps, final DaemonLiveness liveness)
    {
        this.verbs = verbs;
        this.liveness = liveness;
        this.qp = qp;
        this.postSend = context.get(ADDRESS, CONTEXT_POST_SEND);
        this.postRecv = context.get(ADDRESS, CONTEXT_POST_RECV);
        this.sendCq = sendCq;
        this.recvCq = recvCq;
        this.caps = caps;
        this.handle = qp.get(JAVA_INT, QP_HANDLE);
        this.qpNum = qp.get(JAVA_INT, QP_NUM);
    }

    /** @return {@code ibv_qp.qp_num}: what a peer connects to. */
    public int qpNum()
    {
        return qpNum;
    }

    /** @return {@code ibv_qp.handle}: what the daemon knows this queue pair by. */
    public int handle()
    {
        return handle;
    }

    /** @return the capacities the device granted (at least those asked). */
    public QpCaps caps()
    {
        return caps;
    }

    /** @return the peer's qp_num once connected, else -1. */
    public int peerQpNum()
    {
        return peerQpNum;
    }

    public CompletionQueue sendCq()
    {
        return sendCq;
    }

    public CompletionQueue recvCq()
    {
        return recvCq;
    }

    /**
     * Connects to a queue pair of the same device: INIT (port 1, remote read and write allowed), RTR (the
     * peer's qp_num, the port's LID and active MTU, PSN 0), RTS. Post receives before the peer sends; sends
     * before the peer posted one are retried by the device (RNR retry 7: without limit).
     *
     * @throws MrdException the errno of {@code ibv_modify_qp}, naming the step; EOPNOTSUPP on a RoCE port,
     *                      which needs the peer's GID (not set up here).
     */
    public synchronized void connect(final int peerQpNum)
    {
        checkOpen("connect");
        liveness.requireAlive();
        if (verbs.linkLayerIsEthernet())
        {
            throw new MrdException(ErrorCode.EOPNOTSUPP, "port 1 of " + verbs.deviceName() + " is Ethernet " +
                "(RoCE): connecting needs a GID and a GRH, which this datapath does not set up; use an InfiniBand " +
                "port or the emulated device");
        }
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment attr = arena.allocate(IBV_QP_ATTR);
            attr.set(JAVA_INT, ATTR_QP_STATE, QPS_INIT);
            attr.set(JAVA_SHORT, ATTR_PKEY_INDEX, (short)0);
            attr.set(JAVA_BYTE, ATTR_PORT_NUM, (byte)PORT);
            attr.set(JAVA_INT, ATTR_QP_ACCESS_FLAGS, REMOTE_ACCESS);
            modify(attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT", peerQpNum);

            attr.fill((byte)0);
            attr.set(JAVA_INT, ATTR_QP_STATE, QPS_RTR);
            attr.set(JAVA_INT, ATTR_PATH_MTU, verbs.activeMtu());
            attr.set(JAVA_INT, ATTR_DEST_QP_NUM, peerQpNum);
            attr.set(JAVA_INT, ATTR_RQ_PSN, 0);
            attr.set(JAVA_BYTE, ATTR_MAX_DEST_RD_ATOMIC, (byte)RD_ATOMIC);
            attr.set(JAVA_BYTE, ATTR_MIN_RNR_TIMER, (byte)12);
            attr.set(JAVA_SHORT, ATTR_AH_DLID, (short)verbs.portLid());
            attr.set(JAVA_BYTE, ATTR_AH_PORT_NUM, (byte)PORT);
            modify(attr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR", peerQpNum);

            attr.fill((byte)0);
            attr.set(JAVA_INT, ATTR_QP_STATE, QPS_RTS);
            attr.set(JAVA_INT, ATTR_SQ_PSN, 0);
            attr.set(JAVA_BYTE, ATTR_TIMEOUT, (byte)14);
            attr.set(JAVA_BYTE, ATTR_RETRY_CNT, (byte)7);
            attr.set(JAVA_BYTE, ATTR_RNR_RETRY, (byte)7);
            attr.set(JAVA_BYTE, ATTR_MAX_RD_ATOMIC, (byte)RD_ATOMIC);
            modify(attr, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                IBV_QP_MAX_QP_RD_ATOMIC, "RTS", peerQpNum);
        }
        this.peerQpNum = peerQpNum;
    }

    /**
     * Posts one send work request ({@code ibv_post_send}).
     *
     * @param wrId          returned in its completion.
     * @param sges          the local memory, each SGE with the lkey of its memory; may be refilled once this
     *                      returns.
     * @param remoteAddress for RDMA WRITE and READ: where in the peer's memory (ignored for SEND).
     * @param rkey          for RDMA WRITE and READ: the key the peer gave for that memory (ignored for SEND).
     * @param signaled      whether it completes with a work completion; a queue whose requests are all
     *                      unsignaled fills up, as its slots free only when a later completion is polled.
     * @throws MrdException {@code DaemonDeadException} once the daemon is lost ({@link DaemonLiveness}); the
     *                      device's errno: ENOMEM when the send queue is full, EINVAL when the queue pair
     *                      is not connected or the request is malformed (more SGEs than granted).
     */
    public void postSend(
        final long wrId, final Opcode opcode, final SgeList sges, final long remoteAddress, final int rkey,
        final boolean signaled)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.EBADF, "post to QP " + qpNum + ", which is closed");
        }
        liveness.requireAlive();
        final MemorySegment wr = sendWr;
        wr.set(JAVA_LONG, SEND_WR_ID, wrId);
        wr.set(ADDRESS, SEND_SG_LIST, sges.segment());
        wr.set(JAVA_INT, SEND_NUM_SGE, sges.count());
        wr.set(JAVA_INT, SEND_OPCODE, opcode.code());
        wr.set(JAVA_INT, SEND_FLAGS, signaled ? IBV_SEND_SIGNALED : 0);
        wr.set(JAVA_LONG, SEND_REMOTE_ADDR, remoteAddress);
        wr.set(JAVA_INT, SEND_RKEY, rkey);
        final int result;
        try
        {
            result = (int)VerbsLibrary.POST_SEND.invokeExact(postSend, qp, wr, badSendWr);
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        if (0 != result)
        {
            throw postFailure("ibv_post_send", result, wrId, opcode.name() + (opcode == Opcode.SEND ? "" :
                " to " + Sizes.hex(remoteAddress) + " rkey " + Sizes.hex(rkey & 0xFFFF_FFFFL)),
                caps.maxSendWr(), caps.maxSendSge());
        }
    }

    /**
     * Posts a SEND: {@link #postSend} without a remote address.
     */
    public void postSend(final long wrId, final SgeList sges, final boolean signaled)
    {
        postSend(wrId, Opcode.SEND, sges, 0, 0, signaled);
    }

    /**
     * Posts one receive work request ({@code ibv_post_recv}): the memory the peer's next SEND fills.
     *
     * @throws MrdException {@code DaemonDeadException} once the daemon is lost ({@link DaemonLiveness}); the
     *                      device's errno: ENOMEM when the receive queue is full, EINVAL for more SGEs than
     *                      granted or a queue pair in RESET.
     */
    public void postRecv(final long wrId, final SgeList sges)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.EBADF, "post to QP " + qpNum + ", which is closed");
        }
        liveness.requireAlive();
        final MemorySegment wr = recvWr;
        wr.set(JAVA_LONG, RECV_WR_ID, wrId);
        wr.set(ADDRESS, RECV_SG_LIST, sges.segment());
        wr.set(JAVA_INT, RECV_NUM_SGE, sges.count());
        final int result;
        try
        {
            result = (int)VerbsLibrary.POST_RECV.invokeExact(postRecv, qp, wr, badRecvWr);
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        if (0 != result)
        {
            throw postFailure("ibv_post_recv", result, wrId, "RECV", caps.maxRecvWr(), caps.maxRecvSge());
        }
    }

    /**
     * Destroys the queue pair ({@code ibv_destroy_qp}) after telling the daemon; work in flight is dropped.
     * Idempotent.
     */
    public void close()
    {
        verbs.destroy(this);
    }

    MemorySegment struct()
    {
        return qp;
    }

    public String toString()
    {
        return "QueuePair[qp_num " + qpNum + ", handle " + handle + (peerQpNum < 0 ? "" : ", peer " + peerQpNum) +
            (closed ? ", closed" : "") + "]";
    }

    private void modify(final MemorySegment attr, final int mask, final String state, final int peer)
    {
        final int result;
        try
        {
            result = (int)verbs.library().modifyQp.invokeExact(VerbsLibrary.callState(), qp, attr, mask);
        }
        catch (final Throwable t)
        {
            throw VerbsLibrary.rethrow(t);
        }
        if (0 != result)
        {
            final int errno = VerbsLibrary.failure(result);
            throw new MrdException(ErrorCode.of(errno), "ibv_modify_qp(QP " + qpNum + " to " + state +
                ", peer QP " + peer + ") on " + verbs.deviceName() + " failed: " + ErrorCode.describe(errno) +
                (state.equals("INIT") ? ": a queue pair connects once" : ": check the peer's qp_num"));
        }
    }

    private MrdException postFailure(
        final String call, final int errno, final long wrId, final String what, final int depth, final int maxSge)
    {
        final String why = switch (ErrorCode.of(errno))
        {
            case ENOMEM -> ": the queue is full (" + depth + " work requests): poll completions before posting more";
            case EINVAL -> ": the queue pair is not connected, or the request has more than " + maxSge + " SGEs";
            case EIO -> ": the device is gone (its context was destroyed under this process)";
            default -> "";
        };
        return new MrdException(ErrorCode.of(errno), call + "(QP " + qpNum + ", wr_id " + wrId + ", " + what +
            ") failed: " + ErrorCode.describe(errno) + why);
    }

    private void checkOpen(final String what)
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.EBADF, what + " of QP " + qpNum + ", which is closed");
        }
    }
}
