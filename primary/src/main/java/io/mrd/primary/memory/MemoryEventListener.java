package io.mrd.primary.memory;

import java.util.List;

/**
 * Told of memory free events, as DPDK's {@code rte_mem_event_callback_register} tells a driver of
 * {@code RTE_MEM_EVENT_FREE}: the MR engine takes the freed segments out of its MRs here. Registered with
 * {@link MemoryManager#addEventListener}.
 * <p>
 * Called by {@link MemoryManager#free} and {@link MemoryManager#freeAllOwnedBy} with the memory write lock
 * held, after the segments are taken out of use and before they are unmapped, so that the segments and
 * everything built on them change together. Because the lock is held, a listener only updates its
 * bookkeeping: it must not allocate or free memory, and must not deregister or unmap anything (slow, and a
 * provider may re-enter the memory manager); that is done after {@code free} returns, before
 * {@link MemoryManager#release}. An exception propagates to the caller of {@code free}.
 */
@FunctionalInterface
public interface MemoryEventListener
{
    /**
     * @param ranges the ranges just taken out of use, at least one.
     */
    void onFree(List<FreedRange> ranges);

    /**
     * Called under the write lock once a run is mapped for {@code owner} and before its segments are marked
     * allocated, so that a record of it (the event journal) is never behind what the control file shows.
     */
    default void onAllocated(final int owner, final long address, final long length, final int access)
    {
    }

    /**
     * Called under the write lock for each run {@link MemoryManager#free} or {@link MemoryManager#freeAllOwnedBy}
     * takes out of use, before its segments are marked releasing and before {@link #onFree}.
     */
    default void onTakenOutOfUse(final int owner, final long address, final long length)
    {
    }
}
