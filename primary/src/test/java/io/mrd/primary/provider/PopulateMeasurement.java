package io.mrd.primary.provider;

import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * Measures what {@link PagePopulator}'s Javadoc and the README's tuning notes state, on fresh shared memory (a
 * memfd: tmpfs pages, as {@code /dev/shm} has), through the classes the providers use. Prints; asserts nothing
 * (a measurement, not a test). After {@code mvn test-compile -pl primary -am}:
 * <pre>
 *   java -cp primary/target/classes:primary/target/test-classes:shared-layout/target/classes \
 *       --enable-native-access=ALL-UNNAMED io.mrd.primary.provider.PopulateMeasurement [MiB] [runs]
 * </pre>
 */
public final class PopulateMeasurement
{
    private static final long PAGE = PageLocks.PAGE_SIZE;

    private PopulateMeasurement()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final long length = (args.length > 0 ? Long.parseLong(args[0]) : 1024) * Sizes.MIB;
        final int reps = args.length > 1 ? Integer.parseInt(args[1]) : 3;
        System.out.println("fresh memfd (tmpfs), " + Sizes.format(length) + ", " + reps + " runs each, median; " +
            Runtime.getRuntime().availableProcessors() + " processors; MADV_POPULATE_WRITE " +
            (PagePopulator.madviseSupported() ? "supported" : "absent"));
        warmUp();

        row("mlock alone", reps, () -> pin(length, null));
        for (final int threads : new int[] {1, 2, 4})
        {
            try (PagePopulator populator = new PagePopulator(threads, 0, true))
            {
                row("MADV_POPULATE_WRITE x" + threads + " + mlock", reps, () -> pin(length, populator));
            }
        }
        try (PagePopulator populator = new PagePopulator(2, 0, false))
        {
            row("touch x2 + mlock", reps, () -> pin(length, populator));
        }
        row("munlock x1", reps, () -> unpin(length, 1));
        row("munlock x2", reps, () -> unpin(length, 2));

        System.out.println();
        System.out.println("threshold: populate on the caller vs the caller and one pool thread (µs, median of 21)");
        try (PagePopulator caller = new PagePopulator(1, 0, true);
            PagePopulator two = new PagePopulator(2, 0, true))
        {
            for (final long mib : new long[] {2, 4, 8, 16, 32, 64})
            {
                final long size = mib * Sizes.MIB;
                final double one = median(21, () -> populateOnly(size, caller));
                final double both = median(21, () -> populateOnly(size, two));
                System.out.printf("  %3d MiB  caller %8.0f  two threads %8.0f%n", mib, one * 1e6, both * 1e6);
            }
        }

