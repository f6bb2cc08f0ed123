package io.mrd.primary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.ControlHeader;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Sizes;
import io.mrd.primary.journal.EventJournal;
import io.mrd.primary.journal.MemoryJournaling;
import io.mrd.primary.lineage.HolderLink;
import io.mrd.primary.lineage.Predecessor;
import io.mrd.primary.memory.MemoryConfig;
import io.mrd.primary.memory.MemoryManager;
import io.mrd.primary.mr.MrEngine;
import io.mrd.primary.provider.DeviceSelection;
import io.mrd.primary.provider.IbverbsRegistrar;
import io.mrd.primary.provider.ProviderConfig;
import io.mrd.primary.provider.Registrar;
import io.mrd.primary.provider.Registrars;
import io.mrd.primary.provider.SharedDevice;
import io.mrd.primary.provider.TimedRegistrar;
import io.mrd.primary.server.AdoptedClients;
import org.agrona.concurrent.SystemEpochClock;
import org.agrona.concurrent.errors.DistinctErrorLog;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static io.mrd.primary.DaemonSettings.BASE_VIRTADDR;
import static io.mrd.primary.DaemonSettings.HEARTBEAT_INTERVAL;
import static io.mrd.primary.DaemonSettings.JOURNAL_SIZE;
import static io.mrd.primary.DaemonSettings.MR_EXT_MEMSEG;

/**
 * A successor's start (docs/adoption.md): it adopts the state a dead daemon left in its run directory, which
 * {@link Predecessor#find} has checked, instead of starting afresh. The steps, in order:
 * <ol>
 *   <li>map the same control file read-write (the secondaries keep theirs) and read the predecessor's clients;</li>
 *   <li>map the memory lists from the files the holder kept, at the same addresses, with the allocations the
 *   control file records;</li>
 *   <li>import the device and PD ({@code ibverbs}), or start the provider ({@code soft});</li>
 *   <li>take over every MR by handle, checked against the device (nothing is registered: the device's count of
 *   registrations does not move), and keep the global cache as it is;</li>
 *   <li>write this daemon's epoch, with the adopted one beside it (the lineage), and a fresh heartbeat; serve,
 *   keeping the clients' allocations for the grace period; write its pid; keep the holder, which now stands for
 *   this daemon.</li>
 * </ol>
 * A failure at any step undoes the steps before it and throws; the caller then starts afresh.
 */
final class DaemonAdoption
{
    private static final Logger LOG = LoggerFactory.getLogger(DaemonAdoption.class);

    private DaemonAdoption()
    {
    }

