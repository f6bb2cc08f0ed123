package io.mrd.primary.lineage;

import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.HolderMessage;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixListener;
import io.mrd.layout.sys.UnixSocket;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The descriptor holder: a process of its own, started by the daemon in a session of its own, that keeps what a
 * successor needs to adopt the daemon's registrations and cannot find in files: the RDMA device's command file
 * (the kernel keeps a verbs context, its PD and its MRs for as long as any process holds it) and the memory
 * lists' backing files (whose {@code flock} then stays taken, so that no cleaner of stale files truncates them).
 * <p>
 * It serves one daemon at a time, its <em>owner</em>: the one that deposited the descriptors, or the successor
 * that took them. The owner's connection stays open; when it ends without a RELEASE the owner is gone, and the
 * holder waits up to the grace period for a successor's TAKE. It exits, closing everything, on a RELEASE (the
 * daemon stopped cleanly, or a successor starts afresh), when the grace period passes with no owner, or when its
 * socket file or run directory disappears. Only the holder's own uid may connect ({@code SO_PEERCRED}, and the
 * socket file's mode 0600): that, and the successor's checks of every handle against what the device says
 * ({@link Predecessor}), is why no client can plant a device of its own (docs/adoption.md, the trust argument).
 * <p>
 * Single-threaded: it polls its listener and its owner's connection in turn; every exchange is a frame or two.
 */
public final class DescriptorHolder
{
    private static final Logger LOG = LoggerFactory.getLogger(DescriptorHolder.class);
    private static final int POLL_MS = 100;
    /** How long a peer may take to send its frame once connected. */
    private static final int PEER_TIMEOUT_MS = 5_000;

    private final Path dir;
    private final Path socket;
    private final long graceMs;
    private final int uid = Posix.getuid();
    private HolderChannel.Received held;
    private UnixSocket owner;
    private long ownerGoneMs = System.currentTimeMillis();
    private boolean released;

    private DescriptorHolder(final Path dir, final long graceMs)
    {
        this.dir = dir;
        this.socket = dir.resolve(RunDirectoryPath.HOLD_SOCKET_FILE);
        this.graceMs = graceMs;
    }

    /**
     * {@code DescriptorHolder DIR GRACE_MS}: what {@link HolderLink#launch} runs.
     */
    public static void main(final String[] args)
    {
        if (args.length != 2)
        {
            System.err.println("usage: DescriptorHolder DIR GRACE_MS (started by mrd start, not by hand)");
            System.exit(2);
        }
        final DescriptorHolder holder = new DescriptorHolder(Path.of(args[0]), Long.parseLong(args[1]));
        try (UnixListener listener = UnixListener.bind(holder.socket))
        {
            LOG.info("descriptor holder pid {} on {}, grace {} ms", ProcessHandle.current().pid(), holder.socket,
                holder.graceMs);
            holder.run(listener);
        }
        catch (final MrdException ex)
        {
            LOG.error("descriptor holder failed: {}", ex.oneLine());
            System.exit(1);
        }
        finally
        {
            holder.closeHeld();
        }
        System.exit(0);
    }

    private void run(final UnixListener listener)
    {
        while (!released)
        {
            final UnixSocket peer = listener.accept(POLL_MS);
            if (null != peer)
            {
                serve(peer);
            }
            if (null != owner && owner.awaitHangup(0))
            {
                ownerEnded();
            }
            if (null == owner && System.currentTimeMillis() - ownerGoneMs > graceMs)
            {
                LOG.info("no daemon took the descriptors within {} ms: closing them and exiting{}", graceMs,
                    null == held ? "" : " (the device's context lives on in the secondaries that imported it)");
                return;
            }
            if (!Files.exists(socket) || !Files.isDirectory(dir))
            {
                LOG.info("{} is gone: exiting", Files.isDirectory(dir) ? socket : dir);
                return;
            }
        }
        LOG.info("released by the daemon: exiting");
    }

