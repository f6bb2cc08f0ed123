package io.mrd.primary;

import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.provider.Registrars;

import java.math.BigDecimal;
import java.util.List;

import static io.mrd.primary.DaemonContext.ADDRESS_SPACE_END;
import static io.mrd.primary.DaemonContext.DEFAULT_BASE_VIRTADDR;
import static io.mrd.primary.DaemonContext.MAX_CACHE_CAPACITY;
import static io.mrd.primary.DaemonContext.MAX_CLIENTS;
import static io.mrd.primary.DaemonContext.MAX_JOURNAL_SIZE;
import static io.mrd.primary.DaemonContext.MIN_JOURNAL_SIZE;
import static io.mrd.primary.DaemonContext.MAX_LISTS;
import static io.mrd.primary.DaemonContext.MAX_MRS;
import static io.mrd.primary.DaemonContext.MAX_POPULATE_THREADS;
import static io.mrd.primary.DaemonContext.MAX_REGISTRATION_LATENCY_NANOS;
import static io.mrd.primary.DaemonContext.MAX_WORKER_THREADS;
import static io.mrd.primary.DaemonContext.MIN_CACHE_CAPACITY;
import static io.mrd.primary.DaemonContext.SEGMENT_SIZE;

/**
 * What {@link DaemonContext#conclude()} checks: every value of a daemon's settings, alone and together, in one
 * fixed order, so that the first wrong value is the one reported. Each refusal is EINVAL naming the option, the
 * value, what would be right and where the value came from ({@link SettingOrigins#describe}).
 */
final class DaemonSettingChecks
{
    private final SettingOrigins origins;

    private DaemonSettingChecks(final SettingOrigins origins)
    {
        this.origins = origins;
    }

    /**
     * @throws MrdException EINVAL naming the first value that is wrong, its option and variable, and what would
     *                      be right.
     */
    static void check(final DaemonContext context, final SettingOrigins origins)
    {
        new DaemonSettingChecks(origins).checkAll(context);
    }

