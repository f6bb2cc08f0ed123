package io.mrd.primary;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.provider.PagePopulator;
import io.mrd.primary.provider.ProviderConfig;
import io.mrd.primary.provider.Registrars;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.Function;

/**
 * Every setting of a daemon: its default (a {@code DEFAULT_*} constant here, or the constant of the class that
 * owns the rule), its {@code mrd start} option and its {@code MRD_*} variable ({@link DaemonSetting}). The setters are
 * the command line; {@link #applyEnvironment} fills what they left unset; {@link #conclude()} checks every value
 * once; {@link #toString()} prints them all in the log at start.
 * <p>
 * A setting is unset until a setter or a variable gives it a value, whatever the value: {@code --max-memory 2GiB}
 * beats {@code MRD_MAX_MEMORY=4GiB} although 2GiB is the default. So for every setting the command line wins over
 * the variable, and the variable over the default. The getters return the default of a setting still unset.
 */
public final class DaemonContext
{
    /** Logical segment size: the unit of allocation and of MR bitmaps, whether backed by hugepages or not. */
    public static final long SEGMENT_SIZE = 2 * Sizes.MIB;
    /** Default first address of the memory-segment lists: far above where Linux puts heaps, stacks and libraries. */
    public static final long DEFAULT_BASE_VIRTADDR = 0x1000_0000_0000L;
    /** Default of the memory the daemon may hand out. */
    public static final long DEFAULT_MAX_MEMORY = 2 * Sizes.GIB;
    /** Default size of one memory-segment list. */
    public static final long DEFAULT_LIST_SIZE = 512 * Sizes.MIB;
    /** Default address space reserved for external memory that secondaries register. */
    public static final long DEFAULT_MAX_EXTERNAL = 1 * Sizes.GIB;
    /** Default capacity of the MR table. */
    public static final int DEFAULT_MAX_MRS = 4096;
    /** Default entries of the global MR cache (the file is sparse: unused entries cost no memory). */
    public static final int DEFAULT_CACHE_CAPACITY = 1 << 20;
    /** Default of the secondaries connected at once. */
    public static final int DEFAULT_MAX_CLIENTS = 256;
    /** Threads that run requests (registrations are slow and never run on the socket's event loop). */
    public static final int DEFAULT_WORKER_THREADS = 4;
    /**
     * Threads that fault in one large range before it is pinned, the registering worker included: one a processor,
     * at most 4 ({@link PagePopulator}).
     */
    public static final int DEFAULT_POPULATE_THREADS = PagePopulator.defaultThreads();
    /** Register the whole virtually contiguous chunk around an address by default, as DPDK's mr_ext_memseg_en. */
    public static final boolean DEFAULT_MR_EXT_MEMSEG = true;
    /** Default of the bytes registrations may pin: 0, no limit of mrd's own (RLIMIT_MEMLOCK applies anyway). */
    public static final long DEFAULT_MAX_PINNED = 0;
    /** Default of the fault injection {@code --fail-nth}: 0, no registration fails. */
    public static final int DEFAULT_FAIL_NTH = 0;
    /** Default of the fault injection {@code --registration-latency}: none added. */
    public static final long DEFAULT_REGISTRATION_LATENCY_NANOS = 0;
    /** Default bound of the event journal, all its files together. */
    public static final long DEFAULT_JOURNAL_SIZE = 64 * Sizes.MIB;

    /**
     * First address the daemon's memory may not reach: 1 TiB below the end of the 47-bit user address space,
     * which Linux keeps for the stack and the shared libraries it maps from the top down, in the daemon and in
     * every secondary (they map the memory at the same addresses).
     */
    public static final long ADDRESS_SPACE_END = MemoryManager.USER_VA_END - Sizes.TIB;
    /** Most memory-segment lists; a larger {@code --list-size} gives fewer. */
    public static final int MAX_LISTS = 64;
    /** Most entries of the MR table. */
    public static final int MAX_MRS = 1 << 20;
    /** Fewest global cache entries: the sentinel and one MR. */
    public static final int MIN_CACHE_CAPACITY = 2;
    /** Most global cache entries. */
    public static final int MAX_CACHE_CAPACITY = 64 << 20;
    /** Most secondaries connected at once. */
    public static final int MAX_CLIENTS = 65536;
    /** Most request threads. */
    public static final int MAX_WORKER_THREADS = 256;
    /** Most threads that populate one range. */
    public static final int MAX_POPULATE_THREADS = PagePopulator.MAX_THREADS;
    /** Most fault-injection latency added to a registration: 10 s, past any request timeout. */
    public static final long MAX_REGISTRATION_LATENCY_NANOS = 10_000_000_000L;
    /** Smallest journal but none: its files each hold a page of records. */
    public static final long MIN_JOURNAL_SIZE = 64 * Sizes.KIB;
    /** Largest journal: each of its files is mapped whole, and read with int offsets. */
    public static final long MAX_JOURNAL_SIZE = 4 * Sizes.GIB;

