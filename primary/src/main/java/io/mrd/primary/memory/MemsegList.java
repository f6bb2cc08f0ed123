package io.mrd.primary.memory;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrdException;
import io.mrd.layout.RemoteAccess;
import io.mrd.layout.sys.Sizes;
import org.agrona.MutableDirectBuffer;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;

import static io.mrd.layout.MemsegListDescriptor.OWNER_FREE;

/**
 * One memory-segment list, as DPDK's {@code rte_memseg_list}: a range of address space reserved at a fixed
 * address ({@code PROT_NONE}, {@code MAP_FIXED_NOREPLACE}), cut into {@link #segmentCount()} segments of
 * {@link #segmentSize()}, and backed by one sparse file whose offset {@code i * segmentSize} backs segment
 * {@code i}. Secondaries reserve the same range and map the same file ranges at the same addresses, so a
 * pointer means the same thing in every process.
 * <p>
 * The heap arrays here are the truth; every change is mirrored into the list's record in the control file
 * ({@link MemsegListRecord}) for secondaries and tools. A segment is in one of three states: free,
 * allocated (owner &gt; 0), or <em>releasing</em>: freed in the bookkeeping but still holding its pages until
 * {@link MemoryManager#release} gives them back. A releasing segment is neither allocated (the MR engine no
 * longer sees it) nor free (it cannot be handed out again before its pages are gone, or the late hole punch
 * would empty the new owner's memory); the control file shows it as free. {@link MemsegListMapping} says how
 * the daemon maps the list's file.
 * <p>
 * Not thread-safe: {@link MemoryManager} calls the mutators under its memory lock, and the state getters
 * ({@link #isAllocated}, {@link #owner}, {@link #allocationFirst}) must be called with that lock held. The
 * geometry getters never change and need no lock.
 */
public final class MemsegList
{
    /** Internal owner value of a releasing segment; never written to the control file. */
    private static final int OWNER_RELEASING = -1;

    private final int index;
    private final long baseVa;
    private final long segmentSize;
    private final int segmentShift;
    private final int segmentCount;
    private final long length;
    private final long pageSize;
    private final boolean hugetlbfs;
    private final Path backingPath;
    private final MemsegListMapping mapping;
    private final int[] owner;
    private final int[] allocationFirst;
    /** Access of each allocated or releasing segment's allocation. */
    private final int[] access;
    private final MemsegListRecord record = new MemsegListRecord();
    private int allocatedSegments;
    private int releasingSegments;

    /**
     * Reserves the address range, creates the backing file and writes the list's record.
     *
     * @param index        the list's index, also its record's index in the control file.
     * @param baseVa       first address of the list, a multiple of {@code segmentSize}.
     * @param segmentSize  bytes per segment, a power of two and a multiple of {@code pageSize}.
     * @param segmentCount segments in the list.
     * @param backingPath  the backing file to create (an existing one is taken over unless locked).
     * @param hugetlbfs    whether {@code backingPath} is on hugetlbfs.
     * @param pageSize     page size of the backing file system.
     * @param control      the control file.
     * @param recordOffset offset of this list's record in {@code control}.
     * @param adoptedFd    -1 to create the list afresh; else the backing file a predecessor left (its lock
     *                     held): the list then keeps the file, its path and the allocations its record shows.
     * @throws MrdException EEXIST when the range is already mapped, EBUSY when another live daemon holds the
     *                      backing file, EINVAL when an adopted record is not of this geometry, or the failing
     *                      call's errno.
     */
    MemsegList(
        final int index,
        final long baseVa,
        final long segmentSize,
        final int segmentCount,
        final Path backingPath,
        final boolean hugetlbfs,
        final long pageSize,
        final MutableDirectBuffer control,
        final int recordOffset,
        final int adoptedFd)
    {
        this.index = index;
        this.baseVa = baseVa;
        this.segmentSize = segmentSize;
        this.segmentShift = Long.numberOfTrailingZeros(segmentSize);
        this.segmentCount = segmentCount;
        this.length = segmentCount * segmentSize;
        this.pageSize = pageSize;
        this.hugetlbfs = hugetlbfs;
        record.wrap(control, recordOffset);
        this.backingPath = adoptedFd < 0 ? backingPath.toAbsolutePath() : Path.of(record.backingPath());
        this.owner = new int[segmentCount];
        this.allocationFirst = new int[segmentCount];
        this.access = new int[segmentCount];

        final String pathText = this.backingPath.toString();
        if (pathText.getBytes(StandardCharsets.UTF_8).length > MemsegListDescriptor.PATH_MAX_LENGTH)
        {
            throw new MrdException(ErrorCode.EINVAL, "backing file path '" + pathText + "' is longer than " +
                MemsegListDescriptor.PATH_MAX_LENGTH + " bytes: choose a shorter --dir or --huge-dir");
        }

        if (adoptedFd >= 0)
        {
            mapping = adopt(adoptedFd);
            return;
        }
        mapping = new MemsegListMapping(baseVa, length, this.backingPath, hugetlbfs, -1);

        record.baseVa(baseVa)
            .pageSize(pageSize)
            .segmentCount(segmentCount)
            .flags(hugetlbfs ? MemsegListDescriptor.FLAG_HUGETLBFS : 0)
            .backingPath(pathText)
            .allocatedSegments(0);
        for (int i = 0; i < segmentCount; i++)
        {
            record.segment(i, OWNER_FREE, 0, 0);
        }
    }