        System.out.println();
        System.out.println("ALLOC pre-faulted or not (ms, median): alloc = map of a fresh file, register = populate " +
            "x2 + mlock, client = another mapping touching every page");
        try (PagePopulator populator = new PagePopulator(2, PagePopulator.DEFAULT_PARALLEL_THRESHOLD, true))
        {
            for (final long size : new long[] {2 * Sizes.MIB, 64 * Sizes.MIB, length})
            {
                for (final boolean prefault : new boolean[] {false, true})
                {
                    final double[][] parts = new double[3][reps * 3];
                    for (int r = 0; r < parts[0].length; r++)
                    {
                        final double[] one = allocRegisterTouch(size, prefault, populator);
                        for (int p = 0; p < 3; p++)
                        {
                            parts[p][r] = one[p];
                        }
                    }
                    System.out.printf("  %-7s %-13s alloc %8.2f  register %8.2f  client touch %8.2f%n",
                        Sizes.format(size), prefault ? "pre-faulted" : "as today", median(parts[0]) * 1e3,
                        median(parts[1]) * 1e3, median(parts[2]) * 1e3);
                }
            }
        }
    }

    private interface Timed
    {
        double seconds() throws Exception;
    }

    private static void row(final String name, final int reps, final Timed timed) throws Exception
    {
        System.out.printf("  %-32s %.3f s%n", name, median(reps, timed));
    }

    private static double median(final int reps, final Timed timed) throws Exception
    {
        final double[] runs = new double[reps];
        for (int i = 0; i < reps; i++)
        {
            runs[i] = timed.seconds();
        }
        return median(runs);
    }

    private static double median(final double[] runs)
    {
        final double[] sorted = runs.clone();
        Arrays.sort(sorted);
        return sorted[sorted.length / 2];
    }

    private static void warmUp() throws Exception
    {
        try (PagePopulator populator = new PagePopulator(2, 0, true))
        {
            for (int i = 0; i < 20; i++)
            {
                pin(4 * Sizes.MIB, populator);
                populateOnly(4 * Sizes.MIB, populator);
            }
        }
    }

    /** Populates (unless {@code populator} is null), then locks with one mlock, as the soft provider does. */
    private static double pin(final long length, final PagePopulator populator)
    {
        final MemorySegment memory = fresh(length);
        try
        {
            final long start = System.nanoTime();
            if (null != populator)
            {
                populator.populate(memory.address(), length);
            }
            check(Posix.mlock(memory.address(), length), "mlock");
            final double seconds = (System.nanoTime() - start) / 1e9;
            check(Posix.munlock(memory.address(), length), "munlock");
            return seconds;
        }
        finally
        {
            Posix.munmap(memory.address(), length);
        }
    }

    private static double unpin(final long length, final int threads) throws Exception
    {
        final MemorySegment memory = fresh(length);
        final ExecutorService pool = Executors.newFixedThreadPool(threads);
        try
        {
            check(Posix.mlock(memory.address(), length), "mlock");
            final long[] bounds = PagePopulator.slices(memory.address(), memory.address() + length,
                PagePopulator.SLICE_ALIGNMENT, threads);
            final long start = System.nanoTime();
            final Future<?>[] done = new Future<?>[bounds.length - 1];
            for (int i = 0; i < done.length; i++)
            {
                final long from = bounds[i];
                final long to = bounds[i + 1];
                done[i] = pool.submit(() -> check(Posix.munlock(from, to - from), "munlock"));
            }
            for (final Future<?> f : done)
            {
                f.get();
            }
            return (System.nanoTime() - start) / 1e9;
        }
        finally
        {
            pool.shutdown();
            Posix.munmap(memory.address(), length);
        }
    }

    private static double populateOnly(final long length, final PagePopulator populator)
    {
        final MemorySegment memory = fresh(length);
        try
        {
            final long start = System.nanoTime();
            populator.populate(memory.address(), length);
            return (System.nanoTime() - start) / 1e9;
        }
        finally
        {
            Posix.munmap(memory.address(), length);
        }
    }

    /**
     * @return seconds of the ALLOC (map, and populate when {@code prefault}), of the first registration (populate +
     * mlock) and of a client's first touch of every page through its own mapping.
     */
    private static double[] allocRegisterTouch(final long length, final boolean prefault, final PagePopulator populator)
    {
        final int fd = Posix.memfdCreate("mrd-populate-measure", Posix.MFD_CLOEXEC);
        MemorySegment daemon = null;
        MemorySegment client = null;
        try
        {
            Posix.ftruncate(fd, length);
            long start = System.nanoTime();
            daemon = Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
            if (prefault)
            {
                populator.populate(daemon.address(), length);
            }
            final double alloc = (System.nanoTime() - start) / 1e9;
            start = System.nanoTime();
            populator.populate(daemon.address(), length);
            check(Posix.mlock(daemon.address(), length), "mlock");
            final double register = (System.nanoTime() - start) / 1e9;
            client = Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
            start = System.nanoTime();
            for (long offset = 0; offset < length; offset += PAGE)
            {
                client.set(ValueLayout.JAVA_BYTE, offset, (byte)1);
            }
            final double touch = (System.nanoTime() - start) / 1e9;
            return new double[] {alloc, register, touch};
        }
        finally
        {
            if (null != client)
            {
                Posix.munmap(client.address(), length);
            }
            if (null != daemon)
            {
                Posix.munmap(daemon.address(), length);
            }
            Posix.close(fd);
        }
    }

    private static MemorySegment fresh(final long length)
    {
        final int fd = Posix.memfdCreate("mrd-populate-measure", Posix.MFD_CLOEXEC);
        try
        {
            Posix.ftruncate(fd, length);
            return Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
        }
        finally
        {
            Posix.close(fd);
        }
    }

    private static Void check(final int errno, final String call)
    {
        if (0 != errno)
        {
            throw Posix.failure(errno, call);
        }
        return null;
    }
}
