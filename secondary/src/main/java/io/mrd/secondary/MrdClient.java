package io.mrd.secondary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrEntry;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A secondary's connection to the primary: the control file mapped read-only, the daemon's memory reserved
 * at the daemon's addresses, a Unix socket for the few requests that need the primary, and the per-queue
 * caches ({@link #newCache()}) that answer lkey lookups without it.
 * <pre>{@code
 * try (MrdClient client = MrdClient.attach(Path.of("/tmp/mrd")))
 * {
 *     MemorySegment buffer = client.allocate(64 << 20);   // mapped at the same address as in the daemon
 *     MrCache cache = client.newCache();                 // one per queue / thread
 *     int lkey = cache.lkey(buffer.address(), 4096);
 * }
 * }</pre>
 * <b>Liveness.</b> A watchdog thread reads the daemon's heartbeat and epoch every
 * {@link Context#watchdogIntervalMs()} and checks that the control file was not replaced; the reader thread
 * sees the connection close the moment the daemon dies. Either marks the client dead, which fails every
 * request in flight and makes every later call, {@link MrCache#lkey} included, throw
 * {@link DaemonDeadException}: an lkey of a dead or restarted daemon is never returned. The slow path of a
 * lookup checks the heartbeat again itself before it sends {@code CREATE_MR}.
 * <p>
 * <b>Requests</b> are pipelined: each carries a correlation id, one reader thread completes the caller waiting
 * for it, a lock serialises frame writes, and each waits at most {@link Context#requestTimeoutMs()}.
 * <p>
 * <b>One client per daemon per process</b>: the client reserves the daemon's address ranges, so a second
 * client of the same daemon in one process fails with EEXIST. In the daemon's own process (tests) the
 * client reserves and maps nothing: the daemon's mappings are already there.
 * <p>
 * Thread-safe, except that {@link #close()} must come after every thread stopped using the client's caches
 * and memory: it unmaps them.
 */
@SuppressWarnings("restricted")
public final class MrdClient implements AutoCloseable
{
    /** The daemon's socket file inside the run directory. */
    public static final String SOCKET_FILE = "mrd.sock";

    private static final Logger LOG = LoggerFactory.getLogger(MrdClient.class);
    private static final int READ_BUFFER_LENGTH = 64 * 1024;
    private static final long CONNECT_RETRY_NS = TimeUnit.MILLISECONDS.toNanos(20);

    private final Context context;
    private final Path dir;
    private final ControlFile controlFile;
    private final ControlHeader header;
    private final long epoch;
    private final long daemonPid;
    private final Object controlFileKey;
    private final boolean inProcess;
    private final List<MemorySegment> reservations;
    private final long externalBase;
    private final long externalLength;
    private final int[] listFds;
    private final UnixSocket socket;

    private final ReentrantLock writeLock = new ReentrantLock();
    private final MemorySegment sendSegment = Arena.ofAuto().allocate(FrameDescriptor.MAX_FRAME_LENGTH, 64);
    private final UnsafeBuffer sendBuffer = new UnsafeBuffer(sendSegment.address(), FrameDescriptor.MAX_FRAME_LENGTH);
    private final ConcurrentHashMap<Long, CompletableFuture<Message.Reply>> pending = new ConcurrentHashMap<>();
    private final AtomicLong correlationIds = new AtomicLong();
    private final ConcurrentHashMap<Long, Long> allocations = new ConcurrentHashMap<>();
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Object stateLock = new Object();

    private final Thread reader;
    private Thread watchdog;
    private int clientId;
    private volatile String lastDaemonError;

    /** Null while usable; else why not, thrown (as a fresh copy) by every call. */
    private volatile MrdException broken;

    private MrdClient(
        final Context context,
        final ControlFile controlFile,
        final Object controlFileKey,
        final boolean inProcess,
        final List<MemorySegment> reservations,
        final UnixSocket socket)
    {
        this.context = context;
        this.dir = context.dir();
        this.controlFile = controlFile;
        this.header = controlFile.header();
        this.epoch = header.epoch();
        this.daemonPid = header.pid();
        this.controlFileKey = controlFileKey;
        this.inProcess = inProcess;
        this.reservations = reservations;
        this.externalBase = header.externalBase();
        this.externalLength = header.externalLength();
        this.listFds = new int[controlFile.layout().memsegListCount()];
        Arrays.fill(listFds, -1);
        this.socket = socket;
        this.reader = new Thread(this::readLoop, "mrd-client-reader");
        this.reader.setDaemon(true);
        this.reader.start();
    }

    /**
     * Attaches to the daemon in {@code dir} with default settings.
     *
     * @see #attach(Context)
     */
    public static MrdClient attach(final Path dir)
    {
        return attach(new Context().dir(dir));
    }

    /**
     * Attaches: maps the control file read-only, checks that the daemon is alive, reserves its memory's
     * address ranges and its external window in this process, connects, and says HELLO.
     *
     * @throws MrdException ECONNREFUSED when no daemon runs in the directory; EEXIST naming the range when
     *                      one of the daemon's ranges is already mapped in this process; EPROTO on another
     *                      layout version; ESTALE when the daemon restarted during the attach; the daemon's
     *                      status when it refused the HELLO.
     */
    public static MrdClient attach(final Context context)
    {
        context.conclude();
        final Path dir = context.dir();
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(context.attachTimeoutMs());
        final ControlFile controlFile = openControlFile(context, deadline);
        final List<MemorySegment> reservations = new ArrayList<>();
        UnixSocket socket = null;
        MrdClient client = null;
        try
        {
            final Object key = fileKey(controlFile.path());
            final ControlHeader header = controlFile.header();
            requireAlive(context, controlFile);
            final boolean inProcess = header.pid() == ProcessHandle.current().pid();
            if (!inProcess)
            {
                reserve(controlFile, reservations);
            }
            socket = connect(context, controlFile, deadline);
            client = new MrdClient(context, controlFile, key, inProcess, reservations, socket);
            client.hello();
            client.startWatchdog();
            LOG.debug("attached to daemon pid {} in {} as client {} ({})", client.daemonPid, dir, client.clientId,
                context);
            return client;
        }
        catch (final RuntimeException ex)
        {
            if (null != client)
            {
                client.close();
            }
            else
            {
                if (null != socket)
                {
                    socket.close();
                }
                for (final MemorySegment reservation : reservations)
                {
                    Posix.munmapQuietly(reservation.address(), reservation.byteSize());
                }
                controlFile.close();
            }
            throw ex;
        }
    }

    private static ControlFile openControlFile(final Context context, final long deadline)
    {
        final Path path = context.dir().resolve(ControlFile.FILE_NAME);
        while (true)
        {
            try
            {
                return ControlFile.openReadOnly(path);
            }
            catch (final MrdException ex)
            {
                if (ex.code() == ErrorCode.ENOENT)
                {
                    throw new MrdException(ErrorCode.ECONNREFUSED, "no daemon running in " + context.dir() +
                        " (no control file " + path + "): start one with 'mrd start --dir " + context.dir() + "'");
                }
                if (ex.code() != ErrorCode.EAGAIN || System.nanoTime() - deadline > 0)
                {
                    throw ex;
                }
            }
            LockSupport.parkNanos(CONNECT_RETRY_NS);
        }
    }

    private static void requireAlive(final Context context, final ControlFile controlFile)
    {
        final String death = Heartbeat.deathReason(controlFile.header(), System.currentTimeMillis());
        if (null != death)
        {
            throw new MrdException(ErrorCode.ECONNREFUSED, "no daemon running in " + context.dir() + " (pid " +
                controlFile.header().pid() + " " + death + "): start one with 'mrd start --dir " +
                context.dir() + "'");
        }
    }

    /**
     * Reserves every memory-segment list's range and the external window, so that nothing else in this
     * process can be mapped where the daemon's memory will appear.
     */
    private static void reserve(final ControlFile controlFile, final List<MemorySegment> reservations)
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
    }

    private static UnixSocket connect(
        final Context context, final ControlFile controlFile, final long deadline)
    {
        final Path path = context.dir().resolve(SOCKET_FILE);
        while (true)
        {
            try
            {
                return UnixSocket.connect(path);
            }
            catch (final MrdException ex)
            {
                final boolean nobodyListens = ex.code() == ErrorCode.ECONNREFUSED || ex.code() == ErrorCode.ENOENT;
                if (!nobodyListens)
                {
                    throw ex;
                }
                // A daemon publishes its control file before its socket listens: keep trying while it is alive.
                requireAlive(context, controlFile);
                if (System.nanoTime() - deadline > 0)
                {
                    throw new MrdException(ErrorCode.ECONNREFUSED, "the daemon (pid " + controlFile.header().pid() +
                        ") in " + context.dir() + " does not accept connections on " + path + " (" + ex.oneLine() +
                        "): check 'mrd status --dir " + context.dir() + "' and its log " +
                        context.dir().resolve("mrd.log"));
                }
            }
            LockSupport.parkNanos(CONNECT_RETRY_NS);
        }
    }

    private void hello()
    {
        final Message.Reply reply = call(new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, context.name()));
        if (!(reply instanceof Message.Welcome welcome))
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered HELLO with " + reply);
        }
        if (welcome.layoutVersion() != HeaderDescriptor.LAYOUT_VERSION)
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon in " + dir + " uses control-file layout version " +
                welcome.layoutVersion() + " but this client reads version " + HeaderDescriptor.LAYOUT_VERSION +
                ": use the mrd build that matches the daemon");
        }
        if (welcome.epoch() != epoch)
        {
            throw new MrdException(ErrorCode.ESTALE, "the daemon in " + dir + " restarted while this client " +
                "attached (control file epoch " + Sizes.hex(epoch) + ", daemon epoch " + Sizes.hex(welcome.epoch()) +
                "): attach again");
        }
        clientId = welcome.clientId();
    }

    private void startWatchdog()
    {
        watchdog = new Thread(this::watchdogLoop, "mrd-client-watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    // ---------------------------------------------------------------------------------------------------------
    // Memory

    /**
     * Allocates memory from the daemon and maps it here at the daemon's address ({@code ALLOC}).
     *
     * @param length bytes wanted; the daemon rounds up to whole segments (2 MiB).
     * @return the memory, {@code byteSize()} the length the daemon allocated. Pass it to {@link #free}.
     * @throws MrdException the daemon's status (ENOMEM when it has no room, ...).
     */
    public MemorySegment allocate(final long length)
    {
        if (length <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "allocation length " + length + " must be positive");
        }
        final Message.Allocated reply = (Message.Allocated)call(new Message.Alloc(length, 0));
        final long address = reply.address();
        final long allocated = reply.length();
        try
        {
            final int list = listOf(address, allocated);
            if (!inProcess)
            {
                Posix.mapFixed(address, allocated, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED,
                    listFd(list), address - listBase(list));
            }
        }
        catch (final RuntimeException ex)
        {
            freeQuietly(address, allocated);
            throw ex;
        }
        allocations.put(address, allocated);
        return MemorySegment.ofAddress(address).reinterpret(allocated);
    }

    /**
     * Unmaps memory from {@link #allocate} here, then gives it back ({@code FREE}). The daemon removes it
     * from every MR and bumps {@code devGen}, so every process's caches forget its lkeys.
     *
     * @throws MrdException EINVAL when the segment is not one {@link #allocate} returned to this client, else
     *                      the daemon's status.
     */
    public void free(final MemorySegment segment)
    {
        final long address = segment.address();
        final Long length = allocations.get(address);
        if (null == length || length != segment.byteSize())
        {
            throw new MrdException(ErrorCode.EINVAL, "segment [" + Sizes.hex(address) + ", " +
                Sizes.hex(address + segment.byteSize()) + ") was not returned by allocate() of this client" +
                (null == length ? "" : " (that allocation is " + Sizes.format(length) + ")"));
        }
        // Fix (found by the reliability soak, cli/.../reliability/SoakTest): claim the allocation and unmap it here
        // BEFORE the daemon frees it. Once FREE is done, the daemon may hand the same address to another thread
        // of this client, which maps it and records it; removing the record or unmapping after FREE (as this
        // method did) then dropped that thread's record (its free failed EINVAL) or its mapping (SIGSEGV).
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
            call(new Message.Free(address, length));
        }
        catch (final MrdException ex)
        {
            // The daemon answered but did not free it: still this client's, so map it back (nobody else can have
            // been given the address). Dead daemon or timeout: the memory is to be considered gone.
            if (!isBroken() && ex.code() != ErrorCode.ETIMEDOUT)
            {
                if (!inProcess)
                {
                    final int list = listOf(address, length);
                    Posix.mapFixed(address, length, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED,
                        listFd(list), address - listBase(list));
                }
                allocations.put(address, length);
            }
            throw ex;
        }
    }

    /**
     * Registers memory behind {@code fd} (a memfd or a hugetlbfs file of at least {@code length} bytes): the
     * daemon receives the descriptor ({@code SCM_RIGHTS}), maps it in its external window and registers one
     * MR; this process maps it at the same address. The caller keeps its descriptor and may close it.
     *
     * @throws MrdException the daemon's status (ENOMEM when the window is full, ...).
     */
    public ExternalMemory registerExternal(final int fd, final long length)
    {
        if (length <= 0)
        {
            throw new MrdException(ErrorCode.EINVAL, "external memory length " + length + " must be positive");
        }
        if (!UnixSocket.isOpen(fd))
        {
            // Checked first: once the daemon has asked for the descriptor, a failed send breaks the connection.
            throw new MrdException(ErrorCode.EBADF, "fd " + fd + " is not an open file descriptor: pass a memfd or " +
                "hugetlbfs file of at least " + Sizes.format(length));
        }
        final Message.RegExternal request = new Message.RegExternal(length);
        final Message.ExternalRegistered reply;
        // Nothing else may be written between the request and its descriptor, nor until the final reply: the
        // daemon reads the next bytes of the connection as the descriptor's message.
        writeLock.lock();
        try
        {
            final long id = correlationIds.incrementAndGet();
            final CompletableFuture<Message.Reply> sendFd = expect(id);
            send(id, FrameDescriptor.FLAG_FD, request);
            final Message.Reply first = await(id, sendFd, request, true);
            if (first.type() != MessageType.SEND_FD)
            {
                throw first.status() != ErrorCode.OK ? new MrdException(first.status(), first.message()) :
                    new MrdException(ErrorCode.EPROTO, "the daemon answered REG_EXTERNAL with " + first +
                    " before asking for the descriptor");
            }
            checkStatus(first);
            final CompletableFuture<Message.Reply> done = expect(id);
            try
            {
                socket.sendFd(fd, (byte)0);
            }
            catch (final MrdException ex)
            {
                pending.remove(id);
                throw connectionFailed("sending fd " + fd + " for REG_EXTERNAL", ex);
            }
            final Message.Reply last = await(id, done, request, true);
            checkStatus(last);
            if (!(last instanceof Message.ExternalRegistered registered))
            {
                throw new MrdException(ErrorCode.EPROTO, "the daemon answered REG_EXTERNAL with " + last);
            }
            reply = registered;
        }
        finally
        {
            writeLock.unlock();
        }

        final long address = reply.address();
        final long mapped = reply.length();
        try
        {
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
                call(new Message.DeregExternal(address));
            }
            catch (final RuntimeException suppressed)
            {
                ex.addSuppressed(suppressed);
            }
            throw ex;
        }
        return new ExternalMemory(address, mapped, reply.lkey(), MemorySegment.ofAddress(address).reinterpret(mapped));
    }

    /**
     * Creates a memfd of {@code length} bytes and registers it ({@link #registerExternal(int, long)}); the
     * memory lives until {@link #deregisterExternal}.
     */
    public ExternalMemory registerExternal(final long length)
    {
        final int fd = Posix.memfdCreate("mrd-external", Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING);
        try
        {
            Posix.ftruncate(fd, length);
            return registerExternal(fd, length);
        }
        finally
        {
            // The mappings (here and in the daemon) keep the memory; the descriptor is no longer needed.
            Posix.close(fd);
        }
    }

    /**
     * Deregisters external memory ({@code DEREG_EXTERNAL}, a memory free event) and unmaps it here.
     */
    public void deregisterExternal(final ExternalMemory memory)
    {
        // Fix (found by the reliability soak): unmapped here BEFORE the daemon deregisters. Once it has, it may
        // give the same window address to another thread's REG_EXTERNAL, which maps its memfd there; an unmap
        // after DEREG_EXTERNAL (as this method did) removed that thread's mapping instead. If the daemon
        // refuses, the memory is no longer mapped here either way.
        if (!inProcess)
        {
            Posix.unmapToReservation(memory.address(), memory.length());
        }
        call(new Message.DeregExternal(memory.address()));
    }

    private int listOf(final long address, final long length)
    {
        final ControlFileLayout layout = controlFile.layout();
        final MemsegListRecord list = new MemsegListRecord();
        final long segmentSize = header.segmentSize();
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
                ensureUsable();
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
            call(new Message.Free(address, length));
        }
        catch (final RuntimeException ex)
        {
            LOG.warn("could not give [{}, {}) back to the daemon: {}", Sizes.hex(address), Sizes.hex(address + length),
                ex.toString());
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Caches

    /**
     * @return a new per-queue cache; use each from one thread at a time.
     */
    public MrCache newCache()
    {
        ensureUsable();
        return new MrCache(new ClientSource(this, new GlobalCacheReader(controlFile)));
    }

    /**
     * Asks the primary for the MR around {@code address} ({@code CREATE_MR}).
     */
    void createMr(final long address, final long length, final MrEntry out)
    {
        final Message.Reply reply = call(new Message.CreateMr(address, length));
        if (!(reply instanceof Message.MrCreated created))
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered CREATE_MR with " + reply);
        }
        out.set(created.start(), created.end(), created.lkey(), -1);
    }

    // ---------------------------------------------------------------------------------------------------------
    // Liveness

    /**
     * One volatile read: throws once the daemon is known dead, stopped or restarted, or the client closed.
     */
    void ensureUsable()
    {
        final MrdException reason = broken;
        if (null != reason)
        {
            throw copy(reason);
        }
    }

    /**
     * Reads the heartbeat and epoch now; marks the client dead and throws when they say so.
     */
    void checkLiveness()
    {
        ensureUsable();
        final String death = deathReason(false);
        if (null != death)
        {
            markDead(death);
            ensureUsable();
        }
    }

    /**
     * @return why the daemon is to be considered gone, or null when it looks alive.
     */
    private String deathReason(final boolean checkFile)
    {
        final String death = Heartbeat.deathReason(header, System.currentTimeMillis());
        if (null != death)
        {
            return death;
        }
        final long current = header.epoch();
        if (current != epoch)
        {
            return "restarted (epoch changed from " + Sizes.hex(epoch) + " to " + Sizes.hex(current) + ")";
        }
        if (checkFile && !inProcess)
        {
            final Object key = fileKey(controlFile.path());
            if (!Objects.equals(key, controlFileKey))
            {
                return null == key ? "stopped (" + controlFile.path() + " was removed)" :
                    "restarted (epoch changed: " + controlFile.path() + " was replaced by a new daemon's)";
            }
        }
        return null;
    }

    private void markDead(final String reason)
    {
        final DaemonDeadException dead;
        synchronized (stateLock)
        {
            if (null != broken)
            {
                return;
            }
            dead = new DaemonDeadException("daemon pid " + daemonPid + " in " + dir + " " + reason +
                (null == lastDaemonError ? "" : "; its last error: " + lastDaemonError) +
                ": re-attach (start it again with 'mrd start --dir " + dir + "' if it is not running)");
            broken = dead;
        }
        LOG.warn("{}", dead.getMessage());
        failPending(dead);
    }

    private void failPending(final MrdException reason)
    {
        for (final Long id : pending.keySet())
        {
            final CompletableFuture<Message.Reply> future = pending.remove(id);
            if (null != future)
            {
                future.completeExceptionally(reason);
            }
        }
    }

    private void watchdogLoop()
    {
        final long intervalNs = TimeUnit.MILLISECONDS.toNanos(context.watchdogIntervalMs());
        while (!closed.get() && null == broken)
        {
            LockSupport.parkNanos(this, intervalNs);
            if (closed.get())
            {
                return;
            }
            final String death = deathReason(true);
            if (null != death)
            {
                markDead(death);
            }
        }
    }

    private static MrdException copy(final MrdException reason)
    {
        // A fresh exception per throw, so that the stack trace is the caller's.
        return reason instanceof DaemonDeadException ? new DaemonDeadException(reason.getMessage()) :
            new MrdException(reason.code(), reason.getMessage());
    }

    private static Object fileKey(final Path path)
    {
        try
        {
            return Files.readAttributes(path, BasicFileAttributes.class).fileKey();
        }
        catch (final IOException ex)
        {
            return null;
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Requests

    /**
     * Sends a request and waits for its reply.
     *
     * @return the reply, its status OK.
     * @throws MrdException the reply's status and the daemon's message; ETIMEDOUT; DaemonDeadException.
     */
    Message.Reply call(final Message.Request request)
    {
        final long id = correlationIds.incrementAndGet();
        final CompletableFuture<Message.Reply> future = expect(id);
        writeLock.lock();
        try
        {
            send(id, 0, request);
        }
        finally
        {
            writeLock.unlock();
        }
        final Message.Reply reply = await(id, future, request, false);
        checkStatus(reply);
        if (reply.type() != request.type())
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon answered " + describe(request) + " with " + reply);
        }
        return reply;
    }

    private CompletableFuture<Message.Reply> expect(final long id)
    {
        ensureUsable();
        final CompletableFuture<Message.Reply> future = new CompletableFuture<>();
        pending.put(id, future);
        // markDead publishes the reason before it fails what is pending: either it saw this entry or we see it.
        final MrdException reason = broken;
        if (null != reason)
        {
            pending.remove(id);
            throw copy(reason);
        }
        return future;
    }

    /** Called with the write lock held. */
    private void send(final long id, final int flags, final Message.Request request)
    {
        final int length;
        try
        {
            length = FrameCodec.encode(sendBuffer, 0, id, flags, request);
        }
        catch (final MrdException ex)
        {
            pending.remove(id);
            throw ex;
        }
        try
        {
            socket.writeFully(sendSegment, 0, length);
        }
        catch (final MrdException ex)
        {
            pending.remove(id);
            throw connectionFailed("sending " + describe(request), ex);
        }
    }

    private Message.Reply await(
        final long id,
        final CompletableFuture<Message.Reply> future,
        final Message.Request request,
        final boolean midExchange)
    {
        try
        {
            return future.get(context.requestTimeoutMs(), TimeUnit.MILLISECONDS);
        }
        catch (final TimeoutException ex)
        {
            pending.remove(id);
            final MrdException timeout = new MrdException(ErrorCode.ETIMEDOUT, describe(request) +
                " got no reply within " + context.requestTimeoutMs() + " ms from daemon pid " + daemonPid + " in " +
                dir + ": it may be overloaded or stuck; see " + dir.resolve("mrd.log") +
                " or raise the request timeout (MRD_REQUEST_TIMEOUT_MS)");
            if (midExchange)
            {
                // The daemon may still be waiting for the descriptor: the stream is in an unknown state.
                connectionFailed(describe(request) + " timed out", timeout);
            }
            throw timeout;
        }
        catch (final ExecutionException ex)
        {
            throw ex.getCause() instanceof MrdException mrd ? copy(mrd) :
                new MrdException(ErrorCode.EIO, describe(request) + " failed: " + ex.getCause(), ex.getCause());
        }
        catch (final InterruptedException ex)
        {
            pending.remove(id);
            Thread.currentThread().interrupt();
            throw new MrdException(ErrorCode.EIO, "interrupted while waiting for the reply to " + describe(request));
        }
    }

    private static void checkStatus(final Message.Reply reply)
    {
        if (reply.status() != ErrorCode.OK)
        {
            throw new MrdException(reply.status(), reply.message());
        }
    }

    /**
     * The connection cannot be used any more (a write failed, or an fd exchange was left half done): mark
     * the client broken and shut the socket so the reader thread and the daemon both see it end.
     */
    private MrdException connectionFailed(final String what, final MrdException cause)
    {
        if (!closed.get())
        {
            final String death = deathReason(false);
            markDead(null != death ? death : "is unreachable: " + what + " failed (" + cause.oneLine() + ")");
            socket.shutdown();
        }
        final MrdException reason = broken;
        return null != reason ? copy(reason) : cause;
    }

    private static String describe(final Message.Request request)
    {
        return switch (request)
        {
            case Message.Hello m -> "HELLO(version " + m.version() + ", " + m.name() + ")";
            case Message.CreateMr m -> "CREATE_MR(" + Sizes.hex(m.address()) + ", " + m.length() + ")";
            case Message.Alloc m -> "ALLOC(" + Sizes.format(m.length()) + ")";
            case Message.Free m -> "FREE(" + Sizes.hex(m.address()) + ", " + Sizes.format(m.length()) + ")";
            case Message.RegExternal m -> "REG_EXTERNAL(" + Sizes.format(m.length()) + ")";
            case Message.DeregExternal m -> "DEREG_EXTERNAL(" + Sizes.hex(m.address()) + ")";
            case Message.Stop m -> "STOP";
        };
    }

    private void readLoop()
    {
        final MemorySegment segment = Arena.ofAuto().allocate(READ_BUFFER_LENGTH, 64);
        final UnsafeBuffer buffer = new UnsafeBuffer(segment.address(), READ_BUFFER_LENGTH);
        int filled = 0;
        String end;
        try
        {
            while (true)
            {
                final int n = socket.read(segment, filled, READ_BUFFER_LENGTH - filled);
                if (0 == n)
                {
                    end = "closed the connection";
                    break;
                }
                filled += n;
                int at = 0;
                while (true)
                {
                    final int length = FrameCodec.frameLength(buffer, at, filled - at);
                    if (length < 0 || filled - at < length)
                    {
                        break;
                    }
                    dispatch(FrameCodec.decodeReply(buffer, at, length));
                    at += length;
                }
                if (at > 0)
                {
                    buffer.putBytes(0, buffer, at, filled - at);
                    filled -= at;
                }
            }
        }
        catch (final MrdException ex)
        {
            end = switch (ex.code())
            {
                case ECONNRESET -> "died (its connection was reset: the process is gone)";
                case EPROTO -> "sent a reply this client cannot read (" + ex.oneLine() + ")";
                default -> "broke the connection (" + ex.oneLine() + ")";
            };
        }
        catch (final RuntimeException ex)
        {
            end = "broke the connection (" + ex + ")";
        }
        if (!closed.get())
        {
            final String death = deathReason(true);
            markDead(null != death ? death : end);
        }
    }

    private void dispatch(final Frame frame)
    {
        final Message.Reply reply = (Message.Reply)frame.message();
        if (reply.type() == MessageType.ERROR && reply.status() != ErrorCode.OK)
        {
            lastDaemonError = reply.status().name() + ": " + reply.message();
        }
        final CompletableFuture<Message.Reply> future = pending.remove(frame.correlationId());
        if (null != future)
        {
            future.complete(reply);
        }
        else
        {
            LOG.debug("reply to correlation id {} that nobody waits for (timed out?): {}", frame.correlationId(), reply);
        }
    }

    // ---------------------------------------------------------------------------------------------------------

    /**
     * Detaches: stops the watchdog and the reader, closes the socket (the daemon then frees everything this
     * client allocated or registered), unmaps the reservations and the control file. Idempotent. Call it only
     * after every thread stopped using this client's caches and memory.
     */
    public void close()
    {
        if (!closed.compareAndSet(false, true))
        {
            return;
        }
        final MrdException closedReason = new MrdException(ErrorCode.EBADF, "this client of the daemon in " + dir +
            " is closed: attach again");
        synchronized (stateLock)
        {
            if (null == broken)
            {
                broken = closedReason;
            }
        }
        if (null != watchdog)
        {
            LockSupport.unpark(watchdog);
            join(watchdog);
        }
        socket.shutdown();
        join(reader);
        socket.close();
        failPending(closedReason);
        if (!inProcess)
        {
            for (final MemorySegment reservation : reservations)
            {
                Posix.munmapQuietly(reservation.address(), reservation.byteSize());
            }
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
        controlFile.close();
    }

    private static void join(final Thread thread)
    {
        boolean interrupted = false;
        while (thread.isAlive())
        {
            try
            {
                thread.join();
            }
            catch (final InterruptedException ex)
            {
                interrupted = true;
            }
        }
        if (interrupted)
        {
            Thread.currentThread().interrupt();
        }
    }

    /** @return the run directory. */
    public Path dir()
    {
        return dir;
    }

    /** @return the settings, concluded. */
    public Context context()
    {
        return context;
    }

    /** @return the control file, mapped read-only (valid until {@link #close()}). */
    public ControlFile controlFile()
    {
        return controlFile;
    }

    /** @return the id the daemon gave this client in its WELCOME. */
    public int clientId()
    {
        return clientId;
    }

    /** @return the epoch of the daemon this client attached to. */
    public long epoch()
    {
        return epoch;
    }

    /** @return the daemon's pid. */
    public long daemonPid()
    {
        return daemonPid;
    }

    /** @return true once the daemon is known dead, stopped or restarted, or the client is closed. */
    public boolean isBroken()
    {
        return null != broken;
    }

    public String toString()
    {
        return "MrdClient[client " + clientId + " of daemon pid " + daemonPid + " in " + dir + ", epoch " +
            Sizes.hex(epoch) + (null == broken ? "" : ", " + broken.oneLine()) + "]";
    }

    /**
     * The {@link MrSource} of one cache: the client's liveness and requests, and a global-cache reader of
     * its own (readers are single-threaded).
     */
    private static final class ClientSource implements MrSource
    {
        private final MrdClient client;
        private final ControlHeader header;
        private final GlobalCacheReader reader;

        ClientSource(final MrdClient client, final GlobalCacheReader reader)
        {
            this.client = client;
            this.header = client.header;
            this.reader = reader;
        }

        public void ensureAlive()
        {
            client.ensureUsable();
        }

        public long devGen()
        {
            return header.devGen();
        }

        public void checkLiveness()
        {
            client.checkLiveness();
        }

        public boolean lookupGlobal(final long address, final MrEntry out)
        {
            try
            {
                return reader.lookup(address, out);
            }
            catch (final MrdException ex)
            {
                // EBUSY: the primary held the seqlock throughout; if it died inside it, say that instead.
                client.checkLiveness();
                throw ex;
            }
        }

        public void createMr(final long address, final long length, final MrEntry out)
        {
            client.createMr(address, length, out);
        }
    }

    /**
     * Every setting of a client with its default, filled from {@code MRD_*} environment variables for what
     * is not set, checked by {@link #conclude()}.
     * <ul>
     *   <li>{@code dir}: {@code MRD_DIR}, else {@code $XDG_RUNTIME_DIR/mrd}, else {@code /dev/shm/mrd-<uid>};</li>
     *   <li>{@code name} (in the daemon's client table): {@code MRD_CLIENT_NAME}, else {@code pid-<pid>};</li>
     *   <li>{@code requestTimeoutMs}: {@code MRD_REQUEST_TIMEOUT_MS}, else 5000;</li>
     *   <li>{@code attachTimeoutMs} (waiting for a starting daemon): {@code MRD_ATTACH_TIMEOUT_MS}, else 5000;</li>
     *   <li>{@code watchdogIntervalMs}: 100.</li>
     * </ul>
     */
    public static final class Context
    {
        public static final long DEFAULT_REQUEST_TIMEOUT_MS = 5_000;
        public static final long DEFAULT_ATTACH_TIMEOUT_MS = 5_000;
        public static final long DEFAULT_WATCHDOG_INTERVAL_MS = 100;

        private Path dir;
        private String name;
        private long requestTimeoutMs;
        private long attachTimeoutMs;
        private long watchdogIntervalMs;
        private Map<String, String> environment;
        private boolean concluded;

        public Context dir(final Path dir)
        {
            this.dir = dir;
            return this;
        }

        public Path dir()
        {
            return dir;
        }

        /** @param name this client's name in the daemon's client table (at most 32 bytes are kept). */
        public Context name(final String name)
        {
            this.name = name;
            return this;
        }

        public String name()
        {
            return name;
        }

        public Context requestTimeoutMs(final long value)
        {
            this.requestTimeoutMs = value;
            return this;
        }

        public long requestTimeoutMs()
        {
            return requestTimeoutMs;
        }

        public Context attachTimeoutMs(final long value)
        {
            this.attachTimeoutMs = value;
            return this;
        }

        public long attachTimeoutMs()
        {
            return attachTimeoutMs;
        }

        public Context watchdogIntervalMs(final long value)
        {
            this.watchdogIntervalMs = value;
            return this;
        }

        public long watchdogIntervalMs()
        {
            return watchdogIntervalMs;
        }

        /** @param environment where {@code MRD_*} variables are read from (default: the process's). */
        public Context environment(final Map<String, String> environment)
        {
            this.environment = environment;
            return this;
        }

        /**
         * Fills what is unset from the environment and the defaults, and checks every value.
         *
         * @throws MrdException EINVAL naming the first wrong value.
         */
        public Context conclude()
        {
            if (concluded)
            {
                return this;
            }
            final Map<String, String> env = null == environment ? System.getenv() : environment;
            dir = RunDirectoryPath.resolve(dir, env);
            if (null == name || name.isBlank())
            {
                final String fromEnv = env.get("MRD_CLIENT_NAME");
                name = null != fromEnv && !fromEnv.isBlank() ? fromEnv : "pid-" + ProcessHandle.current().pid();
            }
            requestTimeoutMs = orEnv(requestTimeoutMs, env, "MRD_REQUEST_TIMEOUT_MS", DEFAULT_REQUEST_TIMEOUT_MS);
            attachTimeoutMs = orEnv(attachTimeoutMs, env, "MRD_ATTACH_TIMEOUT_MS", DEFAULT_ATTACH_TIMEOUT_MS);
            if (watchdogIntervalMs <= 0)
            {
                watchdogIntervalMs = DEFAULT_WATCHDOG_INTERVAL_MS;
            }
            if (requestTimeoutMs <= 0 || attachTimeoutMs <= 0)
            {
                throw new MrdException(ErrorCode.EINVAL, "request timeout " + requestTimeoutMs +
                    " ms and attach timeout " + attachTimeoutMs + " ms must be positive");
            }
            concluded = true;
            return this;
        }

        private static long orEnv(final long value, final Map<String, String> env, final String key, final long fallback)
        {
            if (value > 0)
            {
                return value;
            }
            final String text = env.get(key);
            if (null == text || text.isBlank())
            {
                return fallback;
            }
            try
            {
                return Long.parseLong(text.trim());
            }
            catch (final NumberFormatException ex)
            {
                throw new MrdException(ErrorCode.EINVAL, key + "='" + text + "' is not a number of milliseconds");
            }
        }

        public String toString()
        {
            return "MrdClient.Context{dir=" + dir + ", name=" + name + ", requestTimeoutMs=" + requestTimeoutMs +
                ", attachTimeoutMs=" + attachTimeoutMs +
                ", watchdogIntervalMs=" + watchdogIntervalMs + "}";
        }
    }
}
