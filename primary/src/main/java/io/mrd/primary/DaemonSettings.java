package io.mrd.primary;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.provider.DeviceSelection;
import io.mrd.primary.provider.PagePopulator;
import io.mrd.primary.provider.ProviderConfig;
import io.mrd.primary.provider.Registrars;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

import static io.mrd.primary.DaemonContext.SEGMENT_SIZE;
import static io.mrd.primary.DaemonSetting.define;

/**
 * The daemon's settings, one row each ({@link DaemonSetting} says what a row is and what adding one takes), in
 * the order {@link DaemonContext#conclude()} checks them and prints them in the log.
 */
public final class DaemonSettings
{
    // Each row adds itself as it is built, so this list comes before them and its order is theirs.
    private static final List<DaemonSetting<?>> ROWS = new ArrayList<>();

    /** The run directory: the control file, the socket, the memory files, the log, the journal. */
    public static final DaemonSetting<Path> DIR = define("dir", SettingType.PATH)
        .byDefaultIn(env -> RunDirectoryPath.resolve(null, env))
        .option("--dir", "DIR", RunDirectoryPath.DIR_HELP)
        .variable(RunDirectoryPath.MRD_DIR) // the name the clients and tools read too
        .expects("a directory");

    /** Where the control file and memory live; the daemon looks for a mount with free pages when none is named. */
    public static final DaemonSetting<Optional<String>> HUGE_DIR =
        define("hugeDir", SettingType.optional(SettingType.NAME, "auto"))
        .byDefault(Optional.empty())
        .option("--huge-dir", "PATH", "hugetlbfs mount for the control file and memory (default: the first " +
            "hugetlbfs mount in /proc/mounts with free pages; 'none' = tmpfs only). Falls back to tmpfs when it " +
            "has too few free pages.")
        .expects("a hugetlbfs mount or 'none'");

    /** Far above where Linux puts heaps, stacks and libraries, in the daemon and in every secondary. */
    public static final DaemonSetting<Long> BASE_VIRTADDR = define("baseVirtaddr", SettingType.ADDRESS)
        .byDefault(0x1000_0000_0000L)
        .option("--base-virtaddr", "ADDR", "First virtual address of the memory-segment lists, a multiple of " +
            "1GiB (default: ${DEFAULT-VALUE}). Secondaries map memory at the same addresses.")
        .check((name, base) -> base <= 0 || base % Sizes.GIB != 0 || base >= DaemonContext.ADDRESS_SPACE_END ?
            name + " " + Sizes.hex(base) + " must be a multiple of 1GiB below " +
            Sizes.hex(DaemonContext.ADDRESS_SPACE_END) + " (user address space), e.g. " +
            Sizes.hex(DaemonSettings.BASE_VIRTADDR.defaultValue()) : null)
        .expects("an address such as 0x100000000000");

    public static final DaemonSetting<Long> MAX_MEMORY = define("maxMemory", SettingType.SIZE)
        .byDefault(2 * Sizes.GIB)
        .option("--max-memory", "SIZE", "Total memory the daemon may hand out, e.g. 4GiB " +
            "(default: ${DEFAULT-VALUE}).")
        .check(SettingCheck.multipleOf(SEGMENT_SIZE, true))
        .expects("a size such as 4GiB");

    public static final DaemonSetting<Long> LIST_SIZE = define("listSize", SettingType.SIZE)
        .byDefault(512 * Sizes.MIB)
        .option("--list-size", "SIZE", "Size of one memory-segment list; lists are never virtually contiguous " +
            "(default: ${DEFAULT-VALUE}).")
        .check(SettingCheck.multipleOf(SEGMENT_SIZE, true))
        .expects("a size such as 512MiB");

    public static final DaemonSetting<Long> MAX_EXTERNAL = define("maxExternal", SettingType.SIZE)
        .byDefault(Sizes.GIB)
        .option("--max-external", "SIZE", "Address space reserved for external memory registered by " +
            "secondaries (default: ${DEFAULT-VALUE}).")
        .check(SettingCheck.multipleOf(SEGMENT_SIZE, false))
        .expects("a size such as 1GiB");

