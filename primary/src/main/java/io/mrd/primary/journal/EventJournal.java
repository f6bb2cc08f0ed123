package io.mrd.primary.journal;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.primary.provider.Registration;

/**
 * Where the daemon tells what changed registrations or ownership, one call at the place it happens: the engine,
 * the memory manager and the server know this interface only, never the journal's files. Each typed method
 * puts its values in the record's fields as {@link JournalEventType} defines them and calls {@link #append}.
 * <p>
 * Calls come from every worker thread, the event loop and the reclaim thread, some of them with the memory or
 * the cache lock held: an implementation must be thread-safe, must not block on anything but a short lock of
 * its own, and must not make a system call per event.
 */
public interface EventJournal extends AutoCloseable
{
    /** The journal of a daemon started with {@code --journal-size 0}: records nothing. */
    EventJournal OFF = (type, flags, client, arg, address, length, lkey, rkey, value) ->
    {
    };

    /**
     * Appends one record; the fields mean what {@link JournalEventType} says for {@code type}.
     */
    void append(JournalEventType type, int flags, int client, int arg, long address, long length, int lkey, int rkey,
        long value);

    /** Releases the journal's files; appends after it record nothing. */
    default void close()
    {
    }

    default void daemonStarted(final long epoch, final long pid, final long journalSize)
    {
        append(JournalEventType.DAEMON_STARTED, 0, 0, (int)pid, 0, journalSize, 0, 0, epoch);
    }

    default void daemonStopped(final long epoch, final long pid)
    {
        append(JournalEventType.DAEMON_STOPPED, 0, 0, (int)pid, 0, 0, 0, 0, epoch);
    }

    default void clientAttached(final int client, final int pid, final int uid)
    {
        append(JournalEventType.CLIENT_ATTACHED, 0, client, pid, 0, 0, 0, 0, uid);
    }

    default void clientRefused(final int pid, final int uid, final ErrorCode code)
    {
        append(JournalEventType.CLIENT_REFUSED, code.errno(), 0, pid, 0, 0, 0, 0, uid);
    }

    default void clientDisconnected(final int client, final int pid)
    {
        append(JournalEventType.CLIENT_DISCONNECTED, 0, client, pid, 0, 0, 0, 0, 0);
    }

    default void allocated(final int owner, final long address, final long length, final int access)
    {
        append(JournalEventType.ALLOC, access, owner, 0, address, length, 0, 0, 0);
    }

    default void freed(final int owner, final long address, final long length)
    {
        append(JournalEventType.FREE, 0, owner, 0, address, length, 0, 0, 0);
    }

    /**
     * {@link JournalEventType#MR_CREATED} with device 0's keys, then one {@link JournalEventType#MR_DEVICE_KEYS} per
     * further device it is placed on: a record has room for one pair of keys, and a one-device daemon's journal
     * reads as before. Device 0's keys are 0 when the MR is not placed on it.
     */
    default void mrCreated(final int owner, final int slot, final Registration mr, final int mrFlags)
    {
        append(JournalEventType.MR_CREATED, mrFlags, owner, slot, mr.address(), mr.length(), mr.lkey(), mr.rkey(), 0);
        for (int device = 1; device < mr.deviceCount(); device++)
        {
            final Registration.DeviceMr keys = mr.on(device);
            if (!keys.isPlaced())
            {
                continue;
            }
            append(JournalEventType.MR_DEVICE_KEYS, 0, owner, slot, mr.address(), mr.length(), keys.lkey(),
                keys.rkey(), device);
        }
    }

    default void mrDetached(final int owner, final int slot, final Registration mr)
    {
        append(JournalEventType.MR_DETACHED, 0, owner, slot, mr.address(), mr.length(), mr.lkey(), mr.rkey(), 0);
    }

    default void mrDeregistered(final int owner, final int slot, final Registration mr)
    {
        append(JournalEventType.MR_DEREGISTERED, 0, owner, slot, mr.address(), mr.length(), mr.lkey(), mr.rkey(), 0);
    }

    default void memoryEvent(final long address, final long length, final long devGen)
    {
        append(JournalEventType.MEMORY_EVENT, 0, 0, 0, address, length, 0, 0, devGen);
    }

    default void externalDeregistered(final int client, final long address)
    {
        append(JournalEventType.EXTERNAL_DEREGISTERED, 0, client, 0, address, 0, 0, 0, 0);
    }

    default void cacheOverflow(final int capacity)
    {
        append(JournalEventType.CACHE_OVERFLOW, 0, 0, 0, 0, 0, 0, 0, capacity);
    }

    default void cacheRebuilt(final int entries, final boolean overflowed)
    {
        append(JournalEventType.CACHE_REBUILT, overflowed ? 1 : 0, 0, 0, 0, 0, 0, 0, entries);
    }
}
