package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.memory.Allocation;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.provider.Registrar;
import org.agrona.concurrent.errors.DistinctErrorLog;

import java.util.List;

/**
 * The primary's MR engine, what the daemon's requests call: creates memory regions the way the reference's
 * {@code mlx5_mr_create_primary} does ({@link #createMr}; its steps are {@link MrCreation}'s), registers
 * external memory ({@link ExternalMrs}), allocates and frees memory through the {@link MemoryManager} and
 * deregisters the MRs a free detached before its pages are unmapped, and closes.
 * <p>
 * Calls run one way: this calls {@link MrCreation} and {@link ExternalMrs}, and they and this call
 * {@link MrShareCache}, which holds the state they share (the cache lock, the MR table, the global cache's
 * writer, the ranges in flight, the closed flag) and calls none of them back. The lock order, and why no
 * registration, wait, deregistration or unmapping happens under a lock, is written there. The memory free
 * event ({@code mlx5_mr_mem_event_free_cb}) is {@link #onMemoryFree}, a listener of the memory manager.
 */
public final class MrEngine implements AutoCloseable
{
    private final MemoryManager memory;
    private final Registrar registrar;
    private final DaemonCounters counters;
    private final EventJournal journal;
    private final MrShareCache shareCache;
    private final ExternalMrs externals;
    private final MrCreation creation;
    private int adoptedMrs;

    /**
     * Starts with an empty MR table and global cache, and registers for the memory manager's free events.
     *
     * @param extendToContiguousChunk {@code --mr-ext-memseg}: register the whole virtually contiguous chunk
     *                                around an address, else one segment.
     */
    public MrEngine(
        final ControlFile controlFile,
        final MemoryManager memory,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final boolean extendToContiguousChunk)
    {
        this(controlFile, memory, registrar, counters, errorLog, extendToContiguousChunk, EventJournal.OFF);
    }

    /**
     * @param journal where MRs created, detached and deregistered and memory free events are recorded.
     */
    public MrEngine(
        final ControlFile controlFile,
        final MemoryManager memory,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final boolean extendToContiguousChunk,
        final EventJournal journal)
    {
        this(controlFile, memory, registrar, counters, errorLog, extendToContiguousChunk, journal, false);
    }

    /**
     * A successor's engine: takes over the MR table and global cache its predecessor left in the control file,
     * each live MR's registration through {@link Registrar#adopt} ({@link MrShareCache#adoptRecords}).
     *
     * @return the engine, whose {@link #adoptedMrs()} says how many MRs it kept.
     * @throws MrdException when the provider refuses a record: the engine is closed again (what was adopted
     *                      deregistered) and the caller starts afresh.
     */
    public static MrEngine adopting(
        final ControlFile controlFile,
        final MemoryManager memory,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final boolean extendToContiguousChunk,
        final EventJournal journal)
    {
        final MrEngine engine = new MrEngine(controlFile, memory, registrar, counters, errorLog,
            extendToContiguousChunk, journal, true);
        try
        {
            engine.adoptedMrs = engine.shareCache.adoptRecords();
            return engine;
        }
        catch (final RuntimeException ex)
        {
            engine.close();
            throw ex;
        }
    }

    private MrEngine(
        final ControlFile controlFile,
        final MemoryManager memory,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final boolean extendToContiguousChunk,
        final EventJournal journal,
        final boolean adopting)
    {
        this.journal = journal;
        this.memory = memory;
        this.registrar = registrar;
        this.counters = counters;
        this.shareCache = new MrShareCache(controlFile, registrar, counters, errorLog, journal, adopting);
        this.externals = new ExternalMrs(shareCache, counters);
        this.creation = new MrCreation(shareCache, memory, registrar, errorLog, extendToContiguousChunk);
        memory.addEventListener(this::onMemoryFree);
    }

    /**
     * @return the MRs a successor's engine took over from its predecessor (0 for an engine started afresh).
     */
    public int adoptedMrs()
    {
        return adoptedMrs;
    }

    /**
     * Returns the entry covering {@code address}, registering the memory around it first when no MR covers it
     * (DESIGN §5).
     *
     * @param owner the client that asked (recorded in the MR, for dumps).
     * @return a new entry: the chunk containing {@code address} and its lkey.
     * @throws MrdException ENXIO when the address is not in allocated managed memory, ENOMEM when the MR
     *                      table is full or the provider's pin limit is reached, or the provider's error.
     */
    public MrEntry createMr(final long address, final int owner)
    {
        counters.increment(MrdCounter.CREATE_REQUESTS);
        try
        {
            return creation.create(address, owner);
        }
        catch (final MrdException ex)
        {
            counters.increment(switch (ex.code())
            {
                case ENOMEM -> MrdCounter.CREATE_ERRORS_ENOMEM;
                case ENXIO -> MrdCounter.CREATE_ERRORS_ENXIO;
                case EINVAL -> MrdCounter.CREATE_ERRORS_EINVAL;
                default -> MrdCounter.CREATE_ERRORS_OTHER;
            });
            throw ex;
        }
    }

    /**
     * The reference's {@code mlx5_mr_mem_event_free_cb}, called by the memory manager with its write lock held:
     * the freed segments taken out of every MR ({@link MrShareCache#clearFreed}), timed for the histogram. The
     * MRs it detaches are deregistered by whoever freed, once the memory lock is released ({@link #releaseFreed}).
     */
    private void onMemoryFree(final List<FreedRange> ranges)
    {
        final long startNs = System.nanoTime();
        try
        {
            shareCache.clearFreed(ranges);
        }
        finally
        {
            counters.histograms().memoryEventHandled(startNs);
        }
    }

