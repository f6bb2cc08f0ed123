package io.mrd.layout;

/**
 * The liveness rule: the one place that says whether the daemon behind a control file is alive.
 * <p>
 * The daemon stores the wall clock into the header every heartbeat interval and publishes, beside it, the
 * interval and the stale limit it was started with ({@link #staleLimitMs(int)}: {@value #STALE_INTERVALS}
 * intervals). A reader never assumes an interval of its own: the client's watch, the global-cache reader, the
 * tools and the metrics all judge a daemon by the limit that daemon published, so they cannot disagree about
 * the same daemon. A limit of several intervals rides out a daemon that is briefly descheduled (GC, a loaded
 * machine) without letting a dead one go unnoticed for long.
 * <p>
 * A heartbeat of {@link HeaderDescriptor#HEARTBEAT_CLOSED} means the daemon shut down cleanly.
 */
public final class Heartbeat
{
    /** Default heartbeat interval of the daemon in ms. */
    public static final int DEFAULT_INTERVAL_MS = 100;

    /** Shortest heartbeat interval a daemon accepts, in ms. */
    public static final int MIN_INTERVAL_MS = 10;

    /** Longest heartbeat interval a daemon accepts, in ms. */
    public static final int MAX_INTERVAL_MS = 10_000;

    /** A heartbeat older than this many intervals means the daemon is dead or hung. */
    public static final int STALE_INTERVALS = 10;

    /** Heartbeat age of a daemon that shut down cleanly ({@link #ageMs}). */
    public static final long CLOSED = -1L;

    private Heartbeat()
    {
    }

    /**
     * @param intervalMs the daemon's heartbeat interval.
     * @return the stale limit the daemon publishes for that interval.
     */
    public static int staleLimitMs(final int intervalMs)
    {
        return STALE_INTERVALS * intervalMs;
    }

    /**
     * @param publishedLimitMs the stale limit a header carries (0 before the daemon published it).
     * @return the limit to judge by: the published one, else that of the default interval.
     */
    public static long staleLimitMs(final long publishedLimitMs)
    {
        return publishedLimitMs > 0 ? publishedLimitMs : staleLimitMs(DEFAULT_INTERVAL_MS);
    }

    /**
     * @param header the daemon's header.
     * @return the stale limit the daemon published.
     */
    public static long staleLimitMs(final ControlHeader header)
    {
        return staleLimitMs((long)header.heartbeatStaleLimitMs());
    }

    /**
     * @param heartbeatMs the heartbeat as read from a header.
     * @param nowMs       the wall clock.
     * @return ms since that heartbeat (0 when the clock stepped back), or {@link #CLOSED}.
     */
    public static long ageMs(final long heartbeatMs, final long nowMs)
    {
        return heartbeatMs == HeaderDescriptor.HEARTBEAT_CLOSED ? CLOSED : Math.max(0, nowMs - heartbeatMs);
    }

    /**
     * @param header the daemon's header.
     * @param nowMs  the wall clock.
     * @return ms since the last heartbeat, or {@link #CLOSED}.
     */
    public static long ageMs(final ControlHeader header, final long nowMs)
    {
        return ageMs(header.heartbeatMs(), nowMs);
    }

    /**
     * @param ageMs        a heartbeat age from {@link #ageMs}.
     * @param staleLimitMs the limit from {@link #staleLimitMs}.
     * @return true when the daemon neither closed the file nor went silent for longer than its limit.
     */
    public static boolean isAlive(final long ageMs, final long staleLimitMs)
    {
        return ageMs != CLOSED && ageMs <= staleLimitMs;
    }

    /**
     * @param header the daemon's header.
     * @param nowMs  the wall clock.
     * @return true when the daemon's heartbeat is fresh.
     */
    public static boolean isAlive(final ControlHeader header, final long nowMs)
    {
        return isAlive(ageMs(header, nowMs), staleLimitMs(header));
    }

    /**
     * @param ageMs        a heartbeat age from {@link #ageMs}.
     * @param staleLimitMs the limit from {@link #staleLimitMs}.
     * @return why the daemon counts as gone ("stopped (heartbeat closed)", "died (heartbeat N ms old, limit M
     * ms)"), or null while it is alive.
     */
    public static String deathReason(final long ageMs, final long staleLimitMs)
    {
        if (ageMs == CLOSED)
        {
            return "stopped (heartbeat closed)";
        }
        return ageMs > staleLimitMs ? "died (heartbeat " + ageMs + " ms old, limit " + staleLimitMs + " ms)" : null;
    }

    /**
     * @param header the daemon's header.
     * @param nowMs  the wall clock.
     * @return why the daemon counts as gone, or null while it is alive.
     */
    public static String deathReason(final ControlHeader header, final long nowMs)
    {
        return deathReason(ageMs(header, nowMs), staleLimitMs(header));
    }
}
