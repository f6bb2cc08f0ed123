package io.mrd.secondary.pool;

/**
 * One thread's free buffers, a magazine (a small stack) per size class, as jemalloc's tcache and Netty's
 * PoolThreadCache keep them: the common acquire pops from its class's magazine and the common release
 * pushes onto it, with no lock and no atomic. A miss takes a batch from the class's shared free list under its
 * lock; a full magazine gives half of itself back there.
 * <p>
 * Only its owner thread touches it, with one exception: once the owner has died (seen through
 * {@link Thread#isAlive()}, which orders everything the thread did before that read), the pool empties it
 * into the shared lists so that a dead thread's buffers are not lost.
 */
final class ThreadCache
{
    private final Thread owner;
    private final BufferSlot[][] magazines;
    private final int[] counts;

    ThreadCache(final Thread owner, final int[] capacities)
    {
        this.owner = owner;
        magazines = new BufferSlot[capacities.length][];
        counts = new int[capacities.length];
        for (int i = 0; i < capacities.length; i++)
        {
            magazines[i] = new BufferSlot[capacities[i]];
        }
    }

    /** @return a free buffer of class {@code classIndex}, null when the magazine is empty. */
    BufferSlot pop(final int classIndex)
    {
        final int n = counts[classIndex] - 1;
        if (n < 0)
        {
            return null;
        }
        final BufferSlot[] magazine = magazines[classIndex];
        final BufferSlot slot = magazine[n];
        magazine[n] = null;
        counts[classIndex] = n;
        return slot;
    }

    /** @return false when the magazine is full (or has no room at all: caching off). */
    boolean push(final int classIndex, final BufferSlot slot)
    {
        final int n = counts[classIndex];
        final BufferSlot[] magazine = magazines[classIndex];
        if (n == magazine.length)
        {
            return false;
        }
        magazine[n] = slot;
        counts[classIndex] = n + 1;
        return true;
    }

    /** @return how many more buffers of the class the magazine takes. */
    int room(final int classIndex)
    {
        return magazines[classIndex].length - counts[classIndex];
    }

    /**
     * Moves the top {@code count} buffers of a class into {@code target}.
     */
    void drain(final int classIndex, final int count, final SizeClass target)
    {
        final BufferSlot[] magazine = magazines[classIndex];
        final int from = counts[classIndex] - count;
        target.putAll(magazine, from, count);
        java.util.Arrays.fill(magazine, from, from + count, null);
        counts[classIndex] = from;
    }

    int count(final int classIndex)
    {
        return counts[classIndex];
    }

    int classCount()
    {
        return counts.length;
    }

    boolean isOwnerDead()
    {
        return !owner.isAlive();
    }
}
