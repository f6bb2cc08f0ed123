package io.mrd.secondary;

import io.mrd.layout.MrEntry;

/**
 * The create round-trip benchmark's way to {@code CREATE_MR} directly. {@link MrdClient} sends it only from
 * an {@link MrCache} miss, and a cache never misses on an address already registered (the global cache has
 * it), yet that is the round trip to compare with a bare socket ping-pong: protocol plus the primary's lookup.
 * This class lives in the bench module but in the client's package to reach its package-private
 * {@code createMr} without changing the library (the benchmarks run on the class path, where a package may
 * span jars).
 */
public final class BenchHooks
{
    private BenchHooks()
    {
    }

    /**
     * Sends {@code CREATE_MR(address, length)} and waits for the reply, as a cache miss does.
     */
    public static void createMr(final MrdClient client, final long address, final long length, final MrEntry out)
    {
        client.createMr(address, length, out);
    }
}
