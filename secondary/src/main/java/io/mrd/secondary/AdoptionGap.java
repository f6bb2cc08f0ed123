package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

/**
 * The gap a client rides through between its daemon's death and a successor's adoption (docs/adoption.md): when
 * it began and why, and the requests waiting for its end.
 * <p>
 * <b>Why keys may be given out in the gap.</b> The liveness rule is: a key is given out only while what pins its
 * memory is alive. With {@code --provider ibverbs} the MRs belong to the device context, which the kernel keeps
 * while any process holds it; the client holds it itself (its import at attach, {@link DaemonWatch#allowGap}), so
 * every key the client can look up stays pinned for as long as the client's device is open. So entering the gap
 * trips nothing, and a gap that ends with a successor resuming the client ({@link #resumed}) trips nothing either.
 * A gap that ends in the loss ({@link #lost}) trips the latch first and lets the waiting requests go after: what
 * the application does on hearing of the loss (closing the client, and so its device and the pins) comes after
 * the trip, and once the trip is done no lookup returns a key ({@code MrCache}'s protocol). The stress test
 * {@code GapLivenessStress} checks these orders with this class and the real latch and cache.
 * <p>
 * Thread-safe: one monitor guards the state and is what waiting requests wait on.
 */
final class AdoptionGap
{
    /** When and why a gap began. */
    record Entered(long sinceMs, String reason)
    {
    }

    /** Guarded by {@code this}: null when not in a gap. */
    private Entered entered;

    /**
     * @return true when this call began the gap; false when the client was in one already.
     */
    synchronized boolean enter(final String reason, final long nowMs)
    {
        if (null != entered)
        {
            return false;
        }
        entered = new Entered(nowMs, reason);
        return true;
    }

    /** @return the gap the client is in, or null. */
    synchronized Entered current()
    {
        return entered;
    }

    synchronized boolean inGap()
    {
        return null != entered;
    }

    /** A successor resumed the client: the waiting requests go on with it. Trips nothing. */
    void resumed()
    {
        end();
    }

    /**
     * The gap ends in the loss: {@code trip} (the latch) runs first, then the waiting requests are let go, and
     * throw.
     */
    void lost(final Runnable trip)
    {
        trip.run();
        end();
    }

    /**
     * Waits while the client is in a gap, polling every {@code pollMs} (a trip by another path ends no gap).
     *
     * @param who names the daemon in the error of an interrupted wait.
     */
    synchronized void awaitEnd(final long pollMs, final String who)
    {
        while (null != entered)
        {
            try
            {
                wait(pollMs);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                throw new MrdException(ErrorCode.EINTR, "interrupted waiting for a successor of " + who);
            }
        }
    }

    private synchronized void end()
    {
        entered = null;
        notifyAll();
    }
}