    /**
     * Reads back the allocations the record shows (a segment a free was releasing when the predecessor died shows
     * its owner still, and is allocated again: its owner frees it once more, or it is reclaimed with the owner),
     * then maps the file: whole on tmpfs, each allocation on hugetlbfs.
     */
    private MemsegListMapping adopt(final int fd)
    {
        final boolean recordedHuge = 0 != (record.flags() & MemsegListDescriptor.FLAG_HUGETLBFS);
        if (record.baseVa() != baseVa || record.segmentCount() != segmentCount || recordedHuge != hugetlbfs)
        {
            throw new MrdException(ErrorCode.EINVAL, "list " + index + " of the control file is " +
                record.segmentCount() + " segments at " + Sizes.hex(record.baseVa()) + (recordedHuge ? " on hugetlbfs" :
                " on tmpfs") + ", not " + segmentCount + " at " + Sizes.hex(baseVa) + ": not adoptable");
        }
        for (int i = 0; i < segmentCount; i++)
        {
            owner[i] = record.owner(i);
            allocationFirst[i] = record.allocationFirst(i);
            access[i] = record.access(i);
            allocatedSegments += owner[i] > 0 ? 1 : 0;
        }
        final MemsegListMapping adopted = new MemsegListMapping(baseVa, length, backingPath, hugetlbfs, fd);
        for (int i = 0; i < segmentCount; )
        {
            int end = i;
            while (end < segmentCount && owner[end] > 0 && allocationFirst[end] == allocationFirst[i])
            {
                end++;
            }
            if (end > i)
            {
                adopted.map(segmentAddress(i), (long)i << segmentShift, (long)(end - i) << segmentShift);
                i = end;
            }
            else
            {
                i++;
            }
        }
        record.allocatedSegments(allocatedSegments);
        return adopted;
    }

    /**
     * @return the list's index.
     */
    public int index()
    {
        return index;
    }

    /**
     * @return first address of the list's reservation.
     */
    public long baseVa()
    {
        return baseVa;
    }

    /**
     * @return bytes per segment.
     */
    public long segmentSize()
    {
        return segmentSize;
    }

    /**
     * @return segments in the list.
     */
    public int segmentCount()
    {
        return segmentCount;
    }

    /**
     * @return bytes of the list's reservation: {@code segmentCount * segmentSize}.
     */
    public long length()
    {
        return length;
    }

    /**
     * @return first address past the list.
     */
    public long endVa()
    {
        return baseVa + length;
    }

    /**
     * @return page size of the backing file: the huge page size on hugetlbfs, 4096 on tmpfs.
     */
    public long pageSize()
    {
        return pageSize;
    }

    /**
     * @return whether the backing file is on hugetlbfs.
     */
    public boolean isHugetlbfs()
    {
        return hugetlbfs;
    }

    /**
     * @return the absolute path of the backing file, as the control file records it.
     */
    public Path backingPath()
    {
        return backingPath;
    }

    /**
     * @param segment a segment index.
     * @return the first address of that segment.
     */
    public long segmentAddress(final int segment)
    {
        return baseVa + ((long)segment << segmentShift);
    }

