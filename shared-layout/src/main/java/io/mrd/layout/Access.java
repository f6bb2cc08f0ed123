package io.mrd.layout;

/**
 * Access flags of memory and of the MRs over it, with libibverbs' values ({@code enum ibv_access_flags}) so that
 * a client asks with the constants a verbs program uses and the ibverbs provider passes them through unchanged.
 * <p>
 * The owner of memory chooses its access when it allocates or registers it; mrd adds {@link #LOCAL_WRITE}
 * (every mrd memory is writable, and verbs refuses remote write or atomic without it) and, when registering,
 * the optional {@link #RELAXED_ORDERING}. Remote access is never granted to memory whose owner did not ask for
 * it: which MRs carry an rkey, what one may cover and when a free revokes it is {@link RemoteAccess}'s rule.
 * <p>
 * Bits 8..15 are mrd's own: the placement, the devices of a daemon with several ({@code --device}) that an
 * allocation is registered on ({@link #onDevices}); none set means every device. They travel with the access
 * because memory of one placement must not share an MR with memory of another, exactly as with the flags;
 * {@link #verbs} strips them before {@code ibv_reg_mr}. libibverbs' flags at those bits ({@code
 * IBV_ACCESS_FLUSH_GLOBAL} and up) are not ones mrd grants.
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

    /** The first bit of the placement ({@link #onDevices}). */
    public static final int PLACEMENT_SHIFT = 8;
    /** Bits 8..15: one per device number 0..7 ({@link DeviceDescriptor#MAX_DEVICES}); none set: every device. */
    public static final int PLACEMENT = 0xFF << PLACEMENT_SHIFT;

    /** Local access only: what {@code allocate(length)} asks for. */
    public static final int LOCAL = LOCAL_WRITE;
    /** Every remote flag. */
    public static final int REMOTE = REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC;
    /** The flags a client may ask for, besides a {@link #PLACEMENT}; any other bit is refused. */
    public static final int KNOWN = LOCAL_WRITE | REMOTE;
    /** The rkey of an MR without remote access. */
    public static final int NO_RKEY = 0;

    private static final String DEVICE_WORD = "device-";
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
     * The placement of an allocation on the devices named, to be or-ed into its access: {@code
     * client.allocate(length, Access.REMOTE_WRITE | Access.onDevices(4, 5))} registers the memory on devices 4
     * and 5 only (say, the NICs of the buffer's NUMA node); with no device named, every device.
     *
     * @param devices device numbers, each a place in the daemon's {@code --device} list (0 first).
     * @throws MrdException EINVAL for a number outside 0..7.
     */
    public static int onDevices(final int... devices)
    {
        int placement = 0;
        for (final int device : devices)
        {
            if (device < 0 || device >= DeviceDescriptor.MAX_DEVICES)
            {
                throw new MrdException(ErrorCode.EINVAL, "device " + device + " cannot be placed on: a daemon " +
                    "numbers its devices 0 to " + (DeviceDescriptor.MAX_DEVICES - 1) + " in --device order");
            }
            placement |= 1 << (PLACEMENT_SHIFT + device);
        }
        return placement;
    }

    /**
     * @return whether memory of {@code access} is registered on {@code device}: it is in the placement, or the
     * access has none (every device).
     */
    public static boolean isOn(final int access, final int device)
    {
        final int placement = (access & PLACEMENT) >>> PLACEMENT_SHIFT;
        return 0 == placement || (placement >>> device & 1) != 0;
    }

    /**
     * @return the access without its placement: the flags {@code ibv_reg_mr} is given.
     */
    public static int verbs(final int access)
    {
        return access & ~PLACEMENT;
    }

    /**
     * Refuses a placement naming a device the daemon does not have.
     *
     * @param devices the daemon's devices, 1 for a provider without one (its registrations count as device 0's).
     * @param what    what the access is for, for the message ("ALLOC", "REG_EXTERNAL", ...).
     * @throws MrdException EINVAL naming the first device out of range.
     */
    public static void requirePlacedWithin(final int access, final int devices, final String what)
    {
        final int placement = (access & PLACEMENT) >>> PLACEMENT_SHIFT;
        if (placement >>> devices != 0)
        {
            final int device = Integer.numberOfTrailingZeros(placement >>> devices) + devices;
            throw new MrdException(ErrorCode.EINVAL, what + " places the memory on device " + device +
                ", and the daemon has " + devices + (1 == devices ? " device (0)" : " devices (0 to " +
                (devices - 1) + ")") + ": name devices of its --device list in Access.onDevices, or none for all");
        }
    }

    /**
     * The access memory gets when its owner asks for {@code requested}: the request plus {@link #LOCAL_WRITE}.
     *
     * @param what what the access is for, for the message ("ALLOC", "REG_EXTERNAL", ...).
     * @throws MrdException EINVAL naming the bits that are not in {@link #KNOWN}.
     */
    public static int granted(final int requested, final String what)
    {
        final int unknown = requested & ~(KNOWN | PLACEMENT);
        if (unknown != 0)
        {
            throw new MrdException(ErrorCode.EINVAL, what + " access 0x" + Integer.toHexString(requested) +
                " has unknown bits 0x" + Integer.toHexString(unknown) + ": ask for a combination of " +
                describe(KNOWN) + " (libibverbs' values 0x1, 0x2, 0x4, 0x8)");
        }
        return requested | LOCAL_WRITE;
    }

    /**
     * @return the flags' names joined by commas ("local-write,remote-read"), then the placement's devices
     * ("device-4,device-5"), unknown bits in hex, "none" for 0.
     */
    public static String describe(final int access)
    {
        if (access == 0)
        {
            return "none";
        }
        final StringBuilder text = new StringBuilder();
        int rest = access & ~PLACEMENT;
        for (int i = 0; i < FLAGS.length; i++)
        {
            if ((access & FLAGS[i]) != 0)
            {
                text.append(text.isEmpty() ? "" : ",").append(NAMES[i]);
                rest &= ~FLAGS[i];
            }
        }
        for (int device = 0; device < DeviceDescriptor.MAX_DEVICES; device++)
        {
            if ((access & PLACEMENT) != 0 && isOn(access, device))
            {
                text.append(text.isEmpty() ? "" : ",").append(DEVICE_WORD).append(device);
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
     * "local" for {@link #LOCAL}, "device-N" for a placement on device N.
     *
     * @throws MrdException EINVAL naming the word that is not a flag and the ones that are.
     */
    public static int parse(final String text)
    {
        int access = 0;
        for (final String word : text.split(",", -1))
        {
            final String name = word.trim();
            if (name.startsWith(DEVICE_WORD) && name.length() > DEVICE_WORD.length())
            {
                access |= onDevices(parseDevice(text, name));
                continue;
            }
            int flag = "local".equals(name) ? LOCAL : 0;
            for (int i = 0; i < FLAGS.length && flag == 0; i++)
            {
                flag = NAMES[i].equals(name) ? FLAGS[i] : 0;
            }
            if (flag == 0 || flag == RELAXED_ORDERING)
            {
                throw new MrdException(ErrorCode.EINVAL, "access '" + text + "': '" + name + "' is not a flag; " +
                    "give a comma-separated list of local, local-write, remote-write, remote-read, remote-atomic " +
                    "and device-N for each device to place the memory on (none: every device)");
            }
            access |= flag;
        }
        return access;
    }

    private static int parseDevice(final String text, final String word)
    {
        try
        {
            return Integer.parseInt(word.substring(DEVICE_WORD.length()));
        }
        catch (final NumberFormatException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, "access '" + text + "': '" + word + "' is not a device; " +
                "write device-0 to device-7 for the devices of --device, in its order");
        }
    }
}
