package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.DaemonDeadException;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.tools.Format;

import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.StampedLock;

import static io.mrd.cli.WorkerCommand.PARTS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One lookup thread of {@code mrd worker} and its own {@link MrCache}: the warm-up, the timed lookups in batches
 * of which the first is verified against the global cache, and, for thread 0 under {@code --free-every}, the
 * frees and re-allocations of parts that make every thread's cache flush.
 */
final class WorkerRunner implements Runnable
{
    /** How often a verification waiting out a daemon's death looks whether the client resumed. */
    private static final long GAP_POLL_NS = TimeUnit.MILLISECONDS.toNanos(10);

    final int index;
    final long quota;
    final MrdClient client;
    final MrCache cache;
    final GlobalCacheReader verifier;
    final Part[] parts;
    final long partLength;
    final long bufferLength;
    final SplittableRandom random;
    final Plan plan;
    final Shared shared;
    final MrEntry entry = new MrEntry();
    final AtomicLong progress = new AtomicLong();
    final AtomicLong errorCount = new AtomicLong();
    final boolean guarded;
    final boolean recycles;
    final int buffers;
    long warmedUp;
    long done;
    /** Calls of the cache, counted or not (warm-up, dropped): what MrCache.mruHits derives MRU hits from. */
    long cacheCalls;
    long timedStartNs;
    long endNs;
    long busyNs;
    long mismatches;
    long verified;
    long frees;

    WorkerRunner(
        final int index,
        final long quota,
        final MrdClient client,
        final Plan plan,
        final Part[] parts,
        final GlobalCacheReader verifier,
        final SplittableRandom random,
        final Shared shared)
    {
        this.index = index;
        this.quota = quota;
        this.client = client;
        this.cache = client.newCache();
        this.verifier = verifier;
        this.parts = parts;
        this.partLength = plan.partLength();
        this.bufferLength = plan.bufferLength();
        this.random = random;
        this.plan = plan;
        this.shared = shared;
        this.guarded = plan.freeEvery() > 0;
        this.recycles = guarded && index == 0;
        this.buffers = plan.buffers();
    }

