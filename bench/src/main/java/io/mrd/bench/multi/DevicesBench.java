package io.mrd.bench.multi;

import io.mrd.bench.CProgram;
import io.mrd.bench.Plan;
import io.mrd.bench.report.ReportTable;
import io.mrd.bench.report.ResultFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * Issue 23's allocate-and-register rows on the emulated device ({@link BenchDaemon#emulatedDevice()}): one
 * allocation of {@value #ALLOCATION_MIB} MiB registered on 1, 2, 4 and 8 devices
 * ({@link ReportTable#DEVICE_COUNTS}), in
 * rounds with the C reference of the same device count ({@code multi_reg_ref --once}: the same size in the same
 * file system populated and locked once, then {@code ibv_reg_mr} on each device from a thread per device).
 * <p>
 * A daemon per device count ({@code --device mrdemu0,...}) with its client ({@link DevicesMain}) is started
 * once; a round then takes the device counts in order (1 2 4 8 in odd rounds, 8 4 2 1 in even ones) and runs,
 * for each, mrd then C in odd rounds and C then mrd in even ones. mrd's figures: the client's time from the
 * request to the keys ({@code devices.N.ms}), and the daemon's minor page faults per page over the allocation
 * and its free ({@code devices.N.faults}: {@code /proc/PID/stat} before and after, so the work of the daemon's
 * other threads in that window counts too). The C reference counts its own faults over its populate and
 * registrations. The emulated devices live in a state directory of the part's own
 * ({@code MRDEMU_DIR}, {@code MRDEMU_DEVICES=8}), removed at the end. Writes {@code devices.tsv} and
 * {@code c-devices.tsv}; the processes' output goes to {@code devices-logs/}.
 */
public final class DevicesBench
{
    /** The allocation of every row, as the issue states it: 1 GiB (DeviceRows' labels say so). */
    static final long ALLOCATION_MIB = 1024;
    /** tmpfs maps base pages: the faults of a populate are counted against these. */
    private static final long PAGE_SIZE = 4096;
    private static final Duration TIMEOUT = Duration.ofMinutes(5);

    private final Plan plan;
    private final Path out;
    private final Path logs;
    private final Map<String, String> env;

    private DevicesBench(final Plan plan, final Path out, final Map<String, String> env)
    {
        this.plan = plan;
        this.out = out;
        this.logs = Child.logDirectory(out, "devices-logs");
        this.env = env;
    }

    public static void run(final Plan plan, final Path out)
    {
        final Path library = BenchDaemon.emulatedDevice();
        final Path state = createStateDirectory();
        try
        {
            final int most = ReportTable.DEVICE_COUNTS[ReportTable.DEVICE_COUNTS.length - 1];
            new DevicesBench(plan, out, Map.of("MRD_IBVERBS_LIBRARY", library.toString(),
                "MRDEMU_DIR", state.toString(), "MRDEMU_DEVICES", String.valueOf(most))).run();
        }
        finally
        {
            BenchDaemon.deleteQuietly(state);
        }
    }

    private void run()
    {
        System.out.println("devices: allocate-and-register " + ALLOCATION_MIB + " MiB on " + counts() +
            " emulated devices, with the C reference (multi_reg_ref --once); " + plan.rounds() + " rounds");
        final Map<Integer, BenchDaemon> daemons = new LinkedHashMap<>();
        final Map<Integer, Child> clients = new HashMap<>();
        try
        {
            for (final int devices : ReportTable.DEVICE_COUNTS)
            {
                final BenchDaemon daemon = BenchDaemon.start(logs.resolve("daemon-" + devices + ".log"), List.of(
                    "--provider", "ibverbs", "--device", names(devices), "--huge-dir", "none",
                    "--max-memory", ALLOCATION_MIB + "MiB", "--list-size", ALLOCATION_MIB + "MiB"), env);
                daemons.put(devices, daemon);
                final Child client = Child.start("devices-" + devices, logs.resolve("client-" + devices + ".log"),
                    MultiProcessBench.CHILD_FLAGS, DevicesMain.class.getName(), List.of(daemon.dir().toString()),
                    env);
                clients.put(devices, client);
                client.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            }
            final int[] run = {0};
            for (int round = 1; round <= plan.rounds(); round++)
            {
                final int r = round;
                final List<Runnable> counts = new ArrayList<>();
                for (final int devices : ReportTable.DEVICE_COUNTS)
                {
                    counts.add(() -> Plan.alternate(r, List.of(
                        () -> mrd(daemons.get(devices), clients.get(devices), ++run[0], r, devices),
                        () -> c(r, devices))));
                }
                Plan.alternate(round, counts);
            }
            for (final Child client : clients.values())
            {
                client.send(Handshake.QUIT);
                client.awaitExit(TIMEOUT);
            }
        }
        finally
        {
            clients.values().forEach(Child::close);
            daemons.values().forEach(BenchDaemon::close);
        }
    }

    private void mrd(final BenchDaemon daemon, final Child client, final int run, final int round, final int devices)
    {
        final long before = daemon.minorFaults();
        client.send("alloc " + run + " " + ALLOCATION_MIB);
        final Map<String, String> result = Handshake.parseResult(client.awaitLine(Handshake.resultOf(run), TIMEOUT));
        final long faults = daemon.minorFaults() - before;
        if (Integer.parseInt(result.get("devices")) != devices)
        {
            throw new IllegalStateException("the daemon of " + devices + " devices registered on " +
                result.get("devices") + ": " + client.tail());
        }
        final long pages = ALLOCATION_MIB * 1024 * 1024 / PAGE_SIZE;
        final double perPage = (double)faults / pages;
        record(round, "devices." + devices + ".ms", Double.parseDouble(result.get("ms")), "ms",
            "allocateRegistered; free " + result.get("freeMs") + " ms");
        record(round, "devices." + devices + ".faults", perPage, "faults/page", "faults=" + faults + " pages=" + pages);
        System.out.printf("devices: round %d, %d devices: mrd %s ms, %.3f faults per page%n", round, devices,
            result.get("ms"), perPage);
    }

    private void c(final int round, final int devices)
    {
        CProgram.run("multi_reg_ref", List.of("--dir", BenchDaemon.runBase().toString(), "--devices",
            String.valueOf(devices), "--gib", String.valueOf(ALLOCATION_MIB / 1024), "--once", "--round",
            String.valueOf(round)),
            env, out.resolve("c-devices.tsv"), logs.resolve("c-devices.log"), TIMEOUT);
    }

    private void record(final int round, final String row, final double value, final String unit, final String note)
    {
        ResultFile.append(out.resolve("devices.tsv"), new ResultFile.Result("multi", row, round, value, unit, note));
    }

    /** {@code --device} for the first {@code devices} emulated devices. */
    private static String names(final int devices)
    {
        return IntStream.range(0, devices).mapToObj(d -> "mrdemu" + d).collect(Collectors.joining(","));
    }

    private static String counts()
    {
        return IntStream.of(ReportTable.DEVICE_COUNTS).mapToObj(String::valueOf).collect(Collectors.joining("/"));
    }

    private static Path createStateDirectory()
    {
        try
        {
            return Files.createTempDirectory(BenchDaemon.runBase(), "mrd-bench-mrdemu-");
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException("cannot create the emulated devices' state directory under " +
                BenchDaemon.runBase(), ex);
        }
    }
}
