package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The faults a test asks a provider for: a registration that fails ({@code --fail-nth}) and registrations as
 * slow as a NIC makes them. Checked first thing in {@code register}, before anything is counted or pinned, so an
 * injected failure leaves nothing behind.
 */
final class FaultInjection
{
    private final int failNth;
    private final long latencyNanos;
    private final AtomicLong attempts = new AtomicLong();

    FaultInjection(final int failNth, final long latencyNanos)
    {
        this.failNth = failNth;
        this.latencyNanos = latencyNanos;
    }

    /**
     * Counts one registration attempt, waits the configured latency, and fails the Nth attempt.
     *
     * @throws MrdException ENOMEM for the Nth attempt.
     */
    void beforeRegister()
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
    }
}
