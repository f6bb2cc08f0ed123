package io.mrd.primary.server;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.DaemonContext;
import io.mrd.primary.DaemonCounters;
import io.mrd.primary.RunDirectory;
import io.mrd.primary.external.ExternalRegistrations;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.mr.MrEngine;
import io.mrd.primary.provider.Registrar;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.netty.channel.unix.DomainSocketAddress;
import io.netty.util.concurrent.DefaultThreadFactory;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static io.mrd.primary.DaemonSettings.ADOPTION_GRACE;
import static io.mrd.primary.DaemonSettings.ALLOW_GID;
import static io.mrd.primary.DaemonSettings.WORKER_THREADS;

/**
 * The daemon's Unix-domain socket server (DESIGN §7): Netty epoll on {@code DIR/mrd.sock}, one event-loop
 * thread ({@code mrd-io}) that accepts, checks peers, cuts frames, answers HELLO and the CREATE_MRs the
 * global cache already holds ({@link ExistingMrReply}: a seqlock read, never a wait), and a bounded pool of
 * workers ({@code mrd-worker-N}) that run every other request, because registrations are slow and must never
 * hold up the event loop. Each connection is a {@link ClientSession}, which uses the server only through the
 * {@link SessionServices} it is lent; a gone client's memory is freed by {@link ClientReclaim} on a thread of its own.
 * <p>
 * The daemon never dies of input: everything a connection does is caught in its session, which answers
 * EPROTO (or EPERM, EBUSY) and closes that connection only.
 */
public final class MrdServer implements AutoCloseable
{
    /** Requests queued for the workers across all connections; more are answered EAGAIN ("overloaded"). */
    static final int QUEUE_CAPACITY = 16_384;
    /** Longest socket path the kernel accepts ({@code sun_path} less its terminating NUL). */
    static final int MAX_SOCKET_PATH = 107;
    private static final long CLOSE_WAIT_SECONDS = 10;

    private static final Logger LOG = LoggerFactory.getLogger(MrdServer.class);

    private final Path socketFile;
    private final DaemonCounters counters;
    private final FailureLog failures;
    private final ClientTable clients;
    private final RequestHandler handler;
    private final ExternalRegistrations external;
    private final RefusalLog refusals;
    private final Runnable onStop;
    private final Runnable onHandover;
    private final ThreadPoolExecutor workers;
    /**
     * Reclaims of closed clients, one at a time on a thread of their own: never refused for a full queue and
     * never stuck behind requests, and waited for by {@link #close()} like the workers.
     */
    private final ExecutorService reclaimer;
    private final EventLoopGroup ioGroup;
    /** What every session uses of the server; its {@link ExistingMrReply} is safe because the group has one thread. */
    private final SessionServices sessionServices;
    private final Set<Channel> channels = ConcurrentHashMap.newKeySet();
    /**
     * Set by the first step of {@link #close()}: sessions read it (a new connection is closed, CREATE_MR skips the
     * event loop's answer, a request the stopped workers refuse is not answered when a client sends it again to a
     * successor, a gone client's memory is not reclaimed one by one).
     */
    private volatile boolean closing;
    /** {@link #close()} ran (guarded by this). */
    private boolean closed;
    private Channel serverChannel;

    private MrdServer(
        final DaemonContext context,
        final RunDirectory runDirectory,
        final ControlFile controlFile,
        final MrEngine engine,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final Runnable onStop,
        final ExternalRegistrations external,
        final AdoptedClients adopted,
        final Runnable onHandover)
    {
        this.socketFile = runDirectory.socketFile();
        this.counters = counters;
        this.failures = new FailureLog(errorLog);
        this.clients = new ClientTable(controlFile, counters.get(MrdCounter.CLIENTS_CONNECTED));
        this.external = external;
        this.handler = new RequestHandler(engine, external, registrar.name(), registrar.sharedDevices());
        this.refusals = new RefusalLog(LOG::warn, () -> System.nanoTime() / 1_000_000, 10);
        this.onStop = onStop;
        this.onHandover = onHandover;
        final AtomicInteger workerNumber = new AtomicInteger();
        final int workerThreads = context.get(WORKER_THREADS);
        this.workers = new ThreadPoolExecutor(workerThreads, workerThreads, 0, TimeUnit.SECONDS,
            new LinkedBlockingQueue<>(QUEUE_CAPACITY),
            r -> Thread.ofPlatform().name("mrd-worker-" + workerNumber.incrementAndGet()).daemon(true).unstarted(r));
        this.reclaimer = Executors.newSingleThreadExecutor(
            r -> Thread.ofPlatform().name("mrd-reclaim").daemon(true).unstarted(r));
        this.ioGroup = new MultiThreadIoEventLoopGroup(1, new DefaultThreadFactory("mrd-io", true),
            EpollIoHandler.newFactory());
        final EventJournal journal = engine.journal();
        final AtomicInteger nextClientId = new AtomicInteger(adopted.firstNewId());
        this.sessionServices = new SessionServices(
            new PeerPolicy(Posix.getuid(), context.get(ALLOW_GID)),
            clients,
            nextClientId::getAndIncrement,
            handler,
            new ExistingMrReply(controlFile, external, counters),
            workers,
            new ClientReclaim(reclaimer, handler, clients, journal, failures, () -> closing),
            counters,
            journal,
            refusals,
            failures,
            () -> closing,
            () -> requestStop(onStop, "STOP"),
            () -> requestStop(onHandover, "STOP with FLAG_HANDOVER"),
            controlFile.header().epoch(),
            runDirectory.controlFile().toAbsolutePath().toString(),
            adopted);
    }

