package io.mrd.bench.multi;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.layout.MrdException;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.LockSupport;

/**
 * The writer of the multi-process benchmark: a secondary that, {@code RATE} times a second, allocates a
 * 2 MiB segment, looks its lkey up (a global miss: {@code CREATE_MR}, a registration and a global-cache
 * insert) and frees it (a memory free event: the primary rebuilds the global cache and bumps {@code devGen},
 * so every secondary's local caches flush). Runs from the go file to the stop file, then prints RESULT.
 * <p>
 * Arguments: {@code DIR GO_FILE STOP_FILE RATE}.
 */
public final class WriterMain
{
    private WriterMain()
    {
    }

    public static void main(final String[] args)
    {
        final Path dir = Path.of(args[0]);
        final Path go = Path.of(args[1]);
        final Path stop = Path.of(args[2]);
        final double rate = Double.parseDouble(args[3]);
        final long period = (long)(1e9 / rate);
        try (MrdClient client = MrdClient.attach(dir))
        {
            final MrCache cache = client.newCache();
            cycle(client, cache);
            System.out.println(Handshake.READY);
            System.out.flush();
            Handshake.awaitFile(go, 120_000);
            long cycles = 0;
            long errors = 0;
            final long start = System.nanoTime();
            long next = start;
            while (!Files.exists(stop))
            {
                next += period;
                final long wait = next - System.nanoTime();
                if (wait > 0)
                {
                    LockSupport.parkNanos(wait);
                }
                try
                {
                    cycle(client, cache);
                    cycles++;
                }
                catch (final MrdException ex)
                {
                    if (errors++ == 0)
                    {
                        System.out.println("writer cycle failed: " + ex.getMessage());
                    }
                }
            }
            final double elapsed = (System.nanoTime() - start) / 1e9;
            final Map<String, Object> result = new LinkedHashMap<>();
            result.put("cycles", cycles);
            result.put("seconds", String.format(Locale.ROOT, "%.3f", elapsed));
            result.put("rate", String.format(Locale.ROOT, "%.1f", cycles / elapsed));
            result.put("flushes", cache.flushes());
            result.put("errors", errors);
            System.out.println(Handshake.result(result));
        }
    }

    private static void cycle(final MrdClient client, final MrCache cache)
    {
        final MemorySegment segment = client.allocate(AddressPattern.CHUNK);
        try
        {
            cache.lkey(segment.address(), AddressPattern.BUFFER_LENGTH);
        }
        finally
        {
            client.free(segment);
        }
    }
}