    private void waitForStartTime()
    {
        long waitMs;
        while (!shared.abort && (waitMs = plan.startAt() - System.currentTimeMillis()) > 0)
        {
            try
            {
                Thread.sleep(Math.min(waitMs, 50));
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * Runs batches of {@code --verify-every} lookups: the loop that matters is the tight one inside a batch
     * (no progress, abort or recycle branches for the JIT to trip over), and each batch's first lookup is
     * the one verified.
     */
    public void run()
    {
        final int batch = plan.verifyEvery();
        while (warmedUp < plan.warmup() && !shared.abort)
        {
            final int n = (int)Math.min(batch, plan.warmup() - warmedUp);
            warmedUp += guarded ? guardedLookups(n) : lookups(n);
        }
        waitForStartTime();
        long nextRecycle = recycles ? plan.freeEvery() : Long.MAX_VALUE;
        long recycleNs = 0;
        final long start = System.nanoTime();
        timedStartNs = start;
        while (done < quota && !shared.abort)
        {
            if (done >= nextRecycle)
            {
                nextRecycle += plan.freeEvery();
                final long before = System.nanoTime();
                recycle(parts[random.nextInt(PARTS)]);
                recycleNs += System.nanoTime() - before;
            }
            final long n = Math.min(Math.min(batch, quota - done), nextRecycle - done);
            if (lookupAndVerify())
            {
                done++;
                done += guarded ? guardedLookups((int)n - 1) : lookups((int)n - 1);
            }
            progress.setRelease(done);
        }
        endNs = System.nanoTime();
        busyNs = endNs - start - recycleNs;
    }

    /**
     * The datapath: random buffers, their lkeys from the cache.
     *
     * @return lookups done ({@code n} unless the run aborts).
     */
    private int lookups(final int n)
    {
        final MrCache cache = this.cache;
        final Part[] parts = this.parts;
        final SplittableRandom random = this.random;
        final int buffers = this.buffers;
        final long bufferLength = this.bufferLength;
        int count = 0;
        while (count < n)
        {
            final int buffer = random.nextInt(buffers);
            final long address = parts[buffer & (PARTS - 1)].address + (long)(buffer >>> 3) * bufferLength;
            count++;
            try
            {
                cache.lkey(address, bufferLength);
            }
            catch (final MrdException ex)
            {
                fail(ex, address);
                if (shared.abort)
                {
                    break;
                }
            }
        }
        cacheCalls += count;
        return count;
    }

    /**
     * The datapath while thread 0 recycles parts: as {@link #lookups}, inside an optimistic read of the
     * part; a lookup that raced with a recycle is dropped, not counted.
     */
    private int guardedLookups(final int n)
    {
        int count = 0;
        int calls = 0;
        while (count < n && !shared.abort)
        {
            final int buffer = random.nextInt(buffers);
            final Part part = parts[buffer & (PARTS - 1)];
            final long stamp = part.lock.tryOptimisticRead();
            if (0 == stamp)
            {
                Thread.onSpinWait();
                continue;
            }
            final long address = part.address + (long)(buffer >>> 3) * bufferLength;
            calls++;
            try
            {
                cache.lkey(address, bufferLength);
                if (part.lock.validate(stamp))
                {
                    count++;
                }
            }
            catch (final MrdException ex)
            {
                if (part.lock.validate(stamp))
                {
                    count++;
                    fail(ex, address);
                }
            }
        }
        cacheCalls += calls;
        return count;
    }

    /**
     * One lookup checked against the global cache read straight from the control file.
     *
     * @return true when it counts (false: it raced with a recycle of its part and was dropped).
     */
    private boolean lookupAndVerify()
    {
        final int buffer = random.nextInt(buffers);
        final Part part = parts[buffer & (PARTS - 1)];
        final long stamp = guarded ? part.lock.tryOptimisticRead() : 0;
        if (guarded && 0 == stamp)
        {
            Thread.onSpinWait();
            return false;
        }
        final long address = part.address + (long)(buffer >>> 3) * bufferLength;
        final int lkey;
        cacheCalls++;
        try
        {
            lkey = cache.lkey(address, bufferLength);
        }
        catch (final MrdException ex)
        {
            if (guarded && !part.lock.validate(stamp))
            {
                return false;
            }
            fail(ex, address);
            return true;
        }
        if (guarded && !part.lock.validate(stamp))
        {
            return false;
        }
        verify(part, stamp, address, lkey);
        return true;
    }

    private void verify(final Part part, final long stamp, final long address, final int lkey)
    {
        final boolean found;
        try
        {
            found = lookUpInGlobalCache(address);
        }
        catch (final MrdException ex)
        {
            fail(ex, address);
            return;
        }
        if (guarded && !part.lock.validate(stamp))
        {
            return;
        }
        verified++;
        if (!found || entry.lkey != lkey || !entry.containsRange(address, bufferLength))
        {
            mismatches++;
            errorCount.incrementAndGet();
            shared.report(index, "lkey " + Format.key(lkey) + " of buffer " + Sizes.hex(address) +
                " disagrees with the global cache: " + (found ? entry.toString() : "no entry"));
        }
    }

    /**
     * The verifier's read of the global cache. A daemon that died inside a write section leaves it unreadable
     * (EBUSY once its heartbeat is stale) until a successor ends the section; the client's own caches then wait
     * for the successor and look again (DaemonMrSource), and so does this check: until the client resumes with a
     * successor (its epoch changes), is lost (its liveness throws), or the client's wait for a successor is over.
     */
    private boolean lookUpInGlobalCache(final long address)
    {
        final long epoch = client.epoch();
        try
        {
            return verifier.lookup(address, entry);
        }
        catch (final MrdException ex)
        {
            if (ex.code() != ErrorCode.EBUSY || client.context().adoptionWaitMs() <= 0)
            {
                throw ex;
            }
            final long waitNs = TimeUnit.MILLISECONDS.toNanos(client.context().adoptionWaitMs());
            final long deadline = System.nanoTime() + waitNs;
            while (client.epoch() == epoch)
            {
                client.liveness().requireAlive();
                if (System.nanoTime() - deadline > 0)
                {
                    throw ex;
                }
                LockSupport.parkNanos(GAP_POLL_NS);
            }
            return verifier.lookup(address, entry);
        }
    }

    /**
     * Frees a part and allocates it again; its buffers move to wherever the daemon puts it.
     */
    private void recycle(final Part part)
    {
        final long stamp = part.lock.writeLock();
        try
        {
            client.free(part.segment);
            part.segment = null;
            part.segment = client.allocate(partLength);
            part.address = part.segment.address();
            part.touch();
            frees++;
        }
        catch (final MrdException ex)
        {
            // Without its part the run cannot go on meaningfully.
            errorCount.incrementAndGet();
            shared.report(index, "freeing and re-allocating the part at " + Sizes.hex(part.address) + " failed: " +
                ex.oneLine() + "; stopping");
            shared.abort = true;
        }
        finally
        {
            part.lock.unlockWrite(stamp);
        }
    }

    private void fail(final MrdException ex, final long address)
    {
        errorCount.incrementAndGet();
        shared.report(index, "lkey(" + Sizes.hex(address) + ", " + bufferLength + "): " + ex.oneLine());
        if (ex instanceof DaemonDeadException)
        {
            shared.abort = true;
        }
    }

    /**
     * What the threads of one run do: part and buffer sizes, from the command's options, and the options that
     * shape their loops.
     */
    record Plan(
        long partLength,
        long bufferLength,
        int buffers,
        long warmup,
        int verifyEvery,
        long freeEvery,
        long startAt)
    {
    }

    /**
     * What the threads of one run share: the flag that stops them all, and the failures printed so far (the
     * first {@link #ERRORS_PRINTED}; the rest are only counted).
     */
    static final class Shared
    {
        /** Failures printed in full; the rest are only counted. */
        static final int ERRORS_PRINTED = 5;

        private final PrintWriter err;
        private final AtomicInteger printed = new AtomicInteger();
        volatile boolean abort;

        Shared(final PrintWriter err)
        {
            this.err = err;
        }

        /**
         * Prints a failure, unless {@link #ERRORS_PRINTED} were printed already.
         */
        void report(final int thread, final String what)
        {
            if (printed.getAndIncrement() < ERRORS_PRINTED)
            {
                synchronized (err)
                {
                    err.println("mrd worker: thread " + thread + ": " + what);
                    err.flush();
                }
            }
        }
    }

    /**
     * One eighth of the memory. Lookup threads read {@link #address} in an optimistic read of {@link #lock} and
     * drop the result when thread 0 freed and re-allocated the part meanwhile: a lookup of memory being freed
     * may fail (ENXIO) or be stale, and that is the race, not an error.
     */
    static final class Part
    {
        final StampedLock lock = new StampedLock();
        MemorySegment segment;
        long address;

        Part(final MemorySegment segment)
        {
            this.segment = segment;
            this.address = segment.address();
        }

        /** Writes the first and last word, so a mapping that is not there faults here and now. */
        void touch()
        {
            segment.set(JAVA_LONG, 0, address);
            segment.set(JAVA_LONG, segment.byteSize() - Long.BYTES, address);
        }
    }
}
