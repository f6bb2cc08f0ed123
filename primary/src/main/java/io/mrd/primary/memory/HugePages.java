package io.mrd.primary.memory;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Where the daemon can get 2 MiB huge pages: the hugetlbfs mounts listed in {@code /proc/mounts} and the
 * kernel's pool counters in {@code /sys/kernel/mm/hugepages/hugepages-2048kB/}.
 * <p>
 * A hugetlbfs file maps only pages the kernel has reserved for it, so "available" here is
 * {@code free_hugepages - resv_hugepages}: pages reserved by other mappings count as free in
 * {@code free_hugepages} but cannot be had.
 */
public final class HugePages
{
    /** The huge page size mrd's segments are cut to. */
    public static final long PAGE_SIZE_2M = 2 * Sizes.MIB;

    /** The script that sets huge pages up, named in every message about missing pages. */
    public static final String SETUP_SCRIPT = "scripts/setup-hugepages";

    private static final Path PROC_MOUNTS = Path.of("/proc/mounts");
    private static final Path PROC_MEMINFO = Path.of("/proc/meminfo");
    private static final Path POOL_2M = Path.of("/sys/kernel/mm/hugepages/hugepages-2048kB");
    private static final String HUGETLBFS = "hugetlbfs";

    /**
     * One line of {@code /proc/mounts}.
     *
     * @param path     the mount point.
     * @param type     the file-system type, {@code hugetlbfs} for huge pages.
     * @param pageSize for hugetlbfs the {@code pagesize=} option (else the system's default huge page
     *                 size); 0 for other file systems.
     */
    public record Mount(Path path, String type, long pageSize)
    {
        /**
         * @return whether this is a hugetlbfs mount.
         */
        public boolean isHugetlbfs()
        {
            return HUGETLBFS.equals(type);
        }
    }

    private HugePages()
    {
    }

    /**
     * @return every mount of the system, in {@code /proc/mounts} order; empty when it cannot be read.
     */
    public static List<Mount> mounts()
    {
        try
        {
            return parseMounts(Files.readAllLines(PROC_MOUNTS), defaultPageSize());
        }
        catch (final IOException ex)
        {
            return List.of();
        }
    }

    /**
     * @return the hugetlbfs mounts of the system.
     */
    public static List<Mount> hugetlbfsMounts()
    {
        return mounts().stream().filter(Mount::isHugetlbfs).toList();
    }

    /**
     * Parses lines in the {@code /proc/mounts} format ({@code device mountpoint type options dump pass}),
     * undoing the kernel's octal escapes ({@code \040} for a space) in the mount point.
     *
     * @param lines           the lines.
     * @param defaultPageSize huge page size of a hugetlbfs mount without {@code pagesize=}.
     * @return the mounts; malformed lines are skipped.
     */
    public static List<Mount> parseMounts(final List<String> lines, final long defaultPageSize)
    {
        final List<Mount> mounts = new ArrayList<>();
        for (final String line : lines)
        {
            final String[] fields = line.trim().split("\\s+");
            if (fields.length < 4)
            {
                continue;
            }
            final String type = fields[2];
            long pageSize = 0;
            if (HUGETLBFS.equals(type))
            {
                pageSize = defaultPageSize;
                for (final String option : fields[3].split(","))
                {
                    if (option.startsWith("pagesize="))
                    {
                        try
                        {
                            pageSize = Sizes.parse(option.substring("pagesize=".length()));
                        }
                        catch (final MrdException ex)
                        {
                            pageSize = defaultPageSize;
                        }
                    }
                }
            }
            mounts.add(new Mount(Path.of(unescape(fields[1])), type, pageSize));
        }
        return mounts;
    }

    /**
     * @param dir a directory.
     * @return the mount {@code dir} lies on (the longest mount point that is a prefix of its real path),
     * or empty when it does not exist or no mount matches.
     */
    public static Optional<Mount> mountOf(final Path dir)
    {
        return mountOf(dir, mounts());
    }

    static Optional<Mount> mountOf(final Path dir, final List<Mount> mounts)
    {
        final Path real;
        try
        {
            real = dir.toRealPath();
        }
        catch (final IOException ex)
        {
            return Optional.empty();
        }
        Mount best = null;
        for (final Mount mount : mounts)
        {
            // Later lines win on equal length: a mount stacked over another one hides it.
            if (real.startsWith(mount.path()) &&
                (null == best || mount.path().getNameCount() >= best.path().getNameCount()))
            {
                best = mount;
            }
        }
        return Optional.ofNullable(best);
    }

    /**
     * @return 2 MiB huge pages in the kernel's pool ({@code nr_hugepages}), 0 when there is no pool.
     */
    public static long totalPages()
    {
        return readCounter("nr_hugepages");
    }

    /**
     * @return 2 MiB huge pages not yet faulted in by anyone ({@code free_hugepages}), reserved ones included.
     */
    public static long freePages()
    {
        return readCounter("free_hugepages");
    }

