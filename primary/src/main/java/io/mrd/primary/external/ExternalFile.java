package io.mrd.primary.external;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The file a client passes for REG_EXTERNAL, made fit to be registered: open read-write, at least as long as
 * the registration, sealed so that it stays so, and with its memory allocated.
 * <p>
 * <b>Why seals.</b> The sender keeps its own descriptor. Were the file unsealed, it could {@code ftruncate} it
 * under the registration: the daemon's and the secondaries' mappings of the cut range would raise SIGBUS, and a
 * NIC would go on writing, under an lkey the daemon still hands out, to pages that no file owns any more.
 * {@code F_SEAL_SHRINK} forbids that through every descriptor, for good; {@code F_SEAL_GROW} keeps the size
 * exactly the one checked (growing is harmless, but nothing needs it). The daemon adds both itself, to the
 * descriptor it received, so a client that made its memfd with {@code MFD_ALLOW_SEALING} has nothing more to do.
 * The last size check comes after the seal, when the size can no longer change: no window is left between the
 * check and the pinning.
 * <p>
 * <b>What is refused</b> (EINVAL, with how to make a usable file): a descriptor open read-only (the daemon maps
 * the memory read-write, and the kernel seals only through a writable descriptor); a file sealed against writes;
 * a file with {@code F_SEAL_SEAL} but not both seals, which can be resized and never sealed (a memfd created
 * without {@code MFD_ALLOW_SEALING} is one: the kernel seals it so at creation); a file that cannot be sealed at
 * all (not a memfd, tmpfs or hugetlbfs file). A hugetlbfs file the daemon cannot seal (opened by path, which the
 * kernel creates with {@code F_SEAL_SEAL}; any hugetlbfs file before Linux 4.16, whose fcntl answers EINVAL) is
 * refused like any other: nothing the daemon can check proves that the sender cannot truncate it, since the
 * sender owns the file, keeps a descriptor, and may open the path again. Hugepage memory is registered as a memfd
 * made with {@code MFD_HUGETLB | MFD_ALLOW_SEALING}, which seals.
 * <p>
 * Seals cannot be removed: a registration refused after the seal (the window full, the pinning over a limit)
 * leaves them, having taken from the sender only what registering asked of it. A hole punched in the file
 * ({@code fallocate PUNCH_HOLE}) is not prevented, as only {@code F_SEAL_WRITE} would and that forbids the writes
 * the memory is for: it loses the sender's own data (the mapping reads zeros; a NIC's pinned pages stay the
 * registration's until it goes) and makes nothing fault.
 */
final class ExternalFile
{
    /** What a registered file must be sealed with. */
    static final int SEALS = Posix.F_SEAL_SHRINK | Posix.F_SEAL_GROW;
    /** How to make a file REG_EXTERNAL accepts, for every refusal. */
    static final String HOW = "create it with memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING) (add MFD_HUGETLB " +
        "for hugepages), size it with ftruncate and pass that descriptor; the daemon seals it against resizing " +
        "(MrdClient.registerExternal(length) does all of this)";

    private static final int O_ACCMODE = 3;

    private ExternalFile()
    {
    }

    /**
     * Checks, seals and backs the file behind {@code fd} for a registration of {@code length} bytes from offset 0.
     * Does not close {@code fd}.
     *
     * @throws MrdException EINVAL naming what is wrong with the file and how to make a usable one; ENOSPC or
     *                      ENOMEM when its memory cannot be allocated.
     */
    static void prepare(final int fd, final long length)
    {
        checkWritable(fd);
        // Also before the seal: a file too short is refused while its owner can still resize it.
        checkSize(fd, length, "");
        seal(fd);
        checkSize(fd, length, " (it was shrunk while the daemon sealed it)");
        allocate(fd, length);
    }

    /**
     * Adds {@link #SEALS} to the file unless it has them.
     *
     * @throws MrdException EINVAL when the file cannot be sealed so, or is sealed against writes.
     */
    private static void seal(final int fd)
    {
        final int seals;
        try
        {
            seals = Posix.getSeals(fd);
        }
        catch (final MrdException ex)
        {
            if (ex.code() == ErrorCode.EINVAL)
            {
                throw refused(fd, "cannot be sealed (" + ex.getMessage() + "): it is not a memfd, tmpfs or " +
                    "hugetlbfs file, or a hugetlbfs file on a kernel older than 4.16, so nothing stops its owner " +
                    "from truncating it under the registration");
            }
            throw ex;
        }
        if (sealedEnough(fd, seals))
        {
            return;
        }
        final int errno = Posix.addSeals(fd, SEALS);
        if (0 == errno)
        {
            return;
        }
        // EPERM with a writable descriptor: F_SEAL_SEAL, added by the sender since F_GET_SEALS.
        if (ErrorCode.EPERM.errno() == errno && sealedEnough(fd, Posix.getSeals(fd)))
        {
            return;
        }
        throw refused(fd, "could not be sealed: " + Posix.failure(errno, "fcntl(F_ADD_SEALS, F_SEAL_SHRINK | " +
            "F_SEAL_GROW)").getMessage());
    }

