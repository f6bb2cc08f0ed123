package io.mrd.primary.memory;

/**
 * What other packages' tests may ask about the memory lock, which is the memory manager's own.
 */
public final class MemoryLocks
{
    private MemoryLocks()
    {
    }

    /**
     * @return true when any thread holds the memory lock for writing or the calling thread holds it for reading.
     */
    public static boolean held(final MemoryManager memory)
    {
        return memory.memoryLock().isWriteLocked() || memory.memoryLock().getReadHoldCount() > 0;
    }
}
