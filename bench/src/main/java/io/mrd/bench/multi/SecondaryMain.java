package io.mrd.bench.multi;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.layout.MrdException;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * One secondary of the multi-process benchmark: attach, allocate, one {@link MrCache}, random 64-byte buffers
 * in the allocation; warm up (the first lookups create the MRs), print READY, wait for the go file, then look
 * up lkeys for a fixed time and print a RESULT line.
 * <p>
 * Arguments: {@code DIR GO_FILE SECONDS ALLOC_BYTES BUFFERS SEED}.
 */
public final class SecondaryMain
{
    private static final int CHECK_EVERY = 4096;

    private SecondaryMain()
    {
    }

    public static void main(final String[] args)
    {
        final Path dir = Path.of(args[0]);
        final Path go = Path.of(args[1]);
        final double seconds = Double.parseDouble(args[2]);
        final long alloc = Long.parseLong(args[3]);
        final int buffers = Integer.parseInt(args[4]);
        final long seed = Long.parseLong(args[5]);
        if (Integer.bitCount(buffers) != 1)
        {
            throw new IllegalArgumentException("buffers must be a power of two: " + buffers);
        }
        try (MrdClient client = MrdClient.attach(dir))
        {
            final MemorySegment memory = client.allocate(alloc);
            final MrCache cache = client.newCache();
            final long[] addresses = new long[buffers];
            final AddressPattern.SplitMix64 random = new AddressPattern.SplitMix64(seed);
            final long slots = memory.byteSize() / AddressPattern.BUFFER_LENGTH;
            for (int i = 0; i < buffers; i++)
            {
                addresses[i] = memory.address() + Long.remainderUnsigned(random.next(), slots) *
                    AddressPattern.BUFFER_LENGTH;
            }
            // Warm-up: create the MRs, then run the loop long enough for C2 to compile it.
            final long warmEnd = System.nanoTime() + 1_000_000_000L;
            long sink = 0;
            int cursor = 0;
            while (System.nanoTime() < warmEnd)
            {
                for (int n = 0; n < CHECK_EVERY; n++)
                {
                    sink += cache.lkey(addresses[cursor], AddressPattern.BUFFER_LENGTH);
                    cursor = (cursor + 1) & (buffers - 1);
                }
            }
            final long topHits = cache.topHits();
            final long bottomHits = cache.bottomHits();
            final long globalHits = cache.globalHits();
            final long creates = cache.createRequests();
            final long flushes = cache.flushes();
            System.out.println(Handshake.READY);
            System.out.flush();
            Handshake.awaitFile(go, 120_000);

            long lookups = 0;
            long errors = 0;
            final long start = System.nanoTime();
            final long deadline = start + (long)(seconds * 1e9);
            long now;
            do
            {
                try
                {
                    for (int n = 0; n < CHECK_EVERY; n++)
                    {
                        sink += cache.lkey(addresses[cursor], AddressPattern.BUFFER_LENGTH);
                        cursor = (cursor + 1) & (buffers - 1);
                    }
                    lookups += CHECK_EVERY;
                }
                catch (final MrdException ex)
                {
                    errors++;
                    if (errors == 1)
                    {
                        System.out.println("lookup failed: " + ex.getMessage());
                    }
                }
                now = System.nanoTime();
            }
            while (now < deadline);
            final double elapsed = (now - start) / 1e9;
            final Map<String, Object> result = new LinkedHashMap<>();
            result.put("lookups", lookups);
            result.put("seconds", String.format(Locale.ROOT, "%.3f", elapsed));
            result.put("lookupsPerSecond", String.format(Locale.ROOT, "%.0f", lookups / elapsed));
            result.put("topHits", cache.topHits() - topHits);
            result.put("bottomHits", cache.bottomHits() - bottomHits);
            result.put("globalHits", cache.globalHits() - globalHits);
            result.put("createRequests", cache.createRequests() - creates);
            result.put("flushes", cache.flushes() - flushes);
            result.put("errors", errors);
            result.put("sink", sink & 0xFF);
            System.out.println(Handshake.result(result));
            client.free(memory);
        }
    }
}
