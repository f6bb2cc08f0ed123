package io.mrd.bench.multi;

import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.LinkedHashMap;
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
 * Every allocation is freed (not timed, but reported) before the next, so each starts from fresh pages. A 64 MiB
 * round of both comes first, untimed, so that neither the first request of a connection nor class loading is in
 * a measurement; then it prints READY and obeys its standard input: {@code alloc K GIB FIRST} allocates GIB GiB
 * both ways, FIRST ({@code lookup} or {@code registered}) first, and prints {@code RESULT run=K} with each
 * way's GB/s (10^9 bytes per second) and the seconds the slower free took; {@code quit} exits.
 * <p>
 * Arguments: {@code DIR}.
 */
public final class AllocateMain
{
    /** Long enough for 8 GiB registered one fault at a time (1.5 GB/s here) on a loaded machine. */
    private static final long REQUEST_TIMEOUT_MS = 120_000;

    private AllocateMain()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).requestTimeoutMs(REQUEST_TIMEOUT_MS)))
        {
            final MrCache cache = client.newCache();
            viaLookup(client, cache, 64 * Sizes.MIB);
            viaRegister(client, 64 * Sizes.MIB);
            Handshake.obey(words ->
            {
                if (words.length != 4 || !words[0].equals("alloc"))
                {
                    return false;
                }
                final int run = Integer.parseInt(words[1]);
                final long length = Integer.parseInt(words[2]) * Sizes.GIB;
                final double[] lookup;
                final double[] register;
                if (words[3].equals("lookup"))
                {
                    lookup = viaLookup(client, cache, length);
                    register = viaRegister(client, length);
                }
                else
                {
                    register = viaRegister(client, length);
                    lookup = viaLookup(client, cache, length);
                }
                final Map<String, Object> result = new LinkedHashMap<>();
                result.put("run", run);
                result.put("lookup", gbps(length, lookup[0]));
                result.put("registered", gbps(length, register[0]));
                result.put("free", String.format(Locale.ROOT, "%.3f", Math.max(lookup[1], register[1])));
                System.out.printf(Locale.ROOT, "%s GiB: allocate + lkey %.3f s, allocateRegistered %.3f s; frees " +
                    "%.3f s, %.3f s%n", words[2], lookup[0], register[0], lookup[1], register[1]);
                Handshake.print(result);
                return true;
            });
        }
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
        return String.format(Locale.ROOT, "%.4f", length / seconds / 1e9);
    }
}
