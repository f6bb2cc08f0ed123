package io.mrd.secondary;

import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;

/**
 * The client's connection to whichever daemon serves it now: the one it attached to, or, after a gap, the
 * successor that adopted it ({@link DaemonWatch}, docs/adoption.md). Every request goes through here: while the
 * client is in a gap a request waits for the successor (up to the gap's deadline, with no lock held), then goes
 * out on the connection current then; once the client is lost it throws the loss.
 * <p>
 * Thread-safe: {@link #replace} is the watchdog's, once per adoption; requests read the current connection.
 */
final class DaemonLink
{
    private final DaemonWatch watch;
    private volatile DaemonConnection current;

    DaemonLink(final DaemonConnection first, final DaemonWatch watch)
    {
        this.current = first;
        this.watch = watch;
    }

    /** @see DaemonConnection#call */
    Message.Reply call(final Message.Request request)
    {
        return served().call(request);
    }

    /** @see DaemonConnection#callForFd */
    DaemonConnection.Answer callForFd(final Message.Request request)
    {
        return served().callForFd(request);
    }

    /** @see DaemonConnection#callWithFd */
    Message.Reply callWithFd(final Message.Request request, final int fd)
    {
        return served().callWithFd(request, fd);
    }

    /**
     * @return the connection to the daemon serving the client, once the gap (if any) is over.
     * @throws DaemonDeadException once the client is lost.
     */
    private DaemonConnection served()
    {
        watch.awaitGapEnd();
        return current;
    }

    /** @return the connection now, gap or not (the first HELLO, tests). */
    DaemonConnection current()
    {
        return current;
    }

    /**
     * A successor adopted the client's daemon and welcomed the client back on {@code next}: requests go there from
     * now on; the dead daemon's connection, failed already, is closed.
     */
    void replace(final DaemonConnection next, final MrdException oldReason)
    {
        final DaemonConnection old = current;
        current = next;
        old.close(oldReason);
    }

    /** Fails the current connection: the client is lost. */
    boolean fail(final MrdException reason)
    {
        return current.fail(reason);
    }

    /** Closes the current connection. */
    void close(final MrdException reason)
    {
        current.close(reason);
    }
}
