package io.mrd.testing;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;

/**
 * The one way tests wait: for a condition, with a deadline, never for a length of time. A wait that times out
 * fails with what it waited for and the last state it saw, so that a failure on a slow, shared machine says how
 * far things got.
 * <p>
 * It looks again at once for some microseconds (a completion on a queue is usually that close), then sleeps
 * 1 ms, 2 ms, 4 ms, up to 10 ms between looks: a condition that is costly to evaluate (a command, a scrape) is
 * not run in a tight loop.
 */
public final class Wait
{
    /** How long a wait looks again without sleeping. */
    private static final long SPIN_NS = TimeUnit.MICROSECONDS.toNanos(50);
    private static final long FIRST_SLEEP_NS = TimeUnit.MILLISECONDS.toNanos(1);
    private static final long MAX_SLEEP_NS = TimeUnit.MILLISECONDS.toNanos(10);

    /**
     * A condition a test waits for; it may throw (an assertion that fails ends the wait with it).
     */
    @FunctionalInterface
    public interface Condition
    {
        boolean holds() throws Exception;
    }

    /**
     * What a test looks at while it waits; it may throw (an assertion that fails ends the wait with it).
     */
    @FunctionalInterface
    public interface Probe<T>
    {
        T observe() throws Exception;
    }

    private Wait()
    {
    }

    /**
     * Waits until {@code condition} holds.
     *
     * @throws AssertionError naming {@code what} when it still does not hold at the deadline.
     */
    public static void await(final String what, final Duration timeout, final Condition condition)
    {
        await(what, timeout, condition::holds, Boolean::booleanValue);
    }

    /**
     * Looks at {@code probe} until what it shows is {@code done}.
     *
     * @return the state that was done.
     * @throws AssertionError naming {@code what} and the last state seen ({@code String.valueOf}) when none was
     *                        done by the deadline.
     */
    public static <T> T await(
        final String what, final Duration timeout, final Probe<T> probe, final Predicate<? super T> done)
    {
        final long start = System.nanoTime();
        final long deadline = start + timeout.toNanos();
        long sleepNs = FIRST_SLEEP_NS;
        while (true)
        {
            final T state = observe(what, probe);
            if (done.test(state))
            {
                return state;
            }
            final long now = System.nanoTime();
            if (now - deadline > 0)
            {
                throw new AssertionError("timed out after " + timeout + " waiting for " + what + "; last seen: " +
                    state);
            }
            if (now - start < SPIN_NS)
            {
                Thread.onSpinWait();
                continue;
            }
            LockSupport.parkNanos(Math.min(sleepNs, deadline - now));
            if (Thread.interrupted())
            {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted waiting for " + what + "; last seen: " + state);
            }
            sleepNs = Math.min(MAX_SLEEP_NS, 2 * sleepNs);
        }
    }

    private static <T> T observe(final String what, final Probe<T> probe)
    {
        try
        {
            return probe.observe();
        }
        catch (final RuntimeException ex)
        {
            throw ex;
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted waiting for " + what, ex);
        }
        catch (final Exception ex)
        {
            throw new AssertionError("waiting for " + what + ": " + ex, ex);
        }
    }
}
