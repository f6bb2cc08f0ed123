package io.mrd.cli.reliability;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.ExternalMemory;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One secondary process of the soak: {@code SoakWorker DIR NAME THREADS SECONDS SEED}. Each thread, with its
 * own {@link MrCache}, does at random for SECONDS: ALLOC (1 to 4 segments), FREE, REG_EXTERNAL of a memfd
 * (4 KiB to 4 MiB) and DEREG_EXTERNAL, and lookups of
 * <ul>
 *   <li>its own buffers: every lkey must be exactly what the control file's MR table and global cache say
 *       ({@link LkeyVerifier}); nothing can change them, since only this thread frees them;</li>
 *   <li>other threads' buffers (a slot table shared inside the process): the owner may free them meanwhile.
 *       A disagreement, or a failed lookup, is tolerated only when that race is proven: the owner had marked
 *       the buffer freed, or the daemon's devGen changed between just before the lookup and the check (every
 *       free and deregistration bumps it); otherwise it counts as a wrong lkey;</li>
 *   <li>a whole multi-segment allocation: its lkey is verified the same way, or, when the client refuses it
 *       as straddling two MRs, the MR table must confirm that no single MR chunk holds it.</li>
 * </ul>
 * At the end every thread frees what it holds, and the process prints one line {@code SOAK-RESULT ...} and
 * exits 0 when nothing was wrong and no call failed unexpectedly (ENOMEM from ALLOC is counted, not failed).
 */
public final class SoakWorker
{
    static final long SEGMENT = 2 * Sizes.MIB;
    static final int SLOTS_PER_THREAD = 6;
    static final int MAX_EXTERNALS_PER_THREAD = 2;
    private static final int ERRORS_PRINTED = 10;

    /** A buffer in a slot: memory from ALLOC, or an external registration. */
    static final class Buffer
    {
        final long address;
        final long length;
        final MemorySegment allocated;
        final ExternalMemory external;
        volatile boolean freed;

        Buffer(final MemorySegment allocated, final ExternalMemory external)
        {
            this.allocated = allocated;
            this.external = external;
            this.address = null != allocated ? allocated.address() : external.address();
            this.length = null != allocated ? allocated.byteSize() : external.length();
        }
    }

    private final MrdClient client;
    private final String name;
    private final int threads;
    private final long deadlineNs;
    private final AtomicReferenceArray<Buffer> slots;
    private final AtomicInteger printed = new AtomicInteger();

    private SoakWorker(final MrdClient client, final String name, final int threads, final long seconds)
    {
        this.client = client;
        this.name = name;
        this.threads = threads;
        this.deadlineNs = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        this.slots = new AtomicReferenceArray<>(threads * SLOTS_PER_THREAD);
    }

