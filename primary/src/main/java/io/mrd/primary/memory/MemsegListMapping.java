package io.mrd.primary.memory;

import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.nio.file.Path;

/**
 * The daemon's side of one memory-segment list's memory: its reserved address range and its backing file,
 * and how the daemon maps the one over the other.
 * <p>
 * <b>A tmpfs list is mapped whole, once.</b> Changing a mapping takes the process's {@code mmap_lock} for
 * writing, and every populating {@code madvise} and every pin of a registration holds it for reading: were
 * ALLOC and FREE to map and unmap segments, each would queue behind whatever registration is faulting pages
 * in (a 1 GiB one takes seconds on a small VM). Mapped whole, ALLOC changes nothing in the daemon's address
 * space and FREE only punches the hole, which takes the file's locks, not the process's. The sparse file
 * costs nothing where no page was touched, and the punch takes the pages out of this mapping as out of every
 * secondary's. The price is that a freed range of the daemon's own mapping stays accessible (empty) rather
 * than fault: the daemon touches list memory only to populate ranges a registration holds.
 * <p>
 * <b>A hugetlbfs list is mapped allocation by allocation</b> over the reservation, as before: a shared
 * hugetlbfs mapping reserves the pool's pages for all of its range when it is made, so mapping a list whole
 * would ask the pool for the whole list, and the per-allocation mapping is where a pool too small is told
 * apart from any other failure.
 * <p>
 * Not thread-safe; {@link MemsegList} says which lock covers each call.
 */
final class MemsegListMapping
{
    private final long baseVa;
    private final long length;
    private final boolean hugetlbfs;
    private final Path backingPath;
    private final int fd;
    private boolean closed;

    /**
     * Reserves {@code [baseVa, baseVa + length)}, creates (or takes over) the backing file and, on tmpfs, maps
     * it over the whole reservation. Undoes what it did when a step fails.
     *
     * @param adoptedFd -1 to create the file; else a predecessor's file, locked, kept as it is (not truncated).
     *
     * @throws MrdException EEXIST when the range is already mapped, EBUSY when another live daemon holds the
     *                      backing file, or the failing call's errno.
     */
    MemsegListMapping(final long baseVa, final long length, final Path backingPath, final boolean hugetlbfs,
        final int adoptedFd)
    {
        this.baseVa = baseVa;
        this.length = length;
        this.hugetlbfs = hugetlbfs;
        this.backingPath = backingPath;

        Posix.reserve(baseVa, length);
        try
        {
            fd = adoptedFd >= 0 ? adoptedFd : BackingFiles.open(backingPath, length);
        }
        catch (final RuntimeException ex)
        {
            Posix.munmapQuietly(baseVa, length);
            throw ex;
        }
        if (!hugetlbfs)
        {
            try
            {
                Posix.mapFixed(baseVa, length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
            }
            catch (final RuntimeException ex)
            {
                Posix.munmapQuietly(baseVa, length);
                if (adoptedFd < 0)
                {
                    BackingFiles.deleteQuietly(backingPath);
                    Posix.close(fd);
                }
                throw ex;
            }
        }
    }

    /**
     * Makes {@code [address, address + bytes)}, backed from {@code offset} of the file, usable in the daemon:
     * maps it read-write and shared over a hugetlbfs list's reservation; a tmpfs list is mapped already. On
     * failure the range is put back to reserved address space and the errno's exception is thrown.
     */
    void map(final long address, final long offset, final long bytes)
    {
        if (!hugetlbfs)
        {
            return;
        }
        try
        {
            Posix.mapFixed(address, bytes, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, offset);
        }
        catch (final MrdException ex)
        {
            // A failed MAP_FIXED may already have unmapped the old range; re-reserve it so that no one else's
            // mmap can land inside the list.
            try
            {
                Posix.unmapToReservation(address, bytes);
            }
            catch (final MrdException ignore)
            {
                // the original failure is what the caller must see
            }
            throw ex;
        }
    }

    /**
     * Gives the pages of {@code [address, address + bytes)}, backed from {@code offset} of the file, back to
     * the system, after putting a hugetlbfs list's range back to reserved address space (a tmpfs list stays
     * mapped whole: the punch empties the range in every process that maps it).
     *
     * @throws MrdException when either step fails.
     */
    void unmapAndPunch(final long address, final long offset, final long bytes)
    {
        if (hugetlbfs)
        {
            Posix.unmapToReservation(address, bytes);
        }
        final int errno = Posix.punchHole(fd, offset, bytes);
        if (errno != 0)
        {
            throw Posix.failure(errno, "fallocate(PUNCH_HOLE " + backingPath + ", offset " + Sizes.hex(offset) +
                ", " + Sizes.format(bytes) + ")");
        }
    }

    /**
     * Unmaps the whole reservation, deletes the backing file and closes it. Idempotent.
     */
    void close()
    {
        if (!closed)
        {
            closed = true;
            Posix.munmapQuietly(baseVa, length);
            BackingFiles.deleteQuietly(backingPath);
            // Unlocks last, so that a daemon cleaning stale files never sees this one unlocked and present.
            Posix.close(fd);
        }
    }

    /** @return the backing file's descriptor (owned here), what the descriptor holder keeps for a successor. */
    int fd()
    {
        return fd;
    }

    boolean isClosed()
    {
        return closed;
    }
}
