package io.mrd.primary.server;

import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Where the server puts failures that are bugs, not input: in the daemon's error log ({@code mrd dump
 * --errors}) and the log at ERROR. The connection concerned is closed or answered EIO; the daemon goes on.
 * Thread-safe (the error log is).
 */
final class FailureLog
{
    private static final Logger LOG = LoggerFactory.getLogger(MrdServer.class);

    private final DistinctErrorLog errorLog;

    FailureLog(final DistinctErrorLog errorLog)
    {
        this.errorLog = errorLog;
    }

    void unexpected(final String where, final Throwable error)
    {
        errorLog.record(error);
        LOG.error("{}: unexpected failure (the connection is closed, the daemon goes on)", where, error);
    }
}