    public static void main(final String[] args) throws InterruptedException
    {
        final Path dir = Path.of(args[0]);
        final String name = args[1];
        final int threads = Integer.parseInt(args[2]);
        final long seconds = Long.parseLong(args[3]);
        final long seed = Long.parseLong(args[4]);
        final Runner[] runners;
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).name(name)))
        {
            final SoakWorker worker = new SoakWorker(client, name, threads, seconds);
            runners = new Runner[threads];
            final Thread[] running = new Thread[threads];
            for (int t = 0; t < threads; t++)
            {
                runners[t] = worker.new Runner(t, new SplittableRandom(seed * 31 + t));
                running[t] = new Thread(runners[t], name + "-" + t);
                running[t].start();
            }
            ReliabilitySecondary.say("soak " + name + " started: pid " + ProcessHandle.current().pid() + ", " +
                threads + " threads, " + seconds + " s, seed " + seed + ", client " + client.clientId());
            long lastReport = System.nanoTime();
            for (final Thread thread : running)
            {
                while (thread.isAlive())
                {
                    thread.join(1000);
                    if (System.nanoTime() - lastReport > TimeUnit.SECONDS.toNanos(10))
                    {
                        lastReport = System.nanoTime();
                        ReliabilitySecondary.say("soak " + name + " progress " + Totals.of(runners));
                    }
                }
            }
        }
        final Totals totals = Totals.of(runners);
        ReliabilitySecondary.say("SOAK-RESULT name=" + name + " " + totals);
        System.exit(totals.wrong == 0 && totals.unexpected == 0 ? 0 : 1);
    }

    void report(final String what)
    {
        if (printed.getAndIncrement() < ERRORS_PRINTED)
        {
            ReliabilitySecondary.say("soak " + name + ": " + what);
        }
    }

    /**
     * Sums of every thread's counts (read after the threads stopped, or as a rough progress figure).
     */
    record Totals(long lkeys, long verified, long shared, long raced, long wrong, long unexpected, long allocs,
        long frees, long externals, long straddles, long enomem)
    {
        static Totals of(final Runner[] runners)
        {
            long lkeys = 0, verified = 0, shared = 0, raced = 0, wrong = 0, unexpected = 0, allocs = 0, frees = 0,
                externals = 0, straddles = 0, enomem = 0;
            for (final Runner r : runners)
            {
                lkeys += r.lkeys;
                verified += r.verified;
                shared += r.shared;
                raced += r.raced;
                wrong += r.wrong;
                unexpected += r.unexpected;
                allocs += r.allocs;
                frees += r.frees;
                externals += r.externals;
                straddles += r.straddles;
                enomem += r.enomem;
            }
            return new Totals(lkeys, verified, shared, raced, wrong, unexpected, allocs, frees, externals, straddles,
                enomem);
        }

        public String toString()
        {
            return "lkeys=" + lkeys + " verified=" + verified + " shared=" + shared + " raced=" + raced + " wrong=" +
                wrong + " unexpected=" + unexpected + " allocs=" + allocs + " frees=" + frees + " externals=" +
                externals + " straddles=" + straddles + " enomem=" + enomem;
        }
    }

    /**
     * One thread: its slots are {@code [index * SLOTS_PER_THREAD, (index + 1) * SLOTS_PER_THREAD)}; it alone
     * fills and frees them. Counters are plain fields, read by the main thread after it joined.
     */
    final class Runner implements Runnable
    {
        final int index;
        final SplittableRandom random;
        final MrCache cache;
        final LkeyVerifier verifier;
        final int firstSlot;
        long lkeys;
        long verified;
        long shared;
        long raced;
        long wrong;
        long unexpected;
        long allocs;
        long frees;
        long externals;
        long straddles;
        long enomem;
        int externalsHeld;

        Runner(final int index, final SplittableRandom random)
        {
            this.index = index;
            this.random = random;
            this.cache = client.newCache();
            this.verifier = new LkeyVerifier(client.controlFile());
            this.firstSlot = index * SLOTS_PER_THREAD;
        }

        public void run()
        {
            try
            {
                while (System.nanoTime() < deadlineNs)
                {
                    final int dice = random.nextInt(100);
                    if (dice < 40)
                    {
                        lookupOwn();
                    }
                    else if (dice < 60)
                    {
                        lookupShared();
                    }
                    else if (dice < 66)
                    {
                        lookupWhole();
                    }
                    else if (dice < 80)
                    {
                        allocate();
                    }
                    else if (dice < 93)
                    {
                        release(firstSlot + random.nextInt(SLOTS_PER_THREAD));
                    }
                    else
                    {
                        registerExternal();
                    }
                }
            }
            catch (final RuntimeException | Error ex)
            {
                unexpected++;
                report("thread " + index + " died: " + ex);
            }
            finally
            {
                for (int s = firstSlot; s < firstSlot + SLOTS_PER_THREAD; s++)
                {
                    release(s);
                }
            }
        }

        private Buffer own()
        {
            final int start = random.nextInt(SLOTS_PER_THREAD);
            for (int i = 0; i < SLOTS_PER_THREAD; i++)
            {
                final Buffer buffer = slots.get(firstSlot + (start + i) % SLOTS_PER_THREAD);
                if (null != buffer)
                {
                    return buffer;
                }
            }
            return null;
        }

        private int emptyOwnSlot()
        {
            final int start = random.nextInt(SLOTS_PER_THREAD);
            for (int i = 0; i < SLOTS_PER_THREAD; i++)
            {
                final int slot = firstSlot + (start + i) % SLOTS_PER_THREAD;
                if (null == slots.get(slot))
                {
                    return slot;
                }
            }
            return -1;
        }

        /**
         * A buffer inside one 2 MiB segment (or inside an external range), so that one MR chunk always holds it.
         *
         * @return {address, length}.
         */
        private long[] pick(final Buffer buffer)
        {
            final long unit = null != buffer.external ? buffer.length : SEGMENT;
            final long base = buffer.address + (null != buffer.external ? 0 : random.nextLong(buffer.length / SEGMENT) * SEGMENT);
            final long offset = random.nextLong(unit);
            final long length = 1 + random.nextLong(Math.min(64 * Sizes.KIB, unit - offset));
            return new long[]{base + offset, length};
        }

        private void lookupOwn()
        {
            final Buffer buffer = own();
            if (null == buffer)
            {
                allocate();
                return;
            }
            final long[] at = pick(buffer);
            try
            {
                final int lkey = cache.lkey(at[0], at[1]);
                lkeys++;
                final String bad = verifier.check(at[0], at[1], lkey);
                verified++;
                if (null != bad)
                {
                    wrong++;
                    report("WRONG own " + bad);
                }
            }
            catch (final MrdException ex)
            {
                unexpected++;
                report("lookup of own [" + Sizes.hex(at[0]) + ", +" + at[1] + ") failed: " + ex.oneLine());
            }
        }

        private void lookupShared()
        {
            if (threads < 2)
            {
                lookupOwn();
                return;
            }
            final int other = (index + 1 + random.nextInt(threads - 1)) % threads;
            final Buffer buffer = slots.get(other * SLOTS_PER_THREAD + random.nextInt(SLOTS_PER_THREAD));
            if (null == buffer)
            {
                return;
            }
            final long[] at = pick(buffer);
            final long devGen = verifier.devGen();
            shared++;
            try
            {
                final int lkey = cache.lkey(at[0], at[1]);
                lkeys++;
                final String bad = verifier.check(at[0], at[1], lkey);
                verified++;
                if (null != bad)
                {
                    if (buffer.freed || verifier.devGen() != devGen)
                    {
                        raced++;
                    }
                    else
                    {
                        wrong++;
                        report("WRONG shared (devGen unchanged at " + devGen + ", buffer not freed) " + bad);
                    }
                }
            }
            catch (final MrdException ex)
            {
                if (buffer.freed || verifier.devGen() != devGen)
                {
                    raced++;
                }
                else
                {
                    unexpected++;
                    report("lookup of shared [" + Sizes.hex(at[0]) + ", +" + at[1] + ") failed although devGen " +
                        "stayed " + devGen + " and the buffer was not freed: " + ex.oneLine());
                }
            }
        }

        private void lookupWhole()
        {
            final Buffer buffer = own();
            if (null == buffer)
            {
                return;
            }
            try
            {
                final int lkey = cache.lkey(buffer.address, buffer.length);
                lkeys++;
                final String bad = verifier.check(buffer.address, buffer.length, lkey);
                verified++;
                if (null != bad)
                {
                    wrong++;
                    report("WRONG whole " + bad);
                }
            }
            catch (final MrdException ex)
            {
                if (ex.code() == ErrorCode.EINVAL && ex.getMessage().contains("straddles"))
                {
                    final String bad = verifier.checkStraddles(buffer.address, buffer.length);
                    if (null == bad)
                    {
                        straddles++;
                    }
                    else
                    {
                        wrong++;
                        report("WRONG " + bad);
                    }
                }
                else
                {
                    unexpected++;
                    report("lookup of whole [" + Sizes.hex(buffer.address) + ", +" + buffer.length + ") failed: " +
                        ex.oneLine());
                }
            }
        }

        private void allocate()
        {
            final int slot = emptyOwnSlot();
            if (slot < 0)
            {
                return;
            }
            try
            {
                final MemorySegment segment = client.allocate((1 + random.nextInt(4)) * SEGMENT);
                ReliabilitySecondary.touch(segment);
                slots.set(slot, new Buffer(segment, null));
                allocs++;
            }
            catch (final MrdException ex)
            {
                if (ex.code() == ErrorCode.ENOMEM)
                {
                    enomem++;
                }
                else
                {
                    unexpected++;
                    report("ALLOC failed: " + ex.oneLine());
                }
            }
        }

        private void registerExternal()
        {
            final int slot = emptyOwnSlot();
            if (slot < 0 || externalsHeld >= MAX_EXTERNALS_PER_THREAD)
            {
                return;
            }
            final long length = (1 + random.nextInt(1024)) * 4096L;
            try
            {
                final ExternalMemory external = client.registerExternal(length);
                external.segment().set(JAVA_LONG, 0, external.address());
                slots.set(slot, new Buffer(null, external));
                externalsHeld++;
                externals++;
                final String bad = verifier.check(external.address(), length, external.lkey());
                verified++;
                lkeys++;
                if (null != bad)
                {
                    wrong++;
                    report("WRONG external " + bad);
                }
            }
            catch (final MrdException ex)
            {
                unexpected++;
                report("REG_EXTERNAL of " + length + " bytes failed: " + ex.oneLine());
            }
        }

        private void release(final int slot)
        {
            final Buffer buffer = slots.get(slot);
            if (null == buffer)
            {
                return;
            }
            // Marked before the daemon frees it, so a thread that looked it up meanwhile knows it raced.
            buffer.freed = true;
            slots.set(slot, null);
            try
            {
                if (null != buffer.external)
                {
                    client.deregisterExternal(buffer.external);
                    externalsHeld--;
                }
                else
                {
                    client.free(buffer.allocated);
                }
                frees++;
            }
            catch (final MrdException ex)
            {
                unexpected++;
                report("free of [" + Sizes.hex(buffer.address) + ", +" + buffer.length + ") failed: " + ex.oneLine());
            }
            if (frees % 64 == 0)
            {
                // a breath for the daemon's workers on a small machine; not synchronisation
                LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(200));
            }
        }
    }
}
