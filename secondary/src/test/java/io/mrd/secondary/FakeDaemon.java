package io.mrd.secondary;

import io.mrd.layout.Access;
import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MemsegListRecord;
import io.mrd.layout.MrEntry;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.SortedTable;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.layout.sys.UnixSocket;
import io.mrd.testing.BaseAddresses;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.Method;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A stand-in for the primary, in the test's process: a control file as the daemon lays it out (one list of
 * {@value #SEGMENTS} segments at {@link #BASE}, an external window), a heartbeat thread, and a socket server
 * speaking the protocol through {@link FrameCodec}. It claims another pid, so the client maps memory as it
 * would in a real secondary. CREATE_MR registers one of two adjacent MRs, each half the list.
 */
final class FakeDaemon implements AutoCloseable
{
    static final long BASE = BaseAddresses.next();
    static final long SEGMENT = 2 * Sizes.MIB;
    static final int SEGMENTS = 8;
    static final long LIST_LENGTH = SEGMENTS * SEGMENT;
    static final long EXTERNAL_BASE = BASE + Sizes.GIB;
    static final long EXTERNAL_LENGTH = 64 * Sizes.MIB;
    static final long PID = 987_654_321L;
    static final int LOW_LKEY = 0x100;
    static final int HIGH_LKEY = 0x200;
    static final int EXTERNAL_LKEY = 0x300;
    static final int HIGH_RKEY = 0x201;

    final Path dir;
    final ControlFile controlFile;
    final ControlHeader header;
    final long epoch = 0x5eed_0000_0000_0001L;
    final MemorySegment backing;
    volatile long welcomeEpoch = epoch;
    volatile boolean heartbeating = true;
    volatile boolean answerCreates = true;
    volatile MemorySegment external;
    /** The access ALLOC replies grant; -1: what was asked (a test sets it to play a daemon that lies). */
    volatile int grantedAccess = -1;
    final AtomicInteger creates = new AtomicInteger();
    final AtomicInteger allocs = new AtomicInteger();

    private final int backingFd;
    private final ServerSocketChannel server;
    private final List<SocketChannel> connections = new CopyOnWriteArrayList<>();
    private final Thread acceptor;
    private final Thread heartbeat;
    private final Object lock = new Object();
    private long nextAllocation = BASE;
    private volatile boolean closed;

    FakeDaemon(final Path dir) throws IOException
    {
        this.dir = dir;
        final ControlFileLayout layout = ControlFileLayout.compute(1, SEGMENTS, 64, 1024, 8);
        controlFile = ControlFile.create(dir.resolve(ControlFile.FILE_NAME), layout, 4096);
        header = controlFile.header();
        final long now = System.currentTimeMillis();
        header.magic(HeaderDescriptor.MAGIC).epoch(epoch).pid(PID).startTimeMs(now).heartbeatMs(now)
            .heartbeatIntervalMs(100).segmentSize(SEGMENT).baseVirtaddr(BASE).externalBase(EXTERNAL_BASE)
            .externalLength(EXTERNAL_LENGTH).providerName("fake");
        header.cacheLen(SortedTable.clear(controlFile.buffer(), layout.cacheOffset()));

        final Path memory = dir.resolve("mem0");
        backingFd = Posix.open(memory.toString(), Posix.O_RDWR | Posix.O_CREAT | Posix.O_CLOEXEC, 0600);
        Posix.ftruncate(backingFd, LIST_LENGTH);
        // The daemon's own view, anywhere: the test reads through it what the client wrote at BASE.
        backing = Posix.map(LIST_LENGTH, Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, backingFd, 0);
        new MemsegListRecord().wrap(controlFile.buffer(), layout.memsegListOffset(0))
            .baseVa(BASE).pageSize(4096).segmentCount(SEGMENTS).backingPath(memory.toString());
        header.publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);

        server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
        server.bind(UnixDomainSocketAddress.of(dir.resolve(RunDirectoryPath.SOCKET_FILE)));
        acceptor = Thread.ofPlatform().daemon().name("fake-daemon-accept").start(this::acceptLoop);
        heartbeat = Thread.ofPlatform().daemon().name("fake-daemon-heartbeat").start(this::beat);
    }

    /** Stops the heartbeat as a killed daemon would: the value freezes. */
    void freezeHeartbeat()
    {
        heartbeating = false;
    }

    /** Writes the "closed" heartbeat as a daemon shutting down cleanly does. */
    void closeHeartbeat()
    {
        heartbeating = false;
        header.heartbeatMs(HeaderDescriptor.HEARTBEAT_CLOSED);
    }

    /** Closes every client connection, as the kernel does when the daemon dies. */
    void dropConnections() throws IOException
    {
        for (final SocketChannel channel : connections)
        {
            channel.close();
        }
    }

    private void beat()
    {
        while (!closed)
        {
            if (heartbeating)
            {
                header.heartbeatMs(System.currentTimeMillis());
            }
            try
            {
                Thread.sleep(50);
            }
            catch (final InterruptedException ex)
            {
                return;
            }
        }
    }

    private void acceptLoop()
    {
        while (!closed)
        {
            try
            {
                final SocketChannel channel = server.accept();
                connections.add(channel);
                Thread.ofPlatform().daemon().name("fake-daemon-conn").start(() -> serve(channel));
            }
            catch (final IOException ex)
            {
                return;
            }
        }
    }

    private void serve(final SocketChannel channel)
    {
        final byte[] in = new byte[64 * 1024];
        final UnsafeBuffer inBuffer = new UnsafeBuffer(in);
        final ByteBuffer inBytes = ByteBuffer.wrap(in);
        try
        {
            while (true)
            {
                if (channel.read(inBytes) < 0)
                {
                    return;
                }
                int at = 0;
                while (true)
                {
                    final int length = FrameCodec.frameLength(inBuffer, at, inBytes.position() - at);
                    if (length < 0 || inBytes.position() - at < length)
                    {
                        break;
                    }
                    handle(channel, FrameCodec.decodeRequest(inBuffer, at, length));
                    at += length;
                }
                inBuffer.putBytes(0, inBuffer, at, inBytes.position() - at);
                inBytes.position(inBytes.position() - at);
            }
        }
        catch (final Exception ex)
        {
            // The connection ended.
        }
    }

    private void handle(final SocketChannel channel, final Frame frame) throws Exception
    {
        final long id = frame.correlationId();
        switch ((Message.Request)frame.message())
        {
            case Message.Hello hello -> reply(channel, id, new Message.Welcome(ErrorCode.OK, "", 7, welcomeEpoch,
                HeaderDescriptor.LAYOUT_VERSION, controlFile.path().toString()));
            case Message.CreateMr create ->
            {
                if (!answerCreates)
                {
                    return;
                }
                creates.incrementAndGet();
                final long address = create.address();
                if (address < BASE || address >= BASE + LIST_LENGTH)
                {
                    reply(channel, id, new Message.Status(MessageType.CREATE_MR, ErrorCode.ENXIO,
                        "address " + Sizes.hex(address) + " is outside managed memory"));
                    return;
                }
                final long half = BASE + LIST_LENGTH / 2;
                final long start = address < half ? BASE : half;
                final long end = address < half ? half : BASE + LIST_LENGTH;
                final int lkey = address < half ? LOW_LKEY : HIGH_LKEY;
                publish(start, end, lkey);
                reply(channel, id, new Message.MrCreated(ErrorCode.OK, "", start, end, lkey, rkeyOf(lkey),
                    accessOf(lkey)));
            }
            case Message.Alloc alloc ->
            {
                allocs.incrementAndGet();
                final long length = Sizes.alignUp(alloc.length(), SEGMENT);
                final long address;
                synchronized (lock)
                {
                    address = nextAllocation;
                    if (address + length > BASE + LIST_LENGTH)
                    {
                        reply(channel, id, new Message.Status(MessageType.ALLOC, ErrorCode.ENOMEM, "no room"));
                        return;
                    }
                    nextAllocation += length;
                }
                reply(channel, id, new Message.Allocated(ErrorCode.OK, "", address, length,
                    grantedAccess >= 0 ? grantedAccess : Access.granted(alloc.access(), "ALLOC")));
            }
            case Message.Free free ->
            {
                freeEvent();
                reply(channel, id, new Message.Status(MessageType.FREE, ErrorCode.OK, ""));
            }
            case Message.RegExternal reg ->
            {
                if ((frame.flags() & FrameDescriptor.FLAG_FD) == 0)
                {
                    reply(channel, id, new Message.Status(MessageType.REG_EXTERNAL, ErrorCode.EPROTO, "no FLAG_FD"));
                    return;
                }
                reply(channel, id, new Message.Status(MessageType.SEND_FD, ErrorCode.OK, ""));
                final int fd = UnixSocket.wrap(fdOf(channel), "fake").receiveFd();
                external = Posix.map(reg.length(), Posix.PROT_READ | Posix.PROT_WRITE, Posix.MAP_SHARED, fd, 0);
                Posix.close(fd);
                final int access = Access.granted(reg.access(), "REG_EXTERNAL");
                reply(channel, id, new Message.ExternalRegistered(ErrorCode.OK, "", EXTERNAL_BASE, reg.length(),
                    EXTERNAL_LKEY, Access.isRemote(access) ? EXTERNAL_LKEY : Access.NO_RKEY, access));
            }
            case Message.DeregExternal dereg ->
            {
                freeEvent();
                reply(channel, id, new Message.Status(MessageType.DEREG_EXTERNAL, ErrorCode.OK, ""));
            }
            case Message.Stop stop -> reply(channel, id, new Message.Status(MessageType.STOP, ErrorCode.OK, ""));
            case Message.ImportPd importPd -> reply(channel, id, new Message.Status(MessageType.IMPORT_PD,
                ErrorCode.EOPNOTSUPP, "the fake daemon has no device"));
            case Message.Queues queues -> reply(channel, id, new Message.Status(MessageType.QUEUES,
                ErrorCode.EOPNOTSUPP, "the fake daemon has no device"));
        }
    }

    /** The high half's MR has remote access, and an rkey, the low half's has neither. */
    static int rkeyOf(final int lkey)
    {
        return lkey == HIGH_LKEY ? HIGH_RKEY : Access.NO_RKEY;
    }

    static int accessOf(final int lkey)
    {
        return lkey == HIGH_LKEY ? Access.LOCAL_WRITE | Access.REMOTE_READ : Access.LOCAL;
    }

    private void publish(final long start, final long end, final int lkey)
    {
        synchronized (lock)
        {
            final int offset = controlFile.layout().cacheOffset();
            controlFile.seqLock().beginWrite();
            final int length = SortedTable.insert(controlFile.buffer(), offset, header.cacheLen(),
                controlFile.layout().cacheCapacity(), new MrEntry().set(start, end, lkey, rkeyOf(lkey), accessOf(lkey), 1));
            header.cacheLen(length);
            controlFile.seqLock().endWrite();
        }
    }

    /** What a memory free event leaves: an empty global cache and a new devGen. */
    private void freeEvent()
    {
        synchronized (lock)
        {
            controlFile.seqLock().beginWrite();
            header.cacheLen(SortedTable.clear(controlFile.buffer(), controlFile.layout().cacheOffset()));
            header.devGen(header.devGen() + 1);
            controlFile.seqLock().endWrite();
        }
    }

    private static void reply(final SocketChannel channel, final long id, final Message.Reply reply) throws IOException
    {
        final byte[] out = new byte[FrameDescriptor.MAX_FRAME_LENGTH];
        final int length = FrameCodec.encode(new UnsafeBuffer(out), 0, id, 0, reply);
        final ByteBuffer bytes = ByteBuffer.wrap(out, 0, length);
        synchronized (channel)
        {
            while (bytes.hasRemaining())
            {
                channel.write(bytes);
            }
        }
    }

    /** The descriptor behind a JDK channel, to receive SCM_RIGHTS on it (the JDK cannot). */
    private static int fdOf(final SocketChannel channel) throws Exception
    {
        final Method method = channel.getClass().getDeclaredMethod("getFDVal");
        method.setAccessible(true);
        return (int)method.invoke(channel);
    }

    public void close() throws IOException
    {
        closed = true;
        server.close();
        dropConnections();
        heartbeat.interrupt();
        try
        {
            acceptor.join(5_000);
            heartbeat.join(5_000);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        if (null != external)
        {
            Posix.munmapQuietly(external.address(), external.byteSize());
        }
        Posix.munmapQuietly(backing.address(), LIST_LENGTH);
        Posix.close(backingFd);
        controlFile.close();
        Files.deleteIfExists(dir.resolve(RunDirectoryPath.SOCKET_FILE));
    }
}
