package io.mrd.primary.mr;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.DeviceTable;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrChunks;
import io.mrd.layout.MrDescriptor;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrRecord;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.RemoteAccess;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.memory.FreedRange;
import io.mrd.primary.provider.Registration;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The MR table from the daemon's side (the reference's {@code mr_list} and {@code mr_free_list}): which record
 * slots are taken, the provider's registration behind each live record, the high-water mark readers scan to,
 * and the MRs detached by memory free events that wait for the garbage collector.
 * <p>
 * <b>Locking.</b> {@link #take} and {@link #release} have a lock of their own: a create takes its record
 * before the cache lock, as the reference allocates its MR before taking its rwlock, so that lookups never
 * wait for the allocation. Everything else is called with the cache lock ({@link MrShareCache}) held, and the
 * methods that change what readers see (marked so) inside the {@link GlobalCacheWriter#write} section.
 */
final class MrTable
{
    /**
     * Which segments of which list an MR covers, as its record holds them.
     *
     * @param listIndex the memory-segment list, or -1 for external memory.
     * @param msBaseIdx the list's segment that bit 0 stands for.
     * @param msBmpN    bits in the bitmap: segments from the first to the last live one.
     * @param live      the live segments, bit 0 being segment {@code msBaseIdx}.
     */
    record Coverage(int listIndex, int msBaseIdx, int msBmpN, BitSet live)
    {
        /**
         * @return the coverage of an external MR: one chunk, its whole range, in no list.
         */
        static Coverage external()
        {
            final BitSet oneChunk = new BitSet(1);
            oneChunk.set(0);
            return new Coverage(-1, 0, 1, oneChunk);
        }
    }

    private final UnsafeBuffer buffer;
    private final ControlHeader header;
    private final ControlFileLayout layout;
    private final DaemonCounters counters;
    private final EventJournal journal;
    private final MrRecord record = new MrRecord();
    private final DeviceTable devices;
    private final MrChunks chunks;
    private final MrEntry scratch = new MrEntry();

    private final Lock slotLock = new ReentrantLock();
    /** Taken record slots, lowest free first so the table stays dense. Guarded by {@link #slotLock}. */
    private final BitSet usedSlots = new BitSet();
    /** Registration of each live slot (ACTIVE or DETACHED). */
    private final Registration[] registrations;
    /** Slots detached by memory events, waiting for the garbage collector. */
    private List<Integer> detached = new ArrayList<>();
    private int highWater;

    MrTable(final ControlFile controlFile, final DaemonCounters counters, final EventJournal journal)
    {
        this.journal = journal;
        this.buffer = controlFile.buffer();
        this.header = controlFile.header();
        this.layout = controlFile.layout();
        this.counters = counters;
        this.chunks = new MrChunks(controlFile);
        this.devices = new DeviceTable(buffer, layout);
        this.registrations = new Registration[layout.mrCapacity()];
    }

    /**
     * Takes the lowest free record slot.
     *
     * @param address the address the MR is for (for the message).
     * @throws MrdException ENOMEM when every slot is taken, naming {@code --max-mrs}.
     */
    int take(final long address)
    {
        slotLock.lock();
        try
        {
            final int slot = usedSlots.nextClearBit(0);
            if (slot >= layout.mrCapacity())
            {
                throw new MrdException(ErrorCode.ENOMEM, "MR table full: " + layout.mrCapacity() +
                    " MRs (--max-mrs) exist, none left for " + Sizes.hex(address) +
                    ": free memory or start the daemon with a larger --max-mrs");
            }
            usedSlots.set(slot);
            return slot;
        }
        finally
        {
            slotLock.unlock();
        }
    }

    void release(final int slot)
    {
        slotLock.lock();
        try
        {
            usedSlots.clear(slot);
        }
        finally
        {
            slotLock.unlock();
        }
    }

    /**
     * The records a predecessor left, read back (adoption): the recorded registration of every live slot, for
     * the provider to take over; the high-water mark is the file's.
     *
     * @return by slot, the registration each ACTIVE or DETACHED record names (its handle unknown: 0), and
     *         whether it is ACTIVE and in managed memory (an external MR is not adopted: its file is not held).
     */
    List<Recorded> recorded()
    {
        highWater = header.mrHighWater();
        final List<Recorded> result = new ArrayList<>();
        for (int slot = 0; slot < highWater; slot++)
        {
            record.wrap(buffer, layout.mrOffset(slot));
            if (record.state() == MrDescriptor.STATE_FREE)
            {
                continue;
            }
            result.add(new Recorded(slot, new Registration(record.start(), record.end() - record.start(),
                record.lkey(), record.rkey(), 0, record.deviceHandle()), record.access(),
                record.state() == MrDescriptor.STATE_ACTIVE, record.isExternal()));
        }
        return result;
    }

    /**
     * A live record of a predecessor's table.
     *
     * @param active   the record is ACTIVE (else DETACHED, waiting for the collector when the predecessor died).
     * @param external the record is of external memory, whose file no one holds: not kept.
     */
    record Recorded(int slot, Registration registration, int access, boolean active, boolean external)
    {
        boolean keep()
        {
            return active && !external;
        }
    }

    /**
     * Takes a predecessor's slot over with the provider's registration behind it; one not to keep goes to the
     * garbage collector (detached, in a write section, when it was ACTIVE).
     */
    void adopt(final Recorded recorded, final Registration registration)
    {
        slotLock.lock();
        try
        {
            usedSlots.set(recorded.slot());
        }
        finally
        {
            slotLock.unlock();
        }
        registrations[recorded.slot()] = registration;
        if (!recorded.keep())
        {
            if (recorded.active())
            {
                detach(recorded.slot());
            }
            else
            {
                detached.add(recorded.slot());
            }
        }
    }

    /**
     * Write section: an empty table.
     */
    void clear()
    {
        highWater = 0;
        header.mrHighWater(0);
    }

    /**
     * Write section: writes the MR's record and bitmap and makes it ACTIVE, raising the high-water mark
     * readers scan to when the slot is above it.
     *
     * @param access the {@link Access} of the memory it covers, as its owner asked for it.
     */
    void publish(final int slot, final Registration registration, final Coverage coverage, final int flags,
        final int owner, final int access)
    {
        registrations[slot] = registration;
        record.wrap(buffer, layout.mrOffset(slot));
        record.bitmapOffset(layout.mrBitmapOffset(slot)).clear(layout.mrBitmapLength());
        record.bitmapOffset(layout.mrBitmapOffset(slot))
            .lkey(registration.lkey())
            .rkey(registration.rkey())
            .listIndex(coverage.listIndex())
            .start(registration.address())
            .end(registration.address() + registration.length())
            .msBaseIdx(coverage.msBaseIdx())
            .msN(coverage.live().cardinality())
            .msBmpN(coverage.msBmpN())
            .flags(flags)
            .access(access)
            .owner(owner)
            .createdMs(System.currentTimeMillis())
            .deviceHandle(registration.deviceHandle());
        devices.clear(slot);
        // A device the access does not place the range on keeps its entry empty: that is how a reader tells it.
        for (int device = 0; device < registration.deviceCount(); device++)
        {
            final Registration.DeviceMr mr = registration.on(device);
            if (mr.isPlaced())
            {
                devices.keys(slot, device, mr.lkey(), mr.rkey(), mr.deviceHandle());
            }
        }
        for (int n = coverage.live().nextSetBit(0); n >= 0; n = coverage.live().nextSetBit(n + 1))
        {
            record.bit(n, true);
        }
        record.state(MrDescriptor.STATE_ACTIVE);
        if (slot >= highWater)
        {
            highWater = slot + 1;
            header.mrHighWater(highWater);
        }
    }

    /**
     * The memory free event's part in the table (the reference's {@code mlx5_mr_mem_event_free_cb} loop):
     * clears the freed segments' bits in every ACTIVE MR of their list, and detaches the MRs left with none.
     * An MR with remote access is detached as soon as any segment of its registered range is freed, live in it
     * or not ({@link RemoteAccess#isRevokedByFree}); it lies in one allocation, so only its owner's free revokes
     * its rkey, and the rest of the allocation gets a new MR on its next lookup. Write section.
     *
     * @return true when any bit was cleared: the cache must be rebuilt.
     */
    boolean clearSegments(final List<FreedRange> ranges)
    {
        boolean cleared = false;
        for (int slot = 0; slot < highWater; slot++)
        {
            record.wrap(buffer, layout.mrOffset(slot));
            if (record.state() != MrDescriptor.STATE_ACTIVE || record.isExternal())
            {
                continue;
            }
            boolean spanFreed = false;
            for (final FreedRange range : ranges)
            {
                if (record.listIndex() != range.listIndex())
                {
                    continue;
                }
                for (int segment = range.firstSegment(); segment < range.firstSegment() + range.segmentCount();
                    segment++)
                {
                    final int bit = segment - record.msBaseIdx();
                    spanFreed |= bit >= 0 && bit < record.msBmpN();
                    if (bit >= 0 && bit < record.msBmpN() && record.bit(bit))
                    {
                        record.bit(bit, false);
                        record.msN(record.msN() - 1);
                        cleared = true;
                    }
                }
            }
            if (RemoteAccess.isRevokedByFree(record.access(), record.msN(), spanFreed))
            {
                detach(slot);
                cleared = true;
            }
        }
        return cleared;
    }

    /**
     * Write section: the MR is DETACHED (readers skip it) and waits for the garbage collector.
     */
    void detach(final int slot)
    {
        journal.mrDetached(record.wrap(buffer, layout.mrOffset(slot)).owner(), slot, registrations[slot]);
        record.state(MrDescriptor.STATE_DETACHED);
        detached.add(slot);
        counters.add(MrdCounter.MRS_ACTIVE, -1);
    }

    /**
     * Write section: detaches every ACTIVE MR this table has a registration of (shutdown; a successor whose
     * adoption failed part way leaves the records it did not take over as they are, for the fresh start that
     * follows to remove).
     */
    void detachAll()
    {
        for (int slot = 0; slot < highWater; slot++)
        {
            if (record.wrap(buffer, layout.mrOffset(slot)).state() == MrDescriptor.STATE_ACTIVE &&
                null != registrations[slot])
            {
                detach(slot);
            }
        }
    }

    /**
     * @return the detached slots, which the caller now owns; the table's list starts empty again.
     */
    List<Integer> takeDetached()
    {
        if (detached.isEmpty())
        {
            return List.of();
        }
        final List<Integer> taken = detached;
        detached = new ArrayList<>();
        return taken;
    }

    Registration registration(final int slot)
    {
        return registrations[slot];
    }

    /**
     * Drops a collected slot's registration; its record is cleared by {@link #clearRecord}.
     */
    void forget(final int slot)
    {
        registrations[slot] = null;
    }

    /**
     * Write section: the record reads FREE, its bitmap and its keys empty.
     */
    void clearRecord(final int slot)
    {
        record.wrap(buffer, layout.mrOffset(slot));
        record.bitmapOffset(layout.mrBitmapOffset(slot)).clear(layout.mrBitmapLength());
        devices.clear(slot);
    }

    /**
     * @return the slot of the ACTIVE external MR that starts at {@code address}, or -1.
     */
    int findExternal(final long address)
    {
        for (int slot = 0; slot < highWater; slot++)
        {
            record.wrap(buffer, layout.mrOffset(slot));
            if (record.state() == MrDescriptor.STATE_ACTIVE && record.isExternal() && record.start() == address)
            {
                return slot;
            }
        }
        return -1;
    }

    /**
     * @return the client that owns the MR in {@code slot}.
     */
    int owner(final int slot)
    {
        return record.wrap(buffer, layout.mrOffset(slot)).owner();
    }

    /**
     * @return the start addresses of the ACTIVE external MRs owned by {@code owner}.
     */
    List<Long> externalsOwnedBy(final int owner)
    {
        final List<Long> result = new ArrayList<>();
        for (int slot = 0; slot < highWater; slot++)
        {
            record.wrap(buffer, layout.mrOffset(slot));
            if (record.state() == MrDescriptor.STATE_ACTIVE && record.isExternal() && record.owner() == owner)
            {
                result.add(record.start());
            }
        }
        return result;
    }

    /**
     * @return true when a live chunk of an ACTIVE MR overlaps {@code [start, end)}.
     */
    boolean overlapsChunk(final long start, final long end)
    {
        for (int slot = 0; slot < highWater; slot++)
        {
            record.wrap(buffer, layout.mrOffset(slot));
            if (record.state() == MrDescriptor.STATE_ACTIVE && record.start() < end && start < record.end())
            {
                for (int from = 0; from != Integer.MAX_VALUE; )
                {
                    from = chunks.next(slot, from, scratch);
                    if (scratch.end == 0)
                    {
                        break;
                    }
                    if (scratch.start < end && start < scratch.end)
                    {
                        return true;
                    }
                }
            }
        }
        return false;
    }
}