    /**
     * @return 2 MiB huge pages reserved by mappings but not yet faulted in ({@code resv_hugepages}).
     */
    public static long reservedPages()
    {
        return readCounter("resv_hugepages");
    }

    /**
     * @return 2 MiB huge pages a new mapping can still get: free minus reserved.
     */
    public static long availablePages()
    {
        return Math.max(0, freePages() - reservedPages());
    }

    /**
     * @return one line describing the 2 MiB pool, for messages and the daemon's start-up log.
     */
    public static String describePool()
    {
        return "2MiB huge pages: " + availablePages() + " available of " + totalPages() + " (free " +
            freePages() + ", reserved " + reservedPages() + ")";
    }

    /**
     * Chooses the hugetlbfs directory the memory-segment lists are backed from.
     *
     * @param explicitHugeDir the directory given with {@code --huge-dir}, if any.
     * @param pagesNeeded     2 MiB pages that must be available for hugetlbfs to be worth using.
     * @return the explicit directory, or the first 2 MiB hugetlbfs mount, when at least {@code pagesNeeded}
     * pages are available; empty otherwise (the caller falls back to tmpfs and says so).
     * @throws MrdException EINVAL when the explicit directory is not on a 2 MiB hugetlbfs mount, with the
     *                      command that mounts one.
     */
    public static Optional<Path> findMountWithFreePages(final Optional<Path> explicitHugeDir, final long pagesNeeded)
    {
        final List<Mount> mounts = mounts();
        final Path chosen;
        if (explicitHugeDir.isPresent())
        {
            final Path dir = explicitHugeDir.get();
            final Optional<Mount> mount = mountOf(dir, mounts);
            if (mount.isEmpty() || !mount.get().isHugetlbfs())
            {
                throw new MrdException(ErrorCode.EINVAL, "--huge-dir " + dir + " is not on a hugetlbfs mount" +
                    mount.map(m -> " (it is on " + m.type() + " at " + m.path() + ")").orElse("") +
                    ": run '" + SETUP_SCRIPT + " <pages>' (as root), or 'mount -t hugetlbfs -o pagesize=2M nodev " +
                    dir + "', or leave --huge-dir out to use tmpfs");
            }
            if (mount.get().pageSize() != PAGE_SIZE_2M)
            {
                throw new MrdException(ErrorCode.EINVAL, "--huge-dir " + dir + " is a hugetlbfs mount of " +
                    Sizes.format(mount.get().pageSize()) + " pages but mrd's segments are 2MiB: mount one with " +
                    "'mount -t hugetlbfs -o pagesize=2M nodev <dir>' or run '" + SETUP_SCRIPT + " <pages>'");
            }
            chosen = dir;
        }
        else
        {
            chosen = mounts.stream()
                .filter(m -> m.isHugetlbfs() && m.pageSize() == PAGE_SIZE_2M && Files.isWritable(m.path()))
                .map(Mount::path)
                .findFirst()
                .orElse(null);
        }
        if (null == chosen || availablePages() < pagesNeeded)
        {
            return Optional.empty();
        }
        return Optional.of(chosen);
    }

    /**
     * @param pagesNeeded 2 MiB pages.
     * @return whether a writable 2 MiB hugetlbfs mount exists and the pool has that many pages available.
     */
    public static boolean available(final long pagesNeeded)
    {
        return findMountWithFreePages(Optional.empty(), pagesNeeded).isPresent();
    }

    private static long readCounter(final String name)
    {
        try
        {
            return Long.parseLong(Files.readString(POOL_2M.resolve(name)).trim());
        }
        catch (final IOException | NumberFormatException ex)
        {
            return 0;
        }
    }

    private static long defaultPageSize()
    {
        try
        {
            for (final String line : Files.readAllLines(PROC_MEMINFO))
            {
                if (line.startsWith("Hugepagesize:"))
                {
                    final String[] fields = line.substring("Hugepagesize:".length()).trim().split("\\s+");
                    return Long.parseLong(fields[0]) * Sizes.KIB;
                }
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            // fall through to the x86-64 default
        }
        return PAGE_SIZE_2M;
    }

    private static String unescape(final String field)
    {
        if (field.indexOf('\\') < 0)
        {
            return field;
        }
        final StringBuilder out = new StringBuilder(field.length());
        for (int i = 0; i < field.length(); i++)
        {
            final char c = field.charAt(i);
            if (c == '\\' && isOctal(field, i + 1))
            {
                out.append((char)Integer.parseInt(field.substring(i + 1, i + 4), 8));
                i += 3;
            }
            else
            {
                out.append(c);
            }
        }
        return out.toString();
    }

    private static boolean isOctal(final String s, final int from)
    {
        if (from + 3 > s.length())
        {
            return false;
        }
        for (int i = from; i < from + 3; i++)
        {
            final char c = s.charAt(i);
            if (c < '0' || c > '7')
            {
                return false;
            }
        }
        return true;
    }
}
