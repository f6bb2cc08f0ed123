package io.mrd.secondary;

import io.mrd.layout.MrdException;

import java.lang.ref.WeakReference;
import java.util.ArrayList;

/**
 * Whether a client is still usable, as one latch: null until the daemon is known dead, stopped or restarted
 * (or the client closed), then the reason, for good. It also holds the client's caches, weakly (a cache the
 * application dropped is still collected), to {@link MrCache#invalidate() invalidate} them when it trips.
 * <p>
 * The caches' side of liveness: a lookup's hit path checks nothing but its generation (see {@link MrCache}'s
 * class comment for the protocol and why no death is lost). This class keeps the two orders that protocol
 * needs:
 * <ul>
 *   <li>{@link #trip} stores the reason (volatile: what {@link #requireAlive()} reads) before it
 *       invalidates any cache;</li>
 *   <li>{@link #track} and {@link #trip} hold the same lock: a cache tracked after a trip is ordered after the
 *       reason's store, so the check its constructor makes after tracking throws; one tracked before is in
 *       the list the trip invalidates.</li>
 * </ul>
 */
final class LivenessLatch implements DaemonLiveness
{
    private static final int MIN_SWEEP = 16;

    /** Guarded by this. */
    private final ArrayList<WeakReference<MrCache>> caches = new ArrayList<>();
    /** Guarded by this: the list is swept of collected caches when it reaches this size. */
    private int sweepAt = MIN_SWEEP;
    private volatile MrdException broken;

    /**
     * One volatile read.
     *
     * @throws MrdException a fresh copy of the reason, once tripped.
     */
    public void requireAlive()
    {
        final MrdException reason = broken;
        if (null != reason)
        {
            throw DaemonConnection.copy(reason);
        }
    }

    /** @return why the client is broken, or null. */
    MrdException broken()
    {
        return broken;
    }

    /**
     * Remembers a cache to invalidate when the latch trips; one tracked after that is invalidated now.
     */
    synchronized void track(final MrCache cache)
    {
        if (null != broken)
        {
            cache.invalidate();
            return;
        }
        if (caches.size() >= sweepAt)
        {
            caches.removeIf(ref -> null == ref.get());
            sweepAt = Math.max(MIN_SWEEP, caches.size() * 2);
        }
        caches.add(new WeakReference<>(cache));
    }

    /**
     * Trips the latch: {@code reason} first, then every tracked cache's generation.
     *
     * @return true when this call tripped it, false when it was tripped already (the first reason stays).
     */
    synchronized boolean trip(final MrdException reason)
    {
        if (null != broken)
        {
            return false;
        }
        broken = reason;
        for (final WeakReference<MrCache> ref : caches)
        {
            final MrCache cache = ref.get();
            if (null != cache)
            {
                cache.invalidate();
            }
        }
        caches.clear();
        return true;
    }
}
