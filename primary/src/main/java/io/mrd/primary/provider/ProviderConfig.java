package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * What {@link Registrars#create} needs to build the daemon's registration provider: the provider's settings from
 * the daemon's context ({@code --provider}, {@code --max-pinned}, {@code --device}) and the fault injection tests
 * ask for.
 *
 * @param name         {@code soft} or {@code ibverbs} ({@code --provider}).
 * @param maxPinned    bytes mrd may keep pinned at once, 0 for no limit of mrd's own ({@code --max-pinned}); the
 *                     kernel's RLIMIT_MEMLOCK applies either way.
 * @param failNth      fail the Nth registration (counting from 1) with an injected ENOMEM, 0 for never.
 * @param latencyNanos added to every registration, to make the provider as slow as a NIC is.
 * @param deviceName   the RDMA device to open ({@code --device}), else the first one libibverbs lists.
 * @param libraryPath  libibverbs to load, else {@code $MRD_IBVERBS_LIBRARY}, else {@value #DEFAULT_LIBRARY} from
 *                     the loader's search path.
 */
public record ProviderConfig(
    String name,
    long maxPinned,
    int failNth,
    long latencyNanos,
    Optional<String> deviceName,
    Optional<Path> libraryPath)
{
    public static final String SOFT = "soft";
    public static final String IBVERBS = "ibverbs";
    /** The soname real programs link against, found through the dynamic loader's search path. */
    public static final String DEFAULT_LIBRARY = "libibverbs.so.1";
    /** Overrides {@link #DEFAULT_LIBRARY} when no path is configured, so tests can substitute a stand-in. */
    public static final String LIBRARY_ENV = "MRD_IBVERBS_LIBRARY";

    /**
     * @throws MrdException EINVAL naming the setting that is negative or missing.
     */
    public ProviderConfig
    {
        Objects.requireNonNull(deviceName, "deviceName");
        Objects.requireNonNull(libraryPath, "libraryPath");
        if (null == name || name.isBlank())
        {
            throw new MrdException(ErrorCode.EINVAL, "--provider is empty: give one of " + Registrars.NAMES);
        }
        if (maxPinned < 0)
        {
            throw new MrdException(ErrorCode.EINVAL,
                "--max-pinned " + maxPinned + " is negative: give a size such as 16GiB, or 0 for no limit");
        }
        if (failNth < 0)
        {
            throw new MrdException(ErrorCode.EINVAL,
                "--fail-nth " + failNth + " is negative: give N >= 1 to fail the Nth registration, or 0");
        }
        if (latencyNanos < 0)
        {
            throw new MrdException(ErrorCode.EINVAL,
                "registration latency " + latencyNanos + "ns is negative: give 0 or more");
        }
    }

    /**
     * @return the default provider: {@code soft}, no limit of mrd's own, no fault injection.
     */
    public static ProviderConfig defaults()
    {
        return new ProviderConfig(SOFT, 0, 0, 0, Optional.empty(), Optional.empty());
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
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath);
    }

    public ProviderConfig withMaxPinned(final long maxPinned)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath);
    }

    public ProviderConfig withFailNth(final int failNth)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath);
    }

    public ProviderConfig withLatencyNanos(final long latencyNanos)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName, libraryPath);
    }

    public ProviderConfig withDeviceName(final String deviceName)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, Optional.ofNullable(deviceName),
            libraryPath);
    }

    public ProviderConfig withLibraryPath(final Path libraryPath)
    {
        return new ProviderConfig(name, maxPinned, failNth, latencyNanos, deviceName,
            Optional.ofNullable(libraryPath));
    }

    /**
     * @return the libibverbs to load: the configured path, else {@code $MRD_IBVERBS_LIBRARY}, else
     * {@value #DEFAULT_LIBRARY}.
     */
    public String library()
    {
        if (libraryPath.isPresent())
        {
            return libraryPath.get().toString();
        }
        final String fromEnv = System.getenv(LIBRARY_ENV);
        return null == fromEnv || fromEnv.isBlank() ? DEFAULT_LIBRARY : fromEnv;
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
            '}';
    }
}
