package io.mrd.primary.external;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.mr.MrEngine;

import java.util.List;

/**
 * Memory a client passes by fd (DESIGN §4, REG_EXTERNAL): each registration maps the fd at a range of the
 * {@link ExternalWindow}, where every secondary can map it at the same address, and registers it as one MR
 * ({@link MrEngine#registerExternal}); deregistration and a client's death undo both, in that order.
 * <p>
 * Order: a range is mapped before it is registered, and unmapped only once deregistered, since the
 * registration pins its pages until then. Thread-safe: the window and the engine are.
 */
public final class ExternalRegistrations implements AutoCloseable
{
    /**
     * What a client's death freed.
     *
     * @param registrations the external registrations unmapped.
     * @param bytes         their bytes.
     */
    public record Reclaimed(int registrations, long bytes)
    {
    }

    private final ExternalWindow window;
    private final MrEngine engine;

    /**
     * Reserves the window {@code [base, base + length)}; a length of 0 disables external memory.
     *
     * @throws MrdException EEXIST when part of the window is already mapped in this process.
     */
    public ExternalRegistrations(final long base, final long length, final MrEngine engine)
    {
        this.window = new ExternalWindow(base, length);
        this.engine = engine;
    }

    public long base()
    {
        return window.base();
    }

    public long length()
    {
        return window.length();
    }

    /**
     * @return true when {@code address} is in the window: only external memory can be registered there.
     */
    public boolean holds(final long address)
    {
        return address >= window.base() && address < window.base() + window.length();
    }

    /**
     * The checks of REG_EXTERNAL that need no fd, made before the primary asks for one.
     *
     * @return null when the length may be registered, else what is wrong with it.
     */
    public String checkLength(final long length)
    {
        if (window.length() == 0)
        {
            return "external memory is disabled (--max-external 0): start the daemon with --max-external SIZE";
        }
        if (length <= 0 || length > window.length())
        {
            return "REG_EXTERNAL of " + length + " bytes: the length must be positive and at most --max-external " +
                Sizes.format(window.length());
        }
        return null;
    }

    /**
     * Seals the client's file against resizing, maps it in the window and registers it ({@link ExternalFile}: the
     * seal is what keeps the registered range backed by the file until it is deregistered). Always closes
     * {@code fd}: the mapping holds the file from then on.
     *
     * @param access the {@link io.mrd.layout.Access} the owner asks for (REG_EXTERNAL's), local write is added.
     * @return the MR: {@code [start, end)} is where the memory is mapped.
     * @throws MrdException EINVAL for a bad length, unknown access bits, a file shorter than it, or a file that
     *                      cannot be sealed (the message says how to make one that can); ENOSPC or ENOMEM when the
     *                      file's memory cannot be allocated, ENOMEM when the window is full; or the mapping's or
     *                      the registration's error.
     */
    public MrEntry register(final long length, final int fd, final int owner, final int access)
    {
        try
        {
            final String bad = checkLength(length);
            if (null != bad)
            {
                throw new MrdException(ErrorCode.EINVAL, bad);
            }
            ExternalFile.prepare(fd, length);
            final ExternalWindow.Range range = window.allocate(length, owner);
            try
            {
                window.map(range, fd);
                return engine.registerExternal(range.address(), length, owner, access);
            }
            catch (final RuntimeException ex)
            {
                window.unmapAndFree(range);
                throw ex;
            }
        }
        finally
        {
            Posix.close(fd);
        }
    }

    /**
     * The MR of the external memory holding {@code address}, an address in the window: external MRs have no
     * chunk to register on a miss, so the engine only knows them by lookup.
     *
     * @throws MrdException ENXIO when no external memory is registered there.
     */
    public MrEntry lookup(final long address)
    {
        final MrEntry found = new MrEntry();
        if (!engine.lookup(address, found))
        {
            throw new MrdException(ErrorCode.ENXIO, "address " + Sizes.hex(address) + " is in the external " +
                "window but no external memory is registered there: register it with REG_EXTERNAL first");
        }
        return found;
    }

    /**
     * Deregisters the external memory at {@code address} and unmaps it.
     *
     * @throws MrdException ENOENT when none starts there, EPERM when another client owns it.
     */
    public void deregister(final long address, final int owner)
    {
        final ExternalWindow.Range range = window.find(address);
        if (null == range)
        {
            throw new MrdException(ErrorCode.ENOENT, "no external memory is registered at " + Sizes.hex(address) +
                ": pass the address REG_EXTERNAL returned");
        }
        engine.deregisterExternal(address, owner);
        // Unmapped only once deregistered: the registration pins the pages until then.
        window.unmapAndFree(range);
    }

    /**
     * Unmaps every range a gone client registered. Call after {@link MrEngine#reclaim}, which deregisters their
     * MRs.
     */
    public Reclaimed reclaim(final int owner)
    {
        final List<ExternalWindow.Range> ranges = window.ownedBy(owner);
        for (final ExternalWindow.Range range : ranges)
        {
            window.unmapAndFree(range);
        }
        return new Reclaimed(ranges.size(), ranges.stream().mapToLong(ExternalWindow.Range::length).sum());
    }

    /**
     * @return bytes of the window in use (mapped or being mapped).
     */
    public long bytesInUse()
    {
        return window.bytesInUse();
    }

    /**
     * Releases the whole window, mapped ranges included.
     *
     * @see ExternalWindow#close()
     */
    public void close()
    {
        window.close();
    }
}
