package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;

import java.nio.file.Path;
import java.util.Map;

/**
 * Every setting of a client with its default, filled from {@code MRD_*} environment variables for what is not
 * set, checked by {@link #conclude()}, printed whole by {@link #toString()} (the client logs it at attach).
 * <ul>
 *   <li>{@code dir}: {@code MRD_DIR}, else {@code $XDG_RUNTIME_DIR/mrd}, else {@code /dev/shm/mrd-<uid>};</li>
 *   <li>{@code name} (in the daemon's client table): {@code MRD_CLIENT_NAME}, else {@code pid-<pid>};</li>
 *   <li>{@code requestTimeoutMs}: {@code MRD_REQUEST_TIMEOUT_MS}, else {@value #DEFAULT_REQUEST_TIMEOUT_MS};</li>
 *   <li>{@code attachTimeoutMs} (waiting for a starting daemon): {@code MRD_ATTACH_TIMEOUT_MS}, else
 *       {@value #DEFAULT_ATTACH_TIMEOUT_MS};</li>
 *   <li>{@code watchdogIntervalMs} (how often the watchdog reads the heartbeat): {@code MRD_WATCHDOG_INTERVAL_MS},
 *       else {@value #DEFAULT_WATCHDOG_INTERVAL_MS};</li>
 *   <li>{@code replySpinNs} (how long a request spins for its reply before it blocks; 0 blocks at once):
 *       {@code MRD_REPLY_SPIN_NS}, else {@value #DEFAULT_REPLY_SPIN_NS}, at most {@value #MAX_REPLY_SPIN_NS};</li>
 *   <li>{@code ibverbsLibrary} (the libibverbs {@link MrdClient#verbs()} imports the daemon's device with; the
 *       daemon's, real or emulated): {@code MRD_IBVERBS_LIBRARY}, else {@value #DEFAULT_IBVERBS_LIBRARY};</li>
 *   <li>{@code adoptionWaitMs} (how long the client rides through a dead daemon's gap, waiting for a successor
 *       to adopt it; docs/adoption.md): {@code MRD_ADOPTION_WAIT_MS}, else 0: the loss at once, as before;</li>
 *   <li>{@code daemonEventListener} (told when the daemon is lost, away or adopted): set here only, else
 *       {@link DaemonEventListener#NONE}.</li>
 * </ul>
 * A value set here wins over the environment. Durations are positive milliseconds.
 */
public final class ClientContext
{
    public static final long DEFAULT_REQUEST_TIMEOUT_MS = 5_000;
    public static final long DEFAULT_ATTACH_TIMEOUT_MS = 5_000;
    public static final long DEFAULT_WATCHDOG_INTERVAL_MS = 100;
    public static final String DEFAULT_IBVERBS_LIBRARY = "libibverbs.so.1";
    /**
     * No spin: it only pays with a core to spare for the spinning caller besides the daemon's event loop. On
     * two shared cores, when a reader thread still handed each reply to its caller, spinning 1 to 10 µs made the
     * create round trip to an existing MR slower (p50 8.5 to 9 µs without, 9.5 to 10 with 1 µs, 14 with 5 µs, 17
     * with 10 µs), as the spinner took the core the reader thread needed.
     */
    public static final long DEFAULT_REPLY_SPIN_NS = 0;
    /** Spinning longer only burns the core: a reply that takes longer is a registration, which takes far longer. */
    public static final long MAX_REPLY_SPIN_NS = 1_000_000;

    public static final String MRD_CLIENT_NAME = "MRD_CLIENT_NAME";
    public static final String MRD_REQUEST_TIMEOUT_MS = "MRD_REQUEST_TIMEOUT_MS";
    public static final String MRD_ATTACH_TIMEOUT_MS = "MRD_ATTACH_TIMEOUT_MS";
    public static final String MRD_WATCHDOG_INTERVAL_MS = "MRD_WATCHDOG_INTERVAL_MS";
    public static final String MRD_IBVERBS_LIBRARY = "MRD_IBVERBS_LIBRARY";
    public static final String MRD_REPLY_SPIN_NS = "MRD_REPLY_SPIN_NS";
    public static final String MRD_ADOPTION_WAIT_MS = "MRD_ADOPTION_WAIT_MS";

    /** A duration nobody set: {@link #conclude()} fills it from the environment or the default. */
    private static final long UNSET = 0;
    /** 0 is a value of the reply spin (no spinning), so it has a sentinel of its own. */
    private static final long UNSET_SPIN = Long.MIN_VALUE;

