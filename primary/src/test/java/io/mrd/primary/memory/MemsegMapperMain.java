package io.mrd.primary.memory;

import io.mrd.layout.ControlFile;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;

/**
 * The second process of {@link CrossProcessMappingTest}, doing what a secondary does at attach: reads list 0
 * from the control file (read-only), reserves the list's range at the daemon's address, maps the allocated
 * segments of the backing file at the same addresses, and reports what it sees.
 * <p>
 * Arguments: control file path, a token to write back at offset 16 of the first allocated segment.
 * Prints {@code SEEN <address> <word0> <word1>} per allocated segment, {@code MAPS <line>} for the first,
 * then {@code DONE}.
 */
public final class MemsegMapperMain
{
    private MemsegMapperMain()
    {
    }

    public static void main(final String[] args)
    {
        try (ControlFile ctl = ControlFile.openReadOnly(Path.of(args[0])))
        {
            final long token = Long.parseUnsignedLong(args[1], 16);
            final long segmentSize = ctl.header().segmentSize();
            final MemsegListRecord list = new MemsegListRecord().wrap(ctl.buffer(), ctl.layout().memsegListOffset(0));
            final long base = list.baseVa();
            final int count = list.segmentCount();
            Posix.reserve(base, count * segmentSize);
            final int fd = Posix.open(list.backingPath(), Posix.O_RDWR | Posix.O_CLOEXEC, 0);
            try
            {
                long firstAllocated = -1;
                int s = 0;
                while (s < count)
                {
                    if (list.owner(s) == MemsegListDescriptor.OWNER_FREE)
                    {
                        s++;
                        continue;
                    }
                    int end = s;
                    while (end < count && list.owner(end) != MemsegListDescriptor.OWNER_FREE)
                    {
                        end++;
                    }
                    final long address = base + s * segmentSize;
                    Posix.mapFixed(address, (end - s) * segmentSize, Posix.PROT_READ | Posix.PROT_WRITE,
                        Posix.MAP_SHARED, fd, s * segmentSize);
                    for (int i = s; i < end; i++)
                    {
                        final MemorySegment segment =
                            MemorySegment.ofAddress(base + i * segmentSize).reinterpret(segmentSize);
                        System.out.println("SEEN " + Sizes.hex(segment.address()) + " " +
                            Long.toHexString(segment.get(ValueLayout.JAVA_LONG, 0)) + " " +
                            Long.toHexString(segment.get(ValueLayout.JAVA_LONG, 8)));
                    }
                    firstAllocated = firstAllocated < 0 ? address : firstAllocated;
                    s = end;
                }
                if (firstAllocated >= 0)
                {
                    System.out.println("MAPS " + MemoryFixture.mapsLine(firstAllocated));
                    MemorySegment.ofAddress(firstAllocated).reinterpret(24).set(ValueLayout.JAVA_LONG, 16, token);
                }
                System.out.println("DONE");
            }
            finally
            {
                Posix.close(fd);
                Posix.munmapQuietly(base, count * segmentSize);
            }
        }
    }
}
