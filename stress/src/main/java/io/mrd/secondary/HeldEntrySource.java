package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import org.agrona.BufferUtil;

import java.nio.ByteBuffer;

/**
 * The client's source of MRs for the liveness stress tests: the real {@link LivenessLatch}'s checks, a global
 * cache that always holds one entry ({@link #BASE}, {@link #LENGTH}, {@link #LKEY}) and no daemon to ask. Its
 * devGen never moves: a test makes a cache stale with {@link MrCache#invalidate()}.
 */
final class HeldEntrySource implements MrSource
{
    static final long BASE = 0x7f00_0000_0000L;
    static final long LENGTH = 1 << 20;
    static final int LKEY = 0x1234;
    private static final ByteBuffer DEV_GEN = BufferUtil.allocateDirectAligned(Long.BYTES, Long.BYTES);
    private static final long DEV_GEN_ADDRESS = BufferUtil.address(DEV_GEN);

    static
    {
        DEV_GEN.putLong(0, 1);
    }

    private final LivenessLatch latch;

    HeldEntrySource(final LivenessLatch latch)
    {
        this.latch = latch;
    }

    public void requireAliveAsLastSeen()
    {
        latch.requireAlive();
    }

    public long devGenAddress()
    {
        return DEV_GEN_ADDRESS;
    }

    public void track(final MrCache cache)
    {
        latch.track(cache);
    }

    public void requireAliveNow()
    {
        latch.requireAlive();
    }

    public boolean lookupGlobal(final long address, final MrEntry out)
    {
        out.set(BASE, BASE + LENGTH, LKEY, Access.NO_RKEY, Access.LOCAL, 0);
        return true;
    }

    public void createMr(final long address, final long length, final MrEntry out)
    {
        throw new MrdException(ErrorCode.ENXIO, "stress: no daemon to create an MR");
    }

    /**
     * @return a cache of {@code source} that holds the entry in every level and whose generation is stale, so
     *         that the next lookup flushes (and races whatever the test races it with).
     */
    static MrCache staleCache(final LivenessLatch latch)
    {
        final MrCache cache = new MrCache(new HeldEntrySource(latch));
        if (cache.lkey(BASE, 8) != LKEY)
        {
            throw new IllegalStateException("the set-up lookup failed");
        }
        cache.invalidate();
        return cache;
    }

    /** @return what a lookup inside the entry gave: the key, the death, or anything else. */
    static int lookup(final MrCache cache)
    {
        try
        {
            return cache.lkey(BASE + 64, 64) == LKEY ? KEY : OTHER;
        }
        catch (final DaemonDeadException ex)
        {
            return DEAD;
        }
        catch (final RuntimeException ex)
        {
            return OTHER;
        }
    }

    /** {@link #lookup} results. */
    static final int KEY = 1;
    static final int DEAD = 2;
    static final int OTHER = 3;
}
