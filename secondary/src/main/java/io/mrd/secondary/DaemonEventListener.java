package io.mrd.secondary;

/**
 * What an application hears of its daemon's end, set with {@link ClientContext#daemonEventListener}: the
 * moment the client knows the daemon is lost (it died, stopped or restarted), from which the loss rule
 * ({@link DaemonLiveness}) holds. Never told of the client's own {@link MrdClient#close()}.
 * <p>
 * Called once per client, on a thread of its own ({@code mrd-daemon-events}), never on a thread of the
 * application's or one the client needs: the listener may block, attach a new client or close this one.
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
}
