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
 * Round trips to one daemon, each timed with {@link System#nanoTime()} into an HdrHistogram, one window at a
 * time on command:
 * <ul>
 *   <li>{@code existing}: {@code CREATE_MR} for an address whose MR exists, so the primary finds it again and
 *       answers: the protocol, the event loop and the primary's lookup, to compare with the C ping-pong;</li>
 *   <li>{@code new}: allocate 2 MiB (not timed), {@code CREATE_MR} for it (timed: a real registration, which
 *       with the soft provider pins the pages), free it (not timed);</li>
 *   <li>{@code allocfree}: {@code ALLOC} of 2 MiB and its {@code FREE}, timed together: the requests that journal
 *       an event each (ALLOC; FREE and its memory event) without a registration's pinning in the time, where
 *       {@code existing} journals nothing.</li>
 * </ul>
 * The memory comes from an attached {@link MrdClient}; the requests go over a {@link DaemonConnection} of the
 * benchmark's own, the client's request path (a client sends {@code CREATE_MR} only from a cache miss, and a
 * cache never misses on an address the global cache holds).
 * <p>
 * Warms every kind up, prints READY, then obeys its standard input: {@code KIND K COUNT} runs a fifth of COUNT
 * (at least 10) untimed, then COUNT timed, and prints {@code RESULT run=K} with {@code KIND.p50} (µs),
 * {@code .p99}, {@code .p999}, {@code .max} and {@code .count} of that window; {@code quit} writes every kind's
 * histogram over all windows to {@code OUT_DIR/create-<kind>FILE_SUFFIX.hgrm} and exits.
 * <p>
 * Arguments: {@code DIR OUT_DIR FILE_SUFFIX}.
 */
public final class RoundTripMain
{
    static final String[] KINDS = {"existing", "new", "allocfree"};

    private final MrdClient client;
    private final DaemonConnection connection;
    private final MrEntry entry = new MrEntry();
    private final long address;
    private final int lkey;

    private RoundTripMain(final MrdClient client, final DaemonConnection connection, final long address)
    {
        this.client = client;
        this.connection = connection;
        this.address = address;
        createMr(connection, address, AddressPattern.BUFFER_LENGTH, entry);
        this.lkey = entry.lkey;
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        final Path out = Path.of(args[1]);
        final String suffix = args.length > 2 ? args[2] : "";
        final Map<String, Histogram> all = new LinkedHashMap<>();
        try (MrdClient client = MrdClient.attach(dir);
            DaemonConnection connection = DaemonConnection.open(
                UnixSocket.connect(dir.resolve(RunDirectoryPath.SOCKET_FILE)),
                "daemon pid " + client.daemonPid() + " in " + dir, dir, client.context().requestTimeoutMs(),
                new DaemonConnection.Listener()
                {
                }))
        {
            connection.hello("bench-round-trip");
            final MemorySegment memory = client.allocate(AddressPattern.CHUNK);
            final RoundTripMain main = new RoundTripMain(client, connection, memory.address() + 4096);
            for (final String kind : KINDS)
            {
                all.put(kind, histogram());
                main.window(kind, kind.equals("existing") ? 5000 : 200, histogram());
            }
            Handshake.obey(words ->
            {
                if (words.length != 3 || !all.containsKey(words[0]))
                {
                    return false;
                }
                final String kind = words[0];
                final int count = Integer.parseInt(words[2]);
                main.window(kind, Math.max(10, count / 5), null);
                final Histogram window = histogram();
                main.window(kind, count, window);
                all.get(kind).add(window);
                final Map<String, Object> result = new LinkedHashMap<>();
                result.put("run", words[1]);
                put(result, kind, window);
                Handshake.print(result);
                return true;
            });
            client.free(memory);
        }
        for (final Map.Entry<String, Histogram> kind : all.entrySet())
        {
            write(out.resolve("create-" + kind.getKey() + suffix + ".hgrm"), kind.getValue());
        }
    }

    /**
     * Runs {@code count} round trips of {@code kind}, timed into {@code histogram} (null: untimed).
     */
    private void window(final String kind, final int count, final Histogram histogram)
    {
        for (int i = 0; i < count; i++)
        {
            final long rtt = switch (kind)
            {
                case "existing" -> existing();
                case "new" -> fresh();
                default -> allocFree();
            };
            if (null != histogram)
            {
                histogram.recordValue(rtt);
            }
        }
    }

    private long existing()
    {
        final long start = System.nanoTime();
        createMr(connection, address, AddressPattern.BUFFER_LENGTH, entry);
        final long rtt = System.nanoTime() - start;
        if (entry.lkey != lkey)
        {
            throw new IllegalStateException("CREATE_MR of a registered address gave lkey " + lkey + " then " +
                entry.lkey);
        }
        return rtt;
    }

    private long fresh()
    {
        final MemorySegment segment = client.allocate(AddressPattern.CHUNK);
        final long start = System.nanoTime();
        createMr(connection, segment.address(), AddressPattern.BUFFER_LENGTH, entry);
        final long rtt = System.nanoTime() - start;
        client.free(segment);
        return rtt;
    }

    private long allocFree()
    {
        final long start = System.nanoTime();
        client.free(client.allocate(AddressPattern.CHUNK));
        return System.nanoTime() - start;
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

    static Histogram histogram()
    {
        return new Histogram(3_600_000_000_000L, 3);
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
