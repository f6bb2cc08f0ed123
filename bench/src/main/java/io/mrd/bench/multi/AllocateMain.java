package io.mrd.bench.multi;

import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Large allocations end to end from a secondary, timed from the request to holding the key of the whole
 * region, in two ways a client gets there:
 * <ul>
 *   <li>{@code lookup}: {@link MrdClient#allocate(long, int)}, then the first {@link MrCache#lkey(long, long)}
 *       of the whole allocation (a miss: {@code CREATE_MR}, which registers the chunk);</li>
 *   <li>{@code registered}: {@link MrdClient#allocateRegistered(long, int)}, one request that allocates,
 *       registers and returns the keys.</li>
 * </ul>
 * The two alternate, each size and repetition after the other, and every allocation is freed (not timed, but
 * reported) before the next, so each starts from fresh pages. A 64 MiB round of both comes first, untimed, so
 * that neither the first request of a connection nor class loading is in a measurement.
 * <p>
 * Prints {@code RESULT} with, per size {@code Ng} and way, the best GB/s (10^9 bytes per second), every
 * repetition's GB/s and the seconds the frees took.
 * <p>
 * Arguments: {@code DIR SIZES_GIB REPETITIONS_OF_1GIB REPETITIONS_OF_LARGER} (sizes separated by commas).
 */
public final class AllocateMain
{
    /** Long enough for 8 GiB registered one fault at a time (1.5 GB/s here) on a loaded machine. */
    private static final long REQUEST_TIMEOUT_MS = 120_000;

    private AllocateMain()
    {
    }

    public static void main(final String[] args)
    {
        final Path dir = Path.of(args[0]);
        final List<Integer> sizes = new ArrayList<>();
        for (final String size : args[1].split(","))
        {
            sizes.add(Integer.parseInt(size.strip()));
        }
        final int repetitionsOf1g = Integer.parseInt(args[2]);
        final int repetitionsOfLarger = Integer.parseInt(args[3]);
        final Map<String, Object> result = new LinkedHashMap<>();
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).requestTimeoutMs(REQUEST_TIMEOUT_MS)))
        {
            final MrCache cache = client.newCache();
            viaLookup(client, cache, 64 * Sizes.MIB);
            viaRegister(client, 64 * Sizes.MIB);
            for (final int gib : sizes)
            {
                final long length = gib * Sizes.GIB;
                final List<String> lookups = new ArrayList<>();
                final List<String> registered = new ArrayList<>();
                double bestLookup = 0;
                double bestRegistered = 0;
                double freeSeconds = 0;
                final int repetitions = gib == 1 ? repetitionsOf1g : repetitionsOfLarger;
                for (int i = 0; i < repetitions; i++)
                {
                    final double[] lookup = viaLookup(client, cache, length);
                    final double[] register = viaRegister(client, length);
                    bestLookup = Math.max(bestLookup, length / lookup[0] / 1e9);
                    bestRegistered = Math.max(bestRegistered, length / register[0] / 1e9);
                    lookups.add(gbps(length, lookup[0]));
                    registered.add(gbps(length, register[0]));
                    freeSeconds = Math.max(freeSeconds, Math.max(lookup[1], register[1]));
                    System.out.printf(Locale.ROOT, "%d GiB: allocate + lkey %.3f s (%s GB/s), allocateRegistered " +
                        "%.3f s (%s GB/s); frees %.3f s, %.3f s%n", gib, lookup[0], gbps(length, lookup[0]),
                        register[0], gbps(length, register[0]), lookup[1], register[1]);
                }
                result.put(gib + "g.lookup", String.format(Locale.ROOT, "%.4f", bestLookup));
                result.put(gib + "g.lookup.runs", String.join(",", lookups));
                result.put(gib + "g.registered", String.format(Locale.ROOT, "%.4f", bestRegistered));
                result.put(gib + "g.registered.runs", String.join(",", registered));
                result.put(gib + "g.free.max", String.format(Locale.ROOT, "%.3f", freeSeconds));
            }
        }
        System.out.println(Handshake.result(result));
    }

    /**
     * @return seconds from the allocation request to the key, and seconds of the free.
     */
    private static double[] viaLookup(final MrdClient client, final MrCache cache, final long length)
    {
        final long start = System.nanoTime();
        final MemorySegment memory = client.allocate(length, Access.LOCAL);
        // Throws rather than answer without a key: the whole region must be in one MR.
        cache.lkey(memory.address(), length);
        final long keyed = System.nanoTime();
        client.free(memory);
        return new double[] {(keyed - start) / 1e9, (System.nanoTime() - keyed) / 1e9};
    }

    private static double[] viaRegister(final MrdClient client, final long length)
    {
        final long start = System.nanoTime();
        final RegisteredMemory memory = client.allocateRegistered(length, Access.LOCAL);
        final long keyed = System.nanoTime();
        client.free(memory);
        return new double[] {(keyed - start) / 1e9, (System.nanoTime() - keyed) / 1e9};
    }

    private static String gbps(final long length, final double seconds)
    {
        return String.format(Locale.ROOT, "%.2f", length / seconds / 1e9);
    }
}
