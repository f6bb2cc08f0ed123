package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import org.agrona.BufferUtil;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

import java.nio.ByteBuffer;

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
    static final int KEY = 1;
    static final int DEAD = 2;
    static final int OTHER = 3;

    private static final long BASE = 0x7f00_0000_0000L;
    private static final long LENGTH = 1 << 20;
    private static final int LKEY = 0x1234;
    /** A devGen that never moves: the staleness comes from {@link MrCache#invalidate()}. */
    private static final ByteBuffer DEV_GEN = BufferUtil.allocateDirectAligned(Long.BYTES, Long.BYTES);
    private static final long DEV_GEN_ADDRESS = BufferUtil.address(DEV_GEN);
    private static final DaemonDeadException DEATH = new DaemonDeadException("stress: the daemon died");

    static
    {
        DEV_GEN.putLong(0, 1);
    }

    private final LivenessLatch latch = new LivenessLatch();
    private final MrCache cache;
    private volatile boolean marked;

    public CacheLivenessStress()
    {
        cache = new MrCache(new Source(latch));
        // The entry in every level, then a stale generation: the datapath's next lookup flushes and adopts.
        if (cache.lkey(BASE, 8) != LKEY)
        {
            throw new IllegalStateException("the set-up lookup failed");
        }
        cache.invalidate();
    }

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

    /** The client's source, but with a global cache that always holds the entry and no daemon to ask. */
    private static final class Source implements MrSource
    {
        private final LivenessLatch latch;

        Source(final LivenessLatch latch)
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
    }
}
