/**
 * The daemon's memory: the memory-segment lists at fixed addresses ({@code MemsegList}), their backing files on
 * hugetlbfs or tmpfs ({@code BackingFiles}, {@code HugePages}), first-fit allocation and the three steps of a
 * free ({@code MemoryManager}), which publish memory free events to registered {@code MemoryEventListener}s
 * (DPDK's {@code rte_mem_event_callback_register}).
 * <p>
 * The memory lock (DPDK's memory hotplug lock) is the memory manager's own: callers hold it only through
 * {@code MemoryManager.withChunk} and the listeners it calls. Work that outlives the lock on pages that must stay
 * mapped (a registration) holds their segments instead ({@code SegmentHold}, {@code SegmentHolds}): a free of held
 * segments waits with no lock held. What does not belong here: anything about MRs,
 * which learn of frees only through the listener, and external memory, which no list holds.
 */
package io.mrd.primary.memory;
