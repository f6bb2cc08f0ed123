package io.mrd.primary.provider;

import io.mrd.layout.DeviceDescriptor;
import io.mrd.layout.sys.Sizes;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * What {@link Registrars#create} needs to build the daemon's registration provider: the provider's settings,
 * taken from the daemon's context ({@code DaemonContext.providerConfig()}, where they are read and checked), and
 * the fault injection tests ask for.
 *
 * @param name         {@code soft} or {@code ibverbs} ({@code --provider}).
 * @param maxPinned    bytes mrd may keep pinned at once, 0 for no limit of mrd's own ({@code --max-pinned}); the
 *                     kernel's RLIMIT_MEMLOCK applies either way.
 * @param failNth      fail the Nth registration (counting from 1) with an injected ENOMEM, 0 for never.
 * @param latencyNanos added to every registration, to make the provider as slow as a NIC is.
 * @param deviceName   the RDMA devices to open ({@code --device}): a name, a comma-separated list of names, or
 *                     {@value #ALL_DEVICES}; else the first one libibverbs lists.
 * @param libraryPath  libibverbs to load ({@value #LIBRARY_ENV}), else {@value #DEFAULT_LIBRARY} from the
 *                     loader's search path.
 * @param populateThreads threads that fault in one large range before it is pinned ({@code --populate-threads},
 *                     the registering thread included; 1 populates on that thread only); see {@link PagePopulator}.
 * @param faultPoint   where a registration on several devices fails, for the tests of its undo; empty for never.
 */
public record ProviderConfig(
    String name,
    long maxPinned,
    int failNth,
    long latencyNanos,
    Optional<String> deviceName,
    Optional<Path> libraryPath,
    int populateThreads,
    Optional<FaultPoint> faultPoint)
{
    public static final String SOFT = "soft";
    public static final String IBVERBS = "ibverbs";
    /** The soname real programs link against, found through the dynamic loader's search path. */
    public static final String DEFAULT_LIBRARY = "libibverbs.so.1";
    /** The variable that names another libibverbs (a stand-in, for tests), read by the daemon's context. */
    public static final String LIBRARY_ENV = "MRD_IBVERBS_LIBRARY";
    /** What {@code --device} takes for every device libibverbs lists. */
    public static final String ALL_DEVICES = "all";
    /** Devices one daemon opens at most: an ML host's NICs, one per GPU pair; the width of a device mask. */
    public static final int MAX_DEVICES = DeviceDescriptor.MAX_DEVICES;

    public ProviderConfig
    {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(deviceName, "deviceName");
        Objects.requireNonNull(libraryPath, "libraryPath");
        Objects.requireNonNull(faultPoint, "faultPoint");
    }

    public ProviderConfig(
        final String name,
        final long maxPinned,
        final int failNth,
        final long latencyNanos,
        final Optional<String> deviceName,
        final Optional<Path> libraryPath,
        final int populateThreads)
    {
        this(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath, populateThreads, Optional.empty());
    }

    /**
     * @return the default provider: {@code soft}, no limit of mrd's own, no fault injection.
     */
    public static ProviderConfig defaults()
    {
        return new ProviderConfig(SOFT, 0, 0, 0, Optional.empty(), Optional.empty(), PagePopulator.defaultThreads());
    }

    /**
     * @return the ibverbs provider on the first device, no fault injection.
     */
    public static ProviderConfig ibverbs()
    {
        return defaults().withName(IBVERBS);
    }

    public ProviderConfig withName(final String name)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath, populateThreads,
            faultPoint);
    }

    public ProviderConfig withMaxPinned(final long maxPinned)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath, populateThreads,
            faultPoint);
    }

    public ProviderConfig withFailNth(final int failNth)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath, populateThreads,
            faultPoint);
    }

    public ProviderConfig withLatencyNanos(final long latencyNanos)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath, populateThreads,
            faultPoint);
    }

    public ProviderConfig withDeviceName(final String deviceName)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, Optional.ofNullable(deviceName),
            libraryPath, populateThreads, faultPoint);
    }

    public ProviderConfig withLibraryPath(final Path libraryPath)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName,
            Optional.ofNullable(libraryPath), populateThreads, faultPoint);
    }

    public ProviderConfig withPopulateThreads(final int populateThreads)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath, populateThreads,
            faultPoint);
    }

    public ProviderConfig withFaultPoint(final FaultPoint faultPoint)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath, populateThreads,
            Optional.of(faultPoint));
    }

    /**
     * @return the libibverbs to load: the configured path, else {@value #DEFAULT_LIBRARY}.
     */
    public String library()
    {
        return libraryPath.map(Path::toString).orElse(DEFAULT_LIBRARY);
    }

    /**
     * @return every setting, as the daemon logs it at start.
     */
    public String toString()
    {
        return "ProviderConfig{provider=" + name +
            ", maxPinned=" + (0 == maxPinned ? "unlimited" : Sizes.format(maxPinned)) +
            ", failNth=" + failNth +
            ", latencyNanos=" + latencyNanos +
            ", device=" + deviceName.orElse("(first)") +
            ", library=" + (IBVERBS.equals(name) ? library() : "(unused)") +
            ", populateThreads=" + populateThreads +
            faultPoint.map(point -> ", faultPoint=" + point).orElse("") +
            '}';
    }
}
