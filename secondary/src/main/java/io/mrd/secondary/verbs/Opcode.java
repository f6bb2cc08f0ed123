package io.mrd.secondary.verbs;

/**
 * What a send work request does ({@code enum ibv_wr_opcode}), the three a zero-copy transfer needs.
 */
public enum Opcode
{
    /** The peer's next posted receive takes the bytes ({@code IBV_WR_SEND}). */
    SEND(2, WorkCompletions.OPCODE_SEND),
    /** The bytes go to the peer's memory at an address and rkey ({@code IBV_WR_RDMA_WRITE}). */
    RDMA_WRITE(0, WorkCompletions.OPCODE_RDMA_WRITE),
    /** The bytes come from the peer's memory at an address and rkey ({@code IBV_WR_RDMA_READ}). */
    RDMA_READ(4, WorkCompletions.OPCODE_RDMA_READ);

    private final int code;
    private final int completion;

    Opcode(final int code, final int completion)
    {
        this.code = code;
        this.completion = completion;
    }

    /**
     * @return the {@code enum ibv_wr_opcode} value.
     */
    public int code()
    {
        return code;
    }

    /**
     * @return the {@code enum ibv_wc_opcode} its completion reports.
     */
    public int completionOpcode()
    {
        return completion;
    }
}
