package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.VarHandle;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Faults in every page of a range before a provider pins it, from several threads when the range is large.
 * <p>
 * Pinning pages that are not there yet faults them in one at a time on the pinning thread, and the kernel does
 * that no faster on two threads; page population does parallelise. Measured on a 2-core machine with 1 GiB of
 * fresh {@code /dev/shm} memory (kernel 6.18; a C program: each variant 3 times, all within 0.02 s):
 * <pre>
 *   mlock alone                                0.40 s   (2.7 GB/s)
 *   MADV_POPULATE_WRITE, 1 thread, then mlock  0.33 + 0.04 = 0.37 s
 *   MADV_POPULATE_WRITE, 2 threads, then mlock 0.23 + 0.04 = 0.27 s   (4.0 GB/s)
 *   MADV_POPULATE_WRITE, 4 threads, then mlock 0.23 + 0.04 = 0.27 s   (2 cores)
 *   touch one int a page, 2 threads, then mlock 0.27 + 0.04 = 0.31 s
 *   2 threads populate, then mlock on 2 threads 0.23 + 0.04 = 0.27 s   (mlock of present pages: no gain)
 *   munlock, 1 thread / 2 threads               0.025 s / 0.026 s     (no gain: unpinning stays serial)
 * </pre>
 * So only population runs in parallel: the caller pins (or {@code ibv_reg_mr}s) once, on its own thread, and
 * unpins on its own thread.
 * <p>
 * How a page is faulted in: {@code madvise(MADV_POPULATE_WRITE)} (Linux 5.14+), which faults it in writable as a
 * write would, without writing. Whether the kernel has it is probed once, on a page of this process's own; on a
 * kernel without it each page is touched instead by an atomic add of 0 to its first {@code int}. The memory is
 * shared with clients that may be writing it while it is registered (a registration of memory already in use,
 * or a second registration over it), so the touch must keep every store a client makes: a load and a store back
 * would lose a client's store that falls between them, while a {@code lock xadd} of 0 is one atomic
 * read-modify-write, which no other store can split, and it changes no bit. The touch first checks with
 * {@code mincore} that the slice is mapped, so that an unmapped range is the pin's error, not a fault in the
 * daemon.
 * <p>
 * A range shorter than the threshold is not populated: the pin faults its pages in itself, in one pass, where
 * population on the calling thread and then the pin would make two. For the common 2 MiB registration of fresh
 * tmpfs pages the one pass is the cheaper by 6 to 10 %: {@code mlock} alone took 1.39 to 1.52 ms at the median,
 * {@code MADV_POPULATE_WRITE} then {@code mlock} 1.50 to 1.97 ms (a C program, 6 alternating rounds of 400 on a
 * 2-core AMD EPYC VM, kernel 6.18); in the daemon the population was 1.35 to 1.72 ms of such a registration and
 * the pin after it 0.22 to 0.37 ms. Longer ranges are cut into slices at {@link #SLICE_ALIGNMENT} boundaries
 * (a multiple of every page size mrd maps, 4 KiB and 2 MiB hugepages, so that no huge page is split between two
 * threads); the caller and up to {@code threads - 1} pool threads claim slices until none is left, so a caller
 * never waits for a slice no thread has started, even when other registrations keep the pool busy.
 * <p>
 * Population is an optimisation: a range that cannot be populated (part of it unmapped, no hugepage left) is
 * left to the pin that follows, which fails with its own error; {@link #populate} only reports the first errno.
 * <p>
 * By default population leaves one processor to the rest of the daemon: the registrations' faults take CPU
 * from everyone else, and every populating call holds the process's {@code mmap_lock} for reading, which ALLOC
 * and FREE of a hugetlbfs list need for writing (they map and unmap; a tmpfs list is mapped whole,
 * {@code MemsegListMapping}). On 2 cores with two populating threads, when ALLOC and FREE still remapped on tmpfs
 * too, a 1 GiB registration in flight put their p99s at 2 and 3 times the idle figures (medians of 5 rounds,
 * {@code bench/results/2026-12-02T02-31-17Z}), with one thread at 1.2 and 1.4 times ({@code 2026-12-02T02-44-25Z}),
 * at the price of a slower 1 GiB registration (1.0 times the C reference's single-threaded {@code MAP_POPULATE} +
 * {@code mlock} instead of 1.6). Lowering the pool's priority instead made it worse (10 and 16 times,
 * {@code 2026-12-02T02-57-10Z}): a descheduled thread kept its read hold on the lock while the writers queued
 * behind it.
 * <p>
 * Thread-safe. The pool's threads are daemon threads named {@code mrd-populate-N}, stopped by {@link #close()}.
 */
public final class PagePopulator implements AutoCloseable
{
    /** Slice boundaries fall on multiples of this: the segment size, a multiple of every page size mrd maps. */
    public static final long SLICE_ALIGNMENT = 2 * Sizes.MIB;

    /**
     * Ranges shorter than this are left to the pin: four segments. Measured with PopulateMeasurement (2 cores,
     * tmpfs, median of 21, on a machine other builds kept busy): 2 MiB took 0.40 ms on the caller and 0.44 ms
     * with one pool thread, 4 MiB 1.19 / 0.97 ms, 8 MiB 1.87 / 1.72 ms. The hand-off pays only from a few
     * segments on, and little while the other cores are busy; below that, a population on the caller is a pass
     * over the pages that the pin would make anyway.
     */
    public static final long DEFAULT_PARALLEL_THRESHOLD = 8 * Sizes.MIB;
    /** Slices per thread: enough for a thread that started late or runs slower to leave its share to others. */
    static final int SLICES_PER_THREAD = 4;
    /** Most threads one populator uses. */
    public static final int MAX_THREADS = 64;

    private static final VarHandle INT = ValueLayout.JAVA_INT.varHandle();
    private static volatile Boolean madviseSupported;

    private final int threads;
    private final long parallelThreshold;
    private final boolean useMadvise;
    private final ExecutorService pool;

    /**
     * @param threads threads that populate one range, the caller included; 1 populates on the caller only.
     */
    public PagePopulator(final int threads)
    {
        this(threads, DEFAULT_PARALLEL_THRESHOLD, madviseSupported());
    }

    /**
     * @param useMadvise false forces the touch of one {@code int} a page, as on a kernel without
     *                   {@code MADV_POPULATE_WRITE}.
     */
    PagePopulator(final int threads, final long parallelThreshold, final boolean useMadvise)
    {
        if (threads < 1 || threads > MAX_THREADS)
        {
            throw new IllegalArgumentException("populate threads " + threads + " must be between 1 and " +
                MAX_THREADS);
        }
        this.threads = threads;
        this.parallelThreshold = parallelThreshold;
        this.useMadvise = useMadvise;
        if (1 == threads)
        {
            pool = null;
        }
        else
        {
            final AtomicInteger names = new AtomicInteger();
            pool = Executors.newFixedThreadPool(threads - 1, task ->
            {
                final Thread thread = new Thread(task, "mrd-populate-" + names.incrementAndGet());
                thread.setDaemon(true);
                return thread;
            });
        }
    }

    /**
     * @return the threads the daemon populates with by default: one a processor but one, at least 1 and at most 4
     * (two threads already reach the memory bandwidth one socket gives page faults; the class comment says why
     * one processor is left over).
     */
    public static int defaultThreads()
    {
        return Math.max(1, Math.min(4, Runtime.getRuntime().availableProcessors() - 1));
    }

    /**
     * @return whether this kernel has {@code MADV_POPULATE_WRITE}: probed once, on a private page of this
     * process, where an EINVAL can only mean the advice is unknown.
     */
    public static boolean madviseSupported()
    {
        Boolean supported = madviseSupported;
        if (null == supported)
        {
            final long page = PageLocks.PAGE_SIZE;
            final MemorySegment probe = Posix.map(page, Posix.PROT_READ | Posix.PROT_WRITE,
                Posix.MAP_PRIVATE | Posix.MAP_ANONYMOUS, -1, 0);
            try
            {
                supported = ErrorCode.EINVAL.errno() != Posix.madvise(probe.address(), page, Posix.MADV_POPULATE_WRITE);
            }
            finally
            {
                Posix.munmapQuietly(probe.address(), page);
            }
            madviseSupported = supported;
        }
        return supported;
    }

    /**
     * @return threads that populate one range, the caller included.
     */
    public int threads()
    {
        return threads;
    }

    /**
     * Faults in the pages of {@code [address, address + length)} (widened to whole pages) and returns when every
     * one is done; a range shorter than the threshold is left as it is, for the pin to fault in.
     *
     * @return 0, or the first errno a slice met (the range stays for the pin to refuse).
     */
    public int populate(final long address, final long length)
    {
        final long start = Sizes.alignDown(address, PageLocks.PAGE_SIZE);
        final long end = Sizes.alignUp(address + length, PageLocks.PAGE_SIZE);
        if (end - start < parallelThreshold)
        {
            return 0;
        }
        if (null == pool)
        {
            return populateSlice(start, end);
        }
        final Job job = new Job(slices(start, end, SLICE_ALIGNMENT, threads * SLICES_PER_THREAD));
        final int helpers = Math.min(threads - 1, job.count() - 1);
        try
        {
            for (int i = 0; i < helpers; i++)
            {
                pool.execute(job);
            }
        }
        catch (final RejectedExecutionException ex)
        {
            // Closed under us (the daemon is stopping): the caller populates what no helper claims.
        }
        job.run();
        return job.await();
    }

    /**
     * Cuts {@code [start, end)} into at most {@code slices} contiguous, non-empty slices whose inner boundaries
     * are multiples of {@code alignment}, as even as those allow.
     *
     * @return the boundaries: {@code start}, the inner ones ascending, {@code end}.
     */
    static long[] slices(final long start, final long end, final long alignment, final int slices)
    {
        final long base = Sizes.alignDown(start, alignment);
        final long units = (Sizes.alignUp(end, alignment) - base) / alignment;
        final int count = (int)Math.min(slices, units);
        final long[] bounds = new long[count + 1];
        bounds[0] = start;
        for (int i = 1; i < count; i++)
        {
            bounds[i] = base + units * i / count * alignment;
        }
        bounds[count] = end;
        return bounds;
    }

    /**
     * Stops the pool's threads; a populate still running finishes on its caller.
     */
    public void close()
    {
        if (null != pool)
        {
            pool.shutdownNow();
        }
    }

    public String toString()
    {
        return "PagePopulator{threads=" + threads + ", parallelThreshold=" + Sizes.format(parallelThreshold) +
            ", method=" + (useMadvise ? "MADV_POPULATE_WRITE" : "touch") + '}';
    }

    private int populateSlice(final long start, final long end)
    {
        return useMadvise ? Posix.madvise(start, end - start, Posix.MADV_POPULATE_WRITE) : touch(start, end);
    }

    private static int touch(final long start, final long end)
    {
        final long page = PageLocks.PAGE_SIZE;
        final long length = end - start;
        try (Arena arena = Arena.ofConfined())
        {
            final int errno = Posix.mincore(start, length, arena.allocate(length / page));
            if (0 != errno)
            {
                return errno;
            }
        }
        final MemorySegment range = MemorySegment.ofAddress(start).reinterpret(length);
        try
        {
            for (long offset = 0; offset < length; offset += page)
            {
                final int ignored = (int)INT.getAndAdd(range, offset, 0);
            }
        }
        catch (final InternalError ex)
        {
            // The JVM's answer to SIGBUS on the access: a page that cannot be had (no hugepage left).
            return ErrorCode.EFAULT.errno();
        }
        return 0;
    }

    /**
     * One range's slices, claimed one at a time by the caller and the pool's threads until none is left.
     */
    private final class Job implements Runnable
    {
        private final long[] bounds;
        private final AtomicInteger next = new AtomicInteger();
        private final CountDownLatch done;
        private final AtomicInteger firstErrno = new AtomicInteger();
        private final AtomicReference<Throwable> failure = new AtomicReference<>();

        Job(final long[] bounds)
        {
            this.bounds = bounds;
            done = new CountDownLatch(count());
        }

        int count()
        {
            return bounds.length - 1;
        }

        public void run()
        {
            for (int i = next.getAndIncrement(); i < count(); i = next.getAndIncrement())
            {
                try
                {
                    final int errno = populateSlice(bounds[i], bounds[i + 1]);
                    if (0 != errno)
                    {
                        firstErrno.compareAndSet(0, errno);
                    }
                }
                catch (final RuntimeException | Error ex)
                {
                    failure.compareAndSet(null, ex);
                }
                finally
                {
                    done.countDown();
                }
            }
        }

        /**
         * Waits for the slices other threads claimed; every slice was claimed once the caller's own run returned.
         */
        int await()
        {
            boolean interrupted = false;
            while (true)
            {
                try
                {
                    done.await();
                    break;
                }
                catch (final InterruptedException ex)
                {
                    // The pages must be in before the pin: finish waiting, then keep the interrupt.
                    interrupted = true;
                }
            }
            if (interrupted)
            {
                Thread.currentThread().interrupt();
            }
            final Throwable t = failure.get();
            if (t instanceof RuntimeException ex)
            {
                throw ex;
            }
            if (t instanceof Error err)
            {
                throw err;
            }
            return firstErrno.get();
        }
    }
}
