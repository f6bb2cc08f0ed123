package io.mrd.secondary;

import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE_INTERESTING;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The caches' liveness protocol ({@link MrCache}'s class comment) with the real {@link MrCache} and the
 * client's real {@link LivenessLatch}: one actor is the watch marking the daemon dead, the other a queue whose
 * next lookup flushes (its generation is stale, so the flush races the death) and which, if it sees that the
 * mark is complete, looks up again; the arbiter looks up once both are done.
 * <p>
 * Results: {@value #KEY} a key, {@value #DEAD} {@link DaemonDeadException}, {@value #NOT_RUN} not looked up
 * (the mark was not seen complete), {@value #OTHER} any other exception. A lookup that starts after the mark
 * returning a key (r2 or r3 {@value #KEY}) is what the protocol forbids; so would be a flush that lost the
 * death, which shows as r3 {@value #KEY}.
 */
@JCStressTest
@Description("Once the watch has marked the daemon dead, no lookup returns a key; a flush racing the death never loses it")
@Outcome(id = {"1, 0, 2", "2, 0, 2"}, expect = ACCEPTABLE, desc = "the racing lookup is either side of the death; " +
    "the lookup after it throws")
@Outcome(id = "2, 2, 2", expect = ACCEPTABLE_INTERESTING, desc = "the queue saw the mark complete: both throw")
@Outcome(id = "1, 2, 2", expect = ACCEPTABLE_INTERESTING, desc = "a key before the mark, then the mark seen: throws")
@Outcome(expect = FORBIDDEN, desc = "a lookup after the mark returned a key (a lost death), or failed otherwise")
@State
public class CacheLivenessStress
{
    static final int NOT_RUN = 0;
    static final int KEY = HeldEntrySource.KEY;
    static final int DEAD = HeldEntrySource.DEAD;
    static final int OTHER = HeldEntrySource.OTHER;

    private static final DaemonDeadException DEATH = new DaemonDeadException("stress: the daemon died");

    private final LivenessLatch latch = new LivenessLatch();
    /** The entry in every level, then a stale generation: the datapath's next lookup flushes and adopts. */
    private final MrCache cache = HeldEntrySource.staleCache(latch);
    private volatile boolean marked;

    /** The watch: the daemon is dead. */
    @Actor
    public void watch()
    {
        latch.trip(DEATH);
        marked = true;
    }

    /** A queue: a lookup that flushes, racing the death; another if the mark is seen complete. */
    @Actor
    public void datapath(final III_Result r)
    {
        r.r1 = lookup();
        r.r2 = marked ? lookup() : NOT_RUN;
    }

    /** A lookup after both. */
    @Arbiter
    public void after(final III_Result r)
    {
        r.r3 = lookup();
    }

    private int lookup()
    {
        return HeldEntrySource.lookup(cache);
    }
}