    public static final DaemonSetting<Integer> MAX_MRS = define("maxMrs", SettingType.INT)
        .byDefault(4096)
        .option("--max-mrs", "N", "Capacity of the MR table (default: ${DEFAULT-VALUE}).")
        .check(SettingCheck.between(1, 1 << 20, ""))
        .expects("a number");

    /** The file is sparse: unused entries cost no memory. The fewest are the sentinel and one MR. */
    public static final DaemonSetting<Integer> CACHE_CAPACITY = define("cacheCapacity", SettingType.INT)
        .byDefault(1 << 20)
        .option("--cache-capacity", "N", "Entries of the global MR cache (default: ${DEFAULT-VALUE}; the file " +
            "is sparse).")
        .check(SettingCheck.between(2, 64 << 20, ""))
        .expects("a number");

    public static final DaemonSetting<Integer> MAX_CLIENTS = define("maxClients", SettingType.INT)
        .byDefault(256)
        .option("--max-clients", "N", "Secondaries connected at once (default: ${DEFAULT-VALUE}).")
        .check(SettingCheck.between(1, 65536, ""))
        .expects("a number");

    public static final DaemonSetting<Integer> WORKER_THREADS = define("workerThreads", SettingType.INT)
        .byDefault(4)
        .option("--worker-threads", "N", "Threads that serve requests (registrations are slow and never run on " +
            "the socket's event loop; default: ${DEFAULT-VALUE}).")
        .check(SettingCheck.between(1, 256, ""))
        .expects("a number");

    public static final DaemonSetting<Integer> POPULATE_THREADS = define("populateThreads", SettingType.INT)
        .byDefault(PagePopulator.defaultThreads())
        .option("--populate-threads", "N", "Threads that fault in a large range before it is pinned, the " +
            "registering worker included; 1 faults in on the worker alone (1 to " + PagePopulator.MAX_THREADS +
            "; default: ${DEFAULT-VALUE}, one a processor but one, at least 1 and at most 4).")
        .check(SettingCheck.between(1, PagePopulator.MAX_THREADS, ""))
        .expects("a number");

    /** The daemon publishes it and {@link Heartbeat#staleLimitMs(int)} of it in the control file. */
    public static final DaemonSetting<Integer> HEARTBEAT_INTERVAL = define("heartbeatIntervalMs", SettingType.INT)
        .byDefault(Heartbeat.DEFAULT_INTERVAL_MS)
        .option("--heartbeat-interval", "MS", "Milliseconds between heartbeats, " + Heartbeat.MIN_INTERVAL_MS +
            " to " + Heartbeat.MAX_INTERVAL_MS + "; every reader counts the daemon dead after " +
            Heartbeat.STALE_INTERVALS + " intervals without one (default: ${DEFAULT-VALUE}).")
        .variable("MRD_HEARTBEAT_INTERVAL_MS")
        .check(SettingCheck.between(Heartbeat.MIN_INTERVAL_MS, Heartbeat.MAX_INTERVAL_MS, " ms"))
        .expects("a number of milliseconds");

    /** As DPDK's mr_ext_memseg_en. */
    public static final DaemonSetting<Boolean> MR_EXT_MEMSEG = define("mrExtMemseg", SettingType.BOOLEAN)
        .byDefault(true)
        .option("--mr-ext-memseg", null, "Register the whole virtually contiguous chunk around an address, or, " +
            "with --no-mr-ext-memseg, one 2MiB segment per MR (default: ${DEFAULT-VALUE}).")
        .expects("true or false");

    public static final DaemonSetting<String> PROVIDER = define("provider", SettingType.TEXT)
        .byDefault(ProviderConfig.SOFT)
        .option("--provider", "NAME", "Registration provider: soft or ibverbs (default: ${DEFAULT-VALUE}).")
        .check((name, provider) -> Registrars.NAMES.contains(provider) ? null :
            "unknown provider '" + provider + "': " + name + " takes one of " + String.join(", ", Registrars.NAMES))
        .expects("a provider name");