    /**
     * One new connection: DEPOSIT or TAKE makes it the owner; anything else, or another uid, is refused by
     * closing it.
     */
    private void serve(final UnixSocket peer)
    {
        boolean keep = false;
        try
        {
            final int peerUid = UnixListener.peerUid(peer);
            if (peerUid != uid)
            {
                LOG.warn("refused a connection from uid {}: only uid {} may take the descriptors", peerUid, uid);
                return;
            }
            peer.receiveTimeout(PEER_TIMEOUT_MS);
            final HolderChannel.Received received = HolderChannel.receive(peer);
            if (null == received)
            {
                return;
            }
            keep = switch (received.frame().type())
            {
                case HolderMessage.DEPOSIT -> deposit(peer, received);
                case HolderMessage.TAKE -> take(peer);
                default ->
                {
                    received.closeAll();
                    LOG.warn("refused a {} from a daemon that does not own the descriptors", received.frame().type());
                    yield false;
                }
            };
            if (keep)
            {
                peer.receiveTimeout(0);
            }
        }
        catch (final MrdException ex)
        {
            LOG.warn("a peer failed: {}", ex.oneLine());
        }
        finally
        {
            if (!keep)
            {
                peer.close();
            }
        }
    }

    private boolean deposit(final UnixSocket peer, final HolderChannel.Received received)
    {
        // Only the daemon that started this holder deposits, once: what it holds is then a dead daemon's until a
        // successor takes it, and nobody may swap a device of their own in for it.
        if (null != held)
        {
            received.closeAll();
            LOG.warn("refused a deposit: the holder holds a daemon's descriptors already{}",
                null == owner ? " (for its successor)" : "");
            return false;
        }
        held = received;
        owner = peer;
        LOG.info("holding {} descriptors of epoch {} ({})", received.fds().length,
            Long.toHexString(received.frame().epoch()), received.frame().hasCommandFd() ?
            "the device's command file and the memory lists" : "the memory lists");
        return true;
    }

    private boolean take(final UnixSocket peer)
    {
        // A successor may ask before this loop has seen its owner's hangup: an owner that exited is gone now.
        if (null != owner && owner.awaitHangup(0))
        {
            ownerEnded();
        }
        if (null != owner || null == held)
        {
            HolderChannel.send(peer, HolderMessage.HELD, 0, 0, new int[0]);
            LOG.warn("refused a take: {}", null == held ? "nothing is held" : "the owner is alive");
            return false;
        }
        HolderChannel.send(peer, HolderMessage.HELD, held.frame().flags(), held.frame().epoch(), held.fds());
        owner = peer;
        LOG.info("a successor took the descriptors of epoch {} after {} ms", Long.toHexString(held.frame().epoch()),
            System.currentTimeMillis() - ownerGoneMs);
        return true;
    }

    /**
     * The owner's connection ended or has a frame: a RELEASE ends the holder; anything else means the owner is
     * gone and the grace period starts.
     */
    private void ownerEnded()
    {
        HolderChannel.Received last = null;
        try
        {
            owner.receiveTimeout(PEER_TIMEOUT_MS);
            last = HolderChannel.receive(owner);
        }
        catch (final MrdException ex)
        {
            // a daemon killed mid-frame is a daemon gone
        }
        if (null != last && last.frame().type() == HolderMessage.RELEASE)
        {
            // Everything closed before the connection is: the releasing daemon waits for the hang-up, and then
            // takes the lists' files' locks itself.
            last.closeAll();
            closeHeld();
            released = true;
            owner.close();
            owner = null;
            return;
        }
        owner.close();
        owner = null;
        if (null != last)
        {
            last.closeAll();
        }
        ownerGoneMs = System.currentTimeMillis();
        LOG.info("the daemon's connection ended: holding for a successor for {} ms", graceMs);
    }

    private void closeHeld()
    {
        if (null != held)
        {
            held.closeAll();
            held = null;
        }
    }
}
