package io.mrd.primary.server;

import io.mrd.layout.ControlFile;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.protocol.Message;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.external.ExternalRegistrations;

/**
 * A CREATE_MR whose MR the global cache already holds, answered on the event loop: the hand-offs to a worker
 * and back cost several times what the answer does, and most CREATE_MRs are of this kind (every secondary
 * that misses on a buffer another one registered asks for it).
 * <p>
 * The answer is one seqlock read of the global cache, with the reader every secondary uses, and it is given
 * only when it is the one {@link RequestHandler} would give, byte for byte: the fields are valid, the complete
 * cache holds the address with no write in progress or intervening (a write in progress belongs to a worker:
 * the event loop never waits for it), and the whole buffer lies in the entry. Everything else (misses, writes,
 * an overflowed cache, straddling buffers, bad fields, a closing server) is left to a worker, whose answer
 * (or, on a closing server whose workers stopped, no answer) is {@link RequestDispatch}'s. A CREATE_MR of an
 * existing MR has no other check on a worker either: any client may learn the keys of any MR (the global cache
 * every client maps holds them all); the ones a worker runs first (garbage collection of detached MRs, the
 * engine's open check) have nothing to do for a hit: every memory free collects the MRs it detached, and a
 * closed engine's cache is empty.
 * <p>
 * Counts as the worker path does ({@link MrdCounter#CREATE_REQUESTS} for managed memory, not for the external
 * window) and each answer given here in {@link MrdCounter#CREATES_ON_EVENT_LOOP}.
 * <p>
 * Not thread-safe (its reader owns scratch state): used only on the server's one event-loop thread.
 */
final class ExistingMrReply
{
    private final GlobalCacheReader reader;
    private final ExternalRegistrations external;
    private final DaemonCounters counters;
    private final MrEntry entry = new MrEntry();

    ExistingMrReply(final ControlFile controlFile, final ExternalRegistrations external, final DaemonCounters counters)
    {
        this.reader = new GlobalCacheReader(controlFile);
        this.external = external;
        this.counters = counters;
    }

    /**
     * @return the reply a worker would send, or null when a worker must answer.
     */
    Message.MrCreated answer(final Message.CreateMr request)
    {
        final long address = request.address();
        final long length = request.length();
        // What the field checks refuse, the worker refuses with its message.
        if (!RequestHandler.createFieldsValid(address, length) ||
            reader.lookupOnce(address, entry) != GlobalCacheReader.FOUND ||
            !entry.containsRange(address, length))
        {
            return null;
        }
        if (!external.holds(address))
        {
            counters.increment(MrdCounter.CREATE_REQUESTS);
        }
        counters.increment(MrdCounter.CREATES_ON_EVENT_LOOP);
        return RequestHandler.created(entry);
    }
}
