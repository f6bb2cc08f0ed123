package io.mrd.bench.multi;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.DaemonConnection;
import io.mrd.secondary.MrdClient;
import org.HdrHistogram.Histogram;

import java.io.PrintStream;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * Create round trips, each timed with {@link System#nanoTime()} into an HdrHistogram:
 * <ul>
 *   <li>{@code existing}: {@code CREATE_MR} for an address whose MR exists, so the primary finds it again and
 *       answers: the protocol, the event loop and the primary's lookup, to compare with the C ping-pong;</li>
 *   <li>{@code new}: allocate 2 MiB (not timed), {@code CREATE_MR} for it (timed: a real registration, which
 *       with the soft provider pins the pages), free it (not timed);</li>
 *   <li>{@code allocfree} (when {@code ALLOC_FREE_COUNT} is given): {@code ALLOC} of 2 MiB and its {@code FREE},
 *       timed together: the requests that journal an event each (ALLOC; FREE and its memory event) without a
 *       registration's pinning in the time, where {@code existing} journals nothing.</li>
 * </ul>
 * The memory comes from an attached {@link MrdClient}; the requests go over a {@link DaemonConnection} of the
 * benchmark's own, the client's request path (a client sends {@code CREATE_MR} only from a cache miss, and a
 * cache never misses on an address the global cache holds).
 * <p>
 * Prints a RESULT line with the percentiles in µs and writes each histogram's percentile distribution to
 * {@code OUT_DIR/create-<kind>.hgrm}.
 * <p>
 * Arguments: {@code DIR OUT_DIR EXISTING_COUNT NEW_COUNT [ALLOC_FREE_COUNT [FILE_SUFFIX]]}; the histograms'
 * files are named {@code create-<kind>FILE_SUFFIX.hgrm}.
 */
public final class RoundTripMain
{
    private RoundTripMain()
    {
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        final Path out = Path.of(args[1]);
        final int existingCount = Integer.parseInt(args[2]);
        final int newCount = Integer.parseInt(args[3]);
        final int allocFreeCount = args.length > 4 ? Integer.parseInt(args[4]) : 0;
        final String suffix = args.length > 5 ? args[5] : "";
        final Map<String, Object> result = new LinkedHashMap<>();
        try (MrdClient client = MrdClient.attach(dir);
            DaemonConnection connection = DaemonConnection.open(
                UnixSocket.connect(dir.resolve(RunDirectoryPath.SOCKET_FILE)),
                "daemon pid " + client.daemonPid() + " in " + dir, dir, client.context().requestTimeoutMs(),
                new DaemonConnection.Listener()
                {
                }))
        {
            connection.hello("bench-round-trip");
            final MrEntry entry = new MrEntry();
            final MemorySegment memory = client.allocate(AddressPattern.CHUNK);
            final long address = memory.address() + 4096;
            createMr(connection, address, AddressPattern.BUFFER_LENGTH, entry);
            final int lkey = entry.lkey;

            final Histogram existing = new Histogram(3_600_000_000_000L, 3);
            final int warmup = Math.max(1000, existingCount / 5);
            for (int i = -warmup; i < existingCount; i++)
            {
                final long start = System.nanoTime();
                createMr(connection, address, AddressPattern.BUFFER_LENGTH, entry);
                final long rtt = System.nanoTime() - start;
                if (entry.lkey != lkey)
                {
                    throw new IllegalStateException("CREATE_MR of a registered address gave lkey " + entry.lkey +
                        " then " + lkey);
                }
                if (i >= 0)
                {
                    existing.recordValue(rtt);
                }
            }
            client.free(memory);
            put(result, "existing", existing);
            write(out.resolve("create-existing" + suffix + ".hgrm"), existing);

            final Histogram fresh = new Histogram(3_600_000_000_000L, 3);
            for (int i = -Math.min(50, newCount); i < newCount; i++)
            {
                final MemorySegment segment = client.allocate(AddressPattern.CHUNK);
                final long start = System.nanoTime();
                createMr(connection, segment.address(), AddressPattern.BUFFER_LENGTH, entry);
                final long rtt = System.nanoTime() - start;
                client.free(segment);
                if (i >= 0)
                {
                    fresh.recordValue(rtt);
                }
            }
            put(result, "new", fresh);
            write(out.resolve("create-new" + suffix + ".hgrm"), fresh);

            if (allocFreeCount > 0)
            {
                final Histogram allocFree = new Histogram(3_600_000_000_000L, 3);
                for (int i = -Math.max(200, allocFreeCount / 5); i < allocFreeCount; i++)
                {
                    final long start = System.nanoTime();
                    client.free(client.allocate(AddressPattern.CHUNK));
                    final long rtt = System.nanoTime() - start;
                    if (i >= 0)
                    {
                        allocFree.recordValue(rtt);
                    }
                }
                put(result, "allocfree", allocFree);
                write(out.resolve("create-allocfree" + suffix + ".hgrm"), allocFree);
            }
        }
        System.out.println(Handshake.result(result));
    }

    /**
     * {@code CREATE_MR(address, length)} and its reply, as a cache miss sends it.
     */
    static void createMr(
        final DaemonConnection connection, final long address, final long length, final MrEntry out)
    {
        if (!(connection.call(new Message.CreateMr(address, length)) instanceof Message.MrCreated created))
        {
            throw new MrdException(ErrorCode.EPROTO, "CREATE_MR was not answered with MR_CREATED");
        }
        out.set(created.start(), created.end(), created.lkey(), created.rkey(), created.access(), -1);
    }

    static void put(final Map<String, Object> result, final String kind, final Histogram histogram)
    {
        result.put(kind + ".count", histogram.getTotalCount());
        result.put(kind + ".p50", micros(histogram.getValueAtPercentile(50)));
        result.put(kind + ".p99", micros(histogram.getValueAtPercentile(99)));
        result.put(kind + ".p999", micros(histogram.getValueAtPercentile(99.9)));
        result.put(kind + ".max", micros(histogram.getMaxValue()));
    }

    static String micros(final long nanos)
    {
        return String.format(Locale.ROOT, "%.3f", nanos / 1e3);
    }

    static void write(final Path file, final Histogram histogram) throws Exception
    {
        try (PrintStream stream = new PrintStream(Files.newOutputStream(file), true, "UTF-8"))
        {
            histogram.outputPercentileDistribution(stream, 5, 1000.0);
        }
    }
}
