package io.mrd.secondary;

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
 * The read turn's hand-on ({@link ReadTurn}'s class comment) with the real {@link ReadTurn}: two callers each
 * register a call and try the turn, as {@link PendingReplies#await} does; one that gets it reads its own reply
 * ({@link ReadTurn#deliver} to itself) and leaves; one that does not would park. The turn's waker records whom
 * it woke instead of unparking.
 * <p>
 * Results: r1, r2 {@value #LED} the caller took the turn, {@value #FOLLOWED} it found the turn taken; r3 which
 * calls were woken (1 the first caller's, 2 the second's). A caller that found the turn taken and was not woken
 * would park with its reply unread until its deadline: forbidden.
 */
@JCStressTest
@Description("A caller that finds the read turn taken is woken by the caller leaving it, never left parked")
@Outcome(id = {"1, 2, 2", "2, 1, 1"}, expect = ACCEPTABLE_INTERESTING, desc = "one read, the other found the turn " +
    "taken and was woken")
@Outcome(id = {"1, 1, 0", "1, 1, 1", "1, 1, 2", "1, 1, 3"}, expect = ACCEPTABLE, desc = "one after the other: each " +
    "took the turn (a caller that left it may have woken the other in vain)")
@Outcome(expect = FORBIDDEN, desc = "a caller found the turn taken and nobody woke it")
@State
public class TurnHandOnStress
{
    static final int LED = 1;
    static final int FOLLOWED = 2;

    private final Set<ReadTurn.Call> woken = ConcurrentHashMap.newKeySet();
    private final ReadTurn turn = new ReadTurn(woken::add);
    private volatile ReadTurn.Call first;
    private volatile ReadTurn.Call second;

    /** A caller. */
    @Actor
    public void firstCaller(final III_Result r)
    {
        first = turn.register(1);
        r.r1 = await(first);
    }

    /** Another. */
    @Actor
    public void secondCaller(final III_Result r)
    {
        second = turn.register(2);
        r.r2 = await(second);
    }

    /** Who was woken, once both are done. */
    @Arbiter
    public void after(final III_Result r)
    {
        r.r3 = (woken.contains(first) ? 1 : 0) | (woken.contains(second) ? 2 : 0);
    }

    private int await(final ReadTurn.Call call)
    {
        if (!turn.tryTake())
        {
            return FOLLOWED;
        }
        turn.deliver(call.id, "its reply");
        turn.leave(call);
        return LED;
    }
}
