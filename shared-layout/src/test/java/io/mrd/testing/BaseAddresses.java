package io.mrd.testing;

import io.mrd.layout.sys.Sizes;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The one allocator of the virtual addresses a test's daemon (in a process of its own or in the test's JVM) or
 * memory manager maps its memory at ({@code --base-virtaddr}): each call hands out a range of its own, so no test
 * names an address and no two in one JVM can collide, even when a failed one leaked a mapping. Addresses are never
 * handed out twice in a JVM; a test run starts hundreds of daemons, far fewer than the ranges there are. Another
 * process learns a daemon's address from its control file, never from this class (its own JVM counts afresh).
 */
public final class BaseAddresses
{
    /** Each range: room for any test's lists and external window, 1 GiB-aligned as a daemon's base must be. */
    public static final long SPAN = 64 * Sizes.GIB;
    /** Above the daemon's default base (0x100000000000), which commands started without options use. */
    private static final long FIRST = 0x2000_0000_0000L;
    /** The daemon's limit: a base must leave the top 1 TiB below the 47-bit user address space free. */
    private static final long END = (1L << 47) - Sizes.TIB;

    private static final AtomicLong NEXT = new AtomicLong(FIRST);

    private BaseAddresses()
    {
    }

    /**
     * @return the base of a new range of {@link #SPAN} bytes.
     */
    public static long next()
    {
        final long base = NEXT.getAndAdd(SPAN);
        if (base + SPAN > END)
        {
            throw new AssertionError("no base address left below " + Sizes.hex(END) + ": " +
                (END - FIRST) / SPAN + " ranges handed out in this JVM");
        }
        return base;
    }
}
