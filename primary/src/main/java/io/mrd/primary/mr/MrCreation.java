package io.mrd.primary.mr;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.Chunk;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.memory.SegmentHold;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registration;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.BitSet;
import java.util.function.Function;

/**
 * The reference's {@code mlx5_mr_create_primary}, one method per step, for an address no MR covers yet:
 * <ol>
 *   <li>{@link MrShareCache#garbageCollect}: deregister detached MRs, outside every lock (then the lookup that
 *   answers most creates, {@link MrShareCache#lookup});</li>
 *   <li>{@link #findChunk}: the chunk around the address, the whole contiguous run or one segment;</li>
 *   <li>{@link #takeRecord}: the MR record, without the cache lock;</li>
 *   <li>{@link #recheckChunk}: under the memory read lock, the chunk again (changed: retry with one
 *   segment);</li>
 *   <li>{@link #lookAgain}: under the cache lock too, the address again (created meanwhile: return it; in
 *   flight: wait for it, {@link #awaitInFlight}, and start again);</li>
 *   <li>{@link #planRange}: the uncovered segments ({@link #uncoveredSegments}), held and marked in flight;</li>
 *   <li>{@link #register}: the registration, with no lock held;</li>
 *   <li>{@link #publish}: the MR into the table and the global cache, under the cache lock
 *   ({@link MrShareCache#publish}).</li>
 * </ol>
 * {@link #create} runs them in that order with the retries; {@link #registerAndPublish} releases the hold and
 * the mark whatever steps 7 and 8 do. The state the steps share, and its locks and their order, are
 * {@link MrShareCache}'s; this class calls into it and into {@link MemoryManager} and is called back by
 * neither (but for the step run under the memory lock, {@link MemoryManager#withChunk}). What it adds to the
 * reference is what makes step 7 lock-free: the segments it registers carry a {@link SegmentHold} (a free of
 * them waits) and its range is in {@link InFlightRanges} (a create for an address in it waits, then starts
 * again and finds the MR).
 */
final class MrCreation
{
    private static final Logger LOG = LoggerFactory.getLogger(MrCreation.class);

    /** What steps 4 to 6 decided, under the memory lock and the cache lock. */
    private sealed interface Decision permits Found, Changed, InFlight, Planned
    {
    }

    /** Step 5 found an MR: a concurrent request created it. */
    private record Found(MrEntry entry) implements Decision
    {
    }

    /** Step 4 found the chunk changed since step 2. */
    private record Changed() implements Decision
    {
    }

    /** Step 5 found the address in a registration in flight. */
    private record InFlight() implements Decision
    {
    }

    /** Step 6 chose the range: held and marked in flight, to be registered with no lock held. */
    private record Planned(MrTable.Coverage coverage, long start, long end, int access, SegmentHold hold)
        implements Decision
    {
    }

    private static final Decision CHANGED = new Changed();
    private static final Decision IN_FLIGHT = new InFlight();

    private final MrShareCache shareCache;
    private final MemoryManager memory;
    private final Registrar registrar;
    private final DistinctErrorLog errorLog;
    private final boolean extendToContiguousChunk;
    private final long segmentSize;

    MrCreation(
        final MrShareCache shareCache,
        final MemoryManager memory,
        final Registrar registrar,
        final DistinctErrorLog errorLog,
        final boolean extendToContiguousChunk)
    {
        this.shareCache = shareCache;
        this.memory = memory;
        this.registrar = registrar;
        this.errorLog = errorLog;
        this.extendToContiguousChunk = extendToContiguousChunk;
        this.segmentSize = memory.segmentSize();
    }

