package io.mrd.secondary;

import io.mrd.layout.MrEntry;

/**
 * Where a per-queue {@link MrCache} gets what its own two levels do not hold, and how it learns that they are
 * stale: the daemon's liveness, the address of {@code devGen}, the global cache in the control file, and
 * {@code CREATE_MR}. {@link MrdClient#newCache()} supplies the real one ({@code DaemonMrSource}, one per cache,
 * since the global-cache reader it wraps is single-threaded); tests and benchmarks supply their own.
 * <p>
 * The hit path calls nothing here: it reads {@code devGen} from {@link #devGenAddress()} and relies on the
 * source to {@link MrCache#invalidate()} every cache it {@link #track tracks} once the daemon is known gone,
 * after {@link #requireAliveAsLastSeen()} says so (the protocol is in {@link MrCache}'s class comment).
 */
public interface MrSource
{
    /**
     * Slow-path check, one volatile read that trusts the last look (the watchdog's, the connection's, an earlier
     * {@link #requireAliveNow()}): throws once the daemon is known dead, stopped or restarted (or the client
     * closed). A source makes a death visible here before it invalidates its caches.
     *
     * @throws DaemonDeadException saying which.
     */
    void requireAliveAsLastSeen();

    /**
     * @return the address of the daemon's {@code devGen}: 8 aligned bytes the cache reads with acquire semantics
     * (a change means a memory free event may have invalidated local entries), readable until the source has
     * invalidated the cache and {@link #requireAliveAsLastSeen()} throws.
     */
    long devGenAddress();

    /**
     * Remembers {@code cache} (weakly: a dropped cache must stay collectable) to {@link MrCache#invalidate()} it
     * once the daemon is known gone. Called by the cache's constructor before it reads a generation.
     */
    void track(MrCache cache);

    /**
     * Slow-path check before a request: reads the heartbeat, the epoch and the control file's identity now
     * instead of trusting the background watchdog's last look.
     *
     * @throws DaemonDeadException when the heartbeat is stale or closed or the epoch changed.
     */
    void requireAliveNow();

    /**
     * Looks an address up in the global cache (no system call).
     *
     * @param out filled with the entry when found.
     * @return true when found.
     */
    boolean lookupGlobal(long address, MrEntry out);

    /**
     * Asks the primary to register the memory around {@code address} ({@code CREATE_MR}).
     *
     * @param out filled with the chunk that contains {@code address} and its lkey.
     * @throws io.mrd.layout.MrdException with the daemon's status and message (ENXIO for an address outside
     *                                    managed memory, ENOMEM for pin limits, ETIMEDOUT, ...).
     */
    void createMr(long address, long length, MrEntry out);
}
