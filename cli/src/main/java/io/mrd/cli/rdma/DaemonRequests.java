package io.mrd.cli.rdma;

import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * The exchange's requests to the daemon (ALLOC, FREE, the CREATE_MR of memory's first lookup, a queue pair's
 * report), run in order on a thread of their own, so that the datapath thread never waits for the daemon. Between a daemon's death and its successor a request waits
 * (up to {@code ClientContext.adoptionWaitMs}) while the RDMA goes on with the memory and keys it holds: what
 * issue 22 asks of an application, and what the adoption scenario counts.
 * <p>
 * The datapath asks whether a result is {@link Future#isDone() done} and takes it with {@link #take}; what it
 * hands back ({@link #free}, {@link #execute}) is fire-and-forget, and its failure is thrown by the next
 * {@link #rethrowFailure()}.
 */
final class DaemonRequests
{
    /** How long {@link #finish()} waits for queued requests (one may be waiting out a gap). */
    private static final long FINISH_TIMEOUT_MS = 120_000;

    /** A request, given the client and the requests thread's own cache (an MrCache is single-threaded). */
    interface Request<T>
    {
        T run(MrdClient client, MrCache cache);
    }

    private final MrdClient client;
    private final MrCache cache;
    private final ExecutorService thread;
    private volatile RuntimeException failure;

    /**
     * @param device the device whose keys the requests' lookups return: the queue pair's.
     */
    DaemonRequests(final MrdClient client, final String name, final int device)
    {
        this.client = client;
        this.cache = client.newCache(device);
        this.thread = Executors.newSingleThreadExecutor(runnable ->
        {
            final Thread t = new Thread(runnable, "mrd-rdma-requests-" + name);
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * Allocates memory and takes its keys: the first lookup of memory with remote access creates its MR
     * (CREATE_MR), after which the datapath's lookup finds it in the global cache with no daemon running.
     */
    Future<MemorySegment> allocate(final long size, final int access)
    {
        return submit((client, cache) ->
        {
            final MemorySegment memory = client.allocate(size, access);
            cache.keyPair(memory);
            return memory;
        });
    }

    <T> Future<T> submit(final Request<T> request)
    {
        return thread.submit(() -> request.run(client, cache));
    }

    void free(final MemorySegment memory)
    {
        execute(() -> client.free(memory));
    }

    void execute(final Runnable request)
    {
        thread.execute(() ->
        {
            try
            {
                request.run();
            }
            catch (final RuntimeException ex)
            {
                if (null == failure)
                {
                    failure = ex;
                }
            }
        });
    }

    /**
     * @return the result of a request that is done; its failure is thrown as it was thrown on this thread.
     */
    static <T> T take(final Future<T> done)
    {
        try
        {
            return done.get();
        }
        catch (final ExecutionException ex)
        {
            throw ex.getCause() instanceof RuntimeException cause ? cause :
                new IllegalStateException("a request to the daemon failed", ex.getCause());
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted taking a request's result", ex);
        }
    }

    /** Throws the first failure of a FREE, if one failed. */
    void rethrowFailure()
    {
        final RuntimeException failed = failure;
        if (null != failed)
        {
            throw failed;
        }
    }

    /**
     * Runs what is queued, then ends the thread: the client must not be closed under a request.
     *
     * @throws IllegalStateException when the queue did not drain within 120 s.
     */
    void finish()
    {
        thread.shutdown();
        try
        {
            if (!thread.awaitTermination(FINISH_TIMEOUT_MS, TimeUnit.MILLISECONDS))
            {
                throw new IllegalStateException("requests to the daemon still queued after " + FINISH_TIMEOUT_MS +
                    " ms: is a daemon running?");
            }
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted waiting for the requests to the daemon", ex);
        }
        rethrowFailure();
    }
}