    private final SettingOrigins origins = new SettingOrigins();
    private Path dir;
    private Optional<Path> hugeDir = Optional.empty();
    private boolean hugeDisabled;
    private long baseVirtaddr = DEFAULT_BASE_VIRTADDR;
    private long maxMemory = DEFAULT_MAX_MEMORY;
    private long listSize = DEFAULT_LIST_SIZE;
    private long maxExternal = DEFAULT_MAX_EXTERNAL;
    private int maxMrs = DEFAULT_MAX_MRS;
    private int cacheCapacity = DEFAULT_CACHE_CAPACITY;
    private int maxClients = DEFAULT_MAX_CLIENTS;
    private int heartbeatIntervalMs = Heartbeat.DEFAULT_INTERVAL_MS;
    private int workerThreads = DEFAULT_WORKER_THREADS;
    private int populateThreads = DEFAULT_POPULATE_THREADS;
    private boolean mrExtMemseg = DEFAULT_MR_EXT_MEMSEG;
    private String provider = ProviderConfig.SOFT;
    private Optional<String> device = Optional.empty();
    private long maxPinned = DEFAULT_MAX_PINNED;
    private final List<Integer> allowGids = new ArrayList<>();
    private Optional<InetSocketAddress> metricsAddress = Optional.empty();
    private int failNth = DEFAULT_FAIL_NTH;
    private long registrationLatencyNanos = DEFAULT_REGISTRATION_LATENCY_NANOS;
    private String ibverbsLibrary = ProviderConfig.DEFAULT_LIBRARY;
    private long journalSize = DEFAULT_JOURNAL_SIZE;
    private boolean concluded;

    private int listCount;
    private int segmentsPerList;

    /**
     * Gives every setting still unset the value of its variable ({@link DaemonSetting#variable()}), when that is set
     * and not blank; the run directory without {@code --dir} and {@code MRD_DIR} is then found as
     * {@link RunDirectoryPath} says. This is the only place the daemon reads its environment.
     *
     * @param env the environment, e.g. {@link System#getenv()}.
     * @throws MrdException EINVAL naming the variable whose value is not of its kind.
     */
    public DaemonContext applyEnvironment(final Map<String, String> env)
    {
        if (!origins.isSet(DaemonSetting.DIR))
        {
            dir = RunDirectoryPath.resolve(null, env);
            if (null != DaemonSetting.DIR.fromEnvironment(env, Function.identity()))
            {
                origins.fromEnvironment(DaemonSetting.DIR);
            }
        }
        origins.fromEnvironment(env, DaemonSetting.HUGE_DIR, Function.identity(), this::hugeDir);
        origins.fromEnvironment(env, DaemonSetting.BASE_VIRTADDR, Sizes::parseAddress, this::baseVirtaddr);
        origins.fromEnvironment(env, DaemonSetting.MAX_MEMORY, Sizes::parse, this::maxMemory);
        origins.fromEnvironment(env, DaemonSetting.LIST_SIZE, Sizes::parse, this::listSize);
        origins.fromEnvironment(env, DaemonSetting.MAX_EXTERNAL, Sizes::parse, this::maxExternal);
        origins.fromEnvironment(env, DaemonSetting.MAX_MRS, Integer::parseInt, this::maxMrs);
        origins.fromEnvironment(env, DaemonSetting.CACHE_CAPACITY, Integer::parseInt, this::cacheCapacity);
        origins.fromEnvironment(env, DaemonSetting.MAX_CLIENTS, Integer::parseInt, this::maxClients);
        origins.fromEnvironment(env, DaemonSetting.WORKER_THREADS, Integer::parseInt, this::workerThreads);
        origins.fromEnvironment(env, DaemonSetting.POPULATE_THREADS, Integer::parseInt, this::populateThreads);
        origins.fromEnvironment(env, DaemonSetting.HEARTBEAT_INTERVAL, Integer::parseInt, this::heartbeatIntervalMs);
        origins.fromEnvironment(env, DaemonSetting.MR_EXT_MEMSEG, DaemonSetting::parseBoolean, this::mrExtMemseg);
        origins.fromEnvironment(env, DaemonSetting.PROVIDER, Function.identity(), this::provider);
        origins.fromEnvironment(env, DaemonSetting.DEVICE, Function.identity(), this::device);
        origins.fromEnvironment(env, DaemonSetting.MAX_PINNED, Sizes::parse, this::maxPinned);
        origins.fromEnvironment(env, DaemonSetting.ALLOW_GID, DaemonSetting::parseGids,
            gids -> gids.forEach(this::allowGid));
        origins.fromEnvironment(env, DaemonSetting.METRICS, DaemonSetting::parseMetrics, this::metricsAddress);
        origins.fromEnvironment(env, DaemonSetting.FAIL_NTH, Integer::parseInt, this::failNth);
        origins.fromEnvironment(env, DaemonSetting.REGISTRATION_LATENCY,
            micros -> DaemonSetting.microsToNanos(Long.parseLong(micros)), this::registrationLatencyNanos);
        origins.fromEnvironment(env, DaemonSetting.IBVERBS_LIBRARY, Function.identity(), this::ibverbsLibrary);
        origins.fromEnvironment(env, DaemonSetting.JOURNAL_SIZE, DaemonSetting::parseJournalSize, this::journalSize);
        return this;
    }