    /**
     * The whole of {@code mlx5_mr_create_primary}: steps 1 to 8 and the retries, with a single segment when
     * step 4 finds that the chunk changed, from step 2 again when step 5 finds the address in flight.
     *
     * @return the entry covering {@code address}: an existing MR's or a new one's.
     */
    MrEntry create(final long address, final int owner)
    {
        // Step 1: release detached MRs, outside every lock.
        shareCache.garbageCollect();
        shareCache.checkOpen(address);

        // Secondaries that missed on one buffer at once all ask for it; the later requests find the MR the first
        // one created. Answer them before taking a record: with the MR table full, step 3 would fail them with
        // ENOMEM although their MR exists (step 5 closes the race for the ones in flight). This also answers
        // addresses in external memory, which no memory-segment list holds.
        final MrEntry existing = new MrEntry();
        if (shareCache.lookup(address, existing))
        {
            return existing;
        }

        final int maxSegments = maxSegmentsPerMr(address);

        // Step 2: the chunk around the address. The walk takes the memory lock itself; the chunk may change
        // before we use it, which step 4 detects.
        boolean contiguous = extendToContiguousChunk;
        Chunk chunk = findChunk(address, contiguous);

        final int slot = takeRecord(address);
        boolean slotPassed = false;
        try
        {
            while (true)
            {
                final Chunk walked = chunk;
                final Decision decision = memory.withChunk(address, contiguous,
                    recheck -> recheckChunk(address, walked, recheck, maxSegments));
                switch (decision)
                {
                    case Found found ->
                    {
                        return found.entry();
                    }
                    case Changed changed ->
                    {
                        // Fall back to the single segment, which cannot change under us.
                        contiguous = false;
                        chunk = findChunk(address, false);
                    }
                    case InFlight busy ->
                    {
                        // Wait with neither the memory lock nor the cache lock held, so that the registration
                        // can publish and frees go on; the chunk may change meanwhile, so walk it again.
                        awaitInFlight(address);
                        chunk = findChunk(address, contiguous);
                    }
                    case Planned planned ->
                    {
                        slotPassed = true;
                        return registerAndPublish(address, owner, slot, planned);
                    }
                }
            }
        }
        finally
        {
            if (!slotPassed)
            {
                shareCache.releaseRecord(slot);
            }
        }
    }

    /**
     * Step 2: the chunk around {@code address} as the walk finds it; it may change once the memory lock is
     * released.
     */
    private Chunk findChunk(final long address, final boolean contiguous)
    {
        final Chunk chunk = memory.withChunk(address, contiguous, Function.identity());
        if (null == chunk)
        {
            throw notManaged(address);
        }
        return chunk;
    }

    /**
     * Step 3: the record is taken without the cache lock, as the reference allocates its MR without its
     * rwlock: allocation may be slow, lookups must not wait for it.
     */
    private int takeRecord(final long address)
    {
        return shareCache.takeRecord(address);
    }

    /**
     * Step 4: re-check under the memory read lock. Segments may have been allocated or freed since the walk.
     * Steps 5 and 6 follow under the cache lock too: both locks are released before step 7, so the hold and the
     * in-flight mark placed in step 6 are what protects the registration from then on.
     */
    private Decision recheckChunk(final long address, final Chunk walked, final Chunk recheck, final int maxSegments)
    {
        if (null == recheck)
        {
            throw notManaged(address);
        }
        // The access too: the address's segment may have been freed and allocated again with another access.
        if (recheck.start() != walked.start() || recheck.end() != walked.end() || recheck.access() != walked.access())
        {
            return CHANGED;
        }
        shareCache.lock();
        try
        {
            // Under the cache lock: a close after this waits for the range step 6 marks.
            shareCache.checkOpen(address);
            final Decision found = lookAgain(address);
            return null != found ? found : planRange(address, walked, maxSegments);
        }
        finally
        {
            shareCache.unlock();
        }
    }

    /**
     * Step 5: look again under the cache lock: a concurrent request may have created the MR meanwhile, or be
     * registering it (one MR for the address, so wait for that one). Caller holds the cache lock.
     *
     * @return {@link Found}, {@link #IN_FLIGHT}, or null when the address is still missing.
     */
    private Decision lookAgain(final long address)
    {
        final MrEntry entry = new MrEntry();
        if (shareCache.lookAgain(address, entry))
        {
            return new Found(entry);
        }
        if (shareCache.isInFlight(address))
        {
            return IN_FLIGHT;
        }
        return null;
    }

