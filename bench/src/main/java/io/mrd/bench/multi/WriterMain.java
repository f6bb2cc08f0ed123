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
import java.util.concurrent.locks.LockSupport;

/**
 * The writer of the multi-process benchmark: a secondary that, at a fixed rate, allocates a 2 MiB segment,
 * looks its lkey up (a global miss: {@code CREATE_MR}, a registration and a global-cache insert) and frees it
 * (a memory free event: the primary rebuilds the global cache and bumps {@code devGen}, so every secondary's
 * local caches flush). Prints READY after one cycle, then obeys its standard input: {@code start K RATE}
 * begins cycling on a thread, {@code stop} ends it and prints {@code RESULT run=K ...}, {@code quit} exits.
 * <p>
 * Arguments: {@code DIR}.
 */
public final class WriterMain
{
    private final MrdClient client;
    private final MrCache cache;
    /** The cycling thread's figures, read after it is joined. */
    private final Map<String, Object> result = new LinkedHashMap<>();
    private final Background background = new Background("bench-writer");

    private WriterMain(final MrdClient client)
    {
        this.client = client;
        this.cache = client.newCache();
    }

    public static void main(final String[] args) throws Exception
    {
        try (MrdClient client = MrdClient.attach(Path.of(args[0])))
        {
            final WriterMain writer = new WriterMain(client);
            writer.cycle();
            Handshake.obey(writer::command);
            writer.background.stop();
        }
    }

    private boolean command(final String[] words) throws InterruptedException
    {
        if (words.length == 3 && words[0].equals("start") && !background.running())
        {
            final double rate = Double.parseDouble(words[2]);
            result.clear();
            background.start(words[1], () -> cycleAt(rate, result));
            return true;
        }
        if (words[0].equals("stop") && background.running())
        {
            final String run = background.stop();
            final Map<String, Object> tagged = new LinkedHashMap<>();
            tagged.put("run", run);
            tagged.putAll(result);
            Handshake.print(tagged);
            return true;
        }
        return false;
    }

    private void cycleAt(final double rate, final Map<String, Object> result)
    {
        final long period = (long)(1e9 / rate);
        final long flushes = cache.flushes();
        long cycles = 0;
        long errors = 0;
        final long start = System.nanoTime();
        long next = start;
        while (!background.stopping())
        {
            next += period;
            final long wait = next - System.nanoTime();
            if (wait > 0)
            {
                LockSupport.parkNanos(wait);
            }
            try
            {
                cycle();
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
        result.put("cycles", cycles);
        result.put("seconds", String.format(Locale.ROOT, "%.3f", elapsed));
        result.put("rate", String.format(Locale.ROOT, "%.1f", cycles / elapsed));
        result.put("flushes", cache.flushes() - flushes);
        result.put("errors", errors);
    }

    private void cycle()
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
