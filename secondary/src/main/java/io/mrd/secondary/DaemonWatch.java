package io.mrd.secondary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * The client's watch on its daemon: whether the daemon it attached to is still the one running, and, once it
 * is not, why. The daemon counts as gone when its heartbeat is stale or closed ({@link Heartbeat}, the rule
 * every process applies), when the epoch in its header changed, or when its control file was removed or
 * replaced (the file's identity is taken at attach).
 * <p>
 * Two checks, named for what they trust: {@link #requireAliveAsLastSeen()}, one volatile read for a cache's slow
 * path and every client call, trusts what the watchdog thread, the connection and earlier checks found;
 * {@link #requireAliveNow()} looks now ({@link Heartbeat#lookNow}, the epoch, the file), before a request goes
 * out. The first failure found is kept and thrown (as a fresh copy) by every later check.
 * <p>
 * <b>Caches.</b> The lookup hit path makes neither check: liveness is folded into each cache's generation
 * ({@link MrCache}'s class comment has the protocol and its proof). Whatever finds the client broken (the
 * watchdog, {@link #requireAliveNow()}, the connection's {@link #lost} on EOF or reset, {@link #close()})
 * trips the one {@link LivenessLatch}, which stores the reason before it invalidates every cache
 * {@link #track} gave it.
 * <p>
 * <b>The gap.</b> With {@link ClientContext#adoptionWaitMs} above 0, a daemon that dies ({@code --provider
 * ibverbs}, not a clean stop) leaves the client in a gap instead of lost (docs/adoption.md): the latch does not
 * trip, so lookups and keys of memory the client holds go on, and so does RDMA on them (the client holds the
 * device's context itself, imported at attach, and with it the MRs' pins: a key is given out only while what
 * pins its memory is alive); requests wait ({@link #awaitGapEnd()}). The watchdog looks for a successor whose
 * header names this client's epoch as the one it adopted, and resumes the client with it ({@link Resumer}); past
 * the wait, or when the directory starts afresh, the client is lost as it would have been at once.
 * <p>
 * In the daemon's own process (tests) the control file's identity is not checked: the daemon may replace it.
 */
final class DaemonWatch
{
    private static final Logger LOG = LoggerFactory.getLogger(DaemonWatch.class);

    private final ClientContext context;
    private final ControlFile controlFile;
    private final ControlHeader header;
    /** The serving daemon's: changed when a successor adopts the client. */
    private volatile long epoch;
    private volatile long daemonPid;
    private final Object controlFileKey;
    private final boolean inProcess;
    private final LivenessLatch latch = new LivenessLatch();

    private Thread watchdog;
    private volatile Consumer<MrdException> onBroken = reason -> { };
    private volatile boolean stopped;
    private volatile String lastDaemonError;
    private volatile Resumer resumer;
    private final AdoptionGap gap = new AdoptionGap();

    /**
     * What resumes the client with a successor: connects to it, says HELLO with the client's id and makes the new
     * connection the one requests go to ({@link DaemonLink#replace}).
     */
    @FunctionalInterface
    interface Resumer
    {
        /**
         * @throws MrdException ECONNREFUSED or ENOENT while the successor does not listen yet (tried again); the
         *                      successor's refusal otherwise (the client is then lost).
         */
        void resume();
    }

    /**
     * Takes the daemon's identity now: its epoch, pid and control file.
     */
    DaemonWatch(final ClientContext context, final ControlFile controlFile)
    {
        this.context = context;
        this.controlFile = controlFile;
        this.header = controlFile.header();
        this.epoch = header.epoch();
        this.daemonPid = header.pid();
        this.controlFileKey = fileKey(controlFile.path());
        this.inProcess = daemonPid == ProcessHandle.current().pid();
    }

    long epoch()
    {
        return epoch;
    }

    long daemonPid()
    {
        return daemonPid;
    }

    /** @return true when the daemon runs in this process: its memory is mapped here already. */
    boolean inProcess()
    {
        return inProcess;
    }

    /** @return who the client attached to, for messages: "daemon pid 42 in /run/mrd". */
    String daemon()
    {
        return "daemon pid " + daemonPid + " in " + context.dir();
    }

    /**
     * At attach, before the client holds anything of the daemon's: refuses a daemon that is already gone.
     *
     * @throws MrdException ECONNREFUSED: there is no daemon to attach to, start one.
     */
    void requireRunning()
    {
        final String death = deathReason();
        if (null != death)
        {
            throw new MrdException(ErrorCode.ECONNREFUSED, "no daemon running in " + context.dir() + " (pid " +
                daemonPid + " " + death + "): start one with 'mrd start --dir " + context.dir() + "'");
        }
    }

    /**
     * Lets the client ride through a gap: set once the client holds what keeps its keys' memory pinned (the
     * device's context). Without one, a dead daemon is lost at once.
     */
    void allowGap(final Resumer resumer)
    {
        this.resumer = resumer;
    }

    /**
     * Waits, with no lock of the client's held, while the client is in a gap: until a successor resumed it or the
     * wait is over.
     *
     * @throws DaemonDeadException once the client is lost (also when it was before the call).
     */
    void awaitGapEnd()
    {
        gap.awaitEnd(context.watchdogIntervalMs(), daemon());
        requireAliveAsLastSeen();
    }

    /** @return true while the client is in a gap (its daemon died, no successor resumed it yet). */
    boolean inGap()
    {
        return gap.inGap();
    }

    /**
     * Starts the watchdog thread, which looks every {@link ClientContext#watchdogIntervalMs()}.
     *
     * @param onBroken told the reason once the client is broken by a look of this watch (not by
     *                 {@link #lost}, whose caller acts on the reason it gets back).
     */
    void start(final Consumer<MrdException> onBroken)
    {
        this.onBroken = onBroken;
        watchdog = new Thread(this::watchdogLoop, "mrd-client-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    /**
     * One volatile read: throws once the daemon is known dead, stopped or restarted, or the client closed. What
     * a cache's slow path checks, and every client call.
     *
     * @throws DaemonDeadException saying which (or EBADF once closed).
     */
    void requireAliveAsLastSeen()
    {
        latch.requireAlive();
    }

    /** @return the check {@link #requireAliveAsLastSeen()} makes, for the parts of the client outside it. */
    DaemonLiveness liveness()
    {
        return latch;
    }

    /**
     * Remembers a cache to invalidate once the client is broken (see the class comment).
     */
    void track(final MrCache cache)
    {
        latch.track(cache);
    }

    /**
     * The full check: reads the heartbeat, the epoch and the control file's identity now; marks the client
     * broken and throws when they say the daemon is gone.
     */
    void requireAliveNow()
    {
        awaitGapEnd();
        final String death = deathReason();
        if (null != death)
        {
            markDead(death);
            awaitGapEnd();
        }
    }

    /** @return true once the daemon is known dead, stopped or restarted, or the client is closed. */
    boolean isBroken()
    {
        return null != latch.broken();
    }

    /** @return why the client is broken, or null. */
    MrdException broken()
    {
        return latch.broken();
    }

    /**
     * Remembers the daemon's last ERROR reply: a death that follows it is reported with it.
     */
    void daemonError(final String error)
    {
        lastDaemonError = error;
    }

    /**
     * The connection to the daemon is lost: the client is broken, for the reason the daemon's state gives if it
     * gives one (a stale heartbeat says more than a reset connection), else for {@code how}.
     *
     * @return why the client is broken (an earlier reason, if it was already).
     */
    MrdException lost(final String how)
    {
        final String death = deathReason();
        final String reason = null != death ? death : how;
        if (enterGap(reason))
        {
            return new DaemonDeadException(daemon() + " " + reason + " with this request in flight: its outcome is " +
                "unknown (the client waits up to " + context.adoptionWaitMs() + " ms for a successor)");
        }
        trip(dead(reason));
        return latch.broken();
    }

    /**
     * Stops the watchdog and marks the client closed (unless it was broken already).
     *
     * @return why calls fail from now on.
     */
    MrdException close()
    {
        latch.trip(new MrdException(ErrorCode.EBADF, "this client of the daemon in " + context.dir() +
            " is closed: attach again"));
        stopped = true;
        gap.resumed();
        if (null != watchdog)
        {
            LockSupport.unpark(watchdog);
            Threads.join(watchdog);
        }
        return latch.broken();
    }

    /**
     * @return why the daemon is to be considered gone, or null when it looks alive.
     */
    private String deathReason()
    {
        final String death = Heartbeat.lookNow(header).reason();
        if (null != death)
        {
            return death;
        }
        final long current = header.epoch();
        if (current != epoch)
        {
            return "restarted (epoch changed from " + Sizes.hex(epoch) + " to " + Sizes.hex(current) + ")";
        }
        if (!inProcess)
        {
            final Object key = fileKey(controlFile.path());
            if (!Objects.equals(key, controlFileKey))
            {
                return null == key ? "stopped (" + controlFile.path() + " was removed)" :
                    "restarted (epoch changed: " + controlFile.path() + " was replaced by a new daemon's)";
            }
        }
        return null;
    }

    /**
     * Marks the client broken by a look of this watch: the connection first, then the latch. A thread that sees
     * the latch tripped (its lookup threw) may go straight on to a request; the request must find the connection
     * failed, never reach a daemon that is only frozen and answers once it resumes.
     */
    private void markDead(final String reason)
    {
        if (null != latch.broken() || enterGap(reason))
        {
            return;
        }
        final DaemonDeadException dead = dead(reason);
        onBroken.accept(dead);
        trip(dead);
    }

    private DaemonDeadException dead(final String reason)
    {
        final String error = lastDaemonError;
        return new DaemonDeadException(daemon() + " " + reason + (null == error ? "" : "; its last error: " + error) +
            ": re-attach (start it again with 'mrd start --dir " + context.dir() + "' if it is not running)");
    }

    private void trip(final DaemonDeadException dead)
    {
        if (latch.trip(dead))
        {
            LOG.warn("{}", dead.getMessage());
            tell(dead);
        }
    }

    /**
     * Tells the application's listener on a thread of its own: the trip runs on the watchdog, on the connection's
     * reader or on a caller's thread holding the connection's read turn, none of which may wait for application
     * code.
     */
    private void tell(final DaemonDeadException dead)
    {
        final long noticedAtMs = System.currentTimeMillis();
        tellListener(listener -> listener.onDaemonLost(dead, noticedAtMs));
    }

    private void tellAway(final String reason, final long noticedAtMs)
    {
        tellListener(listener -> listener.onDaemonAway(reason, noticedAtMs));
    }

    private void tellAdopted(final long successorEpoch, final long gapMs)
    {
        tellListener(listener -> listener.onDaemonAdopted(successorEpoch, gapMs));
    }

    private void tellListener(final Consumer<DaemonEventListener> event)
    {
        final DaemonEventListener listener = context.daemonEventListener();
        if (listener == DaemonEventListener.NONE)
        {
            return;
        }
        Thread.ofPlatform().name("mrd-daemon-events").daemon(true).start(() ->
        {
            try
            {
                event.accept(listener);
            }
            catch (final RuntimeException ex)
            {
                LOG.warn("the daemon event listener {} threw", listener, ex);
            }
        });
    }

    private void watchdogLoop()
    {
        final long intervalNs = TimeUnit.MILLISECONDS.toNanos(context.watchdogIntervalMs());
        while (!stopped && null == latch.broken())
        {
            LockSupport.parkNanos(this, intervalNs);
            if (stopped)
            {
                return;
            }
            if (inGap())
            {
                lookForSuccessor();
                continue;
            }
            final String death = deathReason();
            if (null != death)
            {
                markDead(death);
            }
        }
    }

    /**
     * Enters the gap, when the client may ride through one: it holds its keys' pins ({@link #allowGap}: only a
     * client that asked for a wait, of a daemon on a device; with {@code soft} the pins die with the daemon), and
     * the daemon did not stop cleanly (a clean stop deregistered everything).
     *
     * @return true when the client is in the gap now (entered here or before).
     */
    private boolean enterGap(final String reason)
    {
        if (null == resumer || stopped || null != latch.broken() || Heartbeat.lookNow(header).isClosed())
        {
            return false;
        }
        final long now = System.currentTimeMillis();
        if (!gap.enter(reason, now))
        {
            return true;
        }
        LOG.warn("{} {}: keys and RDMA go on, requests wait up to {} ms for a successor to adopt its state",
            daemon(), reason, context.adoptionWaitMs());
        tellAway(reason, now);
        return true;
    }

    /**
     * In the gap: a successor that adopted this client's daemon resumes the client; past the wait, or when the
     * directory started afresh, the client is lost.
     */
    private void lookForSuccessor()
    {
        final AdoptionGap.Entered entered = gap.current();
        if (null == entered)
        {
            return;
        }
        final long since = entered.sinceMs();
        final String reason = entered.reason();
        final long now = System.currentTimeMillis();
        if (now - since > context.adoptionWaitMs())
        {
            endGap(reason + "; no successor adopted its state within " + context.adoptionWaitMs() + " ms");
            return;
        }
        if (!inProcess && !Objects.equals(fileKey(controlFile.path()), controlFileKey))
        {
            endGap(reason + "; a daemon started afresh in its directory");
            return;
        }
        if (header.epoch() == epoch || null != Heartbeat.lookNow(header).reason())
        {
            return;
        }
        if (header.adoptedEpoch() != epoch)
        {
            endGap(reason + "; epoch " + Sizes.hex(header.epoch()) + " did not adopt it");
            return;
        }
        try
        {
            final long successorEpoch = header.epoch();
            final long successorPid = header.pid();
            resumer.resume();
            epoch = successorEpoch;
            daemonPid = successorPid;
        }
        catch (final MrdException ex)
        {
            if (ex.code() == ErrorCode.ECONNREFUSED || ex.code() == ErrorCode.ENOENT)
            {
                return;
            }
            endGap(reason + "; its successor did not resume this client: " + ex.oneLine());
            return;
        }
        gap.resumed();
        final long gapMs = System.currentTimeMillis() - since;
        LOG.info("resumed with {}, which adopted its predecessor's state, after {} ms without a daemon", daemon(),
            gapMs);
        tellAdopted(epoch, gapMs);
    }

    /** The gap ends in the loss ({@link AdoptionGap#lost}: the latch trips before the waiting requests go). */
    private void endGap(final String reason)
    {
        final DaemonDeadException dead = dead(reason);
        onBroken.accept(dead);
        gap.lost(() -> trip(dead));
    }

    private static Object fileKey(final Path path)
    {
        try
        {
            return Files.readAttributes(path, BasicFileAttributes.class).fileKey();
        }
        catch (final IOException ex)
        {
            return null;
        }
    }
}
