package io.mrd.primary;

import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.provider.ProviderConfig;
import io.mrd.primary.provider.Registrars;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.StringJoiner;

import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.CACHE_CAPACITY;
import static io.mrd.primary.DaemonSettings.DEVICE;
import static io.mrd.primary.DaemonSettings.FAIL_NTH;
import static io.mrd.primary.DaemonSettings.HUGE_DIR;
import static io.mrd.primary.DaemonSettings.IBVERBS_LIBRARY;
import static io.mrd.primary.DaemonSettings.LIST_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_CLIENTS;
import static io.mrd.primary.DaemonSettings.MAX_EXTERNAL;
import static io.mrd.primary.DaemonSettings.MAX_MEMORY;
import static io.mrd.primary.DaemonSettings.MAX_MRS;
import static io.mrd.primary.DaemonSettings.MAX_PINNED;
import static io.mrd.primary.DaemonSettings.POPULATE_THREADS;
import static io.mrd.primary.DaemonSettings.PROVIDER;
import static io.mrd.primary.DaemonSettings.REGISTRATION_LATENCY;

/**
 * The value of every setting of a daemon ({@link DaemonSettings}, one row each): {@link #set} is the command
 * line; {@link #applyEnvironment} fills what it left unset; {@link #conclude()} checks every value once, alone and
 * together, and derives the memory-segment lists; {@link #toString()} prints them all in the log at start.
 * <p>
 * A setting is unset until {@link #set} or a variable gives it a value, whatever the value: {@code --max-memory
 * 2GiB} beats {@code MRD_MAX_MEMORY=4GiB} although 2GiB is the default. So for every setting the command line
 * wins over the variable, and the variable over the default. {@link #get} returns the default of a setting still
 * unset.
 */
public final class DaemonContext
{
    /** Logical segment size: the unit of allocation and of MR bitmaps, whether backed by hugepages or not. */
    public static final long SEGMENT_SIZE = 2 * Sizes.MIB;
    /**
     * First address the daemon's memory may not reach: 1 TiB below the end of the 47-bit user address space,
     * which Linux keeps for the stack and the shared libraries it maps from the top down, in the daemon and in
     * every secondary (they map the memory at the same addresses).
     */
    public static final long ADDRESS_SPACE_END = MemoryManager.USER_VA_END - Sizes.TIB;
    /** Most memory-segment lists; a larger {@code --list-size} gives fewer. */
    public static final int MAX_LISTS = 64;

    /** What the {@code --huge-dir} value {@code none} means: no hugetlbfs, everything on tmpfs. */
    private static final String NO_HUGE_DIR = "none";

    private final Map<DaemonSetting<?>, Object> values = new HashMap<>();
    private final SettingOrigins origins = new SettingOrigins();
    /** Where defaults that depend on the environment (the run directory) are found. */
    private Map<String, String> environment = Map.of();
    private boolean concluded;

    private int listCount;
    private int segmentsPerList;

    /**
     * @return the value of {@code setting}: as set, as read from its variable, or its default.
     */
    public <T> T get(final DaemonSetting<T> setting)
    {
        @SuppressWarnings("unchecked") // set() and applyEnvironment() store only a setting's own values
        final T value = (T)values.get(setting);
        return null != value ? value : setting.defaultIn(environment);
    }

    /**
     * Gives {@code setting} a value, as the command line does: it beats the setting's variable, before or after
     * {@link #applyEnvironment}; {@link #conclude()} checks it.
     *
     * @param value the value, which {@link SettingType} may put in its one form (a path made absolute).
     */
    public <T> DaemonContext set(final DaemonSetting<T> setting, final T value)
    {
        Objects.requireNonNull(value, () -> setting.name() + ": no value (an absent one is Optional.empty())");
        values.put(setting, setting.type().canonical(value));
        origins.given(setting);
        return this;
    }

