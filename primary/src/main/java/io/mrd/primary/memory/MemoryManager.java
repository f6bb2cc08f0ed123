package io.mrd.primary.memory;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.ReentrantReadWriteLock;
import java.util.regex.Pattern;

import static io.mrd.layout.MemsegListDescriptor.OWNER_DAEMON;

/**
 * The daemon's memory: {@link MemoryConfig#listCount()} memory-segment lists placed
 * {@link #listStride(int, long)} apart from {@link MemoryConfig#baseVirtaddr()}, first-fit allocation of
 * contiguous runs of segments for clients, and the contiguity queries the MR engine builds MRs from
 * (DPDK's {@code rte_memseg_contig_walk}).
 * <p>
 * Lists are placed twice their own length apart, and the gap is left unreserved: two lists are then never
 * virtually contiguous, so a chunk (and the MR made from it) never spans two backing files.
 * <p>
 * <b>Locking.</b> One {@link ReentrantReadWriteLock}, {@link #memoryLock()}, plays the part of DPDK's memory
 * hotplug lock: {@link #allocate}, {@link #free} and {@link #freeAllOwnedBy} take it for writing; the MR
 * engine takes it for reading around {@link #contiguousChunk} / {@link #segmentOf} and whatever it does with
 * the answer, so that the chunk cannot change under it. Lookups of geometry ({@link #listOf},
 * {@link #list}) need no lock.
 * <p>
 * <b>Freeing is two steps</b>, so that the MR engine runs its memory free event between them:
 * <ol>
 * <li>{@link #free} (or {@link #freeAllOwnedBy}) takes the segments out of use in the bookkeeping, under the
 * write lock, and returns a {@link FreedRange}. From then on {@link #contiguousChunk} no longer sees them, but
 * they stay mapped and cannot be allocated again;</li>
 * <li>the caller runs the memory free event for the range (clears the segments' bits in every MR covering
 * them, rebuilds the global cache, bumps devGen), so that no lkey for the range is handed out any more;</li>
 * <li>the caller calls {@link #release}, which unmaps the range and punches its pages out of the backing file
 * with no lock held (giving pages back can be slow and must not stall lookups or allocations), then makes
 * the segments free for allocation.</li>
 * </ol>
 * Unmapping before the MR engine has cleared its bitmaps would leave registrations over memory that is gone;
 * allocating the segments again before {@link #release} would let its unmap destroy the new owner's mapping,
 * which is why freed segments stay withheld until then.
 */
public final class MemoryManager implements AutoCloseable
{
    /** First address past the 47-bit user address space of x86-64 and arm64 with 4-level page tables. */
    public static final long USER_VA_END = 1L << 47;

    private static final Pattern HUGE_FILE = Pattern.compile("mrd-\\d+-list-\\d+");

    private final ReentrantReadWriteLock memoryLock = new ReentrantReadWriteLock();
    /**
     * Orders {@link #release} (read side, many at once) against {@link #close} (write side): a release racing
     * a close would otherwise re-reserve unmapped address space or punch a hole through a file descriptor
     * number that has been closed and reused.
     */
    private final ReentrantReadWriteLock lifecycleLock = new ReentrantReadWriteLock();
    private final long baseVirtaddr;
    private final long segmentSize;
    private final int segmentShift;
    private final int segmentsPerList;
    private final long listLength;
    private final long listStride;
    private final long capacity;
    private final Optional<Path> hugeDir;
    private final MemsegList[] lists;
    private volatile long allocatedBytes;
    private boolean closed;

