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
 * <p>
 * Every answer is a {@link State}: alive, closed, or stale with its reason. {@link #lookNow} (or {@link #look}
 * with a clock of the caller's) reads the header now; {@link #state} judges what an earlier read saw, as a
 * snapshot keeps it.
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
     * Judges a heartbeat as it was read at {@code atMs}: what a snapshot or an earlier read saw, trusted as it
     * was then.
     *
     * @param heartbeatMs      the heartbeat read from a header.
     * @param publishedLimitMs the stale limit read beside it (0 before the daemon published it).
     * @param atMs             the wall clock when they were read.
     */
    public static State state(final long heartbeatMs, final long publishedLimitMs, final long atMs)
    {
        final long ageMs = ageMs(heartbeatMs, atMs);
        final long limitMs = staleLimitMs(publishedLimitMs);
        final Liveness liveness = ageMs == CLOSED ? Liveness.CLOSED :
            ageMs > limitMs ? Liveness.STALE : Liveness.ALIVE;
        return new State(liveness, ageMs, limitMs);
    }

    /**
     * Looks at the daemon's header now, judged by the clock the caller gives (tests give their own).
     *
     * @param header the daemon's header.
     * @param nowMs  the wall clock.
     */
    public static State look(final ControlHeader header, final long nowMs)
    {
        return state(header.heartbeatMs(), header.heartbeatStaleLimitMs(), nowMs);
    }

    /**
     * Looks at the daemon's header now, by the wall clock.
     *
     * @param header the daemon's header.
     */
    public static State lookNow(final ControlHeader header)
    {
        return look(header, System.currentTimeMillis());
    }

    /** What a look at a heartbeat found. */
    public enum Liveness
    {
        /** Fresh: no older than the daemon's stale limit. */
        ALIVE,
        /** {@link HeaderDescriptor#HEARTBEAT_CLOSED}: the daemon shut down cleanly. */
        CLOSED,
        /** Older than the daemon's stale limit: the daemon is dead or hung. */
        STALE
    }

    /**
     * What one look at a heartbeat found.
     *
     * @param liveness     alive, closed, or stale.
     * @param ageMs        ms since the heartbeat at the look, or {@link #CLOSED}.
     * @param staleLimitMs the limit it was judged by.
     */
    public record State(Liveness liveness, long ageMs, long staleLimitMs)
    {
        public boolean isAlive()
        {
            return liveness == Liveness.ALIVE;
        }

        public boolean isClosed()
        {
            return liveness == Liveness.CLOSED;
        }

        public boolean isStale()
        {
            return liveness == Liveness.STALE;
        }

        /**
         * @return why the daemon counts as gone ("stopped (heartbeat closed)", "died (heartbeat N ms old, limit M
         * ms)"), or null while it is alive.
         */
        public String reason()
        {
            return switch (liveness)
            {
                case ALIVE -> null;
                case CLOSED -> "stopped (heartbeat closed)";
                case STALE -> "died (heartbeat " + ageMs + " ms old, limit " + staleLimitMs + " ms)";
            };
        }
    }
}
