package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The daemon's memory as this process sees it: every memory-segment list's range and the external window
 * reserved at attach (inaccessible, backed by nothing), the part of them this client was given mapped at the
 * same addresses as in the daemon, and the table of what {@code ALLOC} gave this client.
 * <p>
 * <b>A range is unmapped here before the daemon is told to free it</b> ({@code FREE}, {@code DEREG_EXTERNAL}).
 * Once the daemon has freed it, it may give the same address to another thread of this client, which maps it
 * and records it; a record removed or a range unmapped after the daemon's answer would be that thread's.
 * <p>
 * In the daemon's own process (tests) nothing is reserved or mapped: the daemon's mappings are already there.
 * Thread-safe.
 */
@SuppressWarnings("restricted")
final class AddressSpace
{
    private static final Logger LOG = LoggerFactory.getLogger(AddressSpace.class);

    private final ControlFile controlFile;
    private final boolean inProcess;
    private final List<MemorySegment> reservations;
    private final long externalBase;
    private final long externalLength;
    private final int[] listFds;
    private final DaemonLink connection;
    private final DaemonWatch watch;
    /** Address → length of every live allocation of this client. */
    private final ConcurrentHashMap<Long, Long> allocations = new ConcurrentHashMap<>();

    AddressSpace(
        final ControlFile controlFile,
        final List<MemorySegment> reservations,
        final DaemonLink connection,
        final DaemonWatch watch)
    {
        this.controlFile = controlFile;
        this.inProcess = watch.inProcess();
        this.reservations = reservations;
        this.externalBase = controlFile.header().externalBase();
        this.externalLength = controlFile.header().externalLength();
        this.listFds = new int[controlFile.layout().memsegListCount()];
        Arrays.fill(listFds, -1);
        this.connection = connection;
        this.watch = watch;
    }

    /**
     * Reserves every memory-segment list's range and the external window, so that nothing else in this
     * process can be mapped where the daemon's memory will appear.
     *
     * @return the reservations, for {@link AddressSpace#AddressSpace} (or {@link #release} if attach fails).
     * @throws MrdException EEXIST naming the range when one is mapped already; nothing stays reserved then.
     */
    static List<MemorySegment> reserve(final ControlFile controlFile)
    {
        final List<MemorySegment> reservations = new ArrayList<>();
        try
        {
            final ControlFileLayout layout = controlFile.layout();
            final long segmentSize = controlFile.header().segmentSize();
            final MemsegListRecord list = new MemsegListRecord();
            for (int i = 0; i < layout.memsegListCount(); i++)
            {
                list.wrap(controlFile.buffer(), layout.memsegListOffset(i));
                final long length = (long)list.segmentCount() * segmentSize;
                if (length > 0)
                {
                    reservations.add(Posix.reserve(list.baseVa(), length));
                }
            }
            final long externalLength = controlFile.header().externalLength();
            if (externalLength > 0)
            {
                reservations.add(Posix.reserve(controlFile.header().externalBase(), externalLength));
            }
            return reservations;
        }
        catch (final RuntimeException ex)
        {
            release(reservations);
            throw ex;
        }
    }

    static void release(final List<MemorySegment> reservations)
    {
        for (final MemorySegment reservation : reservations)
        {
            Posix.munmapQuietly(reservation.address(), reservation.byteSize());
        }
    }

    /**
     * {@code ALLOC}, then maps the memory here at the daemon's address.
     *
     * @param access the {@link Access} flags asked for; the daemon adds local write.
     */
    MemorySegment allocate(final long length, final int access)
    {
        return allocate(length, access, false).segment();
    }

