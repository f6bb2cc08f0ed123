package io.mrd.secondary.verbs;

import io.mrd.layout.protocol.Message;

/**
 * How {@link Verbs} tells the daemon about each queue it creates and destroys ({@code QUEUES}): the daemon destroys
 * what a process reported and did not remove when that process's connection ends, since a shared device context
 * would otherwise keep them for the daemon's life. {@link io.mrd.secondary.MrdClient#verbs()} reports on the
 * client's connection.
 */
@FunctionalInterface
public interface QueueReporter
{
    /** Reports nothing: for a device used without a daemon (tests). */
    QueueReporter NONE = (operation, kind, handle) ->
    {
    };

    /**
     * @param operation {@link Message.Queues#ADD} after creating, {@link Message.Queues#REMOVE} before destroying.
     * @param kind      {@link Message.Queues#CQ} or {@link Message.Queues#QP}.
     * @param handle    {@code ibv_cq.handle} or {@code ibv_qp.handle}.
     * @throws io.mrd.layout.MrdException when the daemon refused or is gone; a creation is then undone.
     */
    void report(int operation, int kind, int handle);
}
