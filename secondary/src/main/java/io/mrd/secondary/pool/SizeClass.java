package io.mrd.secondary.pool;

import java.util.Arrays;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A size class's shared free list: the buffers no thread cache holds, a stack under one lock. Threads come
 * here in batches (half a magazine), so the lock is taken once per many acquires or releases.
 */
final class SizeClass
{
    final int index;
    final int capacity;
    final int magazineCapacity;
    private final int batch;
    private final ReentrantLock lock = new ReentrantLock();
    private BufferSlot[] free = new BufferSlot[64];
    private int count;

    SizeClass(final int index, final int capacity, final int magazineCapacity)
    {
        this.index = index;
        this.capacity = capacity;
        this.magazineCapacity = magazineCapacity;
        this.batch = Math.max(1, magazineCapacity / 2);
    }

    /**
     * @return a free buffer, and up to a batch more moved into {@code cache}'s magazine; null when the list is
     *         empty.
     */
    BufferSlot take(final ThreadCache cache)
    {
        lock.lock();
        try
        {
            if (0 == count)
            {
                return null;
            }
            final BufferSlot first = free[--count];
            free[count] = null;
            final int more = Math.min(count, Math.min(batch - 1, cache.room(index)));
            for (int i = 0; i < more; i++)
            {
                cache.push(index, free[--count]);
                free[count] = null;
            }
            return first;
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * A release that found {@code cache}'s magazine full: {@code slot} and half the magazine come here.
     */
    void flush(final ThreadCache cache, final BufferSlot slot)
    {
        lock.lock();
        try
        {
            push(slot);
            final int half = cache.count(index) / 2;
            if (half > 0)
            {
                cache.drain(index, half, this);
            }
        }
        finally
        {
            lock.unlock();
        }
    }

    /** Adds {@code n} buffers from {@code slots[from]} on. */
    void putAll(final BufferSlot[] slots, final int from, final int n)
    {
        lock.lock();
        try
        {
            if (count + n > free.length)
            {
                free = Arrays.copyOf(free, Math.max(free.length * 2, count + n));
            }
            System.arraycopy(slots, from, free, count, n);
            count += n;
        }
        finally
        {
            lock.unlock();
        }
    }

    /** @return buffers in the shared list now. */
    int freeCount()
    {
        lock.lock();
        try
        {
            return count;
        }
        finally
        {
            lock.unlock();
        }
    }

    private void push(final BufferSlot slot)
    {
        if (count == free.length)
        {
            free = Arrays.copyOf(free, free.length * 2);
        }
        free[count++] = slot;
    }
}