    /**
     * Reserves every list's address range and creates its backing file.
     *
     * @param config the geometry, backing directories and control file.
     * @throws MrdException EINVAL naming the setting that is wrong, EEXIST when a list's range is already
     *                      mapped (another {@code --base-virtaddr} is needed), or the failing call's errno.
     */
    public MemoryManager(final MemoryConfig config)
    {
        this.segmentSize = config.segmentSize();
        this.segmentsPerList = config.segmentsPerList();
        this.baseVirtaddr = config.baseVirtaddr();
        this.hugeDir = config.hugeDir();
        final long pageSize = hugeDir.map(MemoryManager::hugePageSize).orElse(4096L);
        validate(config, pageSize);

        this.segmentShift = Long.numberOfTrailingZeros(segmentSize);
        this.listLength = segmentsPerList * segmentSize;
        this.listStride = listStride(segmentsPerList, segmentSize);
        this.capacity = config.capacity();
        this.lists = new MemsegList[config.listCount()];

        final Path dir = hugeDir.orElse(config.memDir());
        try
        {
            Files.createDirectories(dir);
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot create memory directory " + dir + ": " + ex);
        }
        if (hugeDir.isPresent())
        {
            removeStaleBackingFiles(hugeDir.get());
        }

        final long pid = ProcessHandle.current().pid();
        try
        {
            for (int i = 0; i < lists.length; i++)
            {
                final Path backing = hugeDir.isPresent() ?
                    hugeDir.get().resolve("mrd-" + pid + "-list-" + i) : config.memDir().resolve("list-" + i);
                lists[i] = new MemsegList(i, baseVirtaddr + i * listStride, segmentSize, segmentsPerList,
                    backing, hugeDir.isPresent(), pageSize, config.control(), config.layout().memsegListOffset(i));
            }
        }
        catch (final RuntimeException ex)
        {
            for (final MemsegList list : lists)
            {
                if (null != list)
                {
                    list.close();
                }
            }
            throw ex;
        }
    }

    /**
     * @param segmentsPerList segments in each list.
     * @param segmentSize     bytes per segment.
     * @return the distance between the base addresses of two neighbouring lists: twice a list's length, so
     * that lists are never virtually contiguous.
     */
    public static long listStride(final int segmentsPerList, final long segmentSize)
    {
        return 2L * segmentsPerList * segmentSize;
    }

    /**
     * @return the lock that orders allocation and freeing (write side) against the MR engine's re-checks of
     * chunks (read side).
     */
    public ReentrantReadWriteLock memoryLock()
    {
        return memoryLock;
    }

    /**
     * Allocates a virtually contiguous run of whole segments, first fit: the lowest list, then the lowest
     * index, that has a run of enough free segments. Runs never span lists. The run is mapped read-write and
     * shared before this returns; its pages are zero.
     *
     * @param length bytes wanted, rounded up to whole segments.
     * @param owner  the client id, or {@link MemsegListDescriptor#OWNER_DAEMON}; must be positive.
     * @return the run.
     * @throws MrdException EINVAL for a length or owner that is not positive; ENOMEM when the length exceeds a
     *                      list, when no run is free (the message gives the largest free run and
     *                      {@code --max-memory}), or when the backing file system has no pages left.
     */
    public Allocation allocate(final long length, final int owner)
    {
        checkOwner(owner);
        if (length <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "cannot allocate " + length +
                " bytes: the length must be positive");
        }
        if (length > listLength)
        {
            throw new MrdException(ErrorCode.ENOMEM, "cannot allocate " + Sizes.format(length) +
                ": the largest possible allocation is one memory-segment list, " + Sizes.format(listLength) +
                " (" + segmentsPerList + " segments of " + Sizes.format(segmentSize) + "), of --max-memory " +
                Sizes.format(capacity) + " in " + lists.length + " lists; allocate at most " +
                Sizes.format(listLength) + " at a time or start the daemon with a larger --max-memory");
        }
        final int n = (int)((length + segmentSize - 1) >>> segmentShift);

