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
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;

import java.util.List;
import java.util.concurrent.locks.Lock;

/**
 * The MRs over external memory (the reference's {@code mlx5_create_mr_ext}): one MR per registered range, with
 * no memory-segment list behind it, so no memory free event reaches it; it goes when its owner deregisters it
 * or dies. They live in the one MR table and global cache, so that lookups find them like any MR, and are
 * changed under the engine's cache lock and in the cache writer's write sections like any MR. A registration
 * runs with no lock held, its range in {@link InFlightRanges} meanwhile, as a create's does.
 * <p>
 * The memory itself (the window it is mapped in, the client's fd) is {@code io.mrd.primary.external}'s.
 */
final class ExternalMrs
{
    private final MrEngine engine;
    private final Lock cacheLock;
    private final InFlightRanges inFlight;
    private final MrTable table;
    private final GlobalCacheWriter cache;
    private final Registrar registrar;
    private final DaemonCounters counters;
    private final MrEntry scratch = new MrEntry();

    ExternalMrs(
        final MrEngine engine,
        final Lock cacheLock,
        final InFlightRanges inFlight,
        final MrTable table,
        final GlobalCacheWriter cache,
        final Registrar registrar,
        final DaemonCounters counters)
    {
        this.engine = engine;
        this.cacheLock = cacheLock;
        this.inFlight = inFlight;
        this.table = table;
        this.cache = cache;
        this.registrar = registrar;
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
        engine.garbageCollect();
        final long end = address + length;
        final int slot = table.take(address);
        cacheLock.lock();
        try
        {
            engine.checkOpen(address);
            if (cache.lookup(address, scratch) || table.overlapsChunk(address, end) || inFlight.overlaps(address, end))
            {
                throw new MrdException(ErrorCode.EEXIST, "external range [" + Sizes.hex(address) + ", " +
                    Sizes.hex(end) + ") overlaps memory that is already registered");
            }
            inFlight.add(address, end);
        }
        catch (final RuntimeException ex)
        {
            table.release(slot);
            throw ex;
        }
        finally
        {
            cacheLock.unlock();
        }
        try
        {
            return registerAndPublish(address, length, owner, access, slot);
        }
        finally
        {
            cacheLock.lock();
            try
            {
                inFlight.remove(address, end);
            }
            finally
            {
                cacheLock.unlock();
            }
        }
    }

    /** With no lock held, then the publish under the cache lock, or the undo when the daemon closed meanwhile. */
    private MrEntry registerAndPublish(final long address, final long length, final int owner, final int access,
        final int slot)
    {
        final Registration registration;
        try
        {
            registration = registrar.register(address, length, MrEngine.registrationAccess(access));
        }
        catch (final RuntimeException ex)
        {
            table.release(slot);
            throw ex;
        }
        cacheLock.lock();
        try
        {
            if (!engine.isClosed())
            {
                engine.publish(slot, registration, MrTable.Coverage.external(), MrDescriptor.FLAG_EXTERNAL, owner,
                    access);
                counters.increment(MrdCounter.EXTERNAL_REGISTRATIONS);
                return new MrEntry().set(address, address + length, registration.lkey(), registration.rkey(), access,
                    slot);
            }
        }
        finally
        {
            cacheLock.unlock();
        }
        throw engine.undoAfterClose(registration, slot, "external memory at " + Sizes.hex(address));
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
        cacheLock.lock();
        try
        {
            final int slot = table.findExternal(address);
            if (slot < 0)
            {
                throw new MrdException(ErrorCode.ENOENT, "no external memory is registered at " + Sizes.hex(address));
            }
            final int holder = table.owner(slot);
            if (owner != MemsegListDescriptor.OWNER_DAEMON && holder != owner)
            {
                throw new MrdException(ErrorCode.EPERM, "external memory at " + Sizes.hex(address) +
                    " belongs to client " + holder + ", not " + owner);
            }
            engine.journal().externalDeregistered(owner, address);
            cache.write(() ->
            {
                table.detach(slot);
                cache.invalidate();
            });
            counters.increment(MrdCounter.MEMORY_EVENTS);
        }
        finally
        {
            cacheLock.unlock();
        }
        engine.collectAndAwait();
    }

    /**
     * @return the start addresses of the ACTIVE external MRs owned by {@code owner}.
     */
    List<Long> ownedBy(final int owner)
    {
        cacheLock.lock();
        try
        {
            return table.externalsOwnedBy(owner);
        }
        finally
        {
            cacheLock.unlock();
        }
    }
}
