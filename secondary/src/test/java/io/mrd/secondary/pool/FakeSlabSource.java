package io.mrd.secondary.pool;

import io.mrd.layout.Access;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * Slabs of native memory with made-up keys (a distinct lkey per slab, rkey = lkey + 1 for remote access), and
 * a record of what is allocated, so tests check that the pool gives back exactly what it took.
 */
final class FakeSlabSource implements SlabSource
{
    private final Arena arena = Arena.ofShared();
    private final Map<MemorySegment, SlabMemory> live = new IdentityHashMap<>();
    private final List<Long> requested = new ArrayList<>();
    private int nextKey = 0x100;
    private int frees;

    public synchronized SlabMemory allocate(final long length, final int access)
    {
        requested.add(length);
        final int lkey = nextKey;
        nextKey += 2;
        final SlabMemory memory = new SlabMemory(arena.allocate(length, 4096), lkey,
            Access.isRemote(access) ? lkey + 1 : Access.NO_RKEY);
        live.put(memory.segment(), memory);
        return memory;
    }

    public synchronized void free(final SlabMemory memory)
    {
        if (live.remove(memory.segment()) != memory)
        {
            throw new AssertionError("freed memory that is not allocated: " + memory);
        }
        frees++;
    }

    synchronized List<SlabMemory> live()
    {
        return List.copyOf(live.values());
    }

    synchronized List<Long> requested()
    {
        return List.copyOf(requested);
    }

    synchronized int frees()
    {
        return frees;
    }
}
