package io.mrd.cli;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.UnixDatagram;

import java.util.Map;

/**
 * The service manager that started this daemon, when one asked to be told of its state: systemd's notification
 * protocol ({@code sd_notify(3)}), datagrams to the socket {@code NOTIFY_SOCKET} names. Without that variable
 * every method does nothing.
 * <p>
 * {@code scripts/mrd.service} is {@code Type=notify} with {@code NotifyAccess=all} so that its {@code ExecReload}
 * ({@code mrd restart}) can replace the main process: the daemon it starts is not systemd's child, and systemd
 * must know it as the unit's main process before the old one exits, or it takes that exit for the unit's end
 * (and, with {@code KillMode=process}, would leave the new daemon unsupervised). So {@link #mainPid} waits on a
 * barrier until systemd has read the change, and the take-over asks for the handover only after it.
 */
final class ServiceManager
{
    /** How long systemd gets to confirm a barrier ({@code sd_notify_barrier}'s default is 5 s too). */
    static final int BARRIER_TIMEOUT_MS = 5_000;
    static final String NOTIFY_SOCKET = "NOTIFY_SOCKET";

    private final String socket;

    private ServiceManager(final String socket)
    {
        this.socket = socket;
    }

    /** @return the service manager {@code env} names ({@code NOTIFY_SOCKET}), or one that is told nothing. */
    static ServiceManager of(final Map<String, String> env)
    {
        final String socket = env.get(NOTIFY_SOCKET);
        return new ServiceManager(null == socket || socket.isEmpty() ? null : socket);
    }

    /**
     * This daemon serves: {@code READY=1} with its pid as the main one (a daemon started by {@code mrd restart}
     * is the main process from now on).
     *
     * A socket that cannot be reached is reported on stderr (the daemon's log), not thrown: the daemon serves
     * already, and the service manager's start timeout says the rest.
     */
    void ready(final long pid)
    {
        if (null == socket)
        {
            return;
        }
        try (UnixDatagram datagram = UnixDatagram.connect(socket))
        {
            datagram.send("READY=1\nMAINPID=" + pid + "\nSTATUS=serving");
        }
        catch (final MrdException ex)
        {
            System.err.println("mrd: could not tell the service manager READY=1: " + ex.getMessage());
        }
    }

    /**
     * Makes {@code pid} the unit's main process and waits until the service manager has read it.
     *
     * @throws MrdException ETIMEDOUT when it did not confirm within {@link #BARRIER_TIMEOUT_MS}, or the errno of
     *                      a socket that cannot be reached.
     */
    void mainPid(final long pid)
    {
        if (null == socket)
        {
            return;
        }
        try (UnixDatagram datagram = UnixDatagram.connect(socket))
        {
            datagram.send("MAINPID=" + pid);
            if (!datagram.barrier("BARRIER=1", BARRIER_TIMEOUT_MS))
            {
                throw new MrdException(ErrorCode.ETIMEDOUT, "the service manager at " + NOTIFY_SOCKET + "=" + socket +
                    " did not confirm MAINPID=" + pid + " within " + BARRIER_TIMEOUT_MS + " ms: the unit needs " +
                    "Type=notify and NotifyAccess=all (scripts/mrd.service)");
            }
        }
    }

    /**
     * {@link #mainPid} back to the daemon a failed take-over leaves serving, reporting no failure of its own:
     * the take-over's error is what the caller reports.
     */
    void restoreMainPid(final long pid)
    {
        try
        {
            mainPid(pid);
        }
        catch (final MrdException ex)
        {
            System.err.println("mrd: could not give the service manager MAINPID=" + pid + " back: " + ex.getMessage());
        }
    }
}