    /**
     * Registers external memory as one MR with no segment list.
     *
     * @param access the {@link Access} its owner asked for; local write is added.
     * @throws MrdException EINVAL naming unknown access bits.
     * @see ExternalMrs#register
     */
    public MrEntry registerExternal(final long address, final long length, final int owner, final int access)
    {
        return externals.register(address, length, owner, Access.granted(access, "REG_EXTERNAL"));
    }

    /** Deregisters the external MR that starts at {@code address} ({@link ExternalMrs#deregister}). */
    public void deregisterExternal(final long address, final int owner)
    {
        externals.deregister(address, owner);
    }

    /** @return the start addresses of the ACTIVE external MRs {@code owner} has (to reclaim a gone client's). */
    public List<Long> externalsOwnedBy(final int owner)
    {
        return externals.ownedBy(owner);
    }

    /** Allocates memory for local access only ({@link Access#LOCAL}). @see #allocate(long, int, int) */
    public Allocation allocate(final long length, final int owner)
    {
        return allocate(length, owner, Access.LOCAL);
    }

    /**
     * Allocates memory for a client (no MR is created: that happens on the first lookup that misses, with the
     * access chosen here).
     *
     * @see MemoryManager#allocate(long, int, int)
     */
    public Allocation allocate(final long length, final int owner, final int access)
    {
        final Allocation allocation = memory.allocate(length, owner, access);
        counters.increment(MrdCounter.ALLOCS);
        counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
        return allocation;
    }

    /**
     * The check of an ALLOC with registration, made before allocating: the reply carries one MR's keys, so the
     * allocation must fit one MR.
     *
     * @throws MrdException EINVAL when {@code length}, in whole segments, is longer than the provider registers
     *                      in one MR, naming the limit and what to do instead.
     */
    public void checkRegistersInOneMr(final long length)
    {
        final long segmentSize = memory.segmentSize();
        final long max = creation.maxRegisteredLength();
        // A length that is not positive is the allocation's to refuse.
        if (length > 0 && (length - 1) / segmentSize >= max / segmentSize)
        {
            throw new MrdException(ErrorCode.EINVAL, "ALLOC with registration of " + Sizes.format(length) +
                ": provider " + registrar.name() + " registers at most " + Sizes.format(max) + " in one MR " +
                "(max_mr_size " + registrar.maxRegionLength() + " bytes, in whole segments of " +
                Sizes.format(segmentSize) + "), and " +
                "the reply carries one MR's keys: allocate without registration (lookups then register it piece " +
                "by piece) or allocate at most " + Sizes.format(max) + " at a time");
        }
    }

    /**
     * Frees memory the owner allocated (DESIGN §4): the memory manager runs the memory free event
     * ({@link #onMemoryFree}) under its write lock, then the detached MRs are deregistered and the pages
     * released with no lock held.
     *
     * @see MemoryManager#free(long, long, int)
     */
    public FreedRange freeMemory(final long address, final long length, final int owner)
    {
        final FreedRange range = memory.free(address, length, owner);
        releaseFreed(List.of(range));
        counters.increment(MrdCounter.FREES);
        return range;
    }

    /**
     * Frees everything a client owned (it disconnected or died): its allocations and its external MRs.
     *
     * @return the ranges freed.
     */
    public List<FreedRange> reclaim(final int owner)
    {
        final List<FreedRange> ranges = memory.freeAllOwnedBy(owner);
        for (final long external : externalsOwnedBy(owner))
        {
            try
            {
                deregisterExternal(external, MemsegListDescriptor.OWNER_DAEMON);
            }
            catch (final MrdException ex)
            {
                // The client's own DEREG_EXTERNAL, still in flight on a worker when its connection closed, may
                // have taken it since the list was made. Throwing here would leave the ranges freed above
                // unreleased (their segments withheld from allocation for good).
                if (ex.code() != ErrorCode.ENOENT)
                {
                    throw ex;
                }
            }
        }
        releaseFreed(ranges);
        return ranges;
    }

    /** The end of every memory free: its detached MRs deregistered before its pages are unmapped, no lock held. */
    private void releaseFreed(final List<FreedRange> ranges)
    {
        shareCache.collectAndAwait();
        ranges.forEach(memory::release);
        counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
    }

    /**
     * Deregisters every detached MR (the reference's {@code mlx5_mr_garbage_collect}), with no lock held while
     * deregistering.
     *
     * @see MrShareCache#garbageCollect
     */
    public void garbageCollect()
    {
        shareCache.garbageCollect();
    }

    /**
     * Looks an address up the way a secondary would, under the cache lock (for the daemon's own use and tests).
     *
     * @return true and {@code out} filled when registered.
     */
    public boolean lookup(final long address, final MrEntry out)
    {
        return shareCache.lookup(address, out);
    }

    /**
     * Releases every MR (graceful shutdown): all are detached, the cache emptied, then all deregistered, and
     * the registrations in flight waited for.
     *
     * @see MrShareCache#close
     */
    public void close()
    {
        shareCache.close();
    }

    /** @return where this engine records what it changes (the server records its clients there too). */
    public EventJournal journal()
    {
        return journal;
    }
}
