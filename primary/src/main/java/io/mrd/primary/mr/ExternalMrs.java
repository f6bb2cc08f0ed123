package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.provider.Registration;

import java.util.List;

/**
 * The MRs over external memory (the reference's {@code mlx5_create_mr_ext}): one MR per registered range, with
 * no memory-segment list behind it, so no memory free event reaches it; it goes when its owner deregisters it
 * or dies. They live in the one MR table and global cache, so that lookups find them like any MR, and are
 * changed under the cache lock and in the cache writer's write sections like any MR ({@link MrShareCache},
 * which this calls into and which calls nothing here). A registration runs with no lock held, its range in
 * {@link InFlightRanges} meanwhile, as a create's does.
 * <p>
 * The memory itself (the window it is mapped in, the client's fd) is {@code io.mrd.primary.external}'s.
 */
final class ExternalMrs
{
    private final MrShareCache shareCache;
    private final DaemonCounters counters;

    ExternalMrs(final MrShareCache shareCache, final DaemonCounters counters)
    {
        this.shareCache = shareCache;
        this.counters = counters;
    }

    /**
     * Registers {@code [address, address + length)} as one MR. The overlap check and the publish are under the
     * cache lock, the registration between them is not: the range is in flight meanwhile, so that an
     * overlapping registration is refused as if the MR existed, and a close waits for it.
     *
     * @param access the {@link Access} its owner asked for, local write included.
     * @throws MrdException EINVAL for an empty or unaligned range, EEXIST when it overlaps a registered chunk or
     *                      one being registered, ENODEV when the daemon shuts down meanwhile.
     */
    MrEntry register(final long address, final long length, final int owner, final int access)
    {
        if (length <= 0 || address <= 0 || address + length < address)
        {
            throw new MrdException(ErrorCode.EINVAL, "external range at " + Sizes.hex(address) + " of " + length +
                " bytes is empty or wraps");
        }
        shareCache.garbageCollect();
        final long end = address + length;
        final int slot = shareCache.takeRecord(address);
        shareCache.lock();
        try
        {
            shareCache.checkOpen(address);
            if (shareCache.isRegistered(address) || shareCache.overlapsChunk(address, end) ||
                shareCache.overlapsInFlight(address, end))
            {
                throw new MrdException(ErrorCode.EEXIST, "external range [" + Sizes.hex(address) + ", " +
                    Sizes.hex(end) + ") overlaps memory that is already registered");
            }
            shareCache.markInFlight(address, end);
        }
        catch (final RuntimeException ex)
        {
            shareCache.releaseRecord(slot);
            throw ex;
        }
        finally
        {
            shareCache.unlock();
        }
        try
        {
            return registerAndPublish(address, length, owner, access, slot);
        }
        finally
        {
            shareCache.endInFlight(address, end);
        }
    }

    /** With no lock held, then the publish under the cache lock, or the undo when the daemon closed meanwhile. */
    private MrEntry registerAndPublish(final long address, final long length, final int owner, final int access,
        final int slot)
    {
        final Registration registration;
        try
        {
            registration = shareCache.register(address, length, access);
        }
        catch (final RuntimeException ex)
        {
            shareCache.releaseRecord(slot);
            throw ex;
        }
        final MrEntry entry = shareCache.publish(
            address, slot, registration, MrTable.Coverage.external(), MrDescriptor.FLAG_EXTERNAL, owner, access);
        if (null == entry)
        {
            throw shareCache.undoAfterClose(registration, slot, "external memory at " + Sizes.hex(address));
        }
        counters.increment(MrdCounter.EXTERNAL_REGISTRATIONS);
        return entry;
    }

    /**
     * Deregisters the external MR that starts at {@code address}: a memory free event for that range (the MR
     * is detached, the cache rebuilt, devGen bumped), then the MR is collected with no lock held.
     *
     * @param owner the client asking; only the owner (or the daemon, {@link MemsegListDescriptor#OWNER_DAEMON})
     *              may deregister.
     * @throws MrdException ENOENT when no external MR starts there, EPERM when another client owns it.
     */
    void deregister(final long address, final int owner)
    {
        shareCache.lock();
        try
        {
            final int slot = shareCache.findExternal(address);
            if (slot < 0)
            {
                throw new MrdException(ErrorCode.ENOENT, "no external memory is registered at " + Sizes.hex(address));
            }
            final int holder = shareCache.ownerOf(slot);
            if (owner != MemsegListDescriptor.OWNER_DAEMON && holder != owner)
            {
                throw new MrdException(ErrorCode.EPERM, "external memory at " + Sizes.hex(address) +
                    " belongs to client " + holder + ", not " + owner);
            }
            shareCache.detachExternal(slot, address, owner);
        }
        finally
        {
            shareCache.unlock();
        }
        shareCache.collectAndAwait();
    }

    /**
     * @return the start addresses of the ACTIVE external MRs owned by {@code owner}.
     */
    List<Long> ownedBy(final int owner)
    {
        return shareCache.externalsOwnedBy(owner);
    }
}
