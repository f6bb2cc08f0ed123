package io.mrd.primary.memory;

import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import org.agrona.MutableDirectBuffer;

import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;

/**
 * What a {@link MemoryManager} is built from: the geometry of the memory-segment lists, where their
 * backing files go and the control file they are mirrored into.
 *
 * @param baseVirtaddr    first address of list 0 ({@code --base-virtaddr}); a multiple of {@code segmentSize}.
 * @param segmentSize     bytes of one segment, a power of two (2 MiB in the daemon).
 * @param listCount       number of lists, at most the layout's list count.
 * @param segmentsPerList segments in each list, at most the layout's segments per list.
 * @param memDir          directory of the tmpfs backing files ({@code DIR/mem}); created when missing.
 * @param hugeDir         hugetlbfs directory the caller has already chosen (see
 *                        {@link HugePages#findMountWithFreePages}); empty means tmpfs under {@code memDir}.
 * @param control         the control file, read-write.
 * @param layout          the control file's layout, giving each list's record offset.
 * @param adoptedListFds  null to create the lists afresh; else, by list index, the backing file of each list a
 *                        predecessor left (taken from the descriptor holder, its lock held), which the lists adopt
 *                        with the allocations the control file records.
 */
public record MemoryConfig(
    long baseVirtaddr,
    long segmentSize,
    int listCount,
    int segmentsPerList,
    Path memDir,
    Optional<Path> hugeDir,
    MutableDirectBuffer control,
    ControlFileLayout layout,
    int[] adoptedListFds)
{
    /** Lists created afresh. */
    public MemoryConfig(
        final long baseVirtaddr,
        final long segmentSize,
        final int listCount,
        final int segmentsPerList,
        final Path memDir,
        final Optional<Path> hugeDir,
        final MutableDirectBuffer control,
        final ControlFileLayout layout)
    {
        this(baseVirtaddr, segmentSize, listCount, segmentsPerList, memDir, hugeDir, control, layout, null);
    }

    /** @return whether the lists are a predecessor's, adopted. */
    public boolean adopted()
    {
        return null != adoptedListFds;
    }

    /** @return the adopted backing file of list {@code index}, or -1 when creating afresh. */
    int adoptedListFd(final int index)
    {
        return null == adoptedListFds ? -1 : adoptedListFds[index];
    }

    /**
     * Checks the references; the numbers are checked by {@link #validate}, once the backing page size is known.
     */
    public MemoryConfig
    {
        Objects.requireNonNull(memDir, "memDir");
        Objects.requireNonNull(hugeDir, "hugeDir");
        Objects.requireNonNull(control, "control");
        Objects.requireNonNull(layout, "layout");
        if (null != adoptedListFds && adoptedListFds.length != listCount)
        {
            throw new MrdException(ErrorCode.EINVAL, adoptedListFds.length + " adopted list files for " + listCount +
                " lists: the predecessor had another --max-memory");
        }
    }

    /**
     * @return bytes of memory all lists can hold together: the daemon's {@code --max-memory}.
     */
    public long capacity()
    {
        return (long)listCount * segmentsPerList * segmentSize;
    }

    /**
     * Checks the numbers against the backing page size, the control file's layout and the user address space.
     *
     * @throws MrdException EINVAL naming the setting that is wrong.
     */
    void validate(final long pageSize)
    {
        if (segmentSize < pageSize || Long.bitCount(segmentSize) != 1)
        {
            throw new MrdException(ErrorCode.EINVAL, "segment size " + Sizes.format(segmentSize) +
                " must be a power of two and at least the backing page size " + Sizes.format(pageSize));
        }
        if (listCount < 1 || listCount > layout.memsegListCount())
        {
            throw new MrdException(ErrorCode.EINVAL, "list count " + listCount +
                " must be between 1 and the control file's " + layout.memsegListCount());
        }
        if (segmentsPerList < 1 || segmentsPerList > layout.segmentsPerList())
        {
            throw new MrdException(ErrorCode.EINVAL, "segments per list " + segmentsPerList +
                " must be between 1 and the control file's " + layout.segmentsPerList());
        }
        final long lastRecordEnd = (long)layout.memsegListOffset(listCount - 1) + layout.memsegListRecordLength();
        if (lastRecordEnd > control.capacity())
        {
            throw new MrdException(ErrorCode.EINVAL, "the control buffer (" + control.capacity() +
                " bytes) ends before the last memseg list record (" + lastRecordEnd + ")");
        }
        if (baseVirtaddr <= 0 || (baseVirtaddr & (segmentSize - 1)) != 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "--base-virtaddr " + Sizes.hex(baseVirtaddr) +
                " must be a positive multiple of the segment size " + Sizes.format(segmentSize));
        }
        final long stride = ListPlacement.stride(segmentsPerList, segmentSize);
        final double end = baseVirtaddr + (double)listCount * stride;
        if (end > MemoryManager.USER_VA_END)
        {
            throw new MrdException(ErrorCode.EINVAL, "--base-virtaddr " + Sizes.hex(baseVirtaddr) + " with " +
                listCount + " lists of " + Sizes.format(segmentsPerList * segmentSize) + " (placed " +
                Sizes.format(stride) + " apart) ends past " + Sizes.hex(MemoryManager.USER_VA_END) +
                ", the end of user address space: lower --base-virtaddr or --max-memory");
        }
    }
}