    /**
     * Loads Netty's epoll transport and its native library (half a second on a small machine, the first time in a
     * process).
     *
     * @throws MrdException ENOSYS when the transport is unavailable here, saying why.
     */
    public static void requireTransport()
    {
        if (!Epoll.isAvailable())
        {
            throw new MrdException(ErrorCode.ENOSYS, "Netty's epoll transport is unavailable: " +
                Epoll.unavailabilityCause());
        }
    }

    /**
     * Reserves the external window, binds {@code DIR/mrd.sock} (mode 0660) and starts accepting.
     *
     * @param registrar the provider, whose device (if it has one) secondaries import (IMPORT_PD) and whose
     *                  queues a gone client left are destroyed through.
     * @param onStop    what a permitted STOP runs once its reply is written; it must not close the daemon on the
     *                  calling thread (an event-loop or worker thread that {@link #close()} waits for).
     * @param onHandover what a permitted STOP with {@code FLAG_HANDOVER} runs ({@code mrd restart}), as
     *                  {@code onStop} runs.
     * @param adopted   the clients of the daemon this one adopted ({@link AdoptedClients#NONE} when started
     *                  afresh): new clients get ids above theirs, and what is left of them is reclaimed once
     *                  {@code --adoption-grace} has passed.
     * @throws MrdException when the socket cannot be bound or the window reserved, saying why.
     */
    public static MrdServer start(
        final DaemonContext context,
        final RunDirectory runDirectory,
        final ControlFile controlFile,
        final MrEngine engine,
        final Registrar registrar,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final Runnable onStop,
        final Runnable onHandover,
        final AdoptedClients adopted)
    {
        requireTransport();
        final Path socket = runDirectory.socketFile();
        if (socket.toString().getBytes(StandardCharsets.UTF_8).length > MAX_SOCKET_PATH)
        {
            throw new MrdException(ErrorCode.EINVAL, "socket path " + socket + " is longer than " + MAX_SOCKET_PATH +
                " bytes, the limit of a Unix socket address: choose a shorter --dir");
        }
        final ExternalRegistrations external = new ExternalRegistrations(controlFile.header().externalBase(),
            controlFile.header().externalLength(), engine);
        final MrdServer server;
        try
        {
            server = new MrdServer(context, runDirectory, controlFile, engine, registrar, counters, errorLog, onStop,
                external, adopted, onHandover);
        }
        catch (final RuntimeException ex)
        {
            external.close();
            throw ex;
        }
        try
        {
            server.bind();
            server.sessionServices.reclaim().reclaimAfterGrace(adopted, context.get(ADOPTION_GRACE));
            return server;
        }
        catch (final RuntimeException ex)
        {
            server.close();
            throw ex;
        }
    }

