package io.mrd.primary.provider;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Bytes a provider keeps pinned, and the {@code --max-pinned} check made before anything is pinned.
 * <p>
 * Bytes are reserved before the provider pins and released if pinning fails, so concurrent registrations can
 * never together pass the limit; while one is in flight its bytes already count.
 */
final class PinnedBytes
{
    private final long maxPinned;
    private final AtomicLong pinned = new AtomicLong();

    /**
     * @param maxPinned the limit in bytes, 0 for none.
     */
    PinnedBytes(final long maxPinned)
    {
        this.maxPinned = maxPinned;
    }

    /**
     * Counts {@code length} more bytes as pinned.
     *
     * @throws MrdException ENOMEM naming --max-pinned and its value when the total would pass it; nothing counted.
     */
    void reserve(final long length)
    {
        while (true)
        {
            final long current = pinned.get();
            final long wanted = current + length;
            if (0 != maxPinned && wanted > maxPinned)
            {
                throw new MrdException(ErrorCode.ENOMEM, "registering " + Sizes.format(length) + " would pin " +
                    Sizes.format(wanted) + ", over --max-pinned " + Sizes.format(maxPinned) + " (" +
                    Sizes.format(current) + " pinned now): free memory, or raise --max-pinned");
            }
            if (pinned.compareAndSet(current, wanted))
            {
                return;
            }
        }
    }

    /**
     * Counts {@code length} more bytes a predecessor pinned, whatever --max-pinned says now: they are pinned.
     */
    void adopt(final long length)
    {
        pinned.addAndGet(length);
    }

    void release(final long length)
    {
        pinned.addAndGet(-length);
    }

    long get()
    {
        return pinned.get();
    }

    /**
     * @return what to tell an operator whose registration failed for want of lockable memory: the process's
     * RLIMIT_MEMLOCK (which the kernel checks on {@code mlock} and on {@code ibv_reg_mr} alike) and how to raise it.
     */
    static String memlockAdvice()
    {
        final long limit = Posix.memlockLimit();
        if (Posix.RLIM_INFINITY == limit)
        {
            return "RLIMIT_MEMLOCK is unlimited, so the system is short of memory";
        }
        return "RLIMIT_MEMLOCK is " + Sizes.format(limit) + ": raise it (ulimit -l, LimitMEMLOCK= in the systemd " +
            "unit, memlock in /etc/security/limits.conf) or give the daemon CAP_IPC_LOCK";
    }

    /**
     * @return an RLIMIT_MEMLOCK value as a size, or {@code unlimited}.
     */
    static String formatLimit(final long limit)
    {
        return Posix.RLIM_INFINITY == limit ? "unlimited" : Sizes.format(limit);
    }
}
