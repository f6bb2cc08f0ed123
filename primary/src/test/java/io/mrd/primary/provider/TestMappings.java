package io.mrd.primary.provider;

import io.mrd.layout.sys.Posix;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;

/**
 * The mappings a provider test made, unmapped together after each test: memfd memory shared as clients share
 * the daemon's, and any other mapping the test adds.
 */
final class TestMappings
{
    private final List<MemorySegment> mappings = new ArrayList<>();

    /** @return {@code length} bytes of a fresh memfd named {@code name}, mapped shared and writable. */
    MemorySegment sharedMemfd(final String name, final long length)
    {
        final int fd = Posix.memfdCreate(name, Posix.MFD_CLOEXEC);
        try
        {
            Posix.ftruncate(fd, length);
            return add(Posix.map(length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0));
        }
        finally
        {
            Posix.close(fd);
        }
    }

    MemorySegment add(final MemorySegment mapping)
    {
        mappings.add(mapping);
        return mapping;
    }

    void unmapAll()
    {
        mappings.forEach(m -> Posix.munmapQuietly(m.address(), m.byteSize()));
        mappings.clear();
    }
}
