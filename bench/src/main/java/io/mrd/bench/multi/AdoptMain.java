package io.mrd.bench.multi;

import io.mrd.layout.Access;
import io.mrd.layout.sys.Sizes;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.RegisteredMemory;
import io.mrd.testing.DeviceRegistrations;
import org.HdrHistogram.Histogram;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * The secondary of the adoption benchmark ({@link AdoptionBench}): attached to an {@code ibverbs} daemon on the
 * emulated device, riding through gaps ({@link ClientContext#adoptionWaitMs}). After READY it obeys its standard
 * input:
 * <ul>
 *   <li>{@code register K N}: {@code allocateRegistered} of N MiB, one MR each, kept; prints {@code RESULT run=K}
 *       with the milliseconds it took and the registrations of the daemon's device context so far;</li>
 *   <li>{@code ride K} (sent once the daemon is killed): frees one kept allocation, a request that waits for the
 *       successor, while this thread looks up the keys of the others (all of them, then a millisecond's pause); prints how long the FREE
 *       waited, how many lookups were answered meanwhile and how many failed, and the registrations of the
 *       device context, which a successor that adopts leaves where they were;</li>
 *   <li>{@code load K}: ALLOC + FREE of 2 MiB in a loop on a thread of its own, until {@code end K}, which
 *       prints the requests, the failed ones, the longest and the p99 in milliseconds.</li>
 * </ul>
 * Arguments: {@code DIR LIBRARY}.
 */
public final class AdoptMain
{
    private static final long RIDE_MS = 60_000;

    private final MrdClient client;
    private final Path library;
    private final MrCache cache;
    private final List<RegisteredMemory> kept = new ArrayList<>();
    private Load load;

    private AdoptMain(final MrdClient client, final Path library)
    {
        this.client = client;
        this.library = library;
        this.cache = client.newCache();
    }

    public static void main(final String[] args) throws Exception
    {
        final Path library = Path.of(args[1]);
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(Path.of(args[0])).name("adopt-bench")
            .ibverbsLibrary(library.toString()).adoptionWaitMs(RIDE_MS).requestTimeoutMs(RIDE_MS)))
        {
            final AdoptMain main = new AdoptMain(client, library);
            Handshake.obey(main::obey);
        }
    }

    private boolean obey(final String[] words) throws Exception
    {
        if (words.length < 2)
        {
            return false;
        }
        final Map<String, Object> result = new LinkedHashMap<>();
        result.put("run", Integer.parseInt(words[1]));
        switch (words[0])
        {
            case "register" ->
            {
                final long startNs = System.nanoTime();
                for (int i = Integer.parseInt(words[2]); i > 0; i--)
                {
                    kept.add(client.allocateRegistered(Sizes.MIB, Access.REMOTE_WRITE));
                }
                result.put("ms", millis(System.nanoTime() - startNs));
            }
            case "ride" -> ride(result);
            case "load" ->
            {
                load = new Load(client);
                load.thread.start();
                System.out.println("LOADING run=" + words[1]);
                System.out.flush();
                return true;
            }
            case "end" -> load.end(result);
            default ->
            {
                return false;
            }
        }
        result.put("registrations", DeviceRegistrations.of(library, client.verbs().context()));
        Handshake.print(result);
        return true;
    }

    /**
     * A FREE that waits through the gap, and lookups of the memory still held while it waits.
     */
    private void ride(final Map<String, Object> result) throws InterruptedException
    {
        final RegisteredMemory freed = kept.removeLast();
        final long[] waitedNs = {-1};
        final Thread request = Thread.ofPlatform().name("ride-free").start(() ->
        {
            final long startNs = System.nanoTime();
            client.free(freed);
            waitedNs[0] = System.nanoTime() - startNs;
        });
        long lookups = 0;
        long errors = 0;
        while (request.isAlive())
        {
            // Every held buffer once, then a pause: an application's lookups, not a spinning core the successor
            // would have to share on a small machine.
            for (final RegisteredMemory memory : kept)
            {
                final MemorySegment segment = memory.segment();
                try
                {
                    if (cache.lkey(segment.address(), segment.byteSize()) == memory.lkey())
                    {
                        lookups++;
                    }
                    else
                    {
                        errors++;
                    }
                }
                catch (final RuntimeException ex)
                {
                    errors++;
                }
            }
            LockSupport.parkNanos(1_000_000);
        }
        request.join();
        result.put("waitedMs", waitedNs[0] < 0 ? "failed" : millis(waitedNs[0]));
        result.put("lookups", lookups);
        result.put("lookupErrors", errors);
    }

    private static String millis(final long ns)
    {
        return String.format(Locale.ROOT, "%.1f", ns / 1e6);
    }

    /** ALLOC + FREE of 2 MiB in a loop until ended, each pair's time recorded. */
    private static final class Load
    {
        private final Histogram histogram = new Histogram(3);
        private final AtomicBoolean running = new AtomicBoolean(true);
        private final Thread thread;
        private long failed;

        Load(final MrdClient client)
        {
            thread = Thread.ofPlatform().name("load").unstarted(() ->
            {
                while (running.get())
                {
                    final long startNs = System.nanoTime();
                    try
                    {
                        client.free(client.allocate(2 * Sizes.MIB, Access.LOCAL));
                        histogram.recordValue(System.nanoTime() - startNs);
                    }
                    catch (final RuntimeException ex)
                    {
                        failed++;
                        System.out.println("request failed: " + ex);
                    }
                }
            });
        }

        void end(final Map<String, Object> result) throws InterruptedException
        {
            running.set(false);
            thread.join();
            result.put("requests", histogram.getTotalCount() + failed);
            result.put("failed", failed);
            result.put("maxMs", millis(histogram.getMaxValue()));
            result.put("p99Ms", millis(histogram.getValueAtPercentile(99)));
        }
    }
}