    /**
     * @return true when {@code seals} hold {@link #SEALS}; false when they can still be added.
     * @throws MrdException EINVAL when they cannot, or the file is sealed against writes.
     */
    private static boolean sealedEnough(final int fd, final int seals)
    {
        if (0 != (seals & (Posix.F_SEAL_WRITE | Posix.F_SEAL_FUTURE_WRITE)))
        {
            throw refused(fd, "is sealed against writing (seals " + names(seals) + "): registered memory is " +
                "written by the NIC and the secondaries, so it must stay writable");
        }
        if ((seals & SEALS) == SEALS)
        {
            return true;
        }
        if (0 != (seals & Posix.F_SEAL_SEAL))
        {
            throw refused(fd, "has the seals " + names(seals) + ": with F_SEAL_SEAL but not both F_SEAL_SHRINK " +
                "and F_SEAL_GROW it can be resized under the registration and never sealed against that (the " +
                "kernel seals so a memfd created without MFD_ALLOW_SEALING, and a tmpfs or hugetlbfs file opened " +
                "by path)");
        }
        return false;
    }

    /**
     * A read-only descriptor can be neither sealed nor mapped read-write: said plainly, not as fcntl's EPERM.
     */
    private static void checkWritable(final int fd)
    {
        final int flags = openFlags(fd);
        if (flags >= 0 && (flags & O_ACCMODE) != Posix.O_RDWR)
        {
            throw refused(fd, "is open " + ((flags & O_ACCMODE) == Posix.O_RDONLY ? "read-only" : "write-only") +
                ": the daemon maps it read-write and can seal it only through a writable descriptor, so pass one " +
                "open O_RDWR");
        }
    }

    /**
     * A file shorter than the range would map pages that raise SIGBUS when touched.
     */
    private static void checkSize(final int fd, final long length, final String when)
    {
        final long size;
        try
        {
            size = Files.size(procFd(fd));
        }
        catch (final IOException ex)
        {
            // The check is what makes the registration safe: no size, no registration.
            throw new MrdException(ErrorCode.EINVAL, "cannot read the size of the file passed for REG_EXTERNAL " +
                "through " + procFd(fd) + " (" + ex + "): the daemon needs /proc mounted");
        }
        if (size < length)
        {
            throw new MrdException(ErrorCode.EINVAL, "the file passed for REG_EXTERNAL (" + name(fd) + ") has " +
                size + " bytes, fewer than the " + length + " to register" + when + ": size it (ftruncate) " +
                "before registering");
        }
    }

    /**
     * Allocates the file's pages before they are mapped and pinned, so that a shortage of the memory itself (no
     * free hugepages, a memory limit) is reported as that and not as a failure to pin (an mmap ENOMEM, an mlock
     * ENOMEM read as RLIMIT_MEMLOCK). Within the sealed size, so F_SEAL_GROW allows it.
     */
    private static void allocate(final int fd, final long length)
    {
        final int errno = Posix.allocateFile(fd, 0, length);
        if (0 == errno)
        {
            return;
        }
        final String call = "fallocate of the " + Sizes.format(length) + " of the file passed for REG_EXTERNAL (" +
            name(fd) + ") failed: " + ErrorCode.describe(errno);
        if (ErrorCode.ENOSPC.errno() == errno || ErrorCode.ENOMEM.errno() == errno)
        {
            throw new MrdException(ErrorCode.of(errno), call + ": the system cannot supply the file's memory, " +
                "before anything is pinned: a hugetlbfs file (MFD_HUGETLB) needs that many free hugepages " +
                "(HugePages_Free in /proc/meminfo; raise vm.nr_hugepages, e.g. with scripts/setup-hugepages), any " +
                "other file that much free memory within the daemon's memory limit");
        }
        throw new MrdException(ErrorCode.of(errno), call);
    }

    private static MrdException refused(final int fd, final String what)
    {
        return new MrdException(ErrorCode.EINVAL, "the file passed for REG_EXTERNAL (" + name(fd) + ") " + what +
            ": " + HOW);
    }

    /**
     * @return the open flags of {@code fd} (the "flags:" line of /proc/self/fdinfo, octal), or -1 when unknown.
     */
    private static int openFlags(final int fd)
    {
        try
        {
            for (final String line : Files.readAllLines(Path.of("/proc/self/fdinfo/" + fd)))
            {
                if (line.startsWith("flags:"))
                {
                    return Integer.parseInt(line.substring("flags:".length()).trim(), 8);
                }
            }
        }
        catch (final IOException | NumberFormatException ex)
        {
            // unknown: fcntl and mmap report what they find
        }
        return -1;
    }

    /**
     * @return what the descriptor refers to ({@code /memfd:NAME (deleted)}, a path, {@code pipe:[N]}).
     */
    private static String name(final int fd)
    {
        try
        {
            return Files.readSymbolicLink(procFd(fd)).toString();
        }
        catch (final IOException | UnsupportedOperationException ex)
        {
            return "fd " + fd;
        }
    }

    private static Path procFd(final int fd)
    {
        return Path.of("/proc/self/fd/" + fd);
    }

    /**
     * @return {@code seals} as {@code F_SEAL_*} names joined by {@code |}, or {@code none}.
     */
    private static String names(final int seals)
    {
        final StringBuilder sb = new StringBuilder();
        final String[] names = {"F_SEAL_SEAL", "F_SEAL_SHRINK", "F_SEAL_GROW", "F_SEAL_WRITE", "F_SEAL_FUTURE_WRITE"};
        for (int bit = 0; bit < names.length; bit++)
        {
            if (0 != (seals & 1 << bit))
            {
                sb.append(sb.isEmpty() ? "" : " | ").append(names[bit]);
            }
        }
        return sb.isEmpty() ? "none" : sb.toString();
    }
}
