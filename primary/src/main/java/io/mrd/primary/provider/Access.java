package io.mrd.primary.provider;

/**
 * Access flags of a registration, with libibverbs' values ({@code enum ibv_access_flags}) so that the
 * ibverbs provider passes them through unchanged.
 */
public final class Access
{
    public static final int LOCAL_WRITE = 1;
    public static final int REMOTE_WRITE = 1 << 1;
    public static final int REMOTE_READ = 1 << 2;
    public static final int REMOTE_ATOMIC = 1 << 3;
    /** Optional flag: devices that do not know it ignore it (IBV_ACCESS_OPTIONAL_FIRST). */
    public static final int RELAXED_ORDERING = 1 << 20;
    /**
     * Bits 20..29, the flags a device may ignore (IBV_ACCESS_OPTIONAL_RANGE): libibverbs only passes them on
     * through {@code ibv_reg_mr_iova2}, which is what verbs.h's {@code ibv_reg_mr} macro calls when one is set.
     */
    public static final int OPTIONAL_RANGE = 0x3FF0_0000;

    /** What the MR engine asks for, as the reference does. */
    public static final int DEFAULT = LOCAL_WRITE | RELAXED_ORDERING;

    private Access()
    {
    }
}
