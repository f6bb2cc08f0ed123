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
import java.util.concurrent.locks.Lock;
import java.util.function.Function;

/**
 * Steps 2 to 8 of the reference's {@code mlx5_mr_create_primary}, one method per step, for an address in managed
 * memory that no MR covers: find the chunk, take a record, re-check the chunk under the memory lock and look
 * again under the cache lock, pick the uncovered segments, register them with no lock held, publish. The
 * locking is the engine's ({@link MrEngine}); what this adds to the reference is what makes step 7 lock-free:
 * the segments it registers carry a {@link SegmentHold} (a free of them waits) and its range is in
 * {@link InFlightRanges} (a create for an address in it waits, then starts again and finds the MR).
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

    private final MrEngine engine;
    private final MemoryManager memory;
    private final Registrar registrar;
    private final DistinctErrorLog errorLog;
    private final Lock cacheLock;
    private final InFlightRanges inFlight;
    private final MrTable table;
    private final GlobalCacheWriter cache;
    private final boolean extendToContiguousChunk;
    private final long segmentSize;
    /** Guarded by the cache lock. */
    private final MrEntry scratch = new MrEntry();

    MrCreation(
        final MrEngine engine,
        final MemoryManager memory,
        final Registrar registrar,
        final DistinctErrorLog errorLog,
        final Lock cacheLock,
        final InFlightRanges inFlight,
        final MrTable table,
        final GlobalCacheWriter cache,
        final boolean extendToContiguousChunk)
    {
        this.engine = engine;
        this.memory = memory;
        this.registrar = registrar;
        this.errorLog = errorLog;
        this.cacheLock = cacheLock;
        this.inFlight = inFlight;
        this.table = table;
        this.cache = cache;
        this.extendToContiguousChunk = extendToContiguousChunk;
        this.segmentSize = memory.segmentSize();
    }

    /**
     * Steps 2 and 3, and the retries: with a single segment when step 4 finds that the chunk changed, from step 2
     * again when step 5 finds the address in flight.
     */
    MrEntry create(final long address, final int owner)
    {
        final int maxSegments = maxSegmentsPerMr(address);

        // Step 2: the chunk around the address. The walk takes the memory lock itself; the chunk may change
        // before we use it, which step 4 detects.
        boolean contiguous = extendToContiguousChunk;
        Chunk chunk = findChunk(address, contiguous);

        // Step 3: the record is taken without the cache lock, as the reference allocates its MR without its
        // rwlock: allocation may be slow, lookups must not wait for it.
        final int slot = table.take(address);
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
                table.release(slot);
            }
        }
    }

    /**
     * Step 4: re-check under the memory read lock. Segments may have been allocated or freed since the walk.
     */
    private Decision recheckChunk(final long address, final Chunk walked, final Chunk recheck, final int maxSegments)
    {
        if (null == recheck)
        {
            throw engine.notManaged(address);
        }
        // The access too: the address's segment may have been freed and allocated again with another access.
        if (recheck.start() != walked.start() || recheck.end() != walked.end() || recheck.access() != walked.access())
        {
            return CHANGED;
        }
        cacheLock.lock();
        try
        {
            return lookAgainAndPlan(address, walked, maxSegments);
        }
        finally
        {
            cacheLock.unlock();
        }
    }

    /**
     * Steps 5 and 6, under the memory read lock and the cache lock: both are released before step 7, so the hold
     * and the in-flight mark placed here are what protects the registration from then on.
     */
    private Decision lookAgainAndPlan(final long address, final Chunk chunk, final int maxSegments)
    {
        // Under the cache lock: a close after this waits for the range marked below.
        engine.checkOpen(address);

        // Step 5: look again under the cache lock: a concurrent request may have created it meanwhile.
        final MrEntry entry = new MrEntry();
        if (cache.lookup(address, entry))
        {
            // As the reference: put the entry into the cache again, in case it was found by the table scan.
            if (!cache.overflowed())
            {
                cache.write(() -> cache.insert(entry));
            }
            return new Found(entry);
        }
        // Another request is registering this address: one MR for it, so wait for that one.
        if (inFlight.contains(address))
        {
            return IN_FLIGHT;
        }

        final MrTable.Coverage coverage = uncoveredSegments(chunk, address, maxSegments);
        final long start = chunk.start() + (coverage.msBaseIdx() - chunk.firstSegment()) * segmentSize;
        final long end = start + coverage.msBmpN() * segmentSize;
        // The memory read lock is held, so the segments are still the chunk's and no free can come between.
        final SegmentHold hold = memory.hold(chunk, coverage.msBaseIdx(), coverage.msBmpN());
        inFlight.add(start, end);
        return new Planned(coverage, start, end, chunk.access(), hold);
    }

    /**
     * Step 6: exclude the chunk's segments already registered by other MRs and stop short of ranges in flight
     * (two registrations never pin one segment at once), keep at most {@code maxSegments} in a window holding
     * the address, and trim to the first and last uncovered one. The address's own segment is uncovered and
     * not in flight (step 5), so one is.
     */
    private MrTable.Coverage uncoveredSegments(final Chunk chunk, final long address, final int maxSegments)
    {
        final int at = (int)((address - chunk.start()) / segmentSize);
        final int from = (int)((inFlight.startAfter(address, chunk.start()) - chunk.start()) / segmentSize);
        final int to = (int)((inFlight.endBefore(address, chunk.end()) - chunk.start()) / segmentSize);
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
            uncovered.set(n - first, !cache.lookup(chunk.start() + n * segmentSize, scratch));
        }
        return new MrTable.Coverage(chunk.listIndex(), chunk.firstSegment() + first, last - first + 1, uncovered);
    }

    private int firstUncovered(final Chunk chunk, final int from, final int to)
    {
        int n = from;
        while (n < to && cache.lookup(chunk.start() + n * segmentSize, scratch))
        {
            n++;
        }
        return n;
    }

    private int lastUncovered(final Chunk chunk, final int from, final int to)
    {
        int n = to - 1;
        while (n > from && cache.lookup(chunk.start() + n * segmentSize, scratch))
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
            cacheLock.lock();
            try
            {
                inFlight.remove(planned.start(), planned.end());
            }
            finally
            {
                cacheLock.unlock();
            }
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
            return registrar.register(planned.start(), planned.end() - planned.start(),
                MrEngine.registrationAccess(planned.access()));
        }
        catch (final MrdException ex)
        {
            table.release(slot);
            LOG.warn("registration of [{}, {}) for address {} failed: {}", Sizes.hex(planned.start()),
                Sizes.hex(planned.end()), Sizes.hex(address), ex.oneLine());
            throw ex;
        }
        catch (final RuntimeException ex)
        {
            table.release(slot);
            errorLog.record(ex);
            throw new MrdException(ErrorCode.EIO, "provider " + registrar.name() + " failed registering [" +
                Sizes.hex(planned.start()) + ", " + Sizes.hex(planned.end()) + "): " + ex, ex);
        }
    }

    /**
     * Step 8: the MR into the table and the global cache under the cache lock, unless the daemon closed while it
     * was registered: close has detached every MR the table holds and this one is not among them, so it is
     * deregistered here instead, before its in-flight mark goes (which close waits for).
     */
    private MrEntry publish(
        final long address, final int owner, final int slot, final Planned planned, final Registration registration)
    {
        cacheLock.lock();
        try
        {
            if (!engine.isClosed())
            {
                engine.publish(slot, registration, planned.coverage(), 0, owner, planned.access());
                LOG.debug("MR {} created for {}: [{}, {}) lkey {} rkey {} access {} msBaseIdx {} msN {} msBmpN {}",
                    slot, Sizes.hex(address), Sizes.hex(planned.start()), Sizes.hex(planned.end()),
                    Sizes.hex(registration.lkey() & 0xFFFF_FFFFL), Sizes.hex(registration.rkey() & 0xFFFF_FFFFL),
                    Access.describe(planned.access()), planned.coverage().msBaseIdx(),
                    planned.coverage().live().cardinality(), planned.coverage().msBmpN());
                final MrEntry entry = new MrEntry();
                if (!cache.lookup(address, entry))
                {
                    throw new IllegalStateException("MR " + slot + " created for " + Sizes.hex(address) +
                        " but not found");
                }
                return entry;
            }
        }
        finally
        {
            cacheLock.unlock();
        }
        throw engine.undoAfterClose(registration, slot,
            "[" + Sizes.hex(planned.start()) + ", " + Sizes.hex(planned.end()) + ") for " + Sizes.hex(address));
    }

    /** Waits with no lock but the cache lock's condition until no registration in flight holds the address. */
    private void awaitInFlight(final long address)
    {
        cacheLock.lock();
        try
        {
            inFlight.awaitNotContaining(address);
        }
        finally
        {
            cacheLock.unlock();
        }
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

    /**
     * The chunk around {@code address} as the walk finds it; it may change once the memory lock is released.
     */
    private Chunk findChunk(final long address, final boolean contiguous)
    {
        final Chunk chunk = memory.withChunk(address, contiguous, Function.identity());
        if (null == chunk)
        {
            throw engine.notManaged(address);
        }
        return chunk;
    }
}
