package io.mrd.primary.journal;

import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.memory.MemoryEventListener;

import java.util.List;

/**
 * Records the memory manager's allocations and frees in the journal, called under its write lock before the
 * control file shows them. The memory free event itself is the engine's to record, with the devGen it leaves.
 */
public final class MemoryJournaling implements MemoryEventListener
{
    private final EventJournal journal;

    public MemoryJournaling(final EventJournal journal)
    {
        this.journal = journal;
    }

    public void onFree(final List<FreedRange> ranges)
    {
    }

    public void onAllocated(final int owner, final long address, final long length, final int access)
    {
        journal.allocated(owner, address, length, access);
    }

    public void onTakenOutOfUse(final int owner, final long address, final long length)
    {
        journal.freed(owner, address, length);
    }
}
