package io.mrd.layout;

/**
 * Access flags of memory and of the MRs over it, with libibverbs' values ({@code enum ibv_access_flags}) so that
 * a client asks with the constants a verbs program uses and the ibverbs provider passes them through unchanged.
 * <p>
 * The owner of memory chooses its access when it allocates or registers it; mrd adds {@link #LOCAL_WRITE}
 * (every mrd memory is writable, and verbs refuses remote write or atomic without it) and, when registering,
 * the optional {@link #RELAXED_ORDERING}. Remote access is never granted to memory whose owner did not ask for
 * it: which MRs carry an rkey, what one may cover and when a free revokes it is {@link RemoteAccess}'s rule.
 */
public final class Access
{
    /** The NIC may write the memory ({@code IBV_ACCESS_LOCAL_WRITE}); every mrd memory has it. */
    public static final int LOCAL_WRITE = 1;
    /** Peers may RDMA WRITE into the memory ({@code IBV_ACCESS_REMOTE_WRITE}). */
    public static final int REMOTE_WRITE = 1 << 1;
    /** Peers may RDMA READ the memory ({@code IBV_ACCESS_REMOTE_READ}). */
    public static final int REMOTE_READ = 1 << 2;
    /** Peers may run atomics on the memory ({@code IBV_ACCESS_REMOTE_ATOMIC}). */
    public static final int REMOTE_ATOMIC = 1 << 3;
    /** Optional flag: devices that do not know it ignore it (IBV_ACCESS_OPTIONAL_FIRST). */
    public static final int RELAXED_ORDERING = 1 << 20;
    /**
     * Bits 20..29, the flags a device may ignore (IBV_ACCESS_OPTIONAL_RANGE): libibverbs only passes them on
     * through {@code ibv_reg_mr_iova2}, which is what verbs.h's {@code ibv_reg_mr} macro calls when one is set.
     */
    public static final int OPTIONAL_RANGE = 0x3FF0_0000;

    /** Local access only: what {@code allocate(length)} asks for. */
    public static final int LOCAL = LOCAL_WRITE;
    /** Every remote flag. */
    public static final int REMOTE = REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;
    /** The flags a client may ask for; any other bit is refused. */
    public static final int KNOWN = LOCAL_WRITE | REMOTE;
    /** The rkey of an MR without remote access. */
    public static final int NO_RKEY = 0;

    private static final int[] FLAGS = {LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC, RELAXED_ORDERING};
    private static final String[] NAMES =
        {"local-write", "remote-write", "remote-read", "remote-atomic", "relaxed-ordering"};

    private Access()
    {
    }

    /**
     * @return whether {@code access} lets peers reach the memory (it needs an rkey).
     */
    public static boolean isRemote(final int access)
    {
        return (access & REMOTE) != 0;
    }

    /**
     * The access memory gets when its owner asks for {@code requested}: the request plus {@link #LOCAL_WRITE}.
     *
     * @param what what the access is for, for the message ("ALLOC", "REG_EXTERNAL", ...).
     * @throws MrdException EINVAL naming the bits that are not in {@link #KNOWN}.
     */
    public static int granted(final int requested, final String what)
    {
        final int unknown = requested & ~KNOWN;
        if (unknown != 0)
        {
            throw new MrdException(ErrorCode.EINVAL, what + " access 0x" + Integer.toHexString(requested) +
                " has unknown bits 0x" + Integer.toHexString(unknown) + ": ask for a combination of " +
                describe(KNOWN) + " (libibverbs' values 0x1, 0x2, 0x4, 0x8)");
        }
        return requested | LOCAL_WRITE;
    }

    /**
     * @return the flags' names joined by commas ("local-write,remote-read"), unknown bits in hex, "none" for 0.
     */
    public static String describe(final int access)
    {
        if (access == 0)
        {
            return "none";
        }
        final StringBuilder text = new StringBuilder();
        int rest = access;
        for (int i = 0; i < FLAGS.length; i++)
        {
            if ((access & FLAGS[i]) != 0)
            {
                text.append(text.isEmpty() ? "" : ",").append(NAMES[i]);
                rest &= ~FLAGS[i];
            }
        }
        if (rest != 0)
        {
            text.append(text.isEmpty() ? "" : ",").append("0x").append(Integer.toHexString(rest));
        }
        return text.toString();
    }

    /**
     * Parses what {@link #describe} prints (and what a command line takes): flag names separated by commas,
     * "local" for {@link #LOCAL}.
     *
     * @throws MrdException EINVAL naming the word that is not a flag and the ones that are.
     */
    public static int parse(final String text)
    {
        int access = 0;
        for (final String word : text.split(",", -1))
        {
            final String name = word.trim();
            int flag = "local".equals(name) ? LOCAL : 0;
            for (int i = 0; i < FLAGS.length && flag == 0; i++)
            {
                flag = NAMES[i].equals(name) ? FLAGS[i] : 0;
            }
            if (flag == 0 || flag == RELAXED_ORDERING)
            {
                throw new MrdException(ErrorCode.EINVAL, "access '" + text + "': '" + name + "' is not a flag; " +
                    "give a comma-separated list of local, local-write, remote-write, remote-read, remote-atomic");
            }
            access |= flag;
        }
        return access;
    }
}