    /**
     * Step 6: the range to register, its segments held and the range marked in flight. Caller holds the memory
     * read lock and the cache lock.
     */
    private Planned planRange(final long address, final Chunk chunk, final int maxSegments)
    {
        final MrTable.Coverage coverage = uncoveredSegments(chunk, address, maxSegments);
        final long start = chunk.start() + (coverage.msBaseIdx() - chunk.firstSegment()) * segmentSize;
        final long end = start + coverage.msBmpN() * segmentSize;
        // The memory read lock is held, so the segments are still the chunk's and no free can come between.
        final SegmentHold hold = memory.hold(chunk, coverage.msBaseIdx(), coverage.msBmpN());
        shareCache.markInFlight(start, end);
        return new Planned(coverage, start, end, chunk.access(), hold);
    }

    /**
     * Step 6's choice: exclude the chunk's segments already registered by other MRs and stop short of ranges in
     * flight (two registrations never pin one segment at once), keep at most {@code maxSegments} in a window
     * holding the address, and trim to the first and last uncovered one. The address's own segment is uncovered
     * and not in flight (step 5), so one is.
     */
    private MrTable.Coverage uncoveredSegments(final Chunk chunk, final long address, final int maxSegments)
    {
        final int at = (int)((address - chunk.start()) / segmentSize);
        final int from = (int)((shareCache.inFlightStartAfter(address, chunk.start()) - chunk.start()) / segmentSize);
        final int to = (int)((shareCache.inFlightEndBefore(address, chunk.end()) - chunk.start()) / segmentSize);
        int first = firstUncovered(chunk, from, to);
        int last = lastUncovered(chunk, from, to);
        if (last - first + 1 > maxSegments)
        {
            // The window starts at the address when it can, so that an allocation no longer than the limit,
            // registered from its first byte, fits one MR; lookups further on register the pieces after it.
            final int windowStart = Math.max(first, Math.min(at, last + 1 - maxSegments));
            first = firstUncovered(chunk, windowStart, windowStart + maxSegments);
            last = lastUncovered(chunk, windowStart, windowStart + maxSegments);
        }
        final BitSet uncovered = new BitSet(last - first + 1);
        for (int n = first; n <= last; n++)
        {
            uncovered.set(n - first, !shareCache.isRegistered(chunk.start() + n * segmentSize));
        }
        return new MrTable.Coverage(chunk.listIndex(), chunk.firstSegment() + first, last - first + 1, uncovered);
    }

    private int firstUncovered(final Chunk chunk, final int from, final int to)
    {
        int n = from;
        while (n < to && shareCache.isRegistered(chunk.start() + n * segmentSize))
        {
            n++;
        }
        return n;
    }

    private int lastUncovered(final Chunk chunk, final int from, final int to)
    {
        int n = to - 1;
        while (n > from && shareCache.isRegistered(chunk.start() + n * segmentSize))
        {
            n--;
        }
        return n;
    }

    /**
     * Steps 7 and 8, with no lock held between them and the hold and in-flight mark released on every way out:
     * after publishing (a free of the segments then finds the MR to clear) or after undoing.
     */
    private MrEntry registerAndPublish(final long address, final int owner, final int slot, final Planned planned)
    {
        try
        {
            final Registration registration = register(address, slot, planned);
            return publish(address, owner, slot, planned, registration);
        }
        finally
        {
            planned.hold().release();
            shareCache.endInFlight(planned.start(), planned.end());
        }
    }