    static MrdDaemon adopt(final DaemonContext context, final RunDirectory runDirectory,
        final ControlFileLayout layout, final long epoch, final Predecessor predecessor)
    {
        final long startNs = System.nanoTime();
        ControlFile ctl = null;
        MemoryManager memory = null;
        Registrar registrar = null;
        MrEngine engine = null;
        EventJournal journal = EventJournal.OFF;
        MrdDaemon daemon = null;
        try
        {
            LOG.info("adopting the previous daemon's state ({}) with {}", predecessor, context);
            HeapPolicy.apply();
            ctl = ControlFile.openReadWrite(predecessor.controlFile());
            final AdoptedClients clients = AdoptedClients.read(ctl);
            final ControlHeader header = ctl.header();

            journal = MrdDaemon.openJournal(context, runDirectory, epoch);
            journal.daemonStarted(epoch, ProcessHandle.current().pid(), context.get(JOURNAL_SIZE));
            final DaemonCounters counters = new DaemonCounters(ctl);
            final DistinctErrorLog errorLog = new DistinctErrorLog(ctl.errorLogBuffer(), SystemEpochClock.INSTANCE);
            memory = new MemoryManager(new MemoryConfig(context.get(BASE_VIRTADDR), DaemonContext.SEGMENT_SIZE,
                context.listCount(), context.segmentsPerList(), runDirectory.memDir(), predecessor.hugeDir(),
                ctl.buffer(), layout, predecessor.duplicateListFds()));
            counters.set(MrdCounter.BYTES_ALLOCATED, memory.bytesAllocated());
            memory.addEventListener(new MemoryJournaling(journal));

            registrar = adoptProvider(context.providerConfig(), predecessor);
            engine = MrEngine.adopting(ctl, memory, new TimedRegistrar(registrar, counters.histograms()), counters,
                errorLog, context.get(MR_EXT_MEMSEG), journal);
            daemon = new MrdDaemon(context, runDirectory, ctl, target(predecessor.controlFile()), counters, errorLog,
                memory, registrar, engine, journal);
            // The lineage is written only now, all checks passed: a successor killed before this leaves the header
            // naming the predecessor still, so that a third daemon adopts it and the clients in the gap, waiting for
            // a daemon that names their epoch as adopted, resume with that one. The pid comes once the daemon
            // serves: 'mrd start' and the tools take a header naming a live pid for a daemon that answers.
            final long now = System.currentTimeMillis();
            header.adoptedEpoch(predecessor.epoch())
                .epoch(epoch)
                .startTimeMs(now)
                .heartbeatMs(now)
                .heartbeatIntervalMs(context.get(HEARTBEAT_INTERVAL))
                .heartbeatStaleLimitMs(Heartbeat.staleLimitMs(context.get(HEARTBEAT_INTERVAL)));
            daemon.serve(clients);
            header.pid(ProcessHandle.current().pid());
            final HolderLink holder = predecessor.keepHolder();
            daemon.keepHolder(holder);
            holder.watchHolder(daemon::heldDescriptors);
            predecessor.close();
            daemon.startHeartbeat();
            LOG.info("mrd ready: pid {} dir {} epoch {} adopted epoch {} in {} ms: {} MRs ({} registered again: " +
                "none), {} allocated, {}, kept for {} ms", header.pid(), context.get(DaemonSettings.DIR),
                Long.toHexString(epoch), Long.toHexString(predecessor.epoch()),
                (System.nanoTime() - startNs) / 1_000_000, engine.adoptedMrs(), registrar.name(),
                Sizes.format(memory.bytesAllocated()), clients, context.get(DaemonSettings.ADOPTION_GRACE));
            return daemon;
        }
        catch (final RuntimeException ex)
        {
            // Not the daemon's close: that would unlock the directory the caller goes on to start afresh in.
            if (null != daemon && null != daemon.server())
            {
                daemon.server().close();
                if (null != daemon.metrics())
                {
                    daemon.metrics().close();
                }
            }
            if (null != engine)
            {
                engine.close();
            }
            FreshStart.closeStarted(ctl, memory, registrar, journal);
            throw ex;
        }
    }

    /**
     * @return the predecessor's provider, taken over: its device imported from the holder's command file and its
     * PD by handle ({@code ibverbs}, the device's name checked against the header), or a new {@code soft}
     * provider, which pins the MRs again as the engine adopts them.
     */
    private static Registrar adoptProvider(final ProviderConfig config, final Predecessor predecessor)
    {
        if (!ProviderConfig.IBVERBS.equals(predecessor.provider()))
        {
            return Registrars.create(config);
        }
        final List<String> devices = DeviceSelection.names(config.deviceName());
        if (devices.size() > 1 || devices.equals(List.of(ProviderConfig.ALL_DEVICES)))
        {
            // The holder keeps device 0's command file only, and the header names device 0 only: the MRs of the
            // other devices went with the predecessor's contexts.
            throw new MrdException(ErrorCode.EOPNOTSUPP, "--device " + config.deviceName().orElseThrow() +
                " names several devices, and a daemon on several devices is not adopted yet (docs/multi-device.md): " +
                "starting afresh");
        }
        final IbverbsRegistrar registrar = IbverbsRegistrar.adopting(config, predecessor.duplicateCommandFd(),
            predecessor.pdHandle());
        final String imported = registrar.sharedDevice().map(SharedDevice::deviceName).orElse("");
        if (!imported.equals(predecessor.deviceName()))
        {
            registrar.close();
            throw new MrdException(ErrorCode.EINVAL, "the held command file is of device " + imported +
                ", but the control file's MRs are on " + predecessor.deviceName() + ": not the predecessor's");
        }
        return registrar;
    }

    /** @return the file a control file link points to (on hugetlbfs), else the file itself. */
    private static Path target(final Path controlFile)
    {
        try
        {
            return Files.isSymbolicLink(controlFile) ?
                controlFile.resolveSibling(Files.readSymbolicLink(controlFile)) : controlFile;
        }
        catch (final IOException ex)
        {
            return controlFile;
        }
    }
}
