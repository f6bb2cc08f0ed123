package io.mrd.bench.multi;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.report.ReportTable;
import io.mrd.layout.Access;
import io.mrd.layout.MrEntry;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.ClientContext;
import io.mrd.secondary.DaemonConnection;
import io.mrd.secondary.MrdClient;
import org.HdrHistogram.Histogram;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The client whose requests must not wait behind another client's registration: in a loop, {@code ALLOC} of
 * 2 MiB, {@code FREE} of it, and {@code CREATE_MR} of an MR that exists (its own 2 MiB with remote access,
 * registered once at start, so it shares its MR with nothing), each timed into an HdrHistogram of the window's
 * label. {@code ALLOC} and {@code FREE} are {@link MrdClient#allocate}/{@link MrdClient#free} (the memory is
 * never looked up, so freeing deregisters nothing); {@code CREATE_MR} goes over a {@link DaemonConnection} of
 * its own, as in {@link RoundTripMain}.
 * <p>
 * Prints READY once set up, then obeys its standard input: {@code start K LABEL} starts the loop on a thread,
 * recording into LABEL's histograms; {@code stop} ends it and prints {@code RESULT run=K cycles=N};
 * {@code quit} writes {@code OUT_DIR/inflight-LABEL-OP.hgrm} for every label and operation, prints one
 * {@code RESULT run=final} with {@code LABEL.OP.p50} (µs), {@code .p99}, {@code .p999}, {@code .max} and
 * {@code .count}, and exits.
 * <p>
 * Arguments: {@code DIR OUT_DIR}.
 */
public final class ProbeMain
{
    /** The operations in the order of each cycle, named as the report names them. */
    static final String[] OPERATIONS = ReportTable.INFLIGHT_OPERATIONS;

    private final MrdClient client;
    private final DaemonConnection connection;
    private final long existing;
    private final MrEntry entry = new MrEntry();
    private final Map<String, Histogram[]> histograms = new LinkedHashMap<>();
    private volatile boolean stop;

    private ProbeMain(final MrdClient client, final DaemonConnection connection, final long existing)
    {
        this.client = client;
        this.connection = connection;
        this.existing = existing;
    }

    public static void main(final String[] args) throws Exception
    {
        final Path dir = Path.of(args[0]);
        final Path out = Path.of(args[1]);
        // The first CREATE_MR waits out the injected registration latency; later requests may wait behind
        // another client's registration: the timeout only has to outlast that.
        try (MrdClient client = MrdClient.attach(new ClientContext().dir(dir).requestTimeoutMs(60_000));
            DaemonConnection connection = DaemonConnection.open(
                UnixSocket.connect(dir.resolve(RunDirectoryPath.SOCKET_FILE)),
                "daemon pid " + client.daemonPid() + " in " + dir, dir, client.context().requestTimeoutMs(),
                new DaemonConnection.Listener()
                {
                }))
        {
            connection.hello("bench-probe");
            final MemorySegment kept = client.allocate(AddressPattern.CHUNK, Access.REMOTE_READ | Access.REMOTE_WRITE);
            final ProbeMain probe = new ProbeMain(client, connection, kept.address() + 4096);
            RoundTripMain.createMr(connection, probe.existing, AddressPattern.BUFFER_LENGTH, probe.entry);
            // Class loading and the JIT out of the windows: a few hundred cycles recorded nowhere.
            probe.cycles(new Histogram[] {histogram(), histogram(), histogram()}, 500);
            System.out.println(Handshake.READY);
            System.out.flush();
            probe.obey(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)), out);
            client.free(kept);
        }
    }

    private void obey(final BufferedReader commands, final Path out) throws Exception
    {
        String line;
        String run = null;
        Thread thread = null;
        final long[] cycles = new long[1];
        while (null != (line = commands.readLine()) && !line.equals(Handshake.QUIT))
        {
            final String[] words = line.trim().split("\\s+");
            if (words.length == 3 && words[0].equals("start") && null == thread)
            {
                run = words[1];
                final Histogram[] window = histograms.computeIfAbsent(words[2],
                    label -> new Histogram[] {histogram(), histogram(), histogram()});
                stop = false;
                thread = new Thread(() -> cycles[0] = cycles(window, Long.MAX_VALUE), "bench-probe");
                thread.start();
            }
            else if (words[0].equals("stop") && null != thread)
            {
                stop = true;
                thread.join();
                thread = null;
                final Map<String, Object> result = new LinkedHashMap<>();
                result.put("run", run);
                result.put("cycles", cycles[0]);
                System.out.println(Handshake.result(result));
                System.out.flush();
            }
            else
            {
                System.out.println("unknown command: " + line);
            }
        }
        stop = true;
        if (null != thread)
        {
            thread.join();
        }
        final Map<String, Object> result = new LinkedHashMap<>();
        result.put("run", "final");
        histograms.forEach((label, window) ->
        {
            for (int op = 0; op < OPERATIONS.length; op++)
            {
                final String name = label + "." + OPERATIONS[op];
                RoundTripMain.put(result, name, window[op]);
                try
                {
                    RoundTripMain.write(out.resolve("inflight-" + label + "-" + OPERATIONS[op] + ".hgrm"), window[op]);
                }
                catch (final Exception ex)
                {
                    System.out.println("cannot write the histogram of " + name + ": " + ex);
                }
            }
        });
        System.out.println(Handshake.result(result));
        System.out.flush();
    }

    /**
     * Runs ALLOC, FREE, CREATE_MR cycles until stopped or {@code limit} cycles, each timed into {@code window}.
     *
     * @return the cycles run.
     */
    private long cycles(final Histogram[] window, final long limit)
    {
        long n = 0;
        while (!stop && n < limit)
        {
            final long start = System.nanoTime();
            final MemorySegment segment = client.allocate(AddressPattern.CHUNK);
            final long allocated = System.nanoTime();
            client.free(segment);
            final long freed = System.nanoTime();
            RoundTripMain.createMr(connection, existing, AddressPattern.BUFFER_LENGTH, entry);
            final long created = System.nanoTime();
            window[0].recordValue(allocated - start);
            window[1].recordValue(freed - allocated);
            window[2].recordValue(created - freed);
            n++;
        }
        return n;
    }

    private static Histogram histogram()
    {
        return new Histogram(3_600_000_000_000L, 3);
    }
}