    public static final DaemonSetting<Optional<String>> DEVICE =
        define("device", SettingType.optional(SettingType.NAME, "first"))
        .byDefault(Optional.empty())
        .option("--device", "NAMES", "RDMA devices for --provider ibverbs: a name, a comma-separated list " +
            "(each registration gets keys on every one, device 0 first) or all (default: the first).")
        .check((name, device) -> device.map(DeviceSelection::problem).orElse(null))
        .expects("a device name, a comma-separated list of names, or all");

    /** 0 is no limit of mrd's own: the kernel's RLIMIT_MEMLOCK applies anyway. */
    public static final DaemonSetting<Long> MAX_PINNED = define("maxPinned", SettingType.SIZE)
        .byDefault(0L)
        .option("--max-pinned", "SIZE", "Most memory registrations may pin, e.g. 1GiB (default: " +
            "${DEFAULT-VALUE}, no mrd limit; RLIMIT_MEMLOCK applies).")
        .check((name, bytes) -> bytes < 0 ?
            name + " " + bytes + " is negative: give a size such as 16GiB, or 0 for no limit" : null)
        .expects("a size such as 16GiB");

    /** Groups whose processes may connect besides the daemon's uid and root. */
    public static final DaemonSetting<List<Integer>> ALLOW_GID =
        define("allowGids", SettingType.commaList(SettingType.INT))
        .byDefault(List.of())
        .option("--allow-gid", "GID", "Also accept peers of this group (repeatable, or several separated by " +
            "commas). The daemon's uid and root are always accepted.")
        .check((name, gids) -> gids.stream().filter(gid -> gid < 0).findFirst()
            .map(gid -> name + " " + gid + " is negative: give a group id (see getent group)").orElse(null))
        .expects("a group id, or several separated by commas");

    /** Without a host, the loopback address: nothing else reaches the counters unless asked. */
    public static final DaemonSetting<Optional<InetSocketAddress>> METRICS = define("metrics",
        SettingType.optional(SettingType.of(DaemonSettings::parseMetrics, a -> a.getHostString() + ":" + a.getPort()),
            "off"))
        .byDefault(Optional.empty())
        .option("--metrics", "HOST:PORT", "Serve the counters in Prometheus text format on " +
            "http://HOST:PORT/metrics (a bare :PORT or PORT listens on 127.0.0.1 only; default: off).")
        .expects("HOST:PORT with a host that resolves and a port of 0 to 65535 (e.g. 127.0.0.1:9464 or :9464)");

    /** Fault injection: fail the Nth registration (counting from 1) with an injected ENOMEM; 0 for never. */
    public static final DaemonSetting<Integer> FAIL_NTH = define("failNth", SettingType.INT)
        .byDefault(0)
        .option("--fail-nth", "N", "Fault injection: fail the Nth registration (soft provider; default: " +
            "${DEFAULT-VALUE}).")
        .hidden()
        .check((name, n) -> n < 0 ?
            name + " " + n + " is negative: give N >= 1 to fail the Nth registration, or 0" : null)
        .expects("a number");

    /** Fault injection; at most 10 s, past any request timeout. */
    public static final DaemonSetting<Long> REGISTRATION_LATENCY = define("registrationLatencyMicros",
        SettingType.LONG)
        .byDefault(0L)
        .option("--registration-latency", "MICROS", "Fault injection: add this many microseconds to every " +
            "registration (soft provider; default: ${DEFAULT-VALUE}).")
        .hidden()
        .check((name, micros) -> micros < 0 || micros > 10_000_000 ?
            name + " " + micros + " must be between 0 and 10000000 microseconds" : null)
        .expects("a number of microseconds");