    private Path dir;
    private String name;
    private long requestTimeoutMs = UNSET;
    private long attachTimeoutMs = UNSET;
    private long watchdogIntervalMs = UNSET;
    private long replySpinNs = UNSET_SPIN;
    private String ibverbsLibrary;
    private Map<String, String> environment;
    private DaemonEventListener daemonEventListener = DaemonEventListener.NONE;
    /** -1: nobody set it. */
    private long adoptionWaitMs = -1;
    private boolean concluded;

    /** @param dir the daemon's run directory. */
    public ClientContext dir(final Path dir)
    {
        this.dir = dir;
        return this;
    }

    public Path dir()
    {
        return dir;
    }

    /** @param name this client's name in the daemon's client table (at most 32 bytes are kept). */
    public ClientContext name(final String name)
    {
        this.name = name;
        return this;
    }

    public String name()
    {
        return name;
    }

    /** @param value how long a request waits for its reply before it fails with ETIMEDOUT. */
    public ClientContext requestTimeoutMs(final long value)
    {
        this.requestTimeoutMs = value;
        return this;
    }

    public long requestTimeoutMs()
    {
        return requestTimeoutMs;
    }

    /** @param value how long attach waits for a starting daemon's control file and socket. */
    public ClientContext attachTimeoutMs(final long value)
    {
        this.attachTimeoutMs = value;
        return this;
    }

    public long attachTimeoutMs()
    {
        return attachTimeoutMs;
    }

    /** @param value how often the watchdog reads the daemon's heartbeat and epoch. */
    public ClientContext watchdogIntervalMs(final long value)
    {
        this.watchdogIntervalMs = value;
        return this;
    }

    public long watchdogIntervalMs()
    {
        return watchdogIntervalMs;
    }

    /**
     * @param value how long a request spins for its reply before it blocks, 0 to block at once; at most
     *              {@value #MAX_REPLY_SPIN_NS}. The caller reading the socket reads it without blocking meanwhile,
     *              one waiting for another to read spins (Thread.onSpinWait) instead of parking.
     */
    public ClientContext replySpinNs(final long value)
    {
        this.replySpinNs = value;
        return this;
    }

    public long replySpinNs()
    {
        return replySpinNs;
    }

    /**
     * @param value how long, once its daemon ({@code --provider ibverbs}) has died, the client goes on in the gap
     *              (docs/adoption.md): lookups and keys of memory it holds go on, RDMA on them goes on (the client
     *              holds the device's context itself, imported at attach), requests wait for a successor that
     *              adopts the daemon's state, and the client then resumes with its id, memory and caches. Past it,
     *              the loss rule ({@link DaemonLiveness}). 0, the default: the loss at once. With
     *              {@code --provider soft} there is no gap (the pins died with the daemon), nor after a clean stop.
     */
    public ClientContext adoptionWaitMs(final long value)
    {
        this.adoptionWaitMs = value;
        return this;
    }

    public long adoptionWaitMs()
    {
        return adoptionWaitMs;
    }

    /** @param library a path or soname of libibverbs (the daemon's {@code MRD_IBVERBS_LIBRARY}). */
    public ClientContext ibverbsLibrary(final String library)
    {
        this.ibverbsLibrary = library;
        return this;
    }

    public String ibverbsLibrary()
    {
        return ibverbsLibrary;
    }

    /** @param listener told once when the client knows its daemon is lost ({@link DaemonEventListener}). */
    public ClientContext daemonEventListener(final DaemonEventListener listener)
    {
        this.daemonEventListener = listener;
        return this;
    }

    public DaemonEventListener daemonEventListener()
    {
        return daemonEventListener;
    }

    /** @param environment where {@code MRD_*} variables are read from (default: the process's). */
    public ClientContext environment(final Map<String, String> environment)
    {
        this.environment = environment;
        return this;
    }

