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
 * The liveness rule of the gap ({@link AdoptionGap}'s class comment): a key is given out only while what pins its
 * memory is alive. The real {@link AdoptionGap}, {@link LivenessLatch} and {@link MrCache}; the pin is the
 * client's own import of the device context, released by what follows the loss (the application's close).
 * <p>
 * Results ({@link HeldEntrySource#lookup}): 1 a key, 2 {@link DaemonDeadException}, 3 anything else.
 */
public final class GapLivenessStress
{
    private static final DaemonDeadException DEATH = new DaemonDeadException("stress: no successor adopted it");

    private GapLivenessStress()
    {
    }

    /**
     * The gap ends in the loss, and then the pin is released; a queue reads whether the pin is gone, then looks up
     * (flushing: its generation is stale). r1: the pin was released before the lookup (1) or not (0); r2 that
     * lookup; r3 a lookup after both.
     */
    @JCStressTest
    @Description("A gap that ends in the loss trips the latch before the pin can go: no key once the pin is gone")
    @Outcome(id = {"0, 1, 2", "0, 2, 2"}, expect = ACCEPTABLE, desc = "the pin alive: a key in the gap, or the " +
        "loss already seen")
    @Outcome(id = "1, 2, 2", expect = ACCEPTABLE_INTERESTING, desc = "the pin gone: the lookup throws")
    @Outcome(expect = FORBIDDEN, desc = "a key while the pin was gone, a key after the loss, or another failure")
    @State
    public static class Lost
    {
        private final LivenessLatch latch = new LivenessLatch();
        private final MrCache cache = HeldEntrySource.staleCache(latch);
        private final AdoptionGap gap = new AdoptionGap();
        private volatile boolean pinReleased;

        public Lost()
        {
            gap.enter("stress: the daemon died", 1);
        }

        /** The watchdog: no successor in time, the loss; then the application closes the client's device. */
        @Actor
        public void watchdog()
        {
            gap.lost(() -> latch.trip(DEATH));
            pinReleased = true;
        }

        @Actor
        public void datapath(final III_Result r)
        {
            r.r1 = pinReleased ? 1 : 0;
            r.r2 = HeldEntrySource.lookup(cache);
        }

        @Arbiter
        public void after(final III_Result r)
        {
            r.r3 = HeldEntrySource.lookup(cache);
        }
    }

    /**
     * A successor resumes the client while a queue looks up: the gap takes no key away (the pin never went).
     * r1 the lookup racing the resume, r2 a lookup after it, r3 whether the client is still in a gap.
     */
    @JCStressTest
    @Description("A gap entered and resumed trips nothing: every lookup gives the key")
    @Outcome(id = "1, 1, 0", expect = ACCEPTABLE, desc = "keys throughout, the gap over")
    @Outcome(expect = FORBIDDEN, desc = "a lookup failed in or after the gap, or the gap did not end")
    @State
    public static class Resumed
    {
        private final LivenessLatch latch = new LivenessLatch();
        private final MrCache cache = HeldEntrySource.staleCache(latch);
        private final AdoptionGap gap = new AdoptionGap();

        @Actor
        public void watchdog()
        {
            gap.enter("stress: the daemon died", 1);
            gap.resumed();
        }

        @Actor
        public void datapath(final III_Result r)
        {
            r.r1 = HeldEntrySource.lookup(cache);
        }

        @Arbiter
        public void after(final III_Result r)
        {
            r.r2 = HeldEntrySource.lookup(cache);
            r.r3 = gap.inGap() ? 1 : 0;
        }
    }
}