    /**
     * @param address an address inside the list ({@link #contains}).
     * @return the index of the segment holding it.
     */
    public int segmentIndex(final long address)
    {
        return (int)((address - baseVa) >>> segmentShift);
    }

    /**
     * @param address an address.
     * @return whether it lies inside the list's reservation.
     */
    public boolean contains(final long address)
    {
        return address >= baseVa && address - baseVa < length;
    }

    /**
     * Call with the memory lock held.
     *
     * @param segment a segment index.
     * @return whether the segment is allocated (mapped and owned); false for free and releasing segments.
     */
    public boolean isAllocated(final int segment)
    {
        return owner[segment] > 0;
    }

    /**
     * Call with the memory lock held.
     *
     * @param segment a segment index.
     * @return the owner of the segment, {@link MemsegListDescriptor#OWNER_FREE} when it is not allocated.
     */
    public int owner(final int segment)
    {
        return Math.max(owner[segment], OWNER_FREE);
    }

    /**
     * Call with the memory lock held.
     *
     * @param client a client id.
     * @param runs   where every maximal run of segments {@code client} holds in this list is added, lowest first.
     */
    void addRunsOwnedBy(final int client, final List<SegmentRun> runs)
    {
        for (int i = 0; i < owner.length; i++)
        {
            if (owner[i] == client)
            {
                int end = i + 1;
                while (end < owner.length && owner[end] == client)
                {
                    end++;
                }
                runs.add(new SegmentRun(index, i, end - i));
                i = end;
            }
        }
    }

    /**
     * Call with the memory lock held.
     *
     * @param segment an allocated segment's index.
     * @return the index of the first segment of the allocation it belongs to; 0 for a segment not allocated.
     */
    public int allocationFirst(final int segment)
    {
        return owner[segment] > 0 ? allocationFirst[segment] : 0;
    }

    /**
     * Call with the memory lock held.
     *
     * @param segment an allocated segment's index.
     * @return the {@link Access} of the allocation it belongs to; 0 for a segment not allocated.
     */
    public int access(final int segment)
    {
        return owner[segment] > 0 ? access[segment] : 0;
    }

    /**
     * Call with the memory lock held.
     *
     * @return segments allocated in this list.
     */
    public int allocatedSegments()
    {
        return allocatedSegments;
    }

    /**
     * Call with the memory lock held.
     *
     * @return segments free for allocation (releasing segments are not).
     */
    public int freeSegments()
    {
        return segmentCount - allocatedSegments - releasingSegments;
    }

    /**
     * The maximal run around {@code segment}, an allocated one, of allocated segments (of any owners) that may
     * share its MR ({@link RemoteAccess#mayShareMr}): the run stops at a segment of other access, and memory with
     * remote access also at its allocation's bounds.
     */
    Chunk chunkAround(final int segment)
    {
        int first = segment;
        while (first > 0 && mayShareMr(first - 1, segment))
        {
            first--;
        }
        int last = segment;
        while (last + 1 < segmentCount && mayShareMr(last + 1, segment))
        {
            last++;
        }
        return chunkOf(first, last);
    }

    private boolean mayShareMr(final int neighbour, final int segment)
    {
        return isAllocated(neighbour) && RemoteAccess.mayShareMr(access[segment], allocationFirst[segment],
            access[neighbour], allocationFirst[neighbour]);
    }

    /**
     * @return segments {@code [first, last]}, all of one access, as a chunk.
     */
    Chunk chunkOf(final int first, final int last)
    {
        return new Chunk(index, first, last - first + 1, segmentAddress(first), segmentAddress(last + 1),
            access[first]);
    }

    boolean isReleasing(final int segment)
    {
        return owner[segment] == OWNER_RELEASING;
    }

    /**
     * Call with the memory lock held.
     *
     * @throws IllegalStateException when a segment of {@code range} is not being freed (released twice, or made up).
     */
    void checkReleasing(final FreedRange range)
    {
        for (int i = range.firstSegment(); i < range.firstSegment() + range.segmentCount(); i++)
        {
            if (!isReleasing(i))
            {
                throw new IllegalStateException("release of " + range + ": segment " + i +
                    " is not being freed (released twice?)");
            }
        }
    }

