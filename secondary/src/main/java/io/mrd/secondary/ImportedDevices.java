package io.mrd.secondary;

import io.mrd.layout.ControlFile;
import io.mrd.layout.DeviceDescriptor;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.sys.Posix;
import io.mrd.secondary.verbs.Verbs;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The daemon's RDMA devices as this client imported them: one {@link Verbs} per device number, made on first use
 * ({@code IMPORT_PD(device)}: that device's command fd by {@code SCM_RIGHTS}, {@code ibv_import_device},
 * {@code ibv_import_pd}), each reporting its queues to the daemon with its device number, all closed with the
 * client.
 * <p>
 * Thread-safe: imports and the close are serialized on this object.
 */
final class ImportedDevices
{
    private static final Logger LOG = LoggerFactory.getLogger(ImportedDevices.class);

    private final String library;
    private final ControlFile controlFile;
    private final DaemonWatch watch;
    private final DaemonLink connection;
    private final Verbs[] verbs = new Verbs[DeviceDescriptor.MAX_DEVICES];

    ImportedDevices(
        final String library, final ControlFile controlFile, final DaemonWatch watch, final DaemonLink connection)
    {
        this.library = library;
        this.controlFile = controlFile;
        this.watch = watch;
        this.connection = connection;
    }

    /**
     * @see MrdClient#verbs(int)
     */
    synchronized Verbs verbs(final int device)
    {
        watch.requireAliveAsLastSeen();
        Devices.check(controlFile, device);
        if (null == verbs[device])
        {
            final DaemonConnection.Answer answer = connection.callForFd(new Message.ImportPd(device));
            if (!(answer.reply() instanceof Message.PdImported imported))
            {
                Posix.close(answer.fd());
                throw new MrdException(ErrorCode.EPROTO, "the daemon answered IMPORT_PD with " + answer.reply());
            }
            verbs[device] = Verbs.importDevice(library, answer.fd(), imported.pdHandle(), imported.device(),
                (operation, kind, handle) ->
                {
                    watch.requireAliveAsLastSeen();
                    connection.call(new Message.Queues(operation, kind, handle, device));
                }, watch.liveness());
            LOG.debug("imported {} (device {}, PD handle {}) from {}", imported.device(), device,
                imported.pdHandle(), watch.daemon());
        }
        return verbs[device];
    }

    /**
     * Closes every imported device: their queues are destroyed and reported gone.
     */
    synchronized void close()
    {
        for (final Verbs imported : verbs)
        {
            if (null != imported)
            {
                imported.close();
            }
        }
    }
}