    /**
     * Gives every setting still unset the value of its variable ({@link DaemonSetting#variable()}), when that is set
     * and not blank; a run directory no option and no variable names is then found in {@code env} as
     * {@link RunDirectoryPath} says. This is the only place the daemon reads its environment.
     *
     * @param env the environment, e.g. {@link System#getenv()}.
     * @throws MrdException EINVAL naming the variable whose value is not of its kind.
     */
    public DaemonContext applyEnvironment(final Map<String, String> env)
    {
        environment = Map.copyOf(env);
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            fromEnvironment(setting, env);
        }
        return this;
    }

    private <T> void fromEnvironment(final DaemonSetting<T> setting, final Map<String, String> env)
    {
        final T value = origins.isSet(setting) ? null : setting.fromEnvironment(env);
        if (null != value)
        {
            values.put(setting, setting.type().canonical(value));
            origins.fromEnvironment(setting);
        }
    }

    /**
     * Checks every value, in the order of the rows, then what they must be together, and derives the list
     * geometry. A run directory nobody gave is {@link RunDirectoryPath}'s default in the environment applied (or
     * an empty one).
     *
     * @throws MrdException EINVAL naming the first value that is wrong, its option, where it came from, and what
     *                      would be right.
     */
    public DaemonContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            values.put(setting, checked(setting));
        }
        final long maxMemory = get(MAX_MEMORY);
        final long listSize = get(LIST_SIZE);
        final long effectiveListSize = Math.min(listSize, maxMemory);
        if (maxMemory % effectiveListSize != 0)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " must be a multiple of --list-size " +
                Sizes.format(listSize), MAX_MEMORY, LIST_SIZE);
        }
        final int lists = (int)(maxMemory / effectiveListSize);
        if (lists > MAX_LISTS)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " / --list-size " + Sizes.format(listSize) +
                " gives " + lists + " lists, more than " + MAX_LISTS + ": raise --list-size", MAX_MEMORY, LIST_SIZE);
        }
        final long base = get(BASE_VIRTADDR);
        final long end = base + 2L * lists * effectiveListSize + get(MAX_EXTERNAL);
        if (end > ADDRESS_SPACE_END)
        {
            throw invalid("memory from --base-virtaddr " + Sizes.hex(base) + " would reach " + Sizes.hex(end) +
                ", past " + Sizes.hex(ADDRESS_SPACE_END) + " (user address space): lower --base-virtaddr or " +
                "--max-memory", BASE_VIRTADDR, MAX_MEMORY, MAX_EXTERNAL);
        }
        // The layout's own limit (the mapping stays below 2GiB), checked here so that no daemon starts to find it.
        ControlFileLayout.compute(lists, (int)(effectiveListSize / SEGMENT_SIZE), get(MAX_MRS), get(CACHE_CAPACITY),
            get(MAX_CLIENTS));
        listCount = lists;
        segmentsPerList = (int)(effectiveListSize / SEGMENT_SIZE);
        concluded = true;
        return this;
    }

    /**
     * @return the value of {@code setting}, which from now on is fixed (a default found in the environment too).
     * @throws MrdException EINVAL when its row's check refuses it.
     */
    private <T> T checked(final DaemonSetting<T> setting)
    {
        final T value = get(setting);
        final String refusal = setting.refusal(value);
        if (null != refusal)
        {
            throw invalid(refusal, setting);
        }
        return value;
    }

    private MrdException invalid(final String message, final DaemonSetting<?>... settings)
    {
        return new MrdException(ErrorCode.EINVAL, message + origins.describe(settings));
    }

    /**
     * @return the provider's settings, as {@link Registrars#create} takes them.
     */
    public ProviderConfig providerConfig()
    {
        return new ProviderConfig(get(PROVIDER), get(MAX_PINNED), get(FAIL_NTH), get(REGISTRATION_LATENCY) * 1000,
            get(DEVICE), Optional.of(Path.of(get(IBVERBS_LIBRARY))), get(POPULATE_THREADS));
    }

    /**
     * @return the hugetlbfs mount {@code --huge-dir} named, absolute; empty lets the daemon look in /proc/mounts
     * (or, with {@link #hugeDisabled()}, not use one).
     */
    public Optional<Path> hugeDir()
    {
        return get(HUGE_DIR).filter(dir -> !NO_HUGE_DIR.equalsIgnoreCase(dir))
            .map(dir -> Path.of(dir).toAbsolutePath().normalize());
    }

    /**
     * @return whether {@code --huge-dir none} keeps everything on tmpfs.
     */
    public boolean hugeDisabled()
    {
        return get(HUGE_DIR).filter(NO_HUGE_DIR::equalsIgnoreCase).isPresent();
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
        final StringJoiner text = new StringJoiner(", ", "DaemonContext{", "}");
        for (final DaemonSetting<?> setting : DaemonSettings.all())
        {
            text.add(setting.name() + "=" + formatted(setting));
        }
        return text
            .add("lists=" + listCount + "x" + Sizes.format(segmentsPerList * SEGMENT_SIZE))
            .add("segmentSize=" + Sizes.format(SEGMENT_SIZE))
            .add("fromEnvironment=" + origins.variablesRead())
            .toString();
    }

    private <T> String formatted(final DaemonSetting<T> setting)
    {
        return setting.type().format(get(setting));
    }
}
