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
 * in the allocation; warm up (the first lookups create the MRs, then a second of lookups lets C2 compile the
 * loop) and print READY. Then it obeys its standard input, blocked in a read (no CPU) between runs:
 * {@code run K SECONDS} looks lkeys up for that long and prints {@code RESULT run=K ...}; {@code quit} (or end
 * of input) frees, detaches and exits. The process lives through every run, so later runs start warm.
 * <p>
 * Arguments: {@code DIR ALLOC_BYTES BUFFERS SEED}.
 */
public final class SecondaryMain
{
    private static final int CHECK_EVERY = 4096;

    private final MrCache cache;
    private final long[] addresses;
    private final int mask;
    private int cursor;
    private long sink;

    private SecondaryMain(final MrCache cache, final long[] addresses)
    {
        this.cache = cache;
        this.addresses = addresses;
        this.mask = addresses.length - 1;
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        final long alloc = Long.parseLong(args[1]);
        final int buffers = Integer.parseInt(args[2]);
        final long seed = Long.parseLong(args[3]);
        if (Integer.bitCount(buffers) != 1)
        {
            throw new IllegalArgumentException("buffers must be a power of two: " + buffers);
        }
        try (MrdClient client = MrdClient.attach(dir))
        {
            final MemorySegment memory = client.allocate(alloc);
            final long[] addresses = new long[buffers];
            final AddressPattern.SplitMix64 random = new AddressPattern.SplitMix64(seed);
            final long slots = memory.byteSize() / AddressPattern.BUFFER_LENGTH;
            for (int i = 0; i < buffers; i++)
            {
                addresses[i] = memory.address() + Long.remainderUnsigned(random.next(), slots) *
                    AddressPattern.BUFFER_LENGTH;
            }
            final SecondaryMain secondary = new SecondaryMain(client.newCache(), addresses);
            secondary.measure(1.0);
            Handshake.obey(words ->
            {
                if (words.length != 3 || !words[0].equals("run"))
                {
                    return false;
                }
                final Map<String, Object> result = secondary.measure(Double.parseDouble(words[2]));
                final Map<String, Object> tagged = new LinkedHashMap<>();
                tagged.put("run", words[1]);
                tagged.putAll(result);
                Handshake.print(tagged);
                return true;
            });
            client.free(memory);
        }
    }

    private Map<String, Object> measure(final double seconds)
    {
        final long mruMisses = cache.mruMisses();
        final long topHits = cache.topHits();
        final long bottomHits = cache.bottomHits();
        final long globalHits = cache.globalHits();
        final long creates = cache.createRequests();
        final long flushes = cache.flushes();
        final long[] addresses = this.addresses;
        final MrCache cache = this.cache;
        long lookups = 0;
        long errors = 0;
        int i = cursor;
        final long start = System.nanoTime();
        final long deadline = start + (long)(seconds * 1e9);
        long now;
        do
        {
            try
            {
                for (int n = 0; n < CHECK_EVERY; n++)
                {
                    sink += cache.lkey(addresses[i], AddressPattern.BUFFER_LENGTH);
                    i = (i + 1) & mask;
                }
                lookups += CHECK_EVERY;
            }
            catch (final MrdException ex)
            {
                if (errors++ == 0)
                {
                    System.out.println("lookup failed: " + ex.getMessage());
                }
                i = (i + 1) & mask;
            }
            now = System.nanoTime();
        }
        while (now < deadline);
        cursor = i;
        final double elapsed = (now - start) / 1e9;
        final Map<String, Object> result = new LinkedHashMap<>();
        result.put("lookups", lookups);
        result.put("seconds", String.format(Locale.ROOT, "%.3f", elapsed));
        result.put("lookupsPerSecond", String.format(Locale.ROOT, "%.0f", lookups / elapsed));
        // The cache does not count MRU hits (MrCache's class comment): they are the lookups that did not miss it.
        result.put("mruHits", lookups - (cache.mruMisses() - mruMisses));
        result.put("topHits", cache.topHits() - topHits);
        result.put("bottomHits", cache.bottomHits() - bottomHits);
        result.put("globalHits", cache.globalHits() - globalHits);
        result.put("createRequests", cache.createRequests() - creates);
        result.put("flushes", cache.flushes() - flushes);
        result.put("errors", errors);
        result.put("sink", sink & 0xFF);
        return result;
    }
}
