package io.mrd.primary.server;

import io.mrd.layout.ClientDescriptor;
import io.mrd.layout.ClientRecord;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.protocol.FrameDescriptor;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * The control file's client table (DESIGN §3, section 6): one record per connected secondary, where
 * {@code mrd status} and {@code mrd dump} read who is connected without asking the daemon. Its capacity is
 * {@code --max-clients}, so a free record is also the admission check. Thread-safe; the primary is the only
 * writer.
 */
final class ClientTable
{
    private final UnsafeBuffer buffer;
    private final ControlFileLayout layout;
    private final ClientRecord record = new ClientRecord();
    private final AtomicCounter connectedCounter;
    private int connected;

    /**
     * @param connectedCounter {@code CLIENTS_CONNECTED}, set under this table's lock so that it never goes
     *                         back to a stale value.
     */
    ClientTable(final ControlFile controlFile, final AtomicCounter connectedCounter)
    {
        this.buffer = controlFile.buffer();
        this.layout = controlFile.layout();
        this.connectedCounter = connectedCounter;
        for (int slot = 0; slot < layout.clientCapacity(); slot++)
        {
            record.wrap(buffer, layout.clientOffset(slot)).state(ClientDescriptor.STATE_FREE);
        }
    }

    /**
     * Fills a free record. The state is written last, so a tool never sees a CONNECTED record half written
     * (on x86-64 stores are not reordered with other stores).
     *
     * @return the record's slot, or -1 when all {@link #capacity()} are in use.
     */
    synchronized int add(final int clientId, final long pid, final int uid, final int gid, final String name)
    {
        for (int slot = 0; slot < layout.clientCapacity(); slot++)
        {
            record.wrap(buffer, layout.clientOffset(slot));
            if (record.state() == ClientDescriptor.STATE_FREE)
            {
                record.id(clientId)
                    .pid(pid)
                    .uid(uid)
                    .gid(gid)
                    .connectedMs(System.currentTimeMillis())
                    .name(name)
                    .state(ClientDescriptor.STATE_CONNECTED);
                connectedCounter.setRelease(++connected);
                return slot;
            }
        }
        return -1;
    }

    synchronized void remove(final int slot)
    {
        record.wrap(buffer, layout.clientOffset(slot));
        if (record.state() != ClientDescriptor.STATE_FREE)
        {
            record.state(ClientDescriptor.STATE_FREE);
            connectedCounter.setRelease(--connected);
        }
    }

    synchronized int connected()
    {
        return connected;
    }

    int capacity()
    {
        return layout.clientCapacity();
    }

    /**
     * @return the name with anything but printable ASCII replaced, so it cannot forge log lines, cut to what a
     *         record holds.
     */
    static String printable(final String name)
    {
        final StringBuilder clean = new StringBuilder(Math.min(name.length(), FrameDescriptor.MAX_NAME_LENGTH));
        for (int i = 0; i < name.length() && clean.length() < FrameDescriptor.MAX_NAME_LENGTH; i++)
        {
            final char c = name.charAt(i);
            clean.append(c >= 0x20 && c < 0x7F ? c : '?');
        }
        return clean.toString();
    }
}
