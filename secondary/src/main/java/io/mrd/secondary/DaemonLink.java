package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Sizes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.function.Function;
import java.util.function.Supplier;

/**
 * The client's connection to whichever daemon serves it now: the one it attached to, or, after a gap, the
 * successor that adopted it ({@link DaemonWatch}, docs/adoption.md). Every request goes through here: while the
 * client is in a gap a request waits for the successor (up to the gap's deadline, with no lock held), then goes
 * out on the connection current then; once the client is lost it throws the loss.
 * <p>
 * A request in flight when the daemon died has no reply. When the client then resumes with a successor, which
 * adopted the dead daemon's state as it was at the death, the request is sent again there: CREATE_MR, IMPORT_PD
 * and QUEUES are idempotent; a FREE the dead daemon had done already is refused (EINVAL, nothing allocated
 * there; EPERM, allocated to another client since) and so counts as done; an ALLOC the dead daemon may have
 * made stays this client's until it closes (logged). REG_EXTERNAL, whose descriptor travelled to the dead daemon, is not sent again: it fails.
 * <p>
 * Thread-safe: {@link #replace} is the watchdog's, once per adoption; requests read the current connection.
 */
final class DaemonLink
{
    private static final Logger LOG = LoggerFactory.getLogger(DaemonLink.class);

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
        return resending(request, connection -> connection.call(request), () -> callAgain(request));
    }

    /** @see DaemonConnection#callForFd */
    DaemonConnection.Answer callForFd(final Message.Request request)
    {
        return resending(request, connection -> connection.callForFd(request), () -> current.callForFd(request));
    }

    /**
     * Runs {@code call} on the serving daemon's connection; when that daemon died with it in flight and the client
     * resumed with a successor since, runs {@code again} there, for the requests that are sent again
     * ({@link MessageType#sentAgainToSuccessor()}).
     */
    private <T> T resending(final Message.Request request, final Function<DaemonConnection, T> call,
        final Supplier<T> again)
    {
        final DaemonConnection on = served();
        try
        {
            return call.apply(on);
        }
        catch (final DaemonDeadException inFlight)
        {
            if (!request.type().sentAgainToSuccessor() || !resumedSince(on))
            {
                throw inFlight;
            }
            return again.get();
        }
    }

    /**
     * @return true when the daemon {@code on} connected to died and the client resumed with a successor since
     * (waits out the gap first); false when the failure was something else.
     * @throws DaemonDeadException when the client is lost.
     */
    private boolean resumedSince(final DaemonConnection on)
    {
        watch.awaitGapEnd();
        return current != on;
    }

    private Message.Reply callAgain(final Message.Request request)
    {
        if (request.type() == MessageType.ALLOC)
        {
            LOG.warn("an ALLOC was in flight when the daemon died: sent again to its successor; the dead daemon may " +
                "have allocated it once already, which then stays this client's until it closes ({})", request);
        }
        try
        {
            return current.call(request);
        }
        catch (final MrdException ex)
        {
            return doneAlready(request, ex);
        }
    }

    /**
     * The successor's refusal of a request sent again: a FREE refused because the memory is not this client's
     * any more was done by the dead daemon, whose state the successor adopted after the free (EINVAL: nothing
     * allocated there; EPERM: given to another client since). This client held the memory when it asked, and
     * only its owner frees memory, so nothing else can have taken it away. Anything else is the refusal.
     *
     * @return the reply the request gets: done.
     * @throws MrdException {@code refusal}, when it is not the sign of a request done already.
     */
    static Message.Reply doneAlready(final Message.Request request, final MrdException refusal)
    {
        if (request instanceof Message.Free free &&
            (refusal.code() == ErrorCode.EINVAL || refusal.code() == ErrorCode.EPERM))
        {
            return new Message.Status(MessageType.FREE, ErrorCode.OK, "freed by the daemon that died, at " +
                Sizes.hex(free.address()));
        }
        throw refusal;
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
