package io.mrd.primary.server;

import io.mrd.layout.ClientDescriptor;
import io.mrd.layout.ClientRecord;
import io.mrd.layout.ControlFile;
import io.mrd.layout.MemsegListDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrRecord;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The clients a predecessor daemon served, as its control file shows them, read by a successor before its own
 * client table replaces theirs: every client in the table, and every owner of memory or of an MR (one whose
 * reclaim the predecessor had not finished is in no table). Their allocations and MRs stay theirs for the grace
 * period; whatever is left of them then is reclaimed as a dead client's memory is ({@link MrdServer}). New
 * clients get ids above theirs, so that no id names two clients.
 * <p>
 * A client that comes back within the grace period {@link #claim}s its id (HELLO with
 * {@code FLAG_RESUME}): it must be the process the predecessor recorded, pid and uid as the kernel gives them
 * ({@code SO_PEERCRED}), and each id is claimed once. Thread-safe: claims come from the event loop, the grace
 * period's end from its timer.
 */
public final class AdoptedClients
{
    /** No predecessor: a daemon started afresh. */
    public static final AdoptedClients NONE = new AdoptedClients(List.of(), 0);

    /**
     * One of them.
     *
     * @param pid  as the predecessor saw it, 0 when it was in no table.
     * @param uid  as the predecessor saw it, -1 when it was in no table.
     * @param name as it gave it in HELLO, "" when it was in no table.
     */
    public record Client(int id, long pid, int uid, String name)
    {
    }

    private final List<Client> clients;
    private final int maxId;
    /** Guarded by this: the clients not claimed yet; emptied when the grace period ends. */
    private final Map<Integer, Client> unclaimed = new TreeMap<>();
    /** Guarded by this. */
    private boolean expired;

    private AdoptedClients(final List<Client> clients, final int maxId)
    {
        this.clients = clients;
        this.maxId = maxId;
        clients.forEach(client -> unclaimed.put(client.id(), client));
    }

    /**
     * Reads them from a control file a successor adopts, before anything writes to its client table.
     */
    public static AdoptedClients read(final ControlFile ctl)
    {
        final Map<Integer, Client> byId = new TreeMap<>();
        final ClientRecord client = new ClientRecord();
        for (int slot = 0; slot < ctl.layout().clientCapacity(); slot++)
        {
            client.wrap(ctl.buffer(), ctl.layout().clientOffset(slot));
            if (client.state() == ClientDescriptor.STATE_CONNECTED && client.id() > 0)
            {
                byId.put(client.id(), new Client(client.id(), client.pid(), client.uid(), client.name()));
            }
        }
        final MemsegListRecord list = new MemsegListRecord();
        for (int l = 0; l < ctl.layout().memsegListCount(); l++)
        {
            list.wrap(ctl.buffer(), ctl.layout().memsegListOffset(l));
            for (int i = 0; i < list.segmentCount(); i++)
            {
                addOwner(byId, list.owner(i));
            }
        }
        final MrRecord mr = new MrRecord();
        for (int slot = 0; slot < ctl.header().mrHighWater(); slot++)
        {
            mr.wrap(ctl.buffer(), ctl.layout().mrOffset(slot));
            if (mr.state() != MrDescriptor.STATE_FREE)
            {
                addOwner(byId, mr.owner());
            }
        }
        final int maxId = byId.keySet().stream().mapToInt(Integer::intValue).max().orElse(0);
        return new AdoptedClients(List.copyOf(byId.values()), maxId);
    }

    private static void addOwner(final Map<Integer, Client> byId, final int owner)
    {
        if (owner > 0 && owner != MemsegListDescriptor.OWNER_DAEMON)
        {
            byId.putIfAbsent(owner, new Client(owner, 0, -1, ""));
        }
    }

    public List<Client> clients()
    {
        return clients;
    }

    /**
     * A client resuming: takes its id back, so that what it holds is not reclaimed.
     *
     * @throws MrdException ESRCH when the id is no client of the predecessor's, was claimed already, or the
     *                      grace period is over; EPERM when the peer is not the process the predecessor recorded.
     */
    synchronized void claim(final int id, final long pid, final int uid)
    {
        final Client client = unclaimed.get(id);
        if (null == client)
        {
            throw new MrdException(ErrorCode.ESRCH, "client " + id + " has nothing to resume here: " +
                (expired ? "the grace period after the adoption is over and what it held was reclaimed" :
                "it was no client of the daemon this one adopted, or it resumed already") + "; attach as a new client");
        }
        if (client.pid() != pid || client.uid() != uid)
        {
            throw new MrdException(ErrorCode.EPERM, "client " + id + " was pid " + client.pid() + " uid " +
                client.uid() + ", not pid " + pid + " uid " + uid + ": only the process itself may resume it");
        }
        unclaimed.remove(id);
    }

    /**
     * Ends the grace period: no claim succeeds from now on.
     *
     * @return the clients that did not come back, whose memory is to be reclaimed.
     */
    synchronized List<Client> expire()
    {
        expired = true;
        final List<Client> left = new ArrayList<>(unclaimed.values());
        unclaimed.clear();
        return left;
    }

    /** @return the first id a new client may have. */
    public int firstNewId()
    {
        return maxId + 1;
    }

    public String toString()
    {
        return clients.size() + " client" + (clients.size() == 1 ? "" : "s") +
            (clients.isEmpty() ? "" : " " + clients.stream().map(c -> Integer.toString(c.id())).toList());
    }
}
