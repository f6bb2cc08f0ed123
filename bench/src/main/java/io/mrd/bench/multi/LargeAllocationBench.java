package io.mrd.bench.multi;

import io.mrd.bench.report.ReportTable;
import io.mrd.bench.report.ResultFile;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * Allocate + first key of {@link ReportTable#ALLOCATE_SIZES_GIB} GiB end to end from a secondary
 * ({@link AllocateMain}), against a daemon of one memory-segment list as large as the largest size (so one
 * allocation is one chunk and one MR). Writes {@code allocate.tsv}; the child's and the daemon's output go to
 * {@code allocate-logs/}.
 * <p>
 * The memory is hugetlbfs when {@value #HUGE_DIR_PROPERTY} names a mount (scripts/bench names one only when its
 * free pages hold the largest size), else tmpfs; the row {@code alloc.hugetlbfs} says which, and the C
 * reference ({@code pin_ref --populate-dir}) maps from the same file system. The daemon runs as root here, so
 * RLIMIT_MEMLOCK does not bound its pins (CAP_IPC_LOCK); elsewhere the limit must exceed the largest size.
 * <p>
 * Quick: 3 repetitions of 1 GiB, 1 of each larger size; full: 5 and 2.
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

    public static void run(final boolean quick, final Path out)
    {
        final Path logs = out.resolve("allocate-logs");
        try
        {
            Files.createDirectories(logs);
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        final String hugeDir = System.getProperty(HUGE_DIR_PROPERTY, "").strip();
        final int[] sizes = sizes();
        final int largest = Arrays.stream(sizes).max().orElseThrow();
        final Path tsv = out.resolve("allocate.tsv");
        ResultFile.append(tsv, new ResultFile.Result("multi", "alloc.hugetlbfs", hugeDir.isEmpty() ? 0 : 1, "flag",
            hugeDir.isEmpty() ? "tmpfs" : "hugetlbfs " + hugeDir));
        final List<String> sizeList = new ArrayList<>();
        for (final int size : sizes)
        {
            sizeList.add(String.valueOf(size));
        }
        try (BenchDaemon daemon = BenchDaemon.start(logs.resolve("daemon.log"), List.of(
            "--huge-dir", hugeDir.isEmpty() ? "none" : hugeDir,
            "--max-memory", largest + "GiB", "--list-size", largest + "GiB")))
        {
            System.out.println("allocate: " + String.join(", ", sizeList) + " GiB on " +
                (hugeDir.isEmpty() ? "tmpfs" : "hugetlbfs " + hugeDir));
            try (Child child = Child.start("allocate", logs.resolve("allocate.log"),
                List.of("-Xms256m", "-Xmx256m", "-XX:+UseSerialGC"), AllocateMain.class.getName(),
                List.of(daemon.dir().toString(), String.join(",", sizeList), quick ? "3" : "5", quick ? "1" : "2")))
            {
                final Map<String, String> result = Handshake.parseResult(
                    child.awaitLine(line -> line.startsWith(Handshake.RESULT), Duration.ofMinutes(quick ? 4 : 8)));
                child.awaitExit(BenchDaemon.START_TIMEOUT);
                for (final int size : sizes)
                {
                    for (final String way : new String[] {"lookup", "registered"})
                    {
                        final String key = size + "g." + way;
                        ResultFile.append(tsv, new ResultFile.Result("multi", "alloc." + key,
                            Double.parseDouble(result.get(key)), "GB/s", "best; each: " + result.get(key + ".runs") +
                            "; slowest free " + result.get(size + "g.free.max") + " s"));
                        System.out.println("allocate: " + key + " " + result.get(key) + " GB/s (each: " +
                            result.get(key + ".runs") + ")");
                    }
                }
            }
        }
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
