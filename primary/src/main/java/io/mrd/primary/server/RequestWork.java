package io.mrd.primary.server;

import io.mrd.layout.protocol.Message;

/**
 * A request's work on a worker thread, submitted by its {@link ClientSession}.
 */
interface RequestWork
{
    /** @return the reply; runs on a worker, never on the event loop. */
    Message.Reply run();

    /** Releases what the work would have consumed, when it never runs (the connection closed first). */
    default void abandon()
    {
    }
}
