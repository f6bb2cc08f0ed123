package io.mrd.primary.provider;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.layout.RemoteAccess;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The default provider: pins memory the way {@code ibv_reg_mr} does, without a NIC.
 * <p>
 * Pinning is real: {@code mlock} through FFM, so the kernel counts the pages in {@code VmLck} and enforces
 * RLIMIT_MEMLOCK exactly as it does for a verbs registration (unless the daemon has CAP_IPC_LOCK). Keys are laid
 * out as mlx5 mkeys,
 * <pre>
 *   31                                  8 7            0
 *  +-------------------------------------+--------------+
 *  |         index (24 bits)             | variant (8)  |
 *  +-------------------------------------+--------------+
 * </pre>
 * with {@code lkey == rkey} as on mlx5, for registrations with remote access; without it the rkey is
 * {@link Access#NO_RKEY}, as mrd reports it for every provider. The index identifies the live registration (never 0, never two live
 * registrations at once); the variant is the low byte of a registration counter, so a key kept after its
 * registration went differs from the next key on the same index, as a stale mkey does on the NIC.
 * <p>
 * A registration first faults the range in ({@link PagePopulator}: in parallel when it is large), then locks it
 * with one {@code mlock} on the calling thread; a deregistration unlocks with one {@code munlock} on the calling
 * thread. Only population gains from more threads (the figures are in {@link PagePopulator}).
 * <p>
 * Thread-safe: registrations from several threads run their {@code mlock}s in parallel.
 */
public final class SoftRegistrar implements Registrar
{
    public static final String NAME = ProviderConfig.SOFT;
    public static final int INDEX_BITS = 24;
    public static final int VARIANT_BITS = 8;
    public static final int INDEX_MASK = (1 << INDEX_BITS) - 1;
    public static final int VARIANT_MASK = (1 << VARIANT_BITS) - 1;

    private static final Logger LOG = LoggerFactory.getLogger(SoftRegistrar.class);

    private final FaultInjection faults;
    private final PinnedBytes pinned;
    private final PageLocks pageLocks = new PageLocks();
    private final PagePopulator populator;
    /** Live registrations by key index. */
    private final Map<Integer, Registration> live = new ConcurrentHashMap<>();
    private final AtomicInteger nextIndex = new AtomicInteger(1);
    private final AtomicInteger nextVariant = new AtomicInteger();
    private volatile boolean closed;

    /**
     * The soft provider with no limit of mrd's own and no fault injection.
     */
    public SoftRegistrar()
    {
        this(ProviderConfig.defaults());
    }

    /**
     * @param config {@code maxPinned}, {@code failNth}, {@code latencyNanos} and {@code populateThreads} apply; the
     *               name is not checked.
     */
    public SoftRegistrar(final ProviderConfig config)
    {
        this(config, new PagePopulator(config.populateThreads()));
    }

    /**
     * @param populator faults ranges in before they are locked; closed with this provider.
     */
    SoftRegistrar(final ProviderConfig config, final PagePopulator populator)
    {
        faults = new FaultInjection(config.failNth(), config.latencyNanos());
        pinned = new PinnedBytes(config.maxPinned());
        this.populator = populator;
    }

    public String name()
    {
        return NAME;
    }

    /**
     * {@inheritDoc}
     *
     * @throws MrdException EINVAL for an empty or wrapping range; ENOMEM past --max-pinned or RLIMIT_MEMLOCK (the
     *                      message names the limit, its value and how to raise it), or for an injected failure;
     *                      ENOSPC when all 2^24 - 1 key indexes are live.
     */
    public Registration register(final long address, final long length, final int access)
    {
        checkRange(address, length);
        if (closed)
        {
            throw new MrdException(ErrorCode.EINVAL, "the soft provider is closed: the daemon is stopping");
        }
        faults.beforeRegister();
        pinned.reserve(length);
        lockCounted(address, length);
        try
        {
            return insert(address, length, access);
        }
        catch (final RuntimeException ex)
        {
            pageLocks.unlock(address, length);
            pinned.release(length);
            throw ex;
        }
    }

    /**
     * Faults {@code [address, address + length)} in and locks it, its bytes counted as pinned already; on failure
     * the count is given back and the error names the cause.
     */
    private void lockCounted(final long address, final long length)
    {
        final int errno;
        try
        {
            // Whatever population could not fault in, mlock refuses with its own errno, which names the cause.
            populator.populate(address, length);
            errno = pageLocks.lock(address, length);
        }
        catch (final RuntimeException ex)
        {
            pinned.release(length);
            throw ex;
        }
        if (0 != errno)
        {
            pinned.release(length);
            throw lockFailure(errno, address, length, pinned.get());
        }
    }

    /**
     * {@inheritDoc}
     * <p>
     * The pins died with the predecessor's process: the range is populated and locked again, and the recorded
     * keys are kept (their index reserved), so that a key a secondary cached stays the one the range has.
     *
     * @throws MrdException EEXIST when the recorded key's index is live already (two records with one key: the
     *                      control file is not one daemon's); the errors of {@link #register} otherwise.
     */
    public Registration adopt(final Registration recorded, final int access)
    {
        checkRange(recorded.address(), recorded.length());
        pinned.adopt(recorded.length());
        lockCounted(recorded.address(), recorded.length());
        final int index = index(recorded.lkey());
        final Registration registration = new Registration(recorded.address(), recorded.length(), recorded.lkey(),
            recorded.rkey(), recorded.lkey() & 0xFFFF_FFFFL, MrDescriptor.NO_DEVICE_HANDLE);
        if (0 == index || null != live.putIfAbsent(index, registration))
        {
            pageLocks.unlock(recorded.address(), recorded.length());
            pinned.release(recorded.length());
            throw new MrdException(ErrorCode.EEXIST, "soft key " + Sizes.hex(recorded.lkey() & 0xFFFF_FFFFL) +
                " is recorded twice, or is no soft key: the control file is not one daemon's");
        }
        nextIndex.accumulateAndGet(index + 1, Math::max);
        return registration;
    }