    /**
     * Checks every value and derives the list geometry. The run directory, unless given or found by
     * {@link #applyEnvironment}, is {@link RunDirectoryPath}'s default for an empty environment.
     *
     * @throws MrdException EINVAL naming the first value that is wrong, its option and variable, and what would
     *                      be right.
     */
    public DaemonContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        if (null == dir)
        {
            dir = RunDirectoryPath.resolve(null, Map.of());
        }
        DaemonSettingChecks.check(this, origins);
        final long effectiveListSize = effectiveListSize(maxMemory, listSize);
        listCount = (int)(maxMemory / effectiveListSize);
        segmentsPerList = (int)(effectiveListSize / SEGMENT_SIZE);
        concluded = true;
        return this;
    }

    /**
     * @return the size of each memory-segment list: {@code --list-size}, or all of {@code --max-memory} when that
     * is smaller.
     */
    static long effectiveListSize(final long maxMemory, final long listSize)
    {
        return Math.min(listSize, maxMemory);
    }

    private DaemonContext given(final DaemonSetting setting)
    {
        origins.given(setting);
        return this;
    }

    /**
     * @return the provider's settings, as {@link Registrars#create} takes them.
     */
    public ProviderConfig providerConfig()
    {
        return new ProviderConfig(provider, maxPinned, failNth, registrationLatencyNanos, device,
            Optional.of(Path.of(ibverbsLibrary)), populateThreads);
    }

    public Path dir()
    {
        return dir;
    }

    /**
     * @throws MrdException EINVAL when the path is empty: it would name the current directory.
     */
    public DaemonContext dir(final Path dir)
    {
        DaemonSetting.DIR.requireNonBlank(dir.toString());
        this.dir = dir.toAbsolutePath().normalize();
        return given(DaemonSetting.DIR);
    }

    /**
     * @return the hugetlbfs mount to use, when one was named; empty lets the daemon look in /proc/mounts.
     */
    public Optional<Path> hugeDir()
    {
        return hugeDir;
    }

    /**
     * @param value a hugetlbfs mount point, or {@code none} to keep everything on tmpfs.
     */
    public DaemonContext hugeDir(final String value)
    {
        DaemonSetting.HUGE_DIR.requireNonBlank(value);
        hugeDisabled = "none".equalsIgnoreCase(value);
        hugeDir = hugeDisabled ? Optional.empty() : Optional.of(Path.of(value).toAbsolutePath().normalize());
        return given(DaemonSetting.HUGE_DIR);
    }

    public boolean hugeDisabled()
    {
        return hugeDisabled;
    }

    public long baseVirtaddr()
    {
        return baseVirtaddr;
    }

    public DaemonContext baseVirtaddr(final long baseVirtaddr)
    {
        this.baseVirtaddr = baseVirtaddr;
        return given(DaemonSetting.BASE_VIRTADDR);
    }

    public long maxMemory()
    {
        return maxMemory;
    }

    public DaemonContext maxMemory(final long maxMemory)
    {
        this.maxMemory = maxMemory;
        return given(DaemonSetting.MAX_MEMORY);
    }

    public long listSize()
    {
        return listSize;
    }

    public DaemonContext listSize(final long listSize)
    {
        this.listSize = listSize;
        return given(DaemonSetting.LIST_SIZE);
    }

    public long maxExternal()
    {
        return maxExternal;
    }

    public DaemonContext maxExternal(final long maxExternal)
    {
        this.maxExternal = maxExternal;
        return given(DaemonSetting.MAX_EXTERNAL);
    }

    public int maxMrs()
    {
        return maxMrs;
    }

    public DaemonContext maxMrs(final int maxMrs)
    {
        this.maxMrs = maxMrs;
        return given(DaemonSetting.MAX_MRS);
    }

    public int cacheCapacity()
    {
        return cacheCapacity;
    }

    public DaemonContext cacheCapacity(final int cacheCapacity)
    {
        this.cacheCapacity = cacheCapacity;
        return given(DaemonSetting.CACHE_CAPACITY);
    }

    public int maxClients()
    {
        return maxClients;
    }

    public DaemonContext maxClients(final int maxClients)
    {
        this.maxClients = maxClients;
        return given(DaemonSetting.MAX_CLIENTS);
    }

    /**
     * @return ms between heartbeats; the daemon publishes it and {@link Heartbeat#staleLimitMs(int)} of it.
     */
    public int heartbeatIntervalMs()
    {
        return heartbeatIntervalMs;
    }

    public DaemonContext heartbeatIntervalMs(final int heartbeatIntervalMs)
    {
        this.heartbeatIntervalMs = heartbeatIntervalMs;
        return given(DaemonSetting.HEARTBEAT_INTERVAL);
    }

    public int workerThreads()
    {
        return workerThreads;
    }

    public DaemonContext workerThreads(final int workerThreads)
    {
        this.workerThreads = workerThreads;
        return given(DaemonSetting.WORKER_THREADS);
    }

    /**
     * @return threads that fault in one large range before it is pinned, the registering worker included.
     */
    public int populateThreads()
    {
        return populateThreads;
    }

    public DaemonContext populateThreads(final int populateThreads)
    {
        this.populateThreads = populateThreads;
        return given(DaemonSetting.POPULATE_THREADS);
    }

    public boolean mrExtMemseg()
    {
        return mrExtMemseg;
    }

    public DaemonContext mrExtMemseg(final boolean mrExtMemseg)
    {
        this.mrExtMemseg = mrExtMemseg;
        return given(DaemonSetting.MR_EXT_MEMSEG);
    }

    public String provider()
    {
        return provider;
    }

    public DaemonContext provider(final String provider)
    {
        this.provider = provider;
        return given(DaemonSetting.PROVIDER);
    }

    public Optional<String> device()
    {
        return device;
    }

    /**
     * @param device an RDMA device name, or null for the first one libibverbs lists.
     */
    public DaemonContext device(final String device)
    {
        DaemonSetting.DEVICE.requireNonBlank(device);
        this.device = Optional.ofNullable(device);
        return given(DaemonSetting.DEVICE);
    }

    public long maxPinned()
    {
        return maxPinned;
    }

    public DaemonContext maxPinned(final long maxPinned)
    {
        this.maxPinned = maxPinned;
        return given(DaemonSetting.MAX_PINNED);
    }

    public List<Integer> allowGids()
    {
        return allowGids;
    }

    /**
     * Adds a group whose processes may connect (repeatable, as {@code --allow-gid}); the first replaces the
     * groups of {@code MRD_ALLOW_GID}.
     */
    public DaemonContext allowGid(final int gid)
    {
        if (origins.isFromEnvironment(DaemonSetting.ALLOW_GID))
        {
            allowGids.clear();
        }
        allowGids.add(gid);
        return given(DaemonSetting.ALLOW_GID);
    }

    /**
     * @return where {@code /metrics} is served, if anywhere.
     */
    public Optional<InetSocketAddress> metricsAddress()
    {
        return metricsAddress;
    }

    /**
     * @param value {@code HOST:PORT}, {@code :PORT} or {@code PORT}; without a host, the loopback address.
     * @throws MrdException EINVAL naming the value when it is not of that form or its host does not resolve.
     */
    public DaemonContext metrics(final String value)
    {
        return metricsAddress(DaemonSetting.METRICS.fromOption(value, DaemonSetting::parseMetrics));
    }

    /**
     * @param address where to serve {@code /metrics}; port 0 lets the kernel choose.
     */
    public DaemonContext metricsAddress(final InetSocketAddress address)
    {
        metricsAddress = Optional.of(address);
        return given(DaemonSetting.METRICS);
    }

    public int failNth()
    {
        return failNth;
    }

    public DaemonContext failNth(final int failNth)
    {
        this.failNth = failNth;
        return given(DaemonSetting.FAIL_NTH);
    }

    public long registrationLatencyNanos()
    {
        return registrationLatencyNanos;
    }

    public DaemonContext registrationLatencyNanos(final long registrationLatencyNanos)
    {
        this.registrationLatencyNanos = registrationLatencyNanos;
        return given(DaemonSetting.REGISTRATION_LATENCY);
    }

    /**
     * @return the libibverbs {@code --provider ibverbs} loads: a path, or a soname found through the loader's
     * search path.
     */
    public String ibverbsLibrary()
    {
        return ibverbsLibrary;
    }

    public DaemonContext ibverbsLibrary(final String ibverbsLibrary)
    {
        this.ibverbsLibrary = ibverbsLibrary;
        return given(DaemonSetting.IBVERBS_LIBRARY);
    }

    /**
     * @return the bound of the event journal in {@code DIR/journal}, all its files together; 0 when there is none.
     */
    public long journalSize()
    {
        return journalSize;
    }

    public DaemonContext journalSize(final long journalSize)
    {
        this.journalSize = journalSize;
        return given(DaemonSetting.JOURNAL_SIZE);
    }

    /**
     * @param value {@code --journal-size}: a size, or 0 or {@code off}.
     */
    public DaemonContext journalSize(final String value)
    {
        return journalSize(DaemonSetting.JOURNAL_SIZE.fromOption(value, DaemonSetting::parseJournalSize));
    }

    /**
     * @return number of memory-segment lists (after {@link #conclude()}).
     */
    public int listCount()
    {
        return listCount;
    }

    /**
     * @return segments in each list (after {@link #conclude()}).
     */
    public int segmentsPerList()
    {
        return segmentsPerList;
    }

    public String toString()
    {
        return "DaemonContext{" +
            "dir=" + dir +
            ", hugeDir=" + (hugeDisabled ? "none" : hugeDir.map(Path::toString).orElse("auto")) +
            ", baseVirtaddr=" + Sizes.hex(baseVirtaddr) +
            ", maxMemory=" + Sizes.format(maxMemory) +
            ", listSize=" + Sizes.format(listSize) +
            ", lists=" + listCount + "x" + Sizes.format(segmentsPerList * SEGMENT_SIZE) +
            ", segmentSize=" + Sizes.format(SEGMENT_SIZE) +
            ", maxExternal=" + Sizes.format(maxExternal) +
            ", maxMrs=" + maxMrs +
            ", cacheCapacity=" + cacheCapacity +
            ", maxClients=" + maxClients +
            ", heartbeatIntervalMs=" + heartbeatIntervalMs +
            ", workerThreads=" + workerThreads +
            ", populateThreads=" + populateThreads +
            ", mrExtMemseg=" + mrExtMemseg +
            ", provider=" + provider +
            ", device=" + device.orElse("first") +
            ", maxPinned=" + (maxPinned == 0 ? "unlimited" : Sizes.format(maxPinned)) +
            ", allowGids=" + allowGids +
            ", metrics=" + metricsAddress.map(a -> a.getHostString() + ":" + a.getPort()).orElse("off") +
            ", failNth=" + failNth +
            ", registrationLatencyNanos=" + registrationLatencyNanos +
            ", ibverbsLibrary=" + ibverbsLibrary +
            ", journalSize=" + (journalSize == 0 ? "off" : Sizes.format(journalSize)) +
            ", fromEnvironment=" + origins.variablesRead() +
            '}';
    }
}
