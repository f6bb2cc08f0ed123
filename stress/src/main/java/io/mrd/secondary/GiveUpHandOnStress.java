package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import org.openjdk.jcstress.annotations.Actor;
import org.openjdk.jcstress.annotations.Arbiter;
import org.openjdk.jcstress.annotations.Description;
import org.openjdk.jcstress.annotations.JCStressTest;
import org.openjdk.jcstress.annotations.Outcome;
import org.openjdk.jcstress.annotations.State;
import org.openjdk.jcstress.infra.results.III_Result;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE;
import static org.openjdk.jcstress.annotations.Expect.ACCEPTABLE_INTERESTING;
import static org.openjdk.jcstress.annotations.Expect.FORBIDDEN;

/**
 * The read turn's hand-on when a waiting caller gives up ({@link ReadTurn}'s class comment), with the real
 * {@link ReadTurn}: two callers wait (their calls registered, as parked followers), one reads its own reply and
 * leaves the turn, and one of the two waiting gives up (a timeout) at the same time. The leaver may pick the one
 * giving up to wake (its call has the lower id, so the leaver's scan meets it first), in vain; then the one giving
 * up must wake the other. The turn's waker records whom it woke instead of unparking.
 * <p>
 * Results: r1 {@value #LED} the leader took and left the turn, r2 1 the call was given up, r3 which waiting calls
 * were woken (1 the one still waiting, 2 the one giving up). The one still waiting not woken would park with its
 * reply unread until its deadline: forbidden.
 */
@JCStressTest
@Description("A caller giving up while the turn is handed to it hands it on: the caller still waiting is woken")
@Outcome(id = "1, 1, 1", expect = ACCEPTABLE, desc = "the caller still waiting was woken")
@Outcome(id = "1, 1, 3", expect = ACCEPTABLE_INTERESTING, desc = "the leaver woke the one giving up, which handed on")
@Outcome(expect = FORBIDDEN, desc = "the caller still waiting was not woken")
@State
public class GiveUpHandOnStress
{
    static final int LED = 1;
    private static final MrdException TIMEOUT = new MrdException(ErrorCode.ETIMEDOUT, "stress: no reply in time");

    private final Set<ReadTurn.Call> woken = ConcurrentHashMap.newKeySet();
    private final ReadTurn turn = new ReadTurn(woken::add);
    private final ReadTurn.Call givingUp;
    private final ReadTurn.Call stillWaiting;

    public GiveUpHandOnStress()
    {
        givingUp = turn.register(2);
        stillWaiting = turn.register(3);
    }

    /** The caller reading: its own reply comes, it leaves the turn. */
    @Actor
    public void leader(final III_Result r)
    {
        final ReadTurn.Call own = turn.register(1);
        if (turn.tryTake())
        {
            turn.deliver(own.id, "its reply");
            turn.leave(own);
            r.r1 = LED;
        }
    }

    /** A waiting caller's deadline passes. */
    @Actor
    public void timeout(final III_Result r)
    {
        r.r2 = turn.giveUp(givingUp, TIMEOUT) ? 1 : 0;
    }

    /** Who was woken, once both are done. */
    @Arbiter
    public void after(final III_Result r)
    {
        r.r3 = (woken.contains(stillWaiting) ? 1 : 0) | (woken.contains(givingUp) ? 2 : 0);
    }
}
