package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

/**
 * The daemon this client attached to is gone: it died (heartbeat stale, connection reset), stopped, or was
 * restarted (another epoch). Nothing it registered can be trusted any more, so no lkey is returned from then
 * on; the remedy is to close the client and attach again, to a daemon that is running.
 */
public final class DaemonDeadException extends MrdException
{
    private static final long serialVersionUID = 1L;

    public DaemonDeadException(final String message)
    {
        super(ErrorCode.ECONNRESET, message);
    }
}