    /**
     * {@code ALLOC}, registered in the same request when {@code register}, then maps the memory here.
     *
     * @return the memory and, when registered, its keys (else both 0).
     */
    RegisteredMemory allocate(final long length, final int access, final boolean register)
    {
        if (length <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "allocation length " + length + " must be positive");
        }
        final int granted = Access.granted(access, "ALLOC");
        final Message.Allocated reply =
            (Message.Allocated)connection.call(new Message.Alloc(length, access, register));
        final long address = reply.address();
        final long allocated = reply.length();
        try
        {
            checkAccess("ALLOC", granted, reply.access(), reply.registered() ? reply.rkey() : Access.NO_RKEY);
            if (reply.registered() != register)
            {
                throw new MrdException(ErrorCode.EPROTO, "the daemon answered ALLOC " +
                    (register ? "with registration without keys" : "without registration with keys") +
                    ": it is not a daemon of this protocol");
            }
            mapList(address, allocated);
        }
        catch (final RuntimeException ex)
        {
            freeQuietly(address, allocated);
            throw ex;
        }
        allocations.put(address, allocated);
        return new RegisteredMemory(MemorySegment.ofAddress(address).reinterpret(allocated),
            register ? keysOnEveryDevice(address, reply.lkey(), reply.rkey(), reply.access()) :
                new long[] {KeyPair.pack(0, 0)},
            reply.access(), watch.liveness());
    }

    /**
     * Claims the allocation, unmaps it back to the reservation, then {@code FREE}. When the daemon refuses
     * (answers, but does not free), the memory is still this client's: it is mapped and recorded again. When
     * the daemon is gone or does not answer in time, the memory is to be considered gone. Once the daemon is known
     * lost it throws before it changes anything (the loss rule, {@link DaemonLiveness}): the memory stays mapped
     * until the client's close.
     */
    void free(final MemorySegment segment)
    {
        watch.requireAliveAsLastSeen();
        final long address = segment.address();
        final Long length = allocations.get(address);
        if (null == length || length != segment.byteSize())
        {
            throw new MrdException(ErrorCode.EINVAL, "segment [" + Sizes.hex(address) + ", " +
                Sizes.hex(address + segment.byteSize()) + ") was not returned by allocate() of this client" +
                (null == length ? "" : " (that allocation is " + Sizes.format(length) + ")"));
        }
        if (!allocations.remove(address, length))
        {
            throw new MrdException(ErrorCode.EINVAL, "segment [" + Sizes.hex(address) + ", " +
                Sizes.hex(address + length) + ") is being freed by another thread of this client");
        }
        if (!inProcess)
        {
            Posix.unmapToReservation(address, length);
        }
        try
        {
            connection.call(new Message.Free(address, length));
        }
        catch (final MrdException ex)
        {
            if (!watch.isBroken() && ex.code() != ErrorCode.ETIMEDOUT)
            {
                mapList(address, length);
                allocations.put(address, length);
            }
            throw ex;
        }
    }

    /**
     * {@code REG_EXTERNAL} with {@code fd}, then maps the file here at the address the daemon chose.
     *
     * @param access the {@link Access} flags asked for; the daemon adds local write.
     */
    ExternalMemory registerExternal(final int fd, final long length, final int access)
    {
        final int granted = Access.granted(access, "REG_EXTERNAL");
        if (length <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "external memory length " + length + " must be positive");
        }
        if (!Posix.isOpen(fd))
        {
            // Checked first: once the daemon has asked for the descriptor, a failed send breaks the connection.
            throw new MrdException(ErrorCode.EBADF, "fd " + fd + " is not an open file descriptor: pass a memfd made " +
                "with MFD_ALLOW_SEALING of at least " + Sizes.format(length));
        }
        final Message.Reply last = connection.callWithFd(new Message.RegExternal(length, access), fd);
        if (!(last instanceof Message.ExternalRegistered reply))
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered REG_EXTERNAL with " + last);
        }
        final long address = reply.address();
        final long mapped = reply.length();
        try
        {
            checkAccess("REG_EXTERNAL", granted, reply.access(), Access.isRemote(granted) ? reply.rkey() : 0);
            if (mapped < length || address < externalBase || address - externalBase > externalLength - mapped)
            {
                throw new MrdException(ErrorCode.EPROTO, "the daemon registered external memory at [" +
                    Sizes.hex(address) + ", " + Sizes.hex(address + mapped) + "), outside its window [" +
                    Sizes.hex(externalBase) + ", " + Sizes.hex(externalBase + externalLength) + ") or shorter than " +
                    Sizes.format(length));
            }
            if (!inProcess)
            {
                Posix.mapFixed(address, mapped, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
            }
        }
        catch (final RuntimeException ex)
        {
            try
            {
                connection.call(new Message.DeregExternal(address));
            }
            catch (final RuntimeException suppressed)
            {
                ex.addSuppressed(suppressed);
            }
            throw ex;
        }
        return new ExternalMemory(new RegisteredMemory(MemorySegment.ofAddress(address).reinterpret(mapped),
            keysOnEveryDevice(address, reply.lkey(), reply.rkey(), reply.access()), reply.access(), watch.liveness()));
    }

    /**
     * The keys of the MR at {@code address} on every device: device 0's from the reply, the others' from the
     * global cache, which holds the MR once the reply comes (and for as long as this memory is allocated);
     * {@link KeyPair#NOT_PLACED} on a device the access does not place it on.
     *
     * @throws MrdException EPROTO when the global cache does not hold the MR the reply named.
     */
    private long[] keysOnEveryDevice(final long address, final int lkey, final int rkey, final int access)
    {
        final long[] keys = new long[Devices.count(controlFile)];
        keys[0] = Access.isOn(access, 0) ? KeyPair.pack(lkey, rkey) : KeyPair.NOT_PLACED;
        if (keys.length > 1)
        {
            final GlobalCacheReader reader = new GlobalCacheReader(controlFile);
            final MrEntry entry = new MrEntry();
            for (int device = 1; device < keys.length; device++)
            {
                if (!Access.isOn(access, device))
                {
                    keys[device] = KeyPair.NOT_PLACED;
                    continue;
                }
                if (!reader.lookup(address, entry, device))
                {
                    throw new MrdException(ErrorCode.EPROTO, "the daemon registered 0x" + Long.toHexString(address) +
                        " but its global cache has no MR there to read device " + device + "'s keys from");
                }
                keys[device] = KeyPair.pack(entry.lkey, entry.rkey);
            }
        }
        return keys;
    }

    /**
     * A daemon that grants other access than asked (remote access nobody asked for above all), or an rkey
     * without remote access, is not one this client can trust with its memory.
     *
     * @param rkey the reply's rkey where it must be {@link Access#NO_RKEY}, else 0.
     */
    private static void checkAccess(final String request, final int granted, final int replied, final int rkey)
    {
        if (replied != granted || (!Access.isRemote(granted) && rkey != Access.NO_RKEY))
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered " + request + " for access " +
                Access.describe(granted) + " with access " + Access.describe(replied) +
                (rkey != Access.NO_RKEY ? " and rkey " + Sizes.hex(rkey & 0xFFFF_FFFFL) : "") +
                ": it is not a daemon of this protocol");
        }
    }

    /**
     * Unmaps external memory back to the reservation, then {@code DEREG_EXTERNAL}. If the daemon refuses, the
     * memory is no longer mapped here either way. Once the daemon is known lost it throws before it changes
     * anything, as {@link #free} does.
     */
    void deregisterExternal(final ExternalMemory memory)
    {
        watch.requireAliveAsLastSeen();
        if (!inProcess)
        {
            Posix.unmapToReservation(memory.address(), memory.length());
        }
        connection.call(new Message.DeregExternal(memory.address()));
    }

    /**
     * Unmaps the reservations (and so every mapping inside them) and closes the lists' files. Call it after the
     * connection is closed: the daemon has then freed everything of this client's.
     */
    void close()
    {
        if (!inProcess)
        {
            release(reservations);
        }
        synchronized (listFds)
        {
            for (int i = 0; i < listFds.length; i++)
            {
                if (listFds[i] >= 0)
                {
                    Posix.close(listFds[i]);
                    listFds[i] = -1;
                }
            }
        }
        allocations.clear();
    }

    /** Maps {@code [address, address + length)} of the list holding it from the list's backing file. */
    private void mapList(final long address, final long length)
    {
        final int list = listOf(address, length);
        if (!inProcess)
        {
            Posix.mapFixed(address, length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED,
                listFd(list), address - listBase(list));
        }
    }

    private int listOf(final long address, final long length)
    {
        final ControlFileLayout layout = controlFile.layout();
        final MemsegListRecord list = new MemsegListRecord();
        final long segmentSize = controlFile.header().segmentSize();
        for (int i = 0; i < layout.memsegListCount(); i++)
        {
            list.wrap(controlFile.buffer(), layout.memsegListOffset(i));
            final long base = list.baseVa();
            final long size = (long)list.segmentCount() * segmentSize;
            if (address >= base && length <= size && address - base <= size - length)
            {
                return i;
            }
        }
        throw new MrdException(ErrorCode.EPROTO, "the daemon allocated [" + Sizes.hex(address) + ", " +
            Sizes.hex(address + length) + "), which lies in none of its memory-segment lists");
    }

    private long listBase(final int index)
    {
        return new MemsegListRecord().wrap(controlFile.buffer(), controlFile.layout().memsegListOffset(index)).baseVa();
    }

    private int listFd(final int index)
    {
        synchronized (listFds)
        {
            if (listFds[index] < 0)
            {
                // Not after close: the descriptor would leak.
                watch.requireAliveAsLastSeen();
                final String path = new MemsegListRecord()
                    .wrap(controlFile.buffer(), controlFile.layout().memsegListOffset(index)).backingPath();
                listFds[index] = Posix.open(path, Posix.O_RDWR | Posix.O_CLOEXEC, 0);
            }
            return listFds[index];
        }
    }

    private void freeQuietly(final long address, final long length)
    {
        try
        {
            connection.call(new Message.Free(address, length));
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("could not give [{}, {}) back to the daemon: {}", Sizes.hex(address), Sizes.hex(address + length),
                ex.toString());
        }
    }
}
