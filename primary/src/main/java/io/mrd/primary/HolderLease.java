package io.mrd.primary;

import io.mrd.layout.MrdException;
import io.mrd.primary.lineage.HolderLink;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.util.function.Supplier;

/**
 * A daemon's hold on its descriptor holder (docs/adoption.md), from the holder's start, or the predecessor's
 * holder kept, to the daemon's clean stop, which releases it: a clean stop deregisters everything, so there is
 * nothing left for a successor.
 * <p>
 * The holder is a JVM of its own and takes a while to start, so it starts on a thread of its own while the daemon
 * already serves (a crash before it holds anything is a crash no successor can adopt from). A release while it is
 * still starting cancels the start (the process is killed, not waited for) and waits for that thread, so that no
 * holder is left keeping the files of a stopped daemon. Thread-safe.
 */
final class HolderLease
{
    private static final Logger LOG = LoggerFactory.getLogger(HolderLease.class);
    private static final long START_JOIN_MS = 30_000;

    /** Guarded by this. */
    private HolderLink link;
    /** Guarded by this. */
    private boolean released;
    private volatile Thread starting;

    /**
     * Starts a holder for the daemon and deposits {@code descriptors} with it, on a thread of its own.
     */
    void start(final Path dir, final long graceMs, final long epoch,
        final Supplier<HolderLink.Descriptors> descriptors)
    {
        starting = Thread.ofPlatform().name("mrd-holder-start").daemon(true).start(() ->
        {
            try
            {
                keep(HolderLink.launch(dir, graceMs, epoch, descriptors, this::isReleased));
            }
            catch (final MrdException ex)
            {
                if (!isReleased())
                {
                    LOG.error("no descriptor holder: a successor will start afresh: {}", ex.oneLine());
                }
            }
        });
    }

    /**
     * Keeps {@code holder}, or releases it at once when the lease was released meanwhile.
     */
    void keep(final HolderLink holder)
    {
        synchronized (this)
        {
            if (!released)
            {
                link = holder;
                return;
            }
        }
        holder.release();
    }

    /**
     * Tells the holder to close everything and exit; cancels and waits for a start in progress. Idempotent.
     */
    void release()
    {
        final HolderLink held = end();
        if (null != held)
        {
            held.release();
        }
    }

    /**
     * Lets go of the holder without releasing it, as a crash would: it then keeps everything for a successor (a
     * handover). Cancels a start in progress.
     */
    void letGo()
    {
        final HolderLink held = end();
        if (null != held)
        {
            held.close();
        }
    }

    /**
     * Ends the lease: no holder is kept from now on, a start in progress is cancelled and waited for.
     *
     * @return the holder kept until now, or null.
     */
    private HolderLink end()
    {
        synchronized (this)
        {
            released = true;
        }
        final Thread start = starting;
        if (null != start)
        {
            try
            {
                start.join(START_JOIN_MS);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
            }
        }
        synchronized (this)
        {
            final HolderLink held = link;
            link = null;
            return held;
        }
    }

    private synchronized boolean isReleased()
    {
        return released;
    }
}