    /**
     * The bound of the event journal in {@code DIR/journal}, all its files together; 0 for none. The smallest
     * but none is 64KiB (each file holds a page of records), the largest 4GiB (each file is mapped whole and
     * read with int offsets).
     */
    public static final DaemonSetting<Long> JOURNAL_SIZE = define("journalSize",
        SettingType.of(DaemonSettings::parseJournalSize, bytes -> 0 == bytes ? "off" : Sizes.format(bytes)))
        .byDefault(64 * Sizes.MIB)
        .option("--journal-size", "SIZE", "Bound of the event journal in DIR/journal (mrd events reads it), all " +
            "its files together; 0 or 'off' for none (default: ${DEFAULT-VALUE}).")
        .check((name, bytes) -> 0 != bytes && (bytes < 64 * Sizes.KIB || bytes > 4 * Sizes.GIB) ?
            name + " " + Sizes.format(bytes) + " must be 0 (off) or between 64KiB and 4GiB" : null)
        .expects("a size such as 64MiB, or 0 or 'off' for no journal");

    /**
     * How long what a dead daemon leaves waits for a successor (docs/adoption.md): its descriptor holder keeps
     * the device and the memory that long, and a successor keeps the clients' allocations that long for them to
     * come back.
     */
    public static final DaemonSetting<Integer> ADOPTION_GRACE = define("adoptionGraceMs", SettingType.INT)
        .byDefault(30_000)
        .option("--adoption-grace", "MS", "Milliseconds a successor may take to adopt this daemon's registrations " +
            "after it dies (a holder process keeps the device and memory that long), and that a successor keeps " +
            "a client's allocations for it to come back; 0 = no adoption: no holder, a successor starts afresh " +
            "(default: ${DEFAULT-VALUE}).")
        .check(SettingCheck.between(0, 3_600_000, " ms"))
        .expects("a number of milliseconds");

    /** A stand-in libibverbs, for tests; the secondaries read the same variable. */
    public static final DaemonSetting<String> IBVERBS_LIBRARY = define("ibverbsLibrary", SettingType.TEXT)
        .byDefault(ProviderConfig.DEFAULT_LIBRARY)
        .variableOnly(ProviderConfig.LIBRARY_ENV, "names the libibverbs --provider ibverbs loads: a path, or a " +
            "soname found through the loader's search path (default: ${DEFAULT-VALUE}).")
        .expects("a library path or soname");

    private DaemonSettings()
    {
    }

    /**
     * @return every setting, in the order of the rows.
     */
    public static List<DaemonSetting<?>> all()
    {
        return Collections.unmodifiableList(ROWS);
    }

    static <T> DaemonSetting<T> add(final DaemonSetting<T> row)
    {
        ROWS.add(row);
        return row;
    }

    /** @return the bytes of {@code --journal-size}: a size, or 0 for {@code off}. */
    private static long parseJournalSize(final String text)
    {
        if ("off".equalsIgnoreCase(text))
        {
            return 0;
        }
        try
        {
            return Sizes.parse(text);
        }
        catch (final MrdException ex)
        {
            // The row's phrase, which names 'off' too, says better than the size's own what to give.
            throw new IllegalArgumentException(text, ex);
        }
    }

    /**
     * @throws IllegalArgumentException when {@code value} is not {@code HOST:PORT}, {@code :PORT} or {@code PORT},
     *                                  or its host does not resolve (an unresolved address would have the server
     *                                  listen on every interface).
     */
    static InetSocketAddress parseMetrics(final String value)
    {
        final int colon = value.lastIndexOf(':');
        final String host = colon <= 0 ? "127.0.0.1" : value.substring(0, colon);
        final int port = Integer.parseInt(colon < 0 ? value : value.substring(colon + 1));
        if (port < 0 || port > 65535)
        {
            throw new IllegalArgumentException(value);
        }
        final InetSocketAddress address =
            new InetSocketAddress(host.startsWith("[") ? host.substring(1, host.length() - 1) : host, port);
        if (address.isUnresolved())
        {
            throw new IllegalArgumentException(value);
        }
        return address;
    }
}