    private void bind()
    {
        try
        {
            Files.deleteIfExists(socketFile);
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EACCES, "cannot remove the stale socket " + socketFile + ": " + ex);
        }
        final ServerBootstrap bootstrap = new ServerBootstrap()
            .group(ioGroup)
            .channel(EpollServerDomainSocketChannel.class)
            .childOption(ChannelOption.ALLOW_HALF_CLOSURE, true)
            .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(32 * 1024, 64 * 1024))
            .childHandler(new ChannelInitializer<EpollDomainSocketChannel>()
            {
                protected void initChannel(final EpollDomainSocketChannel channel)
                {
                    if (closing)
                    {
                        channel.close();
                        return;
                    }
                    channels.add(channel);
                    channel.closeFuture().addListener(f -> channels.remove(channel));
                    channel.pipeline().addLast("session", new ClientSession(sessionServices, channel));
                }
            });
        try
        {
            serverChannel = bootstrap.bind(new DomainSocketAddress(socketFile.toString())).sync().channel();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
            throw new MrdException(ErrorCode.EIO, "interrupted while binding " + socketFile);
        }
        catch (final Exception ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot listen on " + socketFile + ": " + ex);
        }
        try
        {
            Files.setPosixFilePermissions(socketFile, PosixFilePermissions.fromString("rw-rw----"));
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EACCES, "cannot set mode 0660 on " + socketFile + ": " + ex);
        }
        ioGroup.scheduleAtFixedRate(refusals::flush, 1, 1, TimeUnit.SECONDS);
        LOG.info("listening on {} ({} workers, external window [{}, {}))", socketFile, workers.getMaximumPoolSize(),
            Sizes.hex(external.base()), Sizes.hex(external.base() + external.length()));
    }

    public Path socketFile()
    {
        return socketFile;
    }

    /**
     * @return clients that said HELLO and are still connected.
     */
    public int connectedClients()
    {
        return clients.connected();
    }

    /**
     * @return open connections, whether or not they said HELLO.
     */
    public int openConnections()
    {
        return channels.size();
    }

    /**
     * @return bytes of the external window in use (mapped or being mapped).
     */
    public long externalBytesInUse()
    {
        return external.bytesInUse();
    }

    /**
     * @return queues (CQs, QPs) clients reported in the shared device and still hold.
     */
    public int reportedQueues()
    {
        return handler.reportedQueues();
    }

    /**
     * Runs the daemon's STOP (or handover), once a permitted STOP's reply is written, on a worker.
     */
    private void requestStop(final Runnable what, final String request)
    {
        try
        {
            what.run();
        }
        catch (final RuntimeException ex)
        {
            failures.unexpected(request, ex);
        }
    }

    /**
     * Stops accepting, closes every connection, waits (bounded) for the event loop and the workers, removes the
     * socket and releases the external window. Registrations and memory are the daemon's to release after
     * this (its engine closes every MR); connections closed here are not reclaimed one by one.
     * <p>
     * The steps overlap with the event loop, which may still read a request of a connection whose close it has
     * not run yet while the workers stop: such a request is left unanswered ({@code RequestDispatch}), so that a
     * client sends it again to a successor.
     */
    public synchronized void close()
    {
        if (closed)
        {
            return;
        }
        if (ioGroup.next().inEventLoop())
        {
            throw new IllegalStateException("MrdServer.close() called on its own event loop");
        }
        closed = true;
        try
        {
            final int open = stopAccepting();
            closeConnections();
            stopWorkers();
            stopEventLoop();
            refusals.close();
            counters.set(MrdCounter.CLIENTS_CONNECTED, 0);
            LOG.info("socket server closed ({} connections were open)", open);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
        finally
        {
            try
            {
                Files.deleteIfExists(socketFile);
            }
            catch (final IOException ex)
            {
                LOG.warn("cannot remove {}: {}", socketFile, ex.toString());
            }
            external.close();
        }
    }

    /**
     * Close's first step: the server is closing (sessions see it) and takes no new connection.
     *
     * @return the connections open now.
     */
    int stopAccepting()
    {
        closing = true;
        if (null != serverChannel)
        {
            serverChannel.close().awaitUninterruptibly(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS);
        }
        return channels.size();
    }

    /** Close's second step: every connection's close is handed to the event loop (not waited for). */
    void closeConnections()
    {
        for (final Channel channel : channels)
        {
            channel.close();
        }
    }

    /** Close's third step: the workers and the reclaimer finish what they run (bounded), then take nothing more. */
    void stopWorkers() throws InterruptedException
    {
        for (final ExecutorService pool : List.of(workers, reclaimer))
        {
            pool.shutdown();
            if (!pool.awaitTermination(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS))
            {
                LOG.warn("requests still running after {} s: interrupting them", CLOSE_WAIT_SECONDS);
                pool.shutdownNow();
                pool.awaitTermination(CLOSE_WAIT_SECONDS, TimeUnit.SECONDS);
            }
        }
    }

    private void stopEventLoop()
    {
        if (!ioGroup.shutdownGracefully(0, CLOSE_WAIT_SECONDS, TimeUnit.SECONDS)
            .awaitUninterruptibly(2 * CLOSE_WAIT_SECONDS, TimeUnit.SECONDS))
        {
            LOG.warn("event loop did not stop within {} s", 2 * CLOSE_WAIT_SECONDS);
        }
    }
}