    /**
     * Fills what is unset from the environment and the defaults, and checks every value. Idempotent.
     *
     * @throws MrdException EINVAL naming the first wrong value and where it came from.
     */
    public ClientContext conclude()
    {
        if (concluded)
        {
            return this;
        }
        final Map<String, String> env = null == environment ? System.getenv() : environment;
        dir = RunDirectoryPath.resolve(dir, env);
        if (null == name || name.isBlank())
        {
            final String fromEnv = env.get(MRD_CLIENT_NAME);
            name = null != fromEnv && !fromEnv.isBlank() ? fromEnv : "pid-" + ProcessHandle.current().pid();
        }
        requestTimeoutMs = positive("request timeout", requestTimeoutMs, env, MRD_REQUEST_TIMEOUT_MS,
            DEFAULT_REQUEST_TIMEOUT_MS);
        attachTimeoutMs = positive("attach timeout", attachTimeoutMs, env, MRD_ATTACH_TIMEOUT_MS,
            DEFAULT_ATTACH_TIMEOUT_MS);
        watchdogIntervalMs = positive("watchdog interval", watchdogIntervalMs, env, MRD_WATCHDOG_INTERVAL_MS,
            DEFAULT_WATCHDOG_INTERVAL_MS);
        replySpinNs = replySpin(replySpinNs, env);
        adoptionWaitMs = adoptionWait(adoptionWaitMs, env);
        if (null == ibverbsLibrary || ibverbsLibrary.isBlank())
        {
            final String fromEnv = env.get(MRD_IBVERBS_LIBRARY);
            ibverbsLibrary = null != fromEnv && !fromEnv.isBlank() ? fromEnv.trim() : DEFAULT_IBVERBS_LIBRARY;
        }
        if (null == daemonEventListener)
        {
            throw new MrdException(ErrorCode.EINVAL, "daemon event listener is null: give one, or " +
                "DaemonEventListener.NONE to hear nothing");
        }
        concluded = true;
        return this;
    }

    private static long adoptionWait(final long value, final Map<String, String> env)
    {
        if (value >= 0)
        {
            return value;
        }
        if (value != -1)
        {
            throw new MrdException(ErrorCode.EINVAL, "adoption wait " + value + " ms must be 0 or more");
        }
        final String text = env.get(MRD_ADOPTION_WAIT_MS);
        if (null == text || text.isBlank())
        {
            return 0;
        }
        try
        {
            final long parsed = Long.parseLong(text.trim());
            if (parsed < 0)
            {
                throw new NumberFormatException();
            }
            return parsed;
        }
        catch (final NumberFormatException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, MRD_ADOPTION_WAIT_MS + "='" + text + "' is not 0 or a number " +
                "of milliseconds");
        }
    }

    private static long positive(
        final String what, final long value, final Map<String, String> env, final String key, final long fallback)
    {
        if (value != UNSET)
        {
            if (value < 0)
            {
                throw new MrdException(ErrorCode.EINVAL, what + " " + value + " ms must be positive");
            }
            return value;
        }
        final String text = env.get(key);
        if (null == text || text.isBlank())
        {
            return fallback;
        }
        final long parsed;
        try
        {
            parsed = Long.parseLong(text.trim());
        }
        catch (final NumberFormatException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, key + "='" + text + "' is not a number of milliseconds");
        }
        if (parsed <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, key + "='" + text + "': the " + what +
                " must be a positive number of milliseconds");
        }
        return parsed;
    }

    private static long replySpin(final long value, final Map<String, String> env)
    {
        if (value != UNSET_SPIN)
        {
            if (value < 0 || value > MAX_REPLY_SPIN_NS)
            {
                throw new MrdException(ErrorCode.EINVAL, "reply spin " + value + " ns must be 0 (park at once) to " +
                    MAX_REPLY_SPIN_NS + " ns");
            }
            return value;
        }
        final String text = env.get(MRD_REPLY_SPIN_NS);
        if (null == text || text.isBlank())
        {
            return DEFAULT_REPLY_SPIN_NS;
        }
        final long parsed;
        try
        {
            parsed = Long.parseLong(text.trim());
        }
        catch (final NumberFormatException ex)
        {
            throw new MrdException(ErrorCode.EINVAL, MRD_REPLY_SPIN_NS + "='" + text + "' is not a number of " +
                "nanoseconds: give 0 (park at once) to " + MAX_REPLY_SPIN_NS);
        }
        if (parsed < 0 || parsed > MAX_REPLY_SPIN_NS)
        {
            throw new MrdException(ErrorCode.EINVAL, MRD_REPLY_SPIN_NS + "='" + text + "': the reply spin must be " +
                "0 (park at once) to " + MAX_REPLY_SPIN_NS + " ns");
        }
        return parsed;
    }

    public String toString()
    {
        return "ClientContext{dir=" + dir + ", name=" + name + ", requestTimeoutMs=" + requestTimeoutMs +
            ", attachTimeoutMs=" + attachTimeoutMs + ", watchdogIntervalMs=" + watchdogIntervalMs + ", replySpinNs=" +
            replySpinNs + ", ibverbsLibrary=" + ibverbsLibrary + ", adoptionWaitMs=" + adoptionWaitMs +
            (daemonEventListener == DaemonEventListener.NONE ? "" : ", daemonEventListener=" + daemonEventListener) +
            "}";
    }
}