    /**
     * @return the first index of the lowest run of {@code n} free segments, or -1.
     */
    int findFreeRun(final int n)
    {
        int run = 0;
        for (int i = 0; i < segmentCount; i++)
        {
            if (owner[i] == OWNER_FREE)
            {
                if (++run == n)
                {
                    return i - n + 1;
                }
            }
            else
            {
                run = 0;
            }
        }
        return -1;
    }

    /**
     * @return the longest run of free segments.
     */
    int largestFreeRun()
    {
        int largest = 0;
        int run = 0;
        for (int i = 0; i < segmentCount; i++)
        {
            run = owner[i] == OWNER_FREE ? run + 1 : 0;
            largest = Math.max(largest, run);
        }
        return largest;
    }

    /**
     * Makes {@code [first, first + n)} usable in the daemon ({@link MemsegListMapping#map}). On failure the
     * range is put back to reserved address space and the errno's exception is thrown.
     */
    void map(final int first, final int n)
    {
        mapping.map(segmentAddress(first), (long)first << segmentShift, (long)n << segmentShift);
    }

    void markAllocated(final int first, final int n, final int newOwner, final int newAccess)
    {
        for (int i = first; i < first + n; i++)
        {
            owner[i] = newOwner;
            allocationFirst[i] = first;
            access[i] = newAccess;
            record.segment(i, newOwner, first, newAccess);
        }
        allocatedSegments += n;
        record.allocatedSegments(publishedAllocated());
    }

    /**
     * The count the control file shows: it shows releasing segments with their old owner until
     * {@link #markFree}, so its count must include them, or {@code mrd check} would find more segments with
     * an owner than the count says for as long as a free takes (its deregistration, unmap and hole punch).
     */
    private int publishedAllocated()
    {
        return allocatedSegments + releasingSegments;
    }

    /**
     * Takes {@code [first, first + n)}, all allocated, out of use: releasing until {@link #markFree}.
     * When the range cuts an allocation in two, the part after it becomes an allocation of its own.
     */
    void markReleasing(final int first, final int n)
    {
        final int end = first + n;
        if (end < segmentCount && owner[end] > 0 && allocationFirst[end] < end)
        {
            final int oldFirst = allocationFirst[end];
            for (int i = end; i < segmentCount && owner[i] > 0 && allocationFirst[i] == oldFirst; i++)
            {
                allocationFirst[i] = end;
                record.segment(i, owner[i], end, access[i]);
            }
        }
        // The control file keeps showing the old owner until markFree: readers check that every live
        // segment of an MR is allocated, and the MR engine clears the MR bits only after this call (the
        // memory free event), so showing the segment free here would let them see a live bit on a free
        // segment.
        for (int i = first; i < end; i++)
        {
            owner[i] = OWNER_RELEASING;
            allocationFirst[i] = 0;
        }
        allocatedSegments -= n;
        releasingSegments += n;
    }

    /**
     * Gives the pages of {@code [first, first + n)} back to the system ({@link MemsegListMapping#unmapAndPunch}).
     * Needs no lock: the segments are releasing, so no one else touches them.
     *
     * @throws MrdException when a step fails; the segments then stay releasing (withheld from allocation)
     *                      rather than be handed out with someone's data in them.
     */
    void unmapAndPunch(final int first, final int n)
    {
        mapping.unmapAndPunch(segmentAddress(first), (long)first << segmentShift, (long)n << segmentShift);
    }

    void markFree(final int first, final int n)
    {
        for (int i = first; i < first + n; i++)
        {
            owner[i] = OWNER_FREE;
            access[i] = 0;
            record.segment(i, OWNER_FREE, 0, 0);
        }
        releasingSegments -= n;
        record.allocatedSegments(publishedAllocated());
    }

    /**
     * Unmaps the whole reservation, deletes the backing file and closes it. Idempotent.
     */
    void close()
    {
        mapping.close();
    }

    /** @return the backing file's descriptor, owned by the list: never close it. */
    public int backingFd()
    {
        return mapping.fd();
    }

    boolean isClosed()
    {
        return mapping.isClosed();
    }

    public String toString()
    {
        return "MemsegList{index=" + index + ", base=" + Sizes.hex(baseVa) + ", segments=" + segmentCount + " x " +
            Sizes.format(segmentSize) + ", " + (hugetlbfs ? "hugetlbfs" : "tmpfs") + " " + backingPath + "}";
    }
}
