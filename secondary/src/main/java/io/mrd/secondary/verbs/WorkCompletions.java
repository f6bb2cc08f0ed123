package io.mrd.secondary.verbs;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

import static io.mrd.secondary.verbs.IbvStructs.IBV_WC;
import static io.mrd.secondary.verbs.IbvStructs.WC_BYTE_LEN;
import static io.mrd.secondary.verbs.IbvStructs.WC_OPCODE;
import static io.mrd.secondary.verbs.IbvStructs.WC_QP_NUM;
import static io.mrd.secondary.verbs.IbvStructs.WC_STATUS;
import static io.mrd.secondary.verbs.IbvStructs.WC_VENDOR_ERR;
import static io.mrd.secondary.verbs.IbvStructs.WC_WR_ID;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * A reusable array of work completions ({@code struct ibv_wc}) that {@link CompletionQueue#poll} fills, read
 * in place by index: a flyweight, so polling allocates nothing. Valid until the next poll into it. One thread
 * at a time.
 * <pre>{@code
 * int n = cq.poll(completions);
 * for (int i = 0; i < n; i++)
 * {
 *     if (completions.status(i) != WorkCompletions.SUCCESS) ... completions.statusNameOf(i) ...
 *     long wrId = completions.wrId(i);
 * }
 * }</pre>
 */
public final class WorkCompletions
{
    /** {@code IBV_WC_SUCCESS}. */
    public static final int SUCCESS = 0;
    /** {@code IBV_WC_LOC_LEN_ERR}: a receive too small for the send, or an SGE longer than its MR. */
    public static final int LOC_LEN_ERR = 1;
    /** {@code IBV_WC_LOC_PROT_ERR}: an lkey that names no live MR of the PD covering the SGE. */
    public static final int LOC_PROT_ERR = 4;
    /** {@code IBV_WC_WR_FLUSH_ERR}: flushed because the queue pair is in the error state. */
    public static final int WR_FLUSH_ERR = 5;
    /** {@code IBV_WC_LOC_ACCESS_ERR}: the local MR lacks the access the operation needs. */
    public static final int LOC_ACCESS_ERR = 8;
    /** {@code IBV_WC_REM_ACCESS_ERR}: the rkey names no live MR covering the range with the access needed. */
    public static final int REM_ACCESS_ERR = 10;

    /** {@code IBV_WC_SEND}. */
    public static final int OPCODE_SEND = 0;
    /** {@code IBV_WC_RDMA_WRITE}. */
    public static final int OPCODE_RDMA_WRITE = 1;
    /** {@code IBV_WC_RDMA_READ}. */
    public static final int OPCODE_RDMA_READ = 2;
    /** {@code IBV_WC_RECV}. */
    public static final int OPCODE_RECV = 128;

    private static final String[] STATUS_NAMES = {
        "IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR", "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR", "IBV_WC_LOC_RDD_VIOL_ERR", "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR", "IBV_WC_INV_EECN_ERR", "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR", "IBV_WC_TM_ERR", "IBV_WC_TM_RNDV_INCOMPLETE"};

    private static final long STRIDE = IBV_WC.byteSize();

    private final MemorySegment wcs;
    private final int capacity;

    /**
     * @param capacity completions one poll returns at most.
     */
    public WorkCompletions(final int capacity)
    {
        if (capacity < 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "WorkCompletions of " + capacity + " entries: give it at " +
                "least 1");
        }
        this.capacity = capacity;
        this.wcs = Arena.ofAuto().allocate(STRIDE * capacity, IBV_WC.byteAlignment());
    }

    public int capacity()
    {
        return capacity;
    }

    /** @return the {@code wr_id} the request was posted with. */
    public long wrId(final int index)
    {
        return wcs.get(JAVA_LONG, index * STRIDE + WC_WR_ID);
    }

    /** @return {@code enum ibv_wc_status}: {@link #SUCCESS} or the error. */
    public int status(final int index)
    {
        return wcs.get(JAVA_INT, index * STRIDE + WC_STATUS);
    }

    /** @return {@code enum ibv_wc_opcode} ({@link #OPCODE_SEND}, ...); valid only when successful. */
    public int opcode(final int index)
    {
        return wcs.get(JAVA_INT, index * STRIDE + WC_OPCODE);
    }

    /** @return bytes received (receives) or moved; valid only when successful. */
    public int byteLength(final int index)
    {
        return wcs.get(JAVA_INT, index * STRIDE + WC_BYTE_LEN);
    }

    /** @return the number of the queue pair the request was posted to. */
    public int qpNum(final int index)
    {
        return wcs.get(JAVA_INT, index * STRIDE + WC_QP_NUM);
    }

    /** @return the device's own detail of an error. */
    public int vendorError(final int index)
    {
        return wcs.get(JAVA_INT, index * STRIDE + WC_VENDOR_ERR);
    }

    /** @return the status's name, as {@code enum ibv_wc_status} spells it. */
    public String statusNameOf(final int index)
    {
        return statusName(status(index));
    }

    /** @return the name of a {@code enum ibv_wc_status} value. */
    public static String statusName(final int status)
    {
        return status >= 0 && status < STATUS_NAMES.length ? STATUS_NAMES[status] : "IBV_WC status " + status;
    }

    MemorySegment segment()
    {
        return wcs;
    }
}
