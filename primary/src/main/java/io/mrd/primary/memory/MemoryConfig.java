package io.mrd.primary.memory;

import io.mrd.layout.ControlFileLayout;
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
 */
public record MemoryConfig(
    long baseVirtaddr,
    long segmentSize,
    int listCount,
    int segmentsPerList,
    Path memDir,
    Optional<Path> hugeDir,
    MutableDirectBuffer control,
    ControlFileLayout layout)
{
    /**
     * Checks the references; the numbers are checked by {@link MemoryManager}, whose messages name the flags.
     */
    public MemoryConfig
    {
        Objects.requireNonNull(memDir, "memDir");
        Objects.requireNonNull(hugeDir, "hugeDir");
        Objects.requireNonNull(control, "control");
        Objects.requireNonNull(layout, "layout");
    }

    /**
     * @return bytes of memory all lists can hold together: the daemon's {@code --max-memory}.
     */
    public long capacity()
    {
        return (long)listCount * segmentsPerList * segmentSize;
    }
}
