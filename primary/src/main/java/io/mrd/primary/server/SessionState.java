package io.mrd.primary.server;

/**
 * Where a {@link ClientSession} is in its life. {@link SessionLifecycle} holds the one field of this type and
 * makes every transition; this says what may happen in each state.
 * <pre>
 *   OPEN ──input shut──► DRAINING
 *    │                      │
 *    └──────give up─────────┴──► CLOSING
 *   any of the three ──channel inactive──► CLOSED ──nothing in flight──► FINISHED
 * </pre>
 */
enum SessionState
{
    /**
     * Connected and reading: frames are cut and answered, HELLO first (before it the peer is no client yet),
     * requests run on the workers and their replies are written.
     */
    OPEN,

    /**
     * The peer shut its sending side: nothing more arrives, requests in flight still run and are answered, and
     * the connection is closed after the last reply is flushed.
     */
    DRAINING,

    /**
     * The session gave up on the connection (a refusal, a protocol error, a client that does not read) and is
     * closing it: at most the one last answer already on its way is written, nothing is read, work not yet
     * started is abandoned and its replies are dropped.
     */
    CLOSING,

    /**
     * The channel is inactive: nothing is read or written; requests still in flight finish and write nothing.
     * What the client owned is still its own until the last of them has finished.
     */
    CLOSED,

    /**
     * Closed with nothing in flight: the reclaim of what the client owned has started (when the peer was a
     * client, that is, said HELLO). Terminal.
     */
    FINISHED
}