    private void checkAll(final DaemonContext context)
    {
        final long baseVirtaddr = context.baseVirtaddr();
        final long maxMemory = context.maxMemory();
        final long listSize = context.listSize();
        final long maxExternal = context.maxExternal();
        final int maxMrs = context.maxMrs();
        final int cacheCapacity = context.cacheCapacity();
        final int maxClients = context.maxClients();
        final int heartbeatIntervalMs = context.heartbeatIntervalMs();
        final int workerThreads = context.workerThreads();
        final int populateThreads = context.populateThreads();
        final String provider = context.provider();
        final long maxPinned = context.maxPinned();
        final List<Integer> allowGids = context.allowGids();
        final int failNth = context.failNth();
        final long registrationLatencyNanos = context.registrationLatencyNanos();
        if (baseVirtaddr <= 0 || baseVirtaddr % Sizes.GIB != 0 || baseVirtaddr >= ADDRESS_SPACE_END)
        {
            throw invalid("--base-virtaddr " + Sizes.hex(baseVirtaddr) + " must be a multiple of 1GiB below " +
                Sizes.hex(ADDRESS_SPACE_END) + " (user address space), e.g. " + Sizes.hex(DEFAULT_BASE_VIRTADDR) +
                origins.describe(DaemonSetting.BASE_VIRTADDR));
        }
        if (maxMemory < SEGMENT_SIZE || maxMemory % SEGMENT_SIZE != 0)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " must be a positive multiple of " +
                Sizes.format(SEGMENT_SIZE) + origins.describe(DaemonSetting.MAX_MEMORY));
        }
        if (listSize < SEGMENT_SIZE || listSize % SEGMENT_SIZE != 0)
        {
            throw invalid("--list-size " + Sizes.format(listSize) + " must be a positive multiple of " +
                Sizes.format(SEGMENT_SIZE) + origins.describe(DaemonSetting.LIST_SIZE));
        }
        final long effectiveListSize = DaemonContext.effectiveListSize(maxMemory, listSize);
        if (maxMemory % effectiveListSize != 0)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " must be a multiple of --list-size " +
                Sizes.format(listSize) + origins.describe(DaemonSetting.MAX_MEMORY, DaemonSetting.LIST_SIZE));
        }
        final int listCount = (int)(maxMemory / effectiveListSize);
        if (listCount > MAX_LISTS)
        {
            throw invalid("--max-memory " + Sizes.format(maxMemory) + " / --list-size " + Sizes.format(listSize) +
                " gives " + listCount + " lists, more than " + MAX_LISTS + ": raise --list-size" +
                origins.describe(DaemonSetting.MAX_MEMORY, DaemonSetting.LIST_SIZE));
        }
        if (maxExternal < 0 || maxExternal % SEGMENT_SIZE != 0)
        {
            throw invalid("--max-external " + Sizes.format(maxExternal) + " must be a multiple of " +
                Sizes.format(SEGMENT_SIZE) + origins.describe(DaemonSetting.MAX_EXTERNAL));
        }
        checkRange(DaemonSetting.MAX_MRS, maxMrs, "", 1, MAX_MRS);
        checkRange(DaemonSetting.CACHE_CAPACITY, cacheCapacity, "", MIN_CACHE_CAPACITY, MAX_CACHE_CAPACITY);
        checkRange(DaemonSetting.MAX_CLIENTS, maxClients, "", 1, MAX_CLIENTS);
        checkRange(DaemonSetting.HEARTBEAT_INTERVAL, heartbeatIntervalMs, " ms", Heartbeat.MIN_INTERVAL_MS,
            Heartbeat.MAX_INTERVAL_MS);
        checkRange(DaemonSetting.WORKER_THREADS, workerThreads, "", 1, MAX_WORKER_THREADS);
        checkRange(DaemonSetting.POPULATE_THREADS, populateThreads, "", 1, MAX_POPULATE_THREADS);
        if (!Registrars.NAMES.contains(provider))
        {
            throw invalid("unknown provider '" + provider + "': --provider takes one of " +
                String.join(", ", Registrars.NAMES) + origins.describe(DaemonSetting.PROVIDER));
        }
        if (maxPinned < 0)
        {
            throw invalid("--max-pinned " + maxPinned + " is negative: give a size such as 16GiB, or 0 for no limit" +
                origins.describe(DaemonSetting.MAX_PINNED));
        }
        for (final int gid : allowGids)
        {
            if (gid < 0)
            {
                throw invalid("--allow-gid " + gid + " is negative: give a group id (see getent group)" +
                    origins.describe(DaemonSetting.ALLOW_GID));
            }
        }
        if (failNth < 0)
        {
            throw invalid("--fail-nth " + failNth + " is negative: give N >= 1 to fail the Nth registration, or 0" +
                origins.describe(DaemonSetting.FAIL_NTH));
        }
        if (registrationLatencyNanos < 0 || registrationLatencyNanos > MAX_REGISTRATION_LATENCY_NANOS)
        {
            throw invalid("--registration-latency " +
                BigDecimal.valueOf(registrationLatencyNanos, 3).stripTrailingZeros().toPlainString() +
                " must be between 0 and " + MAX_REGISTRATION_LATENCY_NANOS / 1000 + " microseconds" +
                origins.describe(DaemonSetting.REGISTRATION_LATENCY));
        }
        final long journalSize = context.journalSize();
        if (journalSize != 0 && (journalSize < MIN_JOURNAL_SIZE || journalSize > MAX_JOURNAL_SIZE))
        {
            throw invalid("--journal-size " + Sizes.format(journalSize) + " must be 0 (off) or between " +
                Sizes.format(MIN_JOURNAL_SIZE) + " and " + Sizes.format(MAX_JOURNAL_SIZE) +
                origins.describe(DaemonSetting.JOURNAL_SIZE));
        }
        final long end = baseVirtaddr + 2L * listCount * effectiveListSize + maxExternal;
        if (end > ADDRESS_SPACE_END)
        {
            throw invalid("memory from --base-virtaddr " + Sizes.hex(baseVirtaddr) + " would reach " + Sizes.hex(end) +
                ", past " + Sizes.hex(ADDRESS_SPACE_END) + " (user address space): lower --base-virtaddr or " +
                "--max-memory" +
                origins.describe(DaemonSetting.BASE_VIRTADDR, DaemonSetting.MAX_MEMORY, DaemonSetting.MAX_EXTERNAL));
        }
        // The layout's own limit (the mapping stays below 2GiB), checked here so that no daemon starts to find it.
        ControlFileLayout.compute(listCount, (int)(effectiveListSize / SEGMENT_SIZE), maxMrs, cacheCapacity,
            maxClients);
    }

    private void checkRange(
        final DaemonSetting setting, final int value, final String unit, final int min, final int max)
    {
        if (value < min || value > max)
        {
            throw invalid(setting.option() + " " + value + unit + " must be between " + min + " and " + max +
                origins.describe(setting));
        }
    }

    private static MrdException invalid(final String message)
    {
        return new MrdException(ErrorCode.EINVAL, message);
    }
}
