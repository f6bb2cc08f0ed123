package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Which client reported which completion queue and queue pair in the shared device ({@code QUEUES}), so that the
 * daemon destroys what a gone client left (decision 5: a shared context keeps every importer's queues while
 * the daemon holds it).
 * <p>
 * A handle belongs to the first client that reports it: a second report, by any client, is EEXIST, so a client
 * cannot make the daemon destroy another's queue by claiming its handle; and only a handle a client reported
 * is ever destroyed for it. A client reports a queue after creating it and removes it before destroying it,
 * so a reported handle always names a live queue of its reporter (a handle the device reuses is reported
 * afresh by its new creator).
 * <p>
 * Thread-safe. The lock covers the maps only: {@link #release} hands the queues out, and the caller destroys
 * them without it.
 */
final class QueueOwners
{
    /** Queues one client may report; more are ENOSPC, which bounds what a client can make the daemon hold. */
    static final int MAX_PER_CLIENT = 4096;

    /**
     * A queue to destroy.
     *
     * @param kind   {@link Message.Queues#CQ} or {@link Message.Queues#QP}.
     * @param handle {@code ibv_cq.handle} or {@code ibv_qp.handle}.
     */
    record Queue(int kind, int handle, int device)
    {
        String describe()
        {
            return (kind == Message.Queues.CQ ? "CQ" : "QP") + " handle " + Integer.toUnsignedString(handle) +
                (0 == device ? "" : " of device " + device);
        }
    }

    private final Map<Queue, Integer> owners = new HashMap<>();
    private final Map<Integer, Set<Queue>> byClient = new HashMap<>();

    /**
     * Applies one {@code QUEUES} request of {@code clientId}.
     *
     * @throws MrdException EINVAL for an unknown operation or kind, or the removal of a queue this client did not
     *                      report; EEXIST for a handle reported already; ENOSPC past {@link #MAX_PER_CLIENT}.
     */
    synchronized void apply(final int clientId, final Message.Queues request)
    {
        final int kind = request.kind();
        if (kind != Message.Queues.CQ && kind != Message.Queues.QP)
        {
            throw new MrdException(ErrorCode.EINVAL, "QUEUES kind " + kind + " is unknown: send " +
                Message.Queues.CQ + " for a completion queue or " + Message.Queues.QP + " for a queue pair");
        }
        final Queue queue = new Queue(kind, request.handle(), request.device());
        switch (request.operation())
        {
            case Message.Queues.ADD -> add(clientId, queue);
            case Message.Queues.REMOVE -> remove(clientId, queue);
            default -> throw new MrdException(ErrorCode.EINVAL, "QUEUES operation " + request.operation() +
                " is unknown: send " + Message.Queues.ADD + " after creating a queue or " + Message.Queues.REMOVE +
                " before destroying it");
        }
    }

    private void add(final int clientId, final Queue queue)
    {
        final Integer owner = owners.get(queue);
        if (null != owner)
        {
            throw new MrdException(ErrorCode.EEXIST, queue.describe() + " was reported already" +
                (owner == clientId ? " by this client" : " by client " + owner) + ": report each queue once, " +
                "after creating it");
        }
        final Set<Queue> mine = byClient.computeIfAbsent(clientId, id -> new HashSet<>());
        if (mine.size() >= MAX_PER_CLIENT)
        {
            throw new MrdException(ErrorCode.ENOSPC, "client " + clientId + " has reported " + MAX_PER_CLIENT +
                " queues, the most one client may hold: destroy queues it no longer uses");
        }
        mine.add(queue);
        owners.put(queue, clientId);
    }

    private void remove(final int clientId, final Queue queue)
    {
        final Set<Queue> mine = byClient.get(clientId);
        if (null == mine || !mine.remove(queue))
        {
            throw new MrdException(ErrorCode.EINVAL, queue.describe() + " is not a queue this client reported: " +
                "remove only what it added");
        }
        owners.remove(queue);
    }

    /**
     * Forgets every queue of a gone client.
     *
     * @return its queues, queue pairs first: a completion queue cannot be destroyed while a QP uses it.
     */
    synchronized List<Queue> release(final int clientId)
    {
        final Set<Queue> mine = byClient.remove(clientId);
        if (null == mine)
        {
            return List.of();
        }
        mine.forEach(owners::remove);
        final List<Queue> queues = new ArrayList<>(mine);
        queues.sort(Comparator.comparingInt((Queue q) -> q.kind() == Message.Queues.QP ? 0 : 1)
            .thenComparingInt(Queue::handle));
        return queues;
    }

    /**
     * @return queues reported and not removed, of all clients.
     */
    synchronized int size()
    {
        return owners.size();
    }
}
