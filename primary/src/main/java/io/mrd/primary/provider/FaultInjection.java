package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The faults a test asks a provider for: a registration that fails ({@code --fail-nth}), one that fails at a
 * {@link FaultPoint} of a registration on several devices, and registrations as slow as a NIC makes them.
 * {@link #beforeRegister} is checked first thing in {@code register}, before anything is counted or pinned, so
 * its failure leaves nothing behind; a fault point hits later, and the provider must undo what it did.
 */
final class FaultInjection
{
    private final int failNth;
    private final long latencyNanos;
    private final Optional<FaultPoint> point;
    private final AtomicLong attempts = new AtomicLong();
    /** With a {@link FaultPoint.Step#PUBLISH} point: the attempt number of each registration, by handle. */
    private final Map<Long, Long> attemptOf = new ConcurrentHashMap<>();

    FaultInjection(final int failNth, final long latencyNanos)
    {
        this(failNth, latencyNanos, Optional.empty());
    }

    FaultInjection(final ProviderConfig config)
    {
        this(config.failNth(), config.latencyNanos(), config.faultPoint());
    }

    private FaultInjection(final int failNth, final long latencyNanos, final Optional<FaultPoint> point)
    {
        this.failNth = failNth;
        this.latencyNanos = latencyNanos;
        this.point = point;
    }

    /**
     * Counts one registration attempt, waits the configured latency, and fails the Nth attempt.
     *
     * @return the attempt's number, counting from 1: what {@link #at} takes.
     * @throws MrdException ENOMEM for the Nth attempt.
     */
    long beforeRegister()
    {
        final long attempt = attempts.incrementAndGet();
        if (latencyNanos > 0)
        {
            // parkNanos may return early (spuriously or on unpark); the latency is a floor.
            final long deadline = System.nanoTime() + latencyNanos;
            long remaining = latencyNanos;
            while (remaining > 0)
            {
                LockSupport.parkNanos(remaining);
                remaining = deadline - System.nanoTime();
            }
        }
        if (attempt == failNth)
        {
            throw new MrdException(ErrorCode.ENOMEM, "injected failure of registration #" + attempt + " (--fail-nth)");
        }
        return attempt;
    }

    /**
     * @throws MrdException ENOMEM when the configured {@link FaultPoint} is this one.
     */
    void at(final FaultPoint.Step step, final long attempt, final int device)
    {
        if (point.isPresent())
        {
            point.get().hit(device, attempt, step);
        }
    }

    /**
     * Remembers the attempt a registration was, for {@link #beforePublish}: only with a PUBLISH point.
     */
    void registered(final long handle, final long attempt)
    {
        if (point.isPresent() && point.get().step() == FaultPoint.Step.PUBLISH)
        {
            attemptOf.put(handle, attempt);
        }
    }

    /**
     * @throws MrdException ENOMEM when the configured PUBLISH point is one of this registration's devices.
     */
    void beforePublish(final long handle, final int devices)
    {
        final Long attempt = attemptOf.remove(handle);
        for (int device = 0; null != attempt && device < devices; device++)
        {
            at(FaultPoint.Step.PUBLISH, attempt, device);
        }
    }
}