    /**
     * Step 7: register, with the chunk's access: all its segments have that one ({@code MemsegList.chunkAround}),
     * so the MR grants no access their owners did not ask for. No lock is held: lookups, creates of other
     * ranges, allocations and frees of other memory go on; the hold keeps the segments mapped and the in-flight
     * mark keeps other creates of this range waiting.
     */
    private Registration register(final long address, final int slot, final Planned planned)
    {
        try
        {
            return shareCache.register(planned.start(), planned.end() - planned.start(), planned.access());
        }
        catch (final MrdException ex)
        {
            shareCache.releaseRecord(slot);
            LOG.warn("registration of [{}, {}) for address {} failed: {}", Sizes.hex(planned.start()),
                Sizes.hex(planned.end()), Sizes.hex(address), ex.oneLine());
            throw ex;
        }
        catch (final RuntimeException ex)
        {
            shareCache.releaseRecord(slot);
            errorLog.record(ex);
            throw new MrdException(ErrorCode.EIO, "provider " + registrar.name() + " failed registering [" +
                Sizes.hex(planned.start()) + ", " + Sizes.hex(planned.end()) + "): " + ex, ex);
        }
    }

    /**
     * Step 8: the MR into the table and the global cache ({@link MrShareCache#publish}), unless the provider
     * refuses it ({@link Registrar#beforePublish}, injected faults only) or the daemon closed while it was
     * registered: then it is deregistered here instead, before its in-flight mark goes (which close waits for).
     */
    private MrEntry publish(
        final long address, final int owner, final int slot, final Planned planned, final Registration registration)
    {
        final String what = "[" + Sizes.hex(planned.start()) + ", " + Sizes.hex(planned.end()) + ") for " +
            Sizes.hex(address);
        try
        {
            registrar.beforePublish(registration);
        }
        catch (final MrdException ex)
        {
            throw shareCache.undoRefused(registration, slot, what, ex);
        }
        final MrEntry entry = shareCache.publish(
            address, slot, registration, planned.coverage(), 0, owner, planned.access());
        if (null == entry)
        {
            throw shareCache.undoAfterClose(registration, slot, what);
        }
        LOG.debug("MR {} created for {}: [{}, {}) lkey {} rkey {} access {} msBaseIdx {} msN {} msBmpN {}",
            slot, Sizes.hex(address), Sizes.hex(planned.start()), Sizes.hex(planned.end()),
            Sizes.hex(registration.lkey() & 0xFFFF_FFFFL), Sizes.hex(registration.rkey() & 0xFFFF_FFFFL),
            Access.describe(planned.access()), planned.coverage().msBaseIdx(),
            planned.coverage().live().cardinality(), planned.coverage().msBmpN());
        return entry;
    }

    /** Step 5's wait: with no lock held but the cache lock's condition, until no registration holds the address. */
    private void awaitInFlight(final long address)
    {
        shareCache.awaitNotInFlight(address);
    }

    /**
     * @return segments one MR may cover: the provider's {@link Registrar#maxRegionLength} rounded down.
     * @throws MrdException EINVAL when that is less than one segment, naming both.
     */
    private int maxSegmentsPerMr(final long address)
    {
        final long maxLength = registrar.maxRegionLength();
        final long segments = maxLength / segmentSize;
        if (segments < 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "no MR can be created for " + Sizes.hex(address) +
                ": provider " + registrar.name() + " accepts at most max_mr_size " + maxLength + " bytes (" +
                Sizes.format(maxLength) + ") in one registration, less than one memory segment of " +
                Sizes.format(segmentSize) + ": use a device whose max_mr_size is at least the segment size");
        }
        return (int)Math.min(segments, Integer.MAX_VALUE);
    }

    /**
     * @return bytes one MR may cover at most: {@link Registrar#maxRegionLength} rounded down to whole segments
     * (0 when less than one).
     */
    long maxRegisteredLength()
    {
        return registrar.maxRegionLength() / segmentSize * segmentSize;
    }

    private MrdException notManaged(final long address)
    {
        return new MrdException(ErrorCode.ENXIO, "address " + Sizes.hex(address) +
            " is not in memory allocated from mrd (lists span [" + Sizes.hex(memory.list(0).baseVa()) + ", " +
            Sizes.hex(memory.endVirtaddr()) + ")): allocate buffers with MrdClient.allocate or register them with " +
            "MrdClient.registerExternal");
    }
}
