package io.mrd.bench.multi;

import io.mrd.bench.CProgram;
import io.mrd.bench.Plan;
import io.mrd.bench.report.ReportTable;
import io.mrd.bench.report.ResultFile;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Allocate + first key of {@link ReportTable#ALLOCATE_SIZES_GIB} GiB end to end from a secondary
 * ({@link AllocateMain}), against a daemon of one memory-segment list as large as the largest size (so one
 * allocation is one chunk and one MR), in rounds with the C reference ({@code pin_ref --populate}: one
 * {@code MAP_POPULATE} + {@code mlock} of the same size in the same file system): per round and size, the Java
 * allocations then C in odd rounds, C then Java in even ones. Writes {@code allocate.tsv} and {@code c-pin.tsv};
 * the child's and the daemon's output go to {@code allocate-logs/}.
 * <p>
 * The memory is hugetlbfs when {@value #HUGE_DIR_PROPERTY} names a mount (scripts/bench names one only when its
 * free pages hold the largest size), else tmpfs; the row {@code alloc.hugetlbfs} says which, and the C
 * reference maps from the same file system. The daemon runs as root here, so RLIMIT_MEMLOCK does not bound its
 * pins (CAP_IPC_LOCK); elsewhere the limit must exceed the largest size.
 */
public final class LargeAllocationBench
{
    /** The system property naming the hugetlbfs mount for the large allocations; unset or empty: tmpfs. */
    public static final String HUGE_DIR_PROPERTY = "mrd.bench.large.huge";
    /**
     * The system property listing the sizes to run, in GiB separated by commas (default: every size of
     * {@link ReportTable#ALLOCATE_SIZES_GIB}); scripts/bench leaves out the sizes the machine has no free memory
     * for, and their rows show "missing".
     */
    public static final String SIZES_PROPERTY = "mrd.bench.large.sizes";

    private LargeAllocationBench()
    {
    }

    public static void run(final Plan plan, final Path out)
    {
        final Path logs = Child.logDirectory(out, "allocate-logs");
        final String hugeDir = System.getProperty(HUGE_DIR_PROPERTY, "").strip();
        final Path memory = hugeDir.isEmpty() ? BenchDaemon.runBase() : Path.of(hugeDir);
        final int[] sizes = sizes();
        final int largest = Arrays.stream(sizes).max().orElseThrow();
        final Path tsv = out.resolve("allocate.tsv");
        ResultFile.append(tsv, new ResultFile.Result("multi", "alloc.hugetlbfs", 0, hugeDir.isEmpty() ? 0 : 1, "flag",
            hugeDir.isEmpty() ? "tmpfs" : "hugetlbfs " + hugeDir));
        try (BenchDaemon daemon = BenchDaemon.start(logs.resolve("daemon.log"), List.of(
            "--huge-dir", hugeDir.isEmpty() ? "none" : hugeDir,
            "--max-memory", largest + "GiB", "--list-size", largest + "GiB"));
            Child child = Child.start("allocate", logs.resolve("allocate.log"), MultiProcessBench.CHILD_FLAGS,
                AllocateMain.class.getName(), List.of(daemon.dir().toString())))
        {
            System.out.println("allocate: " + Arrays.toString(sizes) + " GiB on " +
                (hugeDir.isEmpty() ? "tmpfs" : "hugetlbfs " + hugeDir) + ", " + plan.rounds() + " rounds");
            child.awaitLine(Handshake.READY::equals, BenchDaemon.START_TIMEOUT);
            final int[] run = {0};
            for (int round = 1; round <= plan.rounds(); round++)
            {
                for (final int size : sizes)
                {
                    final int r = round;
                    Plan.alternate(round, List.of(() -> java(child, ++run[0], r, size, tsv),
                        () -> CProgram.run("pin_ref", List.of("--dir", memory.toString(), "--round", String.valueOf(r),
                            "--populate", String.valueOf(size)), out.resolve("c-pin.tsv"), logs.resolve("c-pin.log"),
                            Duration.ofMinutes(5))));
                }
            }
            child.send(Handshake.QUIT);
            child.awaitExit(BenchDaemon.START_TIMEOUT);
        }
    }

    private static void java(final Child child, final int run, final int round, final int size, final Path tsv)
    {
        // The two ways alternate too: the first of a pair may find the machine in another state than the second.
        child.send("alloc " + run + " " + size + " " + (round % 2 == 1 ? "lookup" : "registered"));
        final Map<String, String> result = Handshake.parseResult(child.awaitLine(Handshake.resultOf(run),
            Duration.ofMinutes(5)));
        for (final String way : new String[] {"lookup", "registered"})
        {
            ResultFile.append(tsv, new ResultFile.Result("multi", "alloc." + size + "g." + way, round,
                Double.parseDouble(result.get(way)), "GB/s", "slower free " + result.get("free") + " s"));
        }
        System.out.println("allocate: round " + round + ", " + size + " GiB: allocate + lkey " + result.get("lookup") +
            " GB/s, allocateRegistered " + result.get("registered") + " GB/s");
    }

    private static int[] sizes()
    {
        final String property = System.getProperty(SIZES_PROPERTY, "").strip();
        if (property.isEmpty())
        {
            return ReportTable.ALLOCATE_SIZES_GIB;
        }
        try
        {
            final int[] sizes = Arrays.stream(property.split(",")).map(String::strip).mapToInt(Integer::parseInt)
                .toArray();
            if (sizes.length > 0 && Arrays.stream(sizes).allMatch(size -> size > 0))
            {
                return sizes;
            }
        }
        catch (final NumberFormatException ignore)
        {
            // reported below with the whole value
        }
        throw new IllegalArgumentException("-D" + SIZES_PROPERTY + "=" + property + ": give whole GiB separated " +
            "by commas, e.g. 1,8");
    }
}