        checkNoReadLockHeld("allocate");
        memoryLock.writeLock().lock();
        try
        {
            checkOpen();
            for (final MemsegList list : lists)
            {
                final int first = list.findFreeRun(n);
                if (first >= 0)
                {
                    final long bytes = (long)n << segmentShift;
                    checkBackingSpace(list, length, bytes);
                    mapRun(list, first, n, length);
                    list.markAllocated(first, n, owner);
                    allocatedBytes += bytes;
                    return new Allocation(list.index(), first, n, list.segmentAddress(first), bytes, owner);
                }
            }
            throw noFreeRun(length, n);
        }
        finally
        {
            memoryLock.writeLock().unlock();
        }
    }

    /**
     * Step 1 of freeing (see the class comment): takes {@code [address, address + length)} out of use.
     * The caller must then run the memory free event for the returned range and call {@link #release} with
     * it, in that order.
     *
     * @param address first address: a segment boundary inside a list.
     * @param length  bytes, rounded up to whole segments; the range must lie inside one list.
     * @param owner   the client freeing; {@link MemsegListDescriptor#OWNER_DAEMON} may free any segment.
     * @return the range taken out of use.
     * @throws MrdException ENXIO when the address is outside managed memory; EINVAL when it is not on a segment
     *                      boundary, the length is not positive or runs past the list, or a segment is not
     *                      allocated; EPERM when a segment is owned by another client.
     */
    public FreedRange free(final long address, final long length, final int owner)
    {
        checkOwner(owner);
        checkNoReadLockHeld("free");
        memoryLock.writeLock().lock();
        try
        {
            checkOpen();
            final MemsegList list = listOf(address);
            if (null == list)
            {
                throw new MrdException(ErrorCode.ENXIO, "cannot free " + Sizes.hex(address) +
                    ": the address is outside managed memory (" + describeRanges() + ")");
            }
            if (((address - list.baseVa()) & (segmentSize - 1)) != 0)
            {
                throw new MrdException(ErrorCode.EINVAL, "cannot free " + Sizes.hex(address) +
                    ": the address is not segment-aligned (segments are " + Sizes.format(segmentSize) +
                    "; the segment holding it starts at " + Sizes.hex(Sizes.alignDown(address, segmentSize)) + ")");
            }
            final int first = list.segmentIndex(address);
            if (length <= 0 || length > list.endVa() - address)
            {
                throw new MrdException(ErrorCode.EINVAL, "cannot free " + length + " bytes at " +
                    Sizes.hex(address) + ": the length must be positive and the range must end inside list " +
                    list.index() + " (which ends at " + Sizes.hex(list.endVa()) + ")");
            }
            final int n = (int)((length + segmentSize - 1) >>> segmentShift);
            for (int i = first; i < first + n; i++)
            {
                if (!list.isAllocated(i))
                {
                    throw new MrdException(ErrorCode.EINVAL, "cannot free " + Sizes.hex(address) + " (" +
                        Sizes.format(length) + "): segment " + i + " of list " + list.index() + " at " +
                        Sizes.hex(list.segmentAddress(i)) + " is not allocated");
                }
                if (owner != OWNER_DAEMON && list.owner(i) != owner)
                {
                    throw new MrdException(ErrorCode.EPERM, "cannot free " + Sizes.hex(address) + " (" +
                        Sizes.format(length) + ") for " + ownerName(owner) + ": segment " + i + " at " +
                        Sizes.hex(list.segmentAddress(i)) + " is owned by " + ownerName(list.owner(i)));
                }
            }
            return takeOutOfUse(list, first, n);
        }
        finally
        {
            memoryLock.writeLock().unlock();
        }
    }

    /**
     * Step 1 of freeing for a client that has gone: takes every segment it owns out of use. Each returned
     * range is a maximal run of its segments and goes through the memory free event and {@link #release} like
     * the result of {@link #free}.
     *
     * @param owner the dead client's id.
     * @return the ranges taken out of use, by list and address; empty when it owned nothing.
     */
    public List<FreedRange> freeAllOwnedBy(final int owner)
    {
        checkOwner(owner);
        checkNoReadLockHeld("freeAllOwnedBy");
        final List<FreedRange> freed = new ArrayList<>();
        memoryLock.writeLock().lock();
        try
        {
            if (closed)
            {
                return freed;
            }
            for (final MemsegList list : lists)
            {
                int i = 0;
                while (i < list.segmentCount())
                {
                    if (list.owner(i) != owner)
                    {
                        i++;
                        continue;
                    }
                    int end = i + 1;
                    while (end < list.segmentCount() && list.owner(end) == owner)
                    {
                        end++;
                    }
                    freed.add(takeOutOfUse(list, i, end - i));
                    i = end;
                }
            }
            return freed;
        }
        finally
        {
            memoryLock.writeLock().unlock();
        }
    }

    /**
     * Step 3 of freeing: unmaps the range (back to reserved address space) and gives its pages back to the
     * system, then makes its segments free for allocation. Call exactly once per {@link FreedRange}, after
     * the memory free event, and without holding the memory lock: the unmap and the hole punch run with no
     * lock held, so that slow page release never stalls lookups or allocations. A no-op after {@link #close}.
     *
     * @param range what {@link #free} or {@link #freeAllOwnedBy} returned.
     * @throws MrdException when unmapping or punching fails; the segments then stay withheld from allocation.
     * @throws IllegalStateException when the range is not one being freed (released twice, or made up).
     */
    public void release(final FreedRange range)
    {
        checkNoReadLockHeld("release");
        lifecycleLock.readLock().lock();
        try
        {
            if (isClosed())
            {
                return;
            }
            final MemsegList list = lists[range.listIndex()];
            memoryLock.readLock().lock();
            try
            {
                for (int i = range.firstSegment(); i < range.firstSegment() + range.segmentCount(); i++)
                {
                    if (!list.isReleasing(i))
                    {
                        throw new IllegalStateException("release of " + range + ": segment " + i +
                            " is not being freed (released twice?)");
                    }
                }
            }
            finally
            {
                memoryLock.readLock().unlock();
            }

            list.unmapAndPunch(range.firstSegment(), range.segmentCount());

            memoryLock.writeLock().lock();
            try
            {
                list.markFree(range.firstSegment(), range.segmentCount());
            }
            finally
            {
                memoryLock.writeLock().unlock();
            }
        }
        finally
        {
            lifecycleLock.readLock().unlock();
        }
    }

    /**
     * The maximal run of allocated segments (of any owners) around {@code address} within its list: the
     * virtually contiguous chunk the MR engine registers, as {@code rte_memseg_contig_walk} finds it in DPDK.
     * Chunks never span lists. Call with {@link #memoryLock()} held (read or write) and keep holding it while
     * using the answer: it is only true while no allocation or free can run.
     *
     * @param address any address.
     * @return the chunk, or null when the address is not in an allocated segment.
     */
    public Chunk contiguousChunk(final long address)
    {
        final Chunk single = segmentOf(address);
        if (null == single)
        {
            return null;
        }
        final MemsegList list = list(single.listIndex());
        final int segment = single.firstSegment();
        int first = segment;
        while (first > 0 && list.isAllocated(first - 1))
        {
            first--;
        }
        int last = segment;
        while (last + 1 < list.segmentCount() && list.isAllocated(last + 1))
        {
            last++;
        }
        return new Chunk(list.index(), first, last - first + 1, list.segmentAddress(first),
            list.segmentAddress(last + 1));
    }

    /**
     * The single allocated segment holding {@code address} (the MR engine's fallback when the chunk changed
     * under it). Call with {@link #memoryLock()} held.
     *
     * @param address any address.
     * @return the segment as a one-segment chunk, or null when the address is not in an allocated segment.
     */
    public Chunk segmentOf(final long address)
    {
        assert holdsMemoryLock() : "segmentOf needs the memory lock";
        final MemsegList list = listOf(address);
        if (null == list || closed)
        {
            return null;
        }
        final int segment = list.segmentIndex(address);
        if (!list.isAllocated(segment))
        {
            return null;
        }
        return new Chunk(list.index(), segment, 1, list.segmentAddress(segment), list.segmentAddress(segment + 1));
    }

    /**
     * @param index a list index.
     * @return the list.
     */
    public MemsegList list(final int index)
    {
        return lists[index];
    }

    /**
     * @return number of lists.
     */
    public int listCount()
    {
        return lists.length;
    }

    /**
     * @param address any address.
     * @return the list whose reservation holds it, or null (outside all lists, or in a gap between them).
     */
    public MemsegList listOf(final long address)
    {
        final long offset = address - baseVirtaddr;
        if (address < baseVirtaddr || offset >= lists.length * listStride)
        {
            return null;
        }
        final int index = (int)(offset / listStride);
        return offset - index * listStride < listLength ? lists[index] : null;
    }

    /**
     * @return bytes in allocated segments (freed segments stop counting at {@link #free}).
     */
    public long bytesAllocated()
    {
        return allocatedBytes;
    }

    /**
     * @return bytes all lists hold together: {@code --max-memory}.
     */
    public long capacity()
    {
        return capacity;
    }

    /**
     * @return bytes per segment.
     */
    public long segmentSize()
    {
        return segmentSize;
    }

    /**
     * @return bytes per list: the largest possible allocation.
     */
    public long listLength()
    {
        return listLength;
    }

    /**
     * @return first address of list 0.
     */
    public long baseVirtaddr()
    {
        return baseVirtaddr;
    }

    /**
     * @return first address past the last list, where the daemon may place its external-memory window
     * (leaving a gap keeps the window from being virtually contiguous with the last list).
     */
    public long endVirtaddr()
    {
        return baseVirtaddr + (lists.length - 1) * listStride + listLength;
    }

    /**
     * @return the hugetlbfs directory the lists are backed from, or empty for tmpfs.
     */
    public Optional<Path> hugeDir()
    {
        return hugeDir;
    }

    /**
     * Unmaps every list and deletes the backing files; waits for releases in flight. Idempotent.
     */
    public void close()
    {
        lifecycleLock.writeLock().lock();
        try
        {
            memoryLock.writeLock().lock();
            try
            {
                if (!closed)
                {
                    closed = true;
                    for (final MemsegList list : lists)
                    {
                        list.close();
                    }
                    allocatedBytes = 0;
                }
            }
            finally
            {
                memoryLock.writeLock().unlock();
            }
        }
        finally
        {
            lifecycleLock.writeLock().unlock();
        }
    }

    public String toString()
    {
        return "MemoryManager{" + lists.length + " lists of " + segmentsPerList + " x " + Sizes.format(segmentSize) +
            " from " + Sizes.hex(baseVirtaddr) + " every " + Sizes.hex(listStride) + ", " +
            hugeDir.map(d -> "hugetlbfs " + d).orElse("tmpfs") + ", allocated " + Sizes.format(allocatedBytes) +
            " of " + Sizes.format(capacity) + "}";
    }

    /**
     * Removes backing files that dead daemons left in a hugetlbfs directory, where they would hold huge pages
     * until reboot. A file is stale when no one holds its {@code flock}: every live list holds its own.
     *
     * @param dir a hugetlbfs directory.
     * @return files removed.
     */
    static int removeStaleBackingFiles(final Path dir)
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

    private FreedRange takeOutOfUse(final MemsegList list, final int first, final int n)
    {
        list.markReleasing(first, n);
        final long bytes = (long)n << segmentShift;
        allocatedBytes -= bytes;
        return new FreedRange(list.index(), first, n, list.segmentAddress(first), bytes);
    }

    private void mapRun(final MemsegList list, final int first, final int n, final long length)
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
    private static void checkBackingSpace(final MemsegList list, final long length, final long bytes)
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

    private MrdException noFreeRun(final long length, final int n)
    {
        int free = 0;
        int largest = 0;
        int releasing = 0;
        for (final MemsegList list : lists)
        {
            free += list.freeSegments();
            largest = Math.max(largest, list.largestFreeRun());
            releasing += list.segmentCount() - list.freeSegments() - list.allocatedSegments();
        }
        return new MrdException(ErrorCode.ENOMEM, "cannot allocate " + Sizes.format(length) + " (" + n +
            " segments of " + Sizes.format(segmentSize) + "): largest free run is " +
            Sizes.format((long)largest << segmentShift) + " (" + free + " of " + lists.length * segmentsPerList +
            " segments free" + (releasing > 0 ? ", " + releasing + " being released" : "") + ", --max-memory " +
            Sizes.format(capacity) + "); free memory or start the daemon with a larger --max-memory");
    }

    private String describeRanges()
    {
        return lists.length + " lists of " + Sizes.format(listLength) + " from " + Sizes.hex(baseVirtaddr) +
            " every " + Sizes.hex(listStride) + ", ending at " + Sizes.hex(endVirtaddr());
    }

    private static String ownerName(final int owner)
    {
        return owner == OWNER_DAEMON ? "the daemon" : "client " + owner;
    }

    private static void checkOwner(final int owner)
    {
        if (owner <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "owner " + owner + " is not a client id: ids are positive (" +
                OWNER_DAEMON + " for the daemon itself)");
        }
    }

    private void checkOpen()
    {
        if (closed)
        {
            throw new MrdException(ErrorCode.ENODEV, "the daemon's memory has been released: it is shutting down");
        }
    }

    private boolean isClosed()
    {
        memoryLock.readLock().lock();
        try
        {
            return closed;
        }
        finally
        {
            memoryLock.readLock().unlock();
        }
    }

    /**
     * A ReentrantReadWriteLock cannot be upgraded: taking the write lock while holding the read lock would
     * hang this thread forever, so fail loudly instead.
     */
    private void checkNoReadLockHeld(final String operation)
    {
        if (memoryLock.getReadHoldCount() > 0)
        {
            throw new IllegalStateException(operation + " called with the memory read lock held: it would deadlock");
        }
    }

    private boolean holdsMemoryLock()
    {
        return memoryLock.getReadHoldCount() > 0 || memoryLock.isWriteLockedByCurrentThread();
    }

    private static long hugePageSize(final Path dir)
    {
        return HugePages.mountOf(dir).filter(HugePages.Mount::isHugetlbfs).map(HugePages.Mount::pageSize)
            .orElse(HugePages.PAGE_SIZE_2M);
    }

    private void validate(final MemoryConfig config, final long pageSize)
    {
        if (segmentSize < pageSize || Long.bitCount(segmentSize) != 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "segment size " + Sizes.format(segmentSize) +
                " must be a power of two and at least the backing page size " + Sizes.format(pageSize));
        }
        if (config.listCount() < 1 || config.listCount() > config.layout().memsegListCount())
        {
            throw new MrdException(ErrorCode.EINVAL, "list count " + config.listCount() +
                " must be between 1 and the control file's " + config.layout().memsegListCount());
        }
        if (segmentsPerList < 1 || segmentsPerList > config.layout().segmentsPerList())
        {
            throw new MrdException(ErrorCode.EINVAL, "segments per list " + segmentsPerList +
                " must be between 1 and the control file's " + config.layout().segmentsPerList());
        }
        final long lastRecordEnd = (long)config.layout().memsegListOffset(config.listCount() - 1) +
            config.layout().memsegListRecordLength();
        if (lastRecordEnd > config.control().capacity())
        {
            throw new MrdException(ErrorCode.EINVAL, "the control buffer (" + config.control().capacity() +
                " bytes) ends before the last memseg list record (" + lastRecordEnd + ")");
        }
        if (baseVirtaddr <= 0 || (baseVirtaddr & (segmentSize - 1)) != 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "--base-virtaddr " + Sizes.hex(baseVirtaddr) +
                " must be a positive multiple of the segment size " + Sizes.format(segmentSize));
        }
        final double end = baseVirtaddr + (double)config.listCount() * listStride(segmentsPerList, segmentSize);
        if (end > USER_VA_END)
        {
            throw new MrdException(ErrorCode.EINVAL, "--base-virtaddr " + Sizes.hex(baseVirtaddr) + " with " +
                config.listCount() + " lists of " + Sizes.format(segmentsPerList * segmentSize) +
                " (placed " + Sizes.format(listStride(segmentsPerList, segmentSize)) + " apart) ends past " +
                Sizes.hex(USER_VA_END) + ", the end of user address space: lower --base-virtaddr or --max-memory");
        }
    }
}
