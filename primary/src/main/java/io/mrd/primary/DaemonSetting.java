package io.mrd.primary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.provider.ProviderConfig;

import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * The daemon's settings as an operator names them: the {@code mrd start} option and the {@code MRD_*} variable of
 * each ({@link DaemonContext} holds the values and the defaults). Every variable is {@code MRD_} and the option's
 * name in capitals, but for {@code MRD_HEARTBEAT_INTERVAL_MS}, which names its unit, and
 * {@code MRD_IBVERBS_LIBRARY}, which has no option.
 */
public enum DaemonSetting
{
    DIR("--dir", RunDirectoryPath.MRD_DIR, "a directory"),
    HUGE_DIR("--huge-dir", "MRD_HUGE_DIR", "a hugetlbfs mount or 'none'"),
    BASE_VIRTADDR("--base-virtaddr", "MRD_BASE_VIRTADDR", "an address such as 0x100000000000"),
    MAX_MEMORY("--max-memory", "MRD_MAX_MEMORY", "a size such as 4GiB"),
    LIST_SIZE("--list-size", "MRD_LIST_SIZE", "a size such as 512MiB"),
    MAX_EXTERNAL("--max-external", "MRD_MAX_EXTERNAL", "a size such as 1GiB"),
    MAX_MRS("--max-mrs", "MRD_MAX_MRS", "a number"),
    CACHE_CAPACITY("--cache-capacity", "MRD_CACHE_CAPACITY", "a number"),
    MAX_CLIENTS("--max-clients", "MRD_MAX_CLIENTS", "a number"),
    WORKER_THREADS("--worker-threads", "MRD_WORKER_THREADS", "a number"),
    POPULATE_THREADS("--populate-threads", "MRD_POPULATE_THREADS", "a number"),
    HEARTBEAT_INTERVAL("--heartbeat-interval", "MRD_HEARTBEAT_INTERVAL_MS", "a number of milliseconds"),
    MR_EXT_MEMSEG("--mr-ext-memseg", "MRD_MR_EXT_MEMSEG", "true or false"),
    PROVIDER("--provider", "MRD_PROVIDER", "a provider name"),
    DEVICE("--device", "MRD_DEVICE", "a device name"),
    MAX_PINNED("--max-pinned", "MRD_MAX_PINNED", "a size such as 16GiB"),
    ALLOW_GID("--allow-gid", "MRD_ALLOW_GID", "group ids separated by commas"),
    METRICS("--metrics", "MRD_METRICS", "HOST:PORT with a host that resolves and a port of 0 to 65535 (e.g. " +
        "127.0.0.1:9464 or :9464)"),
    FAIL_NTH("--fail-nth", "MRD_FAIL_NTH", "a number"),
    REGISTRATION_LATENCY("--registration-latency", "MRD_REGISTRATION_LATENCY", "a number of microseconds"),
    JOURNAL_SIZE("--journal-size", "MRD_JOURNAL_SIZE", "a size such as 64MiB, or 0 or 'off' for no journal"),
    IBVERBS_LIBRARY(null, ProviderConfig.LIBRARY_ENV, "a library path or soname");

    private final String option;
    private final String variable;
    private final String expected;

    DaemonSetting(final String option, final String variable, final String expected)
    {
        this.option = option;
        this.variable = variable;
        this.expected = expected;
    }

    /**
     * @return the {@code mrd start} option, or null when there is none.
     */
    public String option()
    {
        return option;
    }

    public String variable()
    {
        return variable;
    }

    /**
     * @param value what this setting's option was given; null (unset) passes.
     * @throws MrdException EINVAL when it is empty or blank: for a path that would silently name the current
     *                      directory.
     */
    void requireNonBlank(final String value)
    {
        if (null != value && value.isBlank())
        {
            throw new MrdException(ErrorCode.EINVAL, option + " '" + value + "' is empty: give " + expected);
        }
    }

    /**
     * @return {@code micros} (the unit of {@code --registration-latency}) in nanoseconds.
     * @throws MrdException EINVAL when that does not fit in a {@code long}, rather than wrap into range.
     */
    public static long microsToNanos(final long micros)
    {
        if (micros > Long.MAX_VALUE / 1000 || micros < Long.MIN_VALUE / 1000)
        {
            throw new MrdException(ErrorCode.EINVAL, REGISTRATION_LATENCY.option + " " + micros + " must be between 0 " +
                "and " + DaemonContext.MAX_REGISTRATION_LATENCY_NANOS / 1000 + " microseconds");
        }
        return micros * 1000;
    }

    /**
     * @param env    the environment.
     * @param parser turns the variable's text into a value, throwing any {@link RuntimeException} if it cannot.
     * @return the value of this setting's variable, or null when it is unset or blank.
     * @throws MrdException EINVAL naming the variable, its text and what it should be.
     */
    <T> T fromEnvironment(final Map<String, String> env, final Function<String, T> parser)
    {
        final String text = env.get(variable);
        if (null == text || text.isBlank())
        {
            return null;
        }
        try
        {
            return parser.apply(text.trim());
        }
        catch (final RuntimeException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, variable + "='" + text + "' is not " + expected +
                ": correct or unset it" + (null == option ? "" : ", or give " + option + " (it beats the variable)"));
        }
    }

    /**
     * @param text   the value given to this setting's option.
     * @param parser as for {@link #fromEnvironment}.
     * @return the value.
     * @throws MrdException EINVAL naming the option, its text and what it should be.
     */
    <T> T fromOption(final String text, final Function<String, T> parser)
    {
        try
        {
            return parser.apply(text.trim());
        }
        catch (final RuntimeException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, option + " '" + text + "' is not " + expected);
        }
    }

    static Boolean parseBoolean(final String text)
    {
        if ("true".equalsIgnoreCase(text) || "false".equalsIgnoreCase(text))
        {
            return Boolean.parseBoolean(text);
        }
        throw new IllegalArgumentException(text);
    }

    /** @return the bytes of {@code --journal-size}: a size, or 0 for {@code off}. */
    static long parseJournalSize(final String text)
    {
        return "off".equalsIgnoreCase(text) ? 0 : Sizes.parse(text);
    }

    static List<Integer> parseGids(final String text)
    {
        final List<Integer> gids = new ArrayList<>();
        for (final String gid : text.split(","))
        {
            gids.add(Integer.parseInt(gid.trim()));
        }
        return gids;
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
