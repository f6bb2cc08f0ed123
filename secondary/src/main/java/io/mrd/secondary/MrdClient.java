package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.GlobalCacheReader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.secondary.verbs.Verbs;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;

/**
 * A secondary's attachment to the primary: the control file mapped read-only, the daemon's memory reserved
 * at the daemon's addresses, a Unix socket for the few requests that need the primary, and the per-queue
 * caches ({@link #newCache()}) that answer lkey lookups without it.
 * <pre>{@code
 * try (MrdClient client = MrdClient.attach(Path.of("/tmp/mrd")))
 * {
 *     MemorySegment buffer = client.allocate(64 << 20);   // mapped at the same address as in the daemon
 *     MrCache cache = client.newCache();                 // one per queue / thread
 *     int lkey = cache.lkey(buffer.address(), 4096);
 *
 *     MemorySegment target = client.allocate(2 << 20, Access.REMOTE_WRITE);  // peers may RDMA WRITE here
 *     long keys = cache.keyPair(target.address(), 4096);
 *     int rkey = KeyPair.rkey(keys);                      // what a peer puts in its RDMA WRITE
 * }
 * }</pre>
 * This class orders attach and close and offers the API; the work is done by its parts, as Aeron's client
 * splits it: {@link DaemonConnection} (requests and replies), {@link DaemonWatch} (is the daemon still there),
 * {@link AddressSpace} (reservations and same-address mappings), {@link DaemonMrSource} (what a cache asks).
 * <p>
 * <b>Liveness.</b> A watchdog thread reads the daemon's heartbeat and epoch every
 * {@link ClientContext#watchdogIntervalMs()} and checks that the control file was not replaced; the connection
 * sees itself close the moment the daemon dies (whoever reads it, or its hang-up watch when nobody does).
 * Either marks the client dead, which fails every
 * request in flight and makes every later call, {@link MrCache#lkey} included, throw
 * {@link DaemonDeadException}: an lkey of a dead or restarted daemon is never returned. The slow path of a
 * lookup checks again itself before it sends {@code CREATE_MR}. The rest of the client follows the same rule
 * ({@link DaemonLiveness}: keys of {@link RegisteredMemory}, {@link ExternalMemory} and the pools, the verbs),
 * and every {@code close()} succeeds.
 * <p>
 * <b>One client per daemon per process</b>: the client reserves the daemon's address ranges, so a second
 * client of the same daemon in one process fails with EEXIST. In the daemon's own process (tests) the
 * client reserves and maps nothing: the daemon's mappings are already there.
 * <p>
 * Thread-safe, except that {@link #close()} must come after every thread stopped using the client's caches,
 * memory and {@link #verbs() queues}: it destroys and unmaps them.
 */
