package io.mrd.primary.server;

import io.mrd.primary.journal.EventJournal;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.function.BooleanSupplier;

/**
 * Frees what a gone client owned (its memory, MRs, external mappings and reported queues, through
 * {@link RequestHandler#reclaim}), journals its departure and frees its slot of the client table. Each
 * reclaim runs on the server's reclaim thread, one at a time: never refused for a full queue, never stuck
 * behind requests. A session asks once, after its channel closed and its last request finished
 * ({@link SessionLifecycle}), from the event loop or a worker.
 * <p>
 * Skipped when the server is closing: the daemon's shutdown releases everything.
 */
final class ClientReclaim
{
    private static final Logger LOG = LoggerFactory.getLogger(MrdServer.class);

    private final Executor thread;
    private final RequestHandler handler;
    private final ClientTable clients;
    private final EventJournal journal;
    private final FailureLog failures;
    private final BooleanSupplier serverClosing;
    private final Executor graceTimer = command -> Thread.ofPlatform().name("mrd-adoption-grace").daemon(true)
        .start(command);

    /**
     * @param thread the reclaim thread; it refuses work only once the server is closing.
     */
    ClientReclaim(
        final Executor thread,
        final RequestHandler handler,
        final ClientTable clients,
        final EventJournal journal,
        final FailureLog failures,
        final BooleanSupplier serverClosing)
    {
        this.thread = thread;
        this.handler = handler;
        this.clients = clients;
        this.journal = journal;
        this.failures = failures;
        this.serverClosing = serverClosing;
    }

    /**
     * Reclaims client {@code clientId}, which held table slot {@code slot} (-1: none, a client a predecessor
     * served that did not come back to this daemon); returns at once.
     */
    /**
     * Reclaims, once {@code graceMs} have passed, every client a predecessor served that has not come back by
     * then ({@link AdoptedClients#claim}).
     */
    void reclaimAfterGrace(final AdoptedClients adopted, final long graceMs)
    {
        if (adopted.clients().isEmpty())
        {
            return;
        }
        graceTimer.execute(() ->
        {
            try
            {
                Thread.sleep(graceMs);
            }
            catch (final InterruptedException ex)
            {
                return;
            }
            final List<AdoptedClients.Client> left = adopted.expire();
            LOG.info("the adoption's grace period of {} ms is over: reclaiming {} of {} that did not come back",
                graceMs, left.size(), adopted);
            for (final AdoptedClients.Client client : left)
            {
                reclaim(client.id(), -1, (int)client.pid(), client.name());
            }
        });
    }

    void reclaim(final int clientId, final int slot, final int pid, final String name)
    {
        try
        {
            thread.execute(() ->
            {
                if (serverClosing.getAsBoolean())
                {
                    return;
                }
                String freed;
                try
                {
                    freed = handler.reclaim(clientId, pid);
                }
                catch (final RuntimeException ex)
                {
                    failures.unexpected("reclaiming client " + clientId, ex);
                    freed = "reclaim failed: " + ex;
                }
                journal.clientDisconnected(clientId, pid);
                if (slot >= 0)
                {
                    clients.remove(slot);
                }
                LOG.info("client {} (pid {}, {}) disconnected: {}", clientId, pid, name.isEmpty() ? "no name" : name,
                    freed);
            });
        }
        catch (final RejectedExecutionException ex)
        {
            // only once closing: the daemon's shutdown releases everything
        }
    }
}