    /**
     * {@inheritDoc}
     *
     * @throws MrdException EINVAL when {@code registration} is not live here (deregistered already, or made by
     *                      another provider); munlock's errno otherwise (the registration is gone either way).
     */
    public void deregister(final Registration registration)
    {
        final int index = (registration.lkey() >>> VARIANT_BITS) & INDEX_MASK;
        if (!live.remove(index, registration))
        {
            throw new MrdException(ErrorCode.EINVAL, "registration lkey " +
                Sizes.hex(registration.lkey() & 0xFFFF_FFFFL) + " of " + Sizes.format(registration.length()) + " at " + Sizes.hex(registration.address()) +
                " is not live in the soft provider: deregistered twice, or made by another provider");
        }
        final int errno = pageLocks.unlock(registration.address(), registration.length());
        pinned.release(registration.length());
        // ENOMEM: part of the range is no longer mapped, and unmapping dropped those pages' locks already.
        if (0 != errno && ErrorCode.ENOMEM.errno() != errno)
        {
            throw Posix.failure(errno, "munlock(" + Sizes.format(registration.length()) + " at " +
                Sizes.hex(registration.address()) + ")");
        }
    }

    public long pinnedBytes()
    {
        return pinned.get();
    }

    /**
     * @return live registrations.
     */
    public int liveCount()
    {
        return live.size();
    }

    /**
     * Unlocks what live registrations still hold (there should be none), refuses registrations from then on, and
     * stops the populator's threads.
     */
    public void close()
    {
        closed = true;
        populator.close();
        if (!live.isEmpty())
        {
            LOG.warn("soft provider closed with {} registrations live; unlocking them", live.size());
            for (final Registration registration : live.values())
            {
                try
                {
                    deregister(registration);
                }
                catch (final MrdException ex)
                {
                    LOG.warn("deregistering at close: {}", ex.oneLine());
                }
            }
        }
    }

    /**
     * @return the key index of an mlx5-style key.
     */
    public static int index(final int key)
    {
        return (key >>> VARIANT_BITS) & INDEX_MASK;
    }

    /**
     * @return the variant byte of an mlx5-style key.
     */
    public static int variant(final int key)
    {
        return key & VARIANT_MASK;
    }

    public String toString()
    {
        return "SoftRegistrar{pinned=" + Sizes.format(pinned.get()) + ", live=" + live.size() + '}';
    }

    static void checkRange(final long address, final long length)
    {
        if (length <= 0 || address < 0 || address + length < address)
        {
            throw new MrdException(ErrorCode.EINVAL, "cannot register " + length + " bytes at " + Sizes.hex(address) +
                ": the range must be non-empty and inside the address space");
        }
    }

    /**
     * Translates mlock's errno into what an operator can act on. The kernel answers ENOMEM past RLIMIT_MEMLOCK or
     * over unmapped addresses, and EAGAIN when it could not lock some pages.
     */
    static MrdException lockFailure(final int errno, final long address, final long length, final long pinnedBefore)
    {
        final String call = "mlock of " + Sizes.format(length) + " at " + Sizes.hex(address) + " failed: " +
            ErrorCode.describe(errno);
        if (ErrorCode.ENOMEM.errno() == errno || ErrorCode.EAGAIN.errno() == errno)
        {
            final long limit = Posix.memlockLimit();
            if (Posix.RLIM_INFINITY != limit && pinnedBefore + length > limit)
            {
                return new MrdException(ErrorCode.ENOMEM, call + "; mrd has " + Sizes.format(pinnedBefore) +
                    " pinned and " + PinnedBytes.memlockAdvice());
            }
            return new MrdException(ErrorCode.ENOMEM, call + ": part of the range is not mapped, or the system is " +
                "short of memory (mrd has " + Sizes.format(pinnedBefore) + " pinned; RLIMIT_MEMLOCK is " +
                PinnedBytes.formatLimit(limit) + ")");
        }
        return Posix.failure(errno, "mlock of " + Sizes.format(length) + " at " + Sizes.hex(address));
    }

    private Registration insert(final long address, final long length, final int access)
    {
        for (int tries = 0; tries < INDEX_MASK; tries++)
        {
            final int index = nextIndex.getAndIncrement() & INDEX_MASK;
            if (0 == index)
            {
                continue;
            }
            final int key = index << VARIANT_BITS | nextVariant.getAndIncrement() & VARIANT_MASK;
            final int rkey = RemoteAccess.rkey(access, key);
            final Registration registration = new Registration(address, length, key, rkey, key & 0xFFFF_FFFFL,
                MrDescriptor.NO_DEVICE_HANDLE);
            if (null == live.putIfAbsent(index, registration))
            {
                return registration;
            }
        }
        throw new MrdException(ErrorCode.ENOSPC, "all " + INDEX_MASK + " soft keys are live: deregister some");
    }
}
