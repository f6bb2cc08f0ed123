package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.journal.MappedEventJournal;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.mr.MrEngine;
import io.mrd.primary.lineage.HolderLink;
import io.mrd.primary.lineage.Predecessor;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.SharedDevice;
import io.mrd.primary.server.AdoptedClients;
import io.mrd.primary.server.MrdServer;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import static io.mrd.primary.DaemonSettings.ADOPTION_GRACE;
import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.CACHE_CAPACITY;
import static io.mrd.primary.DaemonSettings.DIR;
import static io.mrd.primary.DaemonSettings.HEARTBEAT_INTERVAL;
import static io.mrd.primary.DaemonSettings.JOURNAL_SIZE;
import static io.mrd.primary.DaemonSettings.MAX_CLIENTS;
import static io.mrd.primary.DaemonSettings.MAX_MRS;
import static io.mrd.primary.DaemonSettings.METRICS;
import static io.mrd.primary.DaemonSettings.PROVIDER;

/**
 * The primary: owns the run directory's lock, the control file, the memory-segment lists, the provider,
 * the MR engine and the socket server. {@link #launch} returns once the control file is
 * published; {@link #close} undoes everything in reverse and is safe to call from a signal's shutdown hook.
 */
public final class MrdDaemon implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MrdDaemon.class);

    private final DaemonContext context;
    private final RunDirectory runDirectory;
    private final ControlFile controlFile;
    private final Path controlFileTarget;
    private final DaemonCounters counters;
    private final DistinctErrorLog errorLog;
    private final MemoryManager memory;
    private final MrEngine engine;
    private final Registrar registrar;
    private final EventJournal journal;
    private final Thread heartbeat;
    /** The descriptor holder this daemon owns, from its start (or its predecessor's) to the clean stop. */
    private final HolderLease holder = new HolderLease();
    /** Set in {@link #launch} once the engine exists and before the control file is published. */
    private volatile MrdServer server;
    private volatile MetricsEndpoint metrics;
    private final CountDownLatch closed = new CountDownLatch(1);
    private volatile boolean closing;

    MrdDaemon(
        final DaemonContext context,
        final RunDirectory runDirectory,
        final ControlFile controlFile,
        final Path controlFileTarget,
        final DaemonCounters counters,
        final DistinctErrorLog errorLog,
        final MemoryManager memory,
        final Registrar registrar,
        final MrEngine engine,
        final EventJournal journal)
    {
        this.journal = journal;
        this.context = context;
        this.runDirectory = runDirectory;
        this.controlFile = controlFile;
        this.controlFileTarget = controlFileTarget;
        this.counters = counters;
        this.errorLog = errorLog;
        this.memory = memory;
        this.registrar = registrar;
        this.engine = engine;
        this.heartbeat = Thread.ofPlatform().name("mrd-heartbeat").daemon(true).unstarted(this::beat);
    }

    /**
     * Loads what a start needs that does not depend on its directory: Netty's epoll transport and Chronicle
     * Bytes, together most of what a small machine spends starting once the JVM runs. {@link #launch} does it
     * before taking the directory's lock; a daemon taking over ({@code mrd start --take-over}) does it before it
     * asks the running daemon to hand over, so that requests wait only for the adoption. Idempotent.
     */
    public static void prepare()
    {
        MrdServer.requireTransport();
        MappedEventJournal.loadLibrary();
    }

    /**
     * Starts a daemon: locks the directory; adopts the state a previous daemon that died there left, when it
     * passes {@link Predecessor}'s checks ({@link DaemonAdoption}); else recovers the directory, creates and
     * publishes the control file, reserves the memory, starts the heartbeat and the descriptor holder.
     *
     * @throws MrdException with a one-line reason when anything is in the way.
     */
    public static MrdDaemon launch(final DaemonContext context)
    {
        context.conclude();
        final RunDirectory runDirectory = new RunDirectory(context.get(DIR)).ensureExists();
        prepare();
        runDirectory.lock();
        final long epoch = new SecureRandom().nextLong();
        final ControlFileLayout layout;
        final Optional<Predecessor> predecessor;
        try
        {
            layout = ControlFileLayout.compute(context.listCount(), context.segmentsPerList(),
                context.get(MAX_MRS), context.get(CACHE_CAPACITY), context.get(MAX_CLIENTS));
            predecessor = Predecessor.find(runDirectory.dir(), runDirectory.controlFile(), new Predecessor.Expected(
                layout, context.get(PROVIDER), context.get(BASE_VIRTADDR), DaemonContext.SEGMENT_SIZE,
                context.get(ADOPTION_GRACE)), epoch);
        }
        catch (final RuntimeException ex)
        {
            runDirectory.unlock();
            throw ex;
        }
        if (predecessor.isPresent())
        {
            try
            {
                return DaemonAdoption.adopt(context, runDirectory, layout, epoch, predecessor.get());
            }
            catch (final RuntimeException ex)
            {
                LOG.warn("adopting the previous daemon's state ({}) failed: {}: starting afresh", predecessor.get(),
                    ex instanceof MrdException mrd ? mrd.oneLine() : ex.toString());
                predecessor.get().releaseHolder();
            }
        }
        return FreshStart.start(context, runDirectory, layout, epoch);
    }

    /**
     * Starts the metrics endpoint (with {@code --metrics}) and the socket server; undoes the first when the second
     * fails.
     */
    void serve(final AdoptedClients adopted)
    {
        if (context.get(METRICS).isPresent())
        {
            metrics = MetricsEndpoint.start(context.get(METRICS).get(), controlFile);
            LOG.info("metrics on http://{}:{}/metrics", context.get(METRICS).get().getHostString(), metrics.port());
        }
        try
        {
            server = MrdServer.start(context, runDirectory, controlFile, engine, registrar, counters, errorLog,
                this::requestStop, this::requestHandover, adopted);
        }
        catch (final RuntimeException ex)
        {
            if (null != metrics)
            {
                metrics.close();
            }
            throw ex;
        }
    }

    /** Starts the heartbeat: a successor's, whose control file is published already. */
    void startHeartbeat()
    {
        heartbeat.start();
    }

    /**
     * Starts this daemon's descriptor holder (docs/adoption.md), unless {@code --adoption-grace} is 0.
     */
    void startHolder()
    {
        if (context.get(ADOPTION_GRACE) > 0)
        {
            holder.start(runDirectory.dir(), context.get(ADOPTION_GRACE), controlFile.header().epoch(),
                this::heldDescriptors);
        }
    }

    /** A successor keeps its predecessor's holder, which now stands for it. */
    void keepHolder(final HolderLink link)
    {
        holder.keep(link);
    }

    /**
     * @return what a holder keeps for a successor: the device's command file and the lists' files.
     */
    HolderLink.Descriptors heldDescriptors()
    {
        final int[] lists = new int[memory.listCount()];
        for (int i = 0; i < lists.length; i++)
        {
            lists[i] = memory.list(i).backingFd();
        }
        return new HolderLink.Descriptors(registrar.sharedDevice().map(SharedDevice::commandFd).orElse(-1), lists);
    }

    /**
     * Keeps the journal a previous daemon left (renamed, for {@code mrd events --previous}), then opens this one's
     * unless {@code --journal-size} is 0.
     */
    static EventJournal openJournal(final DaemonContext context, final RunDirectory runDirectory,
        final long epoch)
    {
        if (MappedEventJournal.keepPrevious(runDirectory.dir()))
        {
            LOG.info("kept the previous daemon's event journal in {}",
                runDirectory.dir().resolve(JournalFileDescriptor.PREVIOUS_DIRECTORY));
        }
        if (context.get(JOURNAL_SIZE) == 0)
        {
            return EventJournal.OFF;
        }
        final MappedEventJournal journal = MappedEventJournal.create(
            runDirectory.dir().resolve(JournalFileDescriptor.DIRECTORY), context.get(JOURNAL_SIZE), epoch);
        LOG.info("event journal {} ({} in {} files)", journal.dir(), Sizes.format(context.get(JOURNAL_SIZE)),
            JournalFileDescriptor.FILE_COUNT);
        return journal;
    }

    private void beat()
    {
        final ControlHeader header = controlFile.header();
        while (!closing)
        {
            final long now = System.currentTimeMillis();
            header.heartbeatMs(now);
            counters.publishHistograms(now);
            try
            {
                Thread.sleep(context.get(HEARTBEAT_INTERVAL));
            }
            catch (final InterruptedException ex)
            {
                return;
            }
        }
    }

    public DaemonContext context()
    {
        return context;
    }

    public ControlFile controlFile()
    {
        return controlFile;
    }

    public DaemonCounters counters()
    {
        return counters;
    }

    public DistinctErrorLog errorLog()
    {
        return errorLog;
    }

    public MemoryManager memory()
    {
        return memory;
    }

    public MrEngine engine()
    {
        return engine;
    }

    public RunDirectory runDirectory()
    {
        return runDirectory;
    }

    /**
     * @return the metrics endpoint, or null without {@code --metrics}.
     */
    public MetricsEndpoint metrics()
    {
        return metrics;
    }

    /**
     * @return the socket server (null only while {@link #launch} is still starting it).
     */
    public MrdServer server()
    {
        return server;
    }

    /**
     * Closes the daemon on a thread of its own: what a STOP request runs, from a thread {@link #close()} waits for.
     */
    public void requestStop()
    {
        Thread.ofPlatform().name("mrd-stop").start(this::close);
    }

    /**
     * Hands over on a thread of its own: what a STOP with {@code FLAG_HANDOVER} runs ({@code mrd restart}).
     */
    public void requestHandover()
    {
        Thread.ofPlatform().name("mrd-handover").start(this::handOver);
    }

    /**
     * Hands over to a successor ({@code mrd restart}, docs/adoption.md): stops the heartbeat without marking it
     * closed, stops accepting and closes every connection (the clients that ride through gaps wait for the
     * successor), flushes the journal, lets go of the holder without releasing it and unlocks the directory; the
     * MRs, the memory, the device and the files stay for the successor, which adopts them as after a crash, and
     * the process ends as {@link #close()}'s would.
     */
    public synchronized void handOver()
    {
        if (closing)
        {
            return;
        }
        closing = true;
        LOG.info("handing over: leaving every registration and the memory to a successor");
        try
        {
            stopHeartbeat();
            stopServing();
            holder.letGo();
            journal.close();
        }
        catch (final RuntimeException ex)
        {
            LOG.error("handover failed part way", ex);
        }
        finally
        {
            runDirectory.unlock();
            LOG.info("handed over");
            closed.countDown();
        }
    }

    /**
     * Blocks until {@link #close()} has finished.
     */
    public void awaitClosed()
    {
        try
        {
            closed.await();
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    public boolean awaitClosed(final long timeout, final TimeUnit unit) throws InterruptedException
    {
        return closed.await(timeout, unit);
    }

    /** Stops the beat thread and waits for it, so that nothing writes the heartbeat after this returns. */
    private void stopHeartbeat()
    {
        heartbeat.interrupt();
        try
        {
            heartbeat.join(5_000);
        }
        catch (final InterruptedException ex)
        {
            Thread.currentThread().interrupt();
        }
    }

    /** Stops accepting and closes every connection, then the metrics endpoint. */
    private void stopServing()
    {
        if (null != server)
        {
            server.close();
        }
        if (null != metrics)
        {
            metrics.close();
        }
    }

    /**
     * Graceful shutdown: marks the heartbeat closed (secondaries see it at once), releases every
     * registration and all memory, removes the files, unlocks the directory.
     */
    public synchronized void close()
    {
        if (closing)
        {
            return;
        }
        closing = true;
        LOG.info("shutting down");
        try
        {
            // The heartbeat is closed before the socket: a secondary that sees its connection end looks at the
            // heartbeat at once to tell a stop from a crash, which a fresh heartbeat would hide. The beat
            // thread is stopped before the write, so that it cannot overwrite CLOSED with a timestamp.
            stopHeartbeat();
            controlFile.header().heartbeatMs(HeaderDescriptor.HEARTBEAT_CLOSED);
            // Then no request may reach the engine while it releases everything.
            stopServing();
            engine.close();
            registrar.close();
            counters.set(MrdCounter.BYTES_ALLOCATED, 0);
            memory.close();
            // A clean stop releases everything: the holder has nothing left to keep.
            holder.release();
            journal.daemonStopped(controlFile.header().epoch(), controlFile.header().pid());
            journal.close();
            controlFile.close();
            RunDirectory.deleteQuietly(controlFileTarget);
            runDirectory.removeStaleFiles();
        }
        catch (final RuntimeException ex)
        {
            LOG.error("shutdown failed part way", ex);
        }
        finally
        {
            runDirectory.unlock();
            LOG.info("stopped");
            closed.countDown();
        }
    }
}
