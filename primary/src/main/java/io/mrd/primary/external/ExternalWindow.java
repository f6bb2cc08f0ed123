package io.mrd.primary.external;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

/**
 * The address range where the primary maps external memory (DESIGN §4, REG_EXTERNAL): {@code [base, base +
 * length)} from the control file's header ({@code externalBase}, {@code externalLength} = {@code --max-external}),
 * reserved {@code PROT_NONE} for the daemon's lifetime so that nothing else of the JVM lands there and every
 * secondary can map the same memory at the same address.
 * <p>
 * Ranges are handed out first fit in {@link #GRANULE}s; a range is taken before its fd is mapped (outside the
 * lock: mapping and registering are slow) and given back only after it has been unmapped to the reservation.
 * Thread-safe.
 */
final class ExternalWindow implements AutoCloseable
{
    /** Unit of allocation: one hugepage, so a hugetlbfs fd maps at an address it accepts. */
    static final long GRANULE = 2 * Sizes.MIB;
    /** Mappings are rounded up to this, the base page size. */
    static final long PAGE = 4 * Sizes.KIB;

    /**
     * One range in use.
     *
     * @param address where the external memory is mapped.
     * @param length  bytes the client registered.
     * @param owner   the client id.
     */
    record Range(long address, long length, int owner)
    {
        long mappedLength()
        {
            return Sizes.alignUp(length, PAGE);
        }

        long span()
        {
            return Sizes.alignUp(length, GRANULE);
        }
    }

    private final long base;
    private final long length;
    private final TreeMap<Long, Range> ranges = new TreeMap<>();
    private boolean reserved;
    private long bytesInUse;

    /**
     * Reserves the window.
     *
     * @throws MrdException EEXIST when part of it is already mapped in this process.
     */
    ExternalWindow(final long base, final long length)
    {
        this.base = base;
        this.length = length;
        if (length > 0)
        {
            Posix.reserve(base, length);
            reserved = true;
        }
    }

    long base()
    {
        return base;
    }

    long length()
    {
        return length;
    }

    /**
     * Takes the first free range that fits {@code length} bytes.
     *
     * @throws MrdException ENOMEM naming what is free and the flag that sets the window.
     */
    synchronized Range allocate(final long length, final int owner)
    {
        if (!reserved)
        {
            throw new MrdException(ErrorCode.ENOMEM, this.length == 0 ?
                "external memory is disabled (--max-external 0): start the daemon with --max-external SIZE" :
                "the daemon is shutting down");
        }
        final long span = Sizes.alignUp(length, GRANULE);
        long cursor = base;
        long largest = 0;
        for (final Range range : ranges.values())
        {
            if (range.address() - cursor >= span)
            {
                break;
            }
            largest = Math.max(largest, range.address() - cursor);
            cursor = range.address() + range.span();
        }
        if (cursor + span > base + this.length)
        {
            largest = Math.max(largest, base + this.length - cursor);
            throw new MrdException(ErrorCode.ENOMEM, "cannot register " + Sizes.format(length) +
                " of external memory: " + Sizes.format(this.length - bytesInUse) + " of --max-external " +
                Sizes.format(this.length) + " is free, the largest free range " + Sizes.format(Math.max(0, largest)) +
                ": deregister external memory or start the daemon with a larger --max-external");
        }
        final Range range = new Range(cursor, length, owner);
        ranges.put(cursor, range);
        bytesInUse += range.span();
        return range;
    }

    /**
     * Maps {@code fd} over the range (replacing that part of the reservation), shared and read-write.
     */
    void map(final Range range, final int fd)
    {
        Posix.mapFixed(range.address(), range.mappedLength(), Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
    }

    /**
     * Puts the range back to reserved address space and frees it.
     */
    void unmapAndFree(final Range range)
    {
        synchronized (this)
        {
            if (ranges.get(range.address()) != range)
            {
                return;
            }
        }
        try
        {
            Posix.unmapToReservation(range.address(), range.span());
        }
        finally
        {
            synchronized (this)
            {
                if (ranges.remove(range.address(), range))
                {
                    bytesInUse -= range.span();
                }
            }
        }
    }

    /**
     * @return the range starting at {@code address}, or null.
     */
    synchronized Range find(final long address)
    {
        return ranges.get(address);
    }

    synchronized List<Range> ownedBy(final int owner)
    {
        final List<Range> result = new ArrayList<>();
        for (final Range range : ranges.values())
        {
            if (range.owner() == owner)
            {
                result.add(range);
            }
        }
        return result;
    }

    synchronized long bytesInUse()
    {
        return bytesInUse;
    }

    synchronized int rangeCount()
    {
        return ranges.size();
    }

    /**
     * Releases the whole window, mapped ranges included. Registrations over it must be gone or about to go: a
     * deregistration of unmapped memory is harmless (the provider tolerates it), a later access is not.
     */
    public synchronized void close()
    {
        if (reserved)
        {
            reserved = false;
            ranges.clear();
            bytesInUse = 0;
            Posix.munmapQuietly(base, length);
        }
    }
}
