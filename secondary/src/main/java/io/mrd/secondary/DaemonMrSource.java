package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;

/**
 * The {@link MrSource} of one of a client's caches: the client's watch for liveness (it tracks and invalidates
 * the caches), the control file for {@code devGen} (its address in the read-only mapping, valid until the
 * client closes, which the watch learns first) and the global cache (through a reader of its own: readers are
 * single-threaded), and the client's connection for {@code CREATE_MR}. Its entries hold the keys of one device:
 * device 0's as the global cache has them, another's from the MR key table ({@link GlobalCacheReader#lookup(long,
 * MrEntry, int)}).
 */
final class DaemonMrSource implements MrSource
{
    private final DaemonWatch watch;
    private final long devGenAddress;
    private final GlobalCacheReader reader;
    private final DaemonLink connection;
    private final int device;

    DaemonMrSource(
        final DaemonWatch watch, final GlobalCacheReader reader, final DaemonLink connection, final int device)
    {
        this.device = device;
        this.watch = watch;
        this.devGenAddress = reader.controlFile().buffer().addressOffset() + HeaderDescriptor.DEV_GEN_OFFSET;
        this.reader = reader;
        this.connection = connection;
    }

    public void requireAliveAsLastSeen()
    {
        watch.requireAliveAsLastSeen();
    }

    public long devGenAddress()
    {
        return devGenAddress;
    }

    public void track(final MrCache cache)
    {
        watch.track(cache);
    }

    public void requireAliveNow()
    {
        watch.requireAliveNow();
    }

    public boolean lookupGlobal(final long address, final MrEntry out)
    {
        return requirePlaced(address, lookupGlobalAnyPlacement(address, out), out.access);
    }

    private boolean lookupGlobalAnyPlacement(final long address, final MrEntry out)
    {
        final long epoch = watch.epoch();
        try
        {
            return reader.lookup(address, out, device);
        }
        catch (final MrdException ex)
        {
            // EBUSY: the primary held the seqlock throughout. If it died inside it, say that instead; or, when
            // the client rides through the gap and resumes with a successor, look again: the successor finished
            // the write its predecessor died in before it served anyone.
            watch.requireAliveNow();
            if (watch.epoch() == epoch)
            {
                throw ex;
            }
            return reader.lookup(address, out, device);
        }
    }

    public void createMr(final long address, final long length, final MrEntry out)
    {
        final Message.Reply reply = connection.call(new Message.CreateMr(address, length));
        if (!(reply instanceof Message.MrCreated created))
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered CREATE_MR with " + reply);
        }
        if (0 == device)
        {
            requirePlaced(address, true, created.access());
            out.set(created.start(), created.end(), created.lkey(), created.rkey(), created.access(), -1);
            return;
        }
        // The reply carries device 0's keys; the MR is in the global cache once it comes, with the other
        // devices' keys in its row of the key table.
        if (!lookupGlobal(address, out))
        {
            throw new MrdException(ErrorCode.EAGAIN, "the MR created for 0x" + Long.toHexString(address) +
                " was gone before its keys on device " + device + " were read (its memory was freed): look again");
        }
    }

    /**
     * An MR not placed on this cache's device has no keys there ({@link Access#onDevices}): its entry is refused
     * rather than cached with the zeros the daemon writes for it.
     *
     * @return {@code found}.
     * @throws MrdException EINVAL naming the address, the device and the placement.
     */
    private boolean requirePlaced(final long address, final boolean found, final int access)
    {
        if (found && !Access.isOn(access, device))
        {
            throw new MrdException(ErrorCode.EINVAL, "0x" + Long.toHexString(address) + " is in memory placed " +
                "on other devices than this cache's device " + device + " (access " + Access.describe(access) +
                "): look it up in the cache of one of those (newCache(device)), or allocate it placed on device " +
                device + " too");
        }
        return found;
    }
}