public final class MrdClient implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MrdClient.class);
    private static final long CONNECT_RETRY_NS = TimeUnit.MILLISECONDS.toNanos(20);

    private final ClientContext context;
    private final ControlFile controlFile;
    private final DaemonWatch watch;
    private final DaemonLink connection;
    private final AddressSpace space;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final ImportedDevices devices;
    private int clientId;

    private MrdClient(
        final ClientContext context,
        final ControlFile controlFile,
        final DaemonWatch watch,
        final List<MemorySegment> reservations,
        final UnixSocket socket)
    {
        this.context = context;
        this.controlFile = controlFile;
        this.watch = watch;
        this.connection = new DaemonLink(open(socket), watch);
        this.space = new AddressSpace(controlFile, reservations, connection, watch);
        this.devices = new ImportedDevices(context.ibverbsLibrary(), controlFile, watch, connection);
    }

    /**
     * @return a connection to the daemon on {@code socket} that tells the watch of the daemon's errors and of its
     * end.
     */
    private DaemonConnection open(final UnixSocket socket)
    {
        return DaemonConnection.open(socket, watch.daemon(), context.dir(), context.requestTimeoutMs(),
            context.replySpinNs(),
            new DaemonConnection.Listener()
            {
                public void onReply(final Frame frame)
                {
                    final Message.Reply reply = (Message.Reply)frame.message();
                    if (reply.type() == MessageType.ERROR && reply.status() != ErrorCode.OK)
                    {
                        watch.daemonError(reply.status().name() + ": " + reply.message());
                    }
                }

                public MrdException onLost(final String daemon, final String how, final MrdException cause)
                {
                    return watch.lost(how);
                }
            });
    }

    /**
     * Attaches to the daemon in {@code dir} with default settings.
     *
     * @see #attach(ClientContext)
     */
    public static MrdClient attach(final Path dir)
    {
        JvmFlags.require();
        return attach(new ClientContext().dir(dir));
    }

    /**
     * Attaches: maps the control file read-only, checks that the daemon is alive, reserves its memory's
     * address ranges and its external window in this process, connects, and says HELLO.
     *
     * @throws MrdException EPERM naming the JVM flags this JVM lacks (scripts/jvm-flags), checked before
     *                      anything touches Agrona or FFM; ECONNREFUSED when no daemon runs in the directory;
     *                      EEXIST naming the range when one of the daemon's ranges is already mapped in this
     *                      process; EPROTO on another layout version; ESTALE when the daemon restarted during the attach; the daemon's
     *                      status when it refused the HELLO.
     */
    public static MrdClient attach(final ClientContext context)
    {
        JvmFlags.require();
        context.conclude();
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(context.attachTimeoutMs());
        final ControlFile controlFile = openControlFile(context, deadline);
        List<MemorySegment> reservations = List.of();
        UnixSocket socket = null;
        MrdClient client = null;
        try
        {
            final DaemonWatch watch = new DaemonWatch(context, controlFile);
            watch.requireRunning();
            if (!watch.inProcess())
            {
                reservations = AddressSpace.reserve(controlFile);
            }
            socket = connect(context, watch, deadline);
            client = new MrdClient(context, controlFile, watch, reservations, socket);
            client.hello();
            client.rideThroughGaps();
            watch.start(client.connection::fail);
            LOG.debug("attached to {} as client {} ({})", watch.daemon(), client.clientId, context);
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
                AddressSpace.release(reservations);
                controlFile.close();
            }
            throw ex;
        }
    }

    private static ControlFile openControlFile(final ClientContext context, final long deadline)
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

    private static UnixSocket connect(final ClientContext context, final DaemonWatch watch, final long deadline)
    {
        final Path path = context.dir().resolve(RunDirectoryPath.SOCKET_FILE);
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
                watch.requireRunning();
                if (System.nanoTime() - deadline > 0)
                {
                    throw new MrdException(ErrorCode.ECONNREFUSED, "the daemon (pid " + watch.daemonPid() +
                        ") in " + context.dir() + " does not accept connections on " + path + " (" + ex.oneLine() +
                        "): check 'mrd status --dir " + context.dir() + "' and its log " +
                        context.dir().resolve(RunDirectoryPath.LOG_FILE));
                }
            }
            LockSupport.parkNanos(CONNECT_RETRY_NS);
        }
    }

    /**
     * With {@link ClientContext#adoptionWaitMs} above 0 and a daemon on a device: imports the device now, so that
     * this process holds the context that pins its keys' memory, and lets the watch ride through a gap.
     */
    private void rideThroughGaps()
    {
        if (context.adoptionWaitMs() > 0 && "ibverbs".equals(controlFile.header().providerName()) &&
            !watch.inProcess())
        {
            verbs();
            watch.allowGap(this::resume);
        }
    }

    /**
     * Resumes with the successor that adopted this client's daemon: a new connection, HELLO with this client's
     * id; what the client holds is its own again there.
     */
    private void resume()
    {
        final UnixSocket socket = UnixSocket.connect(context.dir().resolve(RunDirectoryPath.SOCKET_FILE));
        final DaemonConnection next = open(socket);
        try
        {
            final Message.Welcome welcome = next.hello(context.name(), clientId);
            if (welcome.clientId() != clientId)
            {
                throw new MrdException(ErrorCode.EPROTO, "the successor welcomed client " + clientId + " back as " +
                    welcome.clientId());
            }
            connection.replace(next, new DaemonDeadException("the connection to the dead " + watch.daemon() +
                " is closed: the client resumed with its successor"));
        }
        catch (final RuntimeException ex)
        {
            next.close();
            throw ex;
        }
    }

    private void hello()
    {
        final Message.Welcome welcome = connection.current().hello(context.name());
        if (welcome.layoutVersion() != HeaderDescriptor.LAYOUT_VERSION)
        {
            throw new MrdException(ErrorCode.EPROTO, "the daemon in " + dir() + " uses control-file layout version " +
                welcome.layoutVersion() + " but this client reads version " + HeaderDescriptor.LAYOUT_VERSION +
                ": use the mrd build that matches the daemon");
        }
        if (welcome.epoch() != epoch())
        {
            throw new MrdException(ErrorCode.ESTALE, "the daemon in " + dir() + " restarted while this client " +
                "attached (control file epoch " + Sizes.hex(epoch()) + ", daemon epoch " +
                Sizes.hex(welcome.epoch()) + "): attach again");
        }
        clientId = welcome.clientId();
    }

    /**
     * Allocates memory for local access only ({@link Access#LOCAL}): its MRs have no rkey.
     *
     * @see #allocate(long, int)
     */
    public MemorySegment allocate(final long length)
    {
        return space.allocate(length, Access.LOCAL);
    }

    /**
     * Allocates memory from the daemon and maps it here at the daemon's address ({@code ALLOC}). Its MRs are
     * registered with {@code access} (plus {@link Access#LOCAL_WRITE}, which all mrd memory has) and cover
     * memory of that access only; with a remote flag they have an rkey ({@link MrCache#keyPair}), without one
     * their rkey is {@link Access#NO_RKEY}.
     *
     * @param length bytes wanted; the daemon rounds up to whole segments (2 MiB).
     * @param access {@link Access} flags, e.g. {@code Access.REMOTE_WRITE | Access.REMOTE_READ}.
     * @return the memory, {@code byteSize()} the length the daemon allocated. Pass it to {@link #free}.
     * @throws MrdException EINVAL naming unknown access bits; the daemon's status (ENOMEM when it has no
     *                      room, ...).
     */
    public MemorySegment allocate(final long length, final int access)
    {
        return space.allocate(length, access);
    }

    /**
     * Allocates memory as {@link #allocate(long, int)} does and registers it in the same request: one round
     * trip, and the returned handle carries the keys, so a datapath that keeps the buffer needs no lookup. The
     * daemon publishes the MR in the global cache before it answers, so a lookup of this memory in any
     * {@link MrCache} of this client (also one created before) finds it in the process, without
     * {@code CREATE_MR} (unless the global cache has overflowed; then the daemon answers from its MR table
     * without registering again).
     * <p>
     * The keys are valid for as long as the memory stays allocated (until {@link #free(RegisteredMemory)} or this
     * client ends): mrd keeps an MR registered while any segment it covers is allocated, and frees of other
     * clients' memory in the same chunk only clear their own segments from it; memory with remote access shares
     * its MR with no other allocation, so only its own free detaches it.
     *
     * @param length bytes wanted; the daemon rounds up to whole segments (2 MiB).
     * @param access {@link Access} flags, as for {@link #allocate(long, int)}.
     * @return the memory and the keys of the one MR that holds all of it. Pass it to {@link #free(RegisteredMemory)}.
     * @throws MrdException EINVAL naming unknown access bits; the daemon's status: ENOMEM when it has no room or
     *                      cannot pin, EAGAIN when the MR it made does not hold the whole allocation (the
     *                      daemon runs {@code --no-mr-ext-memseg}, or a neighbour changed the chunk
     *                      meanwhile); in every failure nothing stays allocated.
     */
    public RegisteredMemory allocateRegistered(final long length, final int access)
    {
        return space.allocate(length, access, true);
    }

    /**
     * Frees memory from {@link #allocateRegistered}, as {@link #free(MemorySegment)}; its keys are invalid
     * afterwards.
     */
    public void free(final RegisteredMemory memory)
    {
        free(memory.segment());
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
        space.free(segment);
    }

    /**
     * Registers memory behind {@code fd} (a memfd of at least {@code length} bytes, made with
     * {@code MFD_CLOEXEC | MFD_ALLOW_SEALING}, {@code MFD_HUGETLB} for hugepages, and open read-write): the
     * daemon receives the descriptor ({@code SCM_RIGHTS}), seals it against shrinking and growing, maps it in
     * its external window and registers one MR; this process maps it at the same address. The caller keeps its
     * descriptor and may close it; nobody can resize the file afterwards.
     *
     * @param access {@link Access} flags of its MR, as for {@link #allocate(long, int)}.
     * @throws MrdException EBADF when {@code fd} is not open; EINVAL naming unknown access bits; the daemon's
     *                      status (ENOMEM when the window is full, ...).
     */
    public ExternalMemory registerExternal(final int fd, final long length, final int access)
    {
        return space.registerExternal(fd, length, access);
    }

    /**
     * Registers memory behind {@code fd} for local access only ({@link #registerExternal(int, long, int)}).
     */
    public ExternalMemory registerExternal(final int fd, final long length)
    {
        return registerExternal(fd, length, Access.LOCAL);
    }

    /**
     * Creates a memfd of {@code length} bytes and registers it for local access only ({@link #registerMemfd}).
     */
    public ExternalMemory registerExternal(final long length)
    {
        return registerMemfd(length, Access.LOCAL);
    }

    /**
     * Creates a sealable memfd of {@code length} bytes and registers it with {@code access}
     * ({@link #registerExternal(int, long, int)}); the memory lives until {@link #deregisterExternal}. Not an
     * overload of {@code registerExternal}: {@code registerExternal(long, int)} and
     * {@code registerExternal(int, long)} would be ambiguous for two int arguments.
     */
    public ExternalMemory registerMemfd(final long length, final int access)
    {
        final int fd = Posix.memfdCreate("mrd-external", Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING);
        try
        {
            Posix.ftruncate(fd, length);
            return registerExternal(fd, length, access);
        }
        finally
        {
            // The mappings (here and in the daemon) keep the memory; the descriptor is no longer needed.
            Posix.close(fd);
        }
    }

    /**
     * Unmaps external memory here and deregisters it ({@code DEREG_EXTERNAL}, a memory free event).
     */
    public void deregisterExternal(final ExternalMemory memory)
    {
        space.deregisterExternal(memory);
    }

    /**
     * @return a new per-queue cache of device 0's keys; use each from one thread at a time.
     */
    public MrCache newCache()
    {
        return newCache(0);
    }

    /**
     * A cache of one device's keys: its entries hold the keys of MRs on device {@code device}, so the hit path
     * is the same for every device. A queue pair on device k posts with keys from a cache of device k, never
     * another's: a real HCA may issue equal keys on two devices, and a mixed-up key would go unnoticed.
     *
     * @param device a device number, 0 to {@link #deviceCount()} - 1 (its place in the daemon's {@code --device}).
     * @return a new per-queue cache; use each from one thread at a time.
     * @throws MrdException EINVAL for a device the daemon does not register on, naming its devices.
     */
    public MrCache newCache(final int device)
    {
        watch.requireAliveAsLastSeen();
        Devices.check(controlFile, device);
        return new MrCache(new DaemonMrSource(watch, new GlobalCacheReader(controlFile), connection, device));
    }

    /**
     * @return the devices the daemon registers every MR on (1 for a daemon without a device, whose keys are
     * device 0's).
     */
    public int deviceCount()
    {
        return Devices.count(controlFile);
    }

    /**
     * @return the name of device {@code device} ({@code ibv_get_device_name}), empty without a device.
     * @throws MrdException EINVAL for a device the daemon does not register on.
     */
    public String deviceName(final int device)
    {
        Devices.check(controlFile, device);
        return Devices.name(controlFile, device);
    }

    /**
     * @return device 0's {@link #verbs(int)}.
     */
    public Verbs verbs()
    {
        return verbs(0);
    }

    /**
     * Imports the daemon's RDMA device {@code device} and its protection domain into this process, on first use
     * ({@code IMPORT_PD}: the daemon's command fd of that device by {@code SCM_RIGHTS}, {@code ibv_import_device},
     * {@code ibv_import_pd}), with {@link ClientContext#ibverbsLibrary()}. Queue pairs created there post with
     * the keys of {@link #newCache(int) newCache(device)}, and of {@code keys(device)} of registered memory;
     * each queue is reported to the daemon, which destroys it if this process dies first. Closed by
     * {@link #close()}.
     *
     * @throws MrdException EOPNOTSUPP when the daemon runs {@code --provider soft}; EINVAL for a device the daemon
     *                      does not register on; ENOENT/ENOSYS when the library is missing or older than
     *                      rdma-core 32; the import's errno.
     */
    public Verbs verbs(final int device)
    {
        return devices.verbs(device);
    }

    /**
     * Detaches: stops the watchdog, closes the connection (the daemon then frees everything this client
     * allocated or registered) and fails what was in flight, unmaps the reservations and the control file.
     * Idempotent. Call it only after every thread stopped using this client's caches and memory.
     */
    public void close()
    {
        if (!closed.compareAndSet(false, true))
        {
            return;
        }
        // before the connection: the daemon hears of each queue's end, and nothing posts to them any more
        devices.close();
        final MrdException reason = watch.close();
        connection.close(reason);
        space.close();
        controlFile.close();
    }

    /** @return the run directory. */
    public Path dir()
    {
        return context.dir();
    }

    /** @return the settings, concluded. */
    public ClientContext context()
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
        return watch.epoch();
    }

    /** @return the daemon's pid. */
    public long daemonPid()
    {
        return watch.daemonPid();
    }

    /**
     * @return the check every part of this client makes before it hands out a key or uses the daemon's device:
     *         the loss rule ({@link DaemonLiveness}). For code of the application's own that caches keys.
     */
    public DaemonLiveness liveness()
    {
        return watch.liveness();
    }

    /** @return true once the daemon is known dead, stopped or restarted, or the client is closed. */
    public boolean isBroken()
    {
        return watch.isBroken();
    }

    public String toString()
    {
        final MrdException broken = watch.broken();
        return "MrdClient[client " + clientId + " of " + watch.daemon() + ", epoch " + Sizes.hex(epoch()) +
            (null == broken ? "" : ", " + broken.oneLine()) + "]";
    }
}
