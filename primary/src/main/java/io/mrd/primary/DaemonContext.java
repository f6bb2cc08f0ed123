package io.mrd.primary;

import io.mrd.layout.Heartbeat;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * Every setting of a daemon, with its default, filled from flags and {@code MRD_*} environment variables,
 * checked and completed by {@link #conclude()} and printed whole by {@link #toString()} in the log at start.
 */
public final class DaemonContext
{
    /** Default first address of the memory-segment lists: far above where Linux puts heaps, stacks and libraries. */
    public static final long DEFAULT_BASE_VIRTADDR = 0x1000_0000_0000L;
    /** Logical segment size: the unit of allocation and of MR bitmaps, whether backed by hugepages or not. */
    public static final long SEGMENT_SIZE = 2 * Sizes.MIB;
    public static final long DEFAULT_MAX_MEMORY = 2 * Sizes.GIB;
    public static final long DEFAULT_LIST_SIZE = 512 * Sizes.MIB;
    public static final long DEFAULT_MAX_EXTERNAL = 1 * Sizes.GIB;
    public static final int DEFAULT_MAX_MRS = 4096;
    public static final int DEFAULT_CACHE_CAPACITY = 1 << 20;
    public static final int DEFAULT_MAX_CLIENTS = 256;
    /** Threads that run requests (registrations are slow and never run on the socket's event loop). */
    public static final int DEFAULT_WORKER_THREADS = 4;

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
    private boolean mrExtMemseg = true;
    private String provider = "soft";
    private long maxPinned;
    private int failNth;
    private long registrationLatencyNanos;
    private Optional<String> device = Optional.empty();
    private final List<Integer> allowGids = new ArrayList<>();
    private Optional<java.net.InetSocketAddress> metricsAddress = Optional.empty();
    private boolean concluded;

    private int listCount;
    private int segmentsPerList;

    /**
     * Fills unset values from {@code MRD_*} variables: MRD_HUGE_DIR, MRD_BASE_VIRTADDR, MRD_MAX_MEMORY,
     * MRD_PROVIDER, MRD_MAX_PINNED, MRD_HEARTBEAT_INTERVAL_MS.
     */
    public DaemonContext applyEnvironment(final Map<String, String> env)
    {
        final String huge = env.get("MRD_HUGE_DIR");
        if (null != huge && !huge.isBlank() && hugeDir.isEmpty() && !hugeDisabled)
        {
            hugeDir(huge);
        }
        final String base = env.get("MRD_BASE_VIRTADDR");
        if (null != base && !base.isBlank() && baseVirtaddr == DEFAULT_BASE_VIRTADDR)
        {
            baseVirtaddr = Sizes.parseAddress(base);
        }
        final String maxMem = env.get("MRD_MAX_MEMORY");
        if (null != maxMem && !maxMem.isBlank() && maxMemory == DEFAULT_MAX_MEMORY)
        {
            maxMemory = Sizes.parse(maxMem);
        }
        final String prov = env.get("MRD_PROVIDER");
        if (null != prov && !prov.isBlank() && "soft".equals(provider))
        {
            provider = prov;
        }
        final String interval = env.get("MRD_HEARTBEAT_INTERVAL_MS");
        if (null != interval && !interval.isBlank() && heartbeatIntervalMs == Heartbeat.DEFAULT_INTERVAL_MS)
        {
            try
            {
                heartbeatIntervalMs = Integer.parseInt(interval.trim());
            }
            catch (final NumberFormatException ex)
            {
                throw invalid("MRD_HEARTBEAT_INTERVAL_MS='" + interval + "' is not a number of milliseconds");
            }
        }
        final String pinned = env.get("MRD_MAX_PINNED");
        if (null != pinned && !pinned.isBlank() && maxPinned == 0)
        {
            maxPinned = Sizes.parse(pinned);
        }
        return this;
    }

    /**
     * Checks every value and derives the list geometry.
     *
     * @throws MrdException EINVAL naming the first value that is wrong and what would be right.
     */
    public DaemonContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        if (null == dir)
        {
            dir = RunDirectoryPath.resolve(null, System.getenv());
        }
        if (baseVirtaddr <= 0 || baseVirtaddr % Sizes.GIB != 0 || baseVirtaddr >= 0x7F00_0000_0000L)
        {
            throw invalid("--base-virtaddr " + Sizes.hex(baseVirtaddr) +
                " must be a multiple of 1GiB below 0x7f0000000000 (user address space), e.g. 0x100000000000");
        }
        if (maxMemory < SEGMENT_SIZE || maxMemory % SEGMENT_SIZE != 0)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " must be a positive multiple of 2MiB");
        }
        if (listSize < SEGMENT_SIZE || listSize % SEGMENT_SIZE != 0)
        {
            throw invalid("--list-size " + Sizes.format(listSize) + " must be a positive multiple of 2MiB");
        }
        final long effectiveListSize = Math.min(listSize, maxMemory);
        if (maxMemory % effectiveListSize != 0)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " must be a multiple of --list-size " +
                Sizes.format(listSize));
        }
        listCount = (int)(maxMemory / effectiveListSize);
        segmentsPerList = (int)(effectiveListSize / SEGMENT_SIZE);
        if (listCount > 64)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " / --list-size " + Sizes.format(listSize) +
                " gives " + listCount + " lists, more than 64: raise --list-size");
        }
        if (maxExternal < 0 || maxExternal % SEGMENT_SIZE != 0)
        {
            throw invalid("--max-external " + Sizes.format(maxExternal) + " must be a multiple of 2MiB");
        }
        if (maxMrs < 1 || maxMrs > 1 << 20)
        {
            throw invalid("--max-mrs " + maxMrs + " must be between 1 and 1048576");
        }
        if (cacheCapacity < 2 || cacheCapacity > 64 << 20)
        {
            throw invalid("--cache-capacity " + cacheCapacity + " must be between 2 and 67108864");
        }
        if (maxClients < 1 || maxClients > 65536)
        {
            throw invalid("--max-clients " + maxClients + " must be between 1 and 65536");
        }
        if (heartbeatIntervalMs < Heartbeat.MIN_INTERVAL_MS || heartbeatIntervalMs > Heartbeat.MAX_INTERVAL_MS)
        {
            throw invalid("--heartbeat-interval " + heartbeatIntervalMs + " ms must be between " +
                Heartbeat.MIN_INTERVAL_MS + " and " + Heartbeat.MAX_INTERVAL_MS);
        }
        if (workerThreads < 1 || workerThreads > 256)
        {
            throw invalid("--worker-threads " + workerThreads + " must be between 1 and 256");
        }
        if (maxPinned < 0)
        {
            throw invalid("--max-pinned " + maxPinned + " must not be negative");
        }
        if (failNth < 0)
        {
            throw invalid("--fail-nth " + failNth + " must not be negative");
        }
        final long end = baseVirtaddr + 2L * listCount * effectiveListSize + maxExternal;
        if (end > 0x7F00_0000_0000L)
        {
            throw invalid("memory from --base-virtaddr " + Sizes.hex(baseVirtaddr) + " would reach " + Sizes.hex(end) +
                ", past the user address space: lower --base-virtaddr or --max-memory");
        }
        concluded = true;
        return this;
    }

    private static MrdException invalid(final String message)
    {
        return new MrdException(ErrorCode.EINVAL, message);
    }

    public Path dir()
    {
        return dir;
    }

    public DaemonContext dir(final Path dir)
    {
        this.dir = dir.toAbsolutePath().normalize();
        return this;
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
        if ("none".equalsIgnoreCase(value))
        {
            hugeDisabled = true;
            hugeDir = Optional.empty();
        }
        else
        {
            hugeDisabled = false;
            hugeDir = Optional.of(Path.of(value).toAbsolutePath().normalize());
        }
        return this;
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
        return this;
    }

    public long maxMemory()
    {
        return maxMemory;
    }

    public DaemonContext maxMemory(final long maxMemory)
    {
        this.maxMemory = maxMemory;
        return this;
    }

    public long listSize()
    {
        return listSize;
    }

    public DaemonContext listSize(final long listSize)
    {
        this.listSize = listSize;
        return this;
    }

    public long maxExternal()
    {
        return maxExternal;
    }

    public DaemonContext maxExternal(final long maxExternal)
    {
        this.maxExternal = maxExternal;
        return this;
    }

    public int maxMrs()
    {
        return maxMrs;
    }

    public DaemonContext maxMrs(final int maxMrs)
    {
        this.maxMrs = maxMrs;
        return this;
    }

    public int cacheCapacity()
    {
        return cacheCapacity;
    }

    public DaemonContext cacheCapacity(final int cacheCapacity)
    {
        this.cacheCapacity = cacheCapacity;
        return this;
    }

    public int maxClients()
    {
        return maxClients;
    }

    public DaemonContext maxClients(final int maxClients)
    {
        this.maxClients = maxClients;
        return this;
    }

    public int heartbeatIntervalMs()
    {
        return heartbeatIntervalMs;
    }

    public DaemonContext heartbeatIntervalMs(final int heartbeatIntervalMs)
    {
        this.heartbeatIntervalMs = heartbeatIntervalMs;
        return this;
    }

    public int workerThreads()
    {
        return workerThreads;
    }

    public DaemonContext workerThreads(final int workerThreads)
    {
        this.workerThreads = workerThreads;
        return this;
    }

    public boolean mrExtMemseg()
    {
        return mrExtMemseg;
    }

    public DaemonContext mrExtMemseg(final boolean mrExtMemseg)
    {
        this.mrExtMemseg = mrExtMemseg;
        return this;
    }

    public String provider()
    {
        return provider;
    }

    public DaemonContext provider(final String provider)
    {
        this.provider = provider;
        return this;
    }

    public long maxPinned()
    {
        return maxPinned;
    }

    public DaemonContext maxPinned(final long maxPinned)
    {
        this.maxPinned = maxPinned;
        return this;
    }

    public int failNth()
    {
        return failNth;
    }

    public DaemonContext failNth(final int failNth)
    {
        this.failNth = failNth;
        return this;
    }

    public long registrationLatencyNanos()
    {
        return registrationLatencyNanos;
    }

    public DaemonContext registrationLatencyNanos(final long registrationLatencyNanos)
    {
        this.registrationLatencyNanos = registrationLatencyNanos;
        return this;
    }

    public Optional<String> device()
    {
        return device;
    }

    public DaemonContext device(final String device)
    {
        this.device = Optional.ofNullable(device);
        return this;
    }

    /**
     * @return where {@code /metrics} is served, if anywhere.
     */
    public Optional<java.net.InetSocketAddress> metricsAddress()
    {
        return metricsAddress;
    }

    /**
     * @param value {@code HOST:PORT}, {@code :PORT} or {@code PORT}; without a host, the loopback address.
     * @throws MrdException EINVAL naming the value when it is not of that form.
     */
    public DaemonContext metrics(final String value)
    {
        final int colon = value.lastIndexOf(':');
        final String host = colon <= 0 ? "127.0.0.1" : value.substring(0, colon);
        final String port = colon < 0 ? value : value.substring(colon + 1);
        try
        {
            final int number = Integer.parseInt(port);
            if (number < 0 || number > 65535)
            {
                throw new NumberFormatException();
            }
            metricsAddress = Optional.of(new java.net.InetSocketAddress(
                host.startsWith("[") ? host.substring(1, host.length() - 1) : host, number));
            return this;
        }
        catch (final NumberFormatException ex)
        {
            throw invalid("--metrics '" + value + "' is not HOST:PORT (e.g. 127.0.0.1:9464 or :9464)");
        }
    }

    public List<Integer> allowGids()
    {
        return allowGids;
    }

    public DaemonContext allowGid(final int gid)
    {
        allowGids.add(gid);
        return this;
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
            ", lists=" + listCount + "x" + Sizes.format(segmentsPerList * SEGMENT_SIZE) +
            ", segmentSize=" + Sizes.format(SEGMENT_SIZE) +
            ", maxExternal=" + Sizes.format(maxExternal) +
            ", maxMrs=" + maxMrs +
            ", cacheCapacity=" + cacheCapacity +
            ", maxClients=" + maxClients +
            ", heartbeatIntervalMs=" + heartbeatIntervalMs +
            ", workerThreads=" + workerThreads +
            ", mrExtMemseg=" + mrExtMemseg +
            ", provider=" + provider +
            ", device=" + device.orElse("first") +
            ", maxPinned=" + (maxPinned == 0 ? "unlimited" : Sizes.format(maxPinned)) +
            ", failNth=" + failNth +
            ", registrationLatencyNanos=" + registrationLatencyNanos +
            ", allowGids=" + allowGids +
            ", metrics=" + metricsAddress.map(a -> a.getHostString() + ":" + a.getPort()).orElse("off") +
            '}';
    }
}
