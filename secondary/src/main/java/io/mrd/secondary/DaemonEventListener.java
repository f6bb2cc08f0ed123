package io.mrd.secondary;

/**
 * What an application hears of its daemon's end, set with {@link ClientContext#daemonEventListener}: the
 * moment the client knows the daemon is lost (it died, stopped or restarted), from which the loss rule
 * ({@link DaemonLiveness}) holds; and, for a client that rides through a gap ({@link ClientContext#adoptionWaitMs}),
 * the daemon's death ({@link #onDaemonAway}) and its adoption by a successor ({@link #onDaemonAdopted}). Never told
 * of the client's own {@link MrdClient#close()}.
 * <p>
 * {@link #onDaemonLost} is told once per client; every call is on a thread of its own ({@code mrd-daemon-events}),
 * never on a thread of the application's or one the client needs: the listener may block, attach a new client or
 * close this one.
 */
@FunctionalInterface
public interface DaemonEventListener
{
    /** Hears nothing: the default. */
    DaemonEventListener NONE = (reason, noticedAtMs) ->
    {
    };

    /**
     * @param reason      why the client counts the daemon lost, as every later call throws it.
     * @param noticedAtMs the wall clock (ms since the epoch) when the client noticed.
     */
    void onDaemonLost(DaemonDeadException reason, long noticedAtMs);

    /**
     * With {@link ClientContext#adoptionWaitMs} above 0: the daemon died and the client is in the gap, waiting
     * for a successor (keys and RDMA go on, requests wait). Then either {@link #onDaemonAdopted} or
     * {@link #onDaemonLost}.
     *
     * @param reason      why the client counts its daemon gone.
     * @param noticedAtMs the wall clock (ms since the epoch) when the client noticed.
     */
    default void onDaemonAway(final String reason, final long noticedAtMs)
    {
    }

    /**
     * A successor adopted the dead daemon's state and the client resumed with it: its id, its memory, its caches.
     *
     * @param epoch the successor's epoch.
     * @param gapMs how long the client was without a daemon, from noticing the death to resuming.
     */
    default void onDaemonAdopted(final long epoch, final long gapMs)
    {
    }
}
