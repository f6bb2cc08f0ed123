package io.mrd.primary.memory;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Where the lists' pages come from: one backing file per list, on hugetlbfs ({@code mrd-<pid>-list-<i>} in the
 * shared mount, named by pid so that daemons of several directories can share it) or on tmpfs
 * ({@code DIR/mem/list-<i>}); the removal of files dead daemons left on hugetlbfs; and the two ways a backing
 * file system runs out of pages, turned into ENOMEM errors that say what to do.
 */
final class BackingFiles
{
    private static final Pattern HUGE_FILE = Pattern.compile("mrd-\\d+-list-\\d+");

    private final Optional<Path> hugeDir;
    private final Path memDir;

    BackingFiles(final Optional<Path> hugeDir, final Path memDir)
    {
        this.hugeDir = hugeDir;
        this.memDir = memDir;
    }

    /**
     * Creates the directory the files go in and, on hugetlbfs, removes the stale files found there.
     *
     * @throws MrdException EIO when the directory cannot be created.
     */
    void prepare()
    {
        final Path dir = hugeDir.orElse(memDir);
        try
        {
            Files.createDirectories(dir);
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot create memory directory " + dir + ": " + ex);
        }
        hugeDir.ifPresent(BackingFiles::removeStale);
    }

    /**
     * @return the page size of the backing file system: the hugetlbfs mount's, else 4 KiB.
     */
    long pageSize()
    {
        return hugeDir.map(BackingFiles::hugePageSize).orElse(4096L);
    }

    boolean isHugetlbfs()
    {
        return hugeDir.isPresent();
    }

    /**
     * @return the backing file of list {@code index}.
     */
    Path path(final int index)
    {
        return hugeDir.isPresent() ? hugeDir.get().resolve("mrd-" + ProcessHandle.current().pid() + "-list-" + index) :
            memDir.resolve("list-" + index);
    }

    /**
     * Creates or takes over the backing file and sizes it, sparse.
     * <p>
     * The file is locked ({@code flock LOCK_EX}) for the list's lifetime before it is truncated: a file of a
     * live daemon (a pid reused in another pid namespace sharing the hugetlbfs mount) is then refused instead
     * of truncated under that daemon's mappings, and a file nobody holds a lock on is known to be stale
     * (DPDK clears its hugepage directory the same way).
     */
    static int open(final Path path, final long length)
    {
        final int fd = Posix.open(path.toString(), Posix.O_RDWR | Posix.O_CREAT | Posix.O_CLOEXEC, 0660);
        boolean locked = false;
        try
        {
            final int errno = Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB);
            if (errno == ErrorCode.EAGAIN.errno())
            {
                throw new MrdException(ErrorCode.EBUSY, "backing file " + path +
                    " is in use by another mrd daemon: give each daemon its own --dir or --huge-dir");
            }
            if (errno != 0)
            {
                throw Posix.failure(errno, "flock(" + path + ")");
            }
            locked = true;
            // Drop whatever a dead daemon left in the file, then size it: sparse, so unallocated segments
            // cost nothing.
            Posix.ftruncate(fd, 0);
            Posix.ftruncate(fd, length);
            return fd;
        }
        catch (final RuntimeException ex)
        {
            Posix.close(fd);
            if (locked)
            {
                deleteQuietly(path);
            }
            throw ex;
        }
    }

    /**
     * Maps {@code [first, first + n)} of the list, turning hugetlbfs running out of pages into an ENOMEM that
     * names the pool and the ways to grow it.
     *
     * @param length the bytes the client asked for (for the message).
     */
    void map(final MemsegList list, final int first, final int n, final long length)
    {
        try
        {
            list.map(first, n);
        }
        catch (final MrdException ex)
        {
            if (list.isHugetlbfs() && (ex.code() == ErrorCode.ENOMEM || ex.code() == ErrorCode.EINVAL))
            {
                // No silent fallback to tmpfs mid-run: secondaries and tools were told at start where the
                // memory lives, and the operator should learn that the pool is too small.
                throw new MrdException(ErrorCode.ENOMEM, "cannot allocate " + Sizes.format(length) + " (" + n +
                    " huge pages of " + Sizes.format(list.pageSize()) + ") from hugetlbfs at " + hugeDir.orElseThrow() +
                    ": hugetlbfs ran out of pages (" + HugePages.describePool() + "); add pages with '" +
                    HugePages.SETUP_SCRIPT + " <pages>' or 'echo <pages> > " +
                    "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages' as root, or start the daemon " +
                    "without --huge-dir to use tmpfs (" + ex.getMessage() + ")", ex);
            }
            throw ex;
        }
    }

    /**
     * A tmpfs that fills up does not fail the mapping: the first write to an unbacked page kills the writer
     * with SIGBUS. Checking the free space first turns the common case (a small /dev/shm) into an ENOMEM.
     * The check is approximate: pages allocated but not yet touched are not counted as used.
     */
    static void checkSpace(final MemsegList list, final long length, final long bytes)
    {
        if (list.isHugetlbfs())
        {
            return;
        }
        final long usable;
        try
        {
            usable = Files.getFileStore(list.backingPath()).getUsableSpace();
        }
        catch (final IOException | RuntimeException ex)
        {
            return;
        }
        if (usable < bytes)
        {
            throw new MrdException(ErrorCode.ENOMEM, "cannot allocate " + Sizes.format(length) + ": the file " +
                "system of " + list.backingPath().getParent() + " has only " + Sizes.format(usable) +
                " free to back " + Sizes.format(bytes) + "; free memory there, enlarge it (e.g. 'mount -o " +
                "remount,size=<n>G /dev/shm') or use huge pages (" + HugePages.SETUP_SCRIPT + ")");
        }
    }

    /**
     * Removes backing files that dead daemons left in a hugetlbfs directory, where they would hold huge pages
     * until reboot. A file is stale when no one holds its {@code flock}: every live list holds its own.
     *
     * @param dir a hugetlbfs directory.
     * @return files removed.
     */
    static int removeStale(final Path dir)
    {
        int removed = 0;
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir))
        {
            for (final Path file : files)
            {
                if (!HUGE_FILE.matcher(file.getFileName().toString()).matches())
                {
                    continue;
                }
                final int fd;
                try
                {
                    fd = Posix.open(file.toString(), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
                }
                catch (final MrdException ex)
                {
                    continue;
                }
                try
                {
                    if (Posix.flock(fd, Posix.LOCK_EX | Posix.LOCK_NB) == 0)
                    {
                        Files.deleteIfExists(file);
                        removed++;
                    }
                }
                catch (final IOException ignore)
                {
                    // not ours to remove after all (permissions): leave it
                }
                finally
                {
                    Posix.close(fd);
                }
            }
        }
        catch (final IOException ignore)
        {
            // an unreadable directory fails clearly when the first list is created in it
        }
        return removed;
    }

    static void deleteQuietly(final Path path)
    {
        try
        {
            Files.deleteIfExists(path);
        }
        catch (final IOException ignore)
        {
            // the next daemon on this directory truncates it before use
        }
    }

    private static long hugePageSize(final Path dir)
    {
        return HugePages.mountOf(dir).filter(HugePages.Mount::isHugetlbfs).map(HugePages.Mount::pageSize)
            .orElse(HugePages.PAGE_SIZE_2M);
    }
}
