package io.mrd.bench.jmh;

import io.mrd.bench.fixture.AddressPattern;

/**
 * Every lookup benchmark does {@link #SIZE} lookups per invocation ({@code @OperationsPerInvocation}), walking
 * its address array round-robin, so that JMH's per-invocation cost does not weigh on one-nanosecond lookups;
 * the C reference walks its array the same way.
 */
final class Batch
{
    static final int SIZE = 1024;
    static final int MASK = AddressPattern.COUNT - 1;

    private Batch()
    {
    }
}
