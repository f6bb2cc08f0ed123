package io.mrd.layout;

/**
 * The rule for MRs that peers may reach, in one place: an rkey reaches exactly the memory of one owner's one
 * allocation that asked for remote access, and nothing once any of it is freed.
 * <ul>
 *   <li><b>Who gets an rkey:</b> an MR has one exactly when its access has a remote flag ({@link #rkey}); the
 *       device makes one for every registration, but that of local-only memory grants nothing and is reported
 *       as {@link Access#NO_RKEY}, so that no meaningless key travels.</li>
 *   <li><b>What one MR may cover:</b> segments of one access only, so that an MR never grants remote access its
 *       owner did not ask for; with remote access also of one allocation only, so that an rkey reaches one
 *       owner's memory and a free by one owner never revokes another's rkey ({@link #mayShareMr}).</li>
 *   <li><b>When a free revokes it:</b> an MR without remote access lives while it has a live segment; one with
 *       remote access is detached as soon as any segment of its registered range is freed, live in it or not:
 *       the device checks only the registered range, which will be allocated again, possibly to another owner
 *       ({@link #isRevokedByFree}).</li>
 * </ul>
 * The primary's memseg lists, MR table and registrars apply it; {@code mrd check} verifies what it leaves in the
 * control file.
 */
public final class RemoteAccess
{
    private RemoteAccess()
    {
    }

    /**
     * @param access     the MR's access.
     * @param deviceRkey the rkey the device made for the registration.
     * @return the rkey mrd reports: the device's with remote access, else {@link Access#NO_RKEY}.
     */
    public static int rkey(final int access, final int deviceRkey)
    {
        return Access.isRemote(access) ? deviceRkey : Access.NO_RKEY;
    }

    /**
     * @return whether {@code rkey} is what an MR of {@code access} must carry: one exactly with remote access.
     */
    public static boolean isRightRkey(final int access, final int rkey)
    {
        return Access.isRemote(access) != (rkey == Access.NO_RKEY);
    }

    /**
     * @param access                   the access of the segment an MR is made around.
     * @param allocationFirst          the first segment of its allocation.
     * @param neighbourAccess          the access of an allocated segment next to it.
     * @param neighbourAllocationFirst the first segment of the neighbour's allocation.
     * @return whether one MR may cover both.
     */
    public static boolean mayShareMr(
        final int access, final int allocationFirst, final int neighbourAccess, final int neighbourAllocationFirst)
    {
        return neighbourAccess == access && (!Access.isRemote(access) || neighbourAllocationFirst == allocationFirst);
    }

    /**
     * @param access       the MR's access.
     * @param liveSegments its live segments after the free.
     * @param spanFreed    whether the free touched any segment of its registered range, live in it or not.
     * @return whether the MR must be detached.
     */
    public static boolean isRevokedByFree(final int access, final int liveSegments, final boolean spanFreed)
    {
        return liveSegments == 0 || (Access.isRemote(access) && spanFreed);
    }
}
