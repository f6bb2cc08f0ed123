package io.mrd.primary.lineage;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.RunDirectoryPath;
import io.mrd.layout.protocol.HolderMessage;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.UnixSocket;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

/**
 * A daemon's side of its {@link DescriptorHolder}: starts one and deposits the descriptors ({@link #launch}), or
 * takes over the one a dead predecessor left ({@link #take}); keeps the connection that makes this daemon the
 * holder's owner; starts a new holder when that one dies; and {@link #release}s it when the daemon stops cleanly.
 * <p>
 * The holder is started with {@code setsid} (when there is one), so that a signal to the daemon's process group
 * does not reach it, with a small heap: it holds a few descriptors and answers a frame now and then.
 */
public final class HolderLink implements AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(HolderLink.class);
    private static final long START_TIMEOUT_MS = 20_000;
    private static final long RESTART_INTERVAL_MS = 1_000;

    /**
     * What a daemon deposits.
     *
     * @param commandFd the device's command file, or -1 without a device ({@code --provider soft}).
     * @param listFds   each memory list's backing file, by list index.
     */
    public record Descriptors(int commandFd, int[] listFds)
    {
        int[] all()
        {
            final int[] all = new int[listFds.length + (commandFd >= 0 ? 1 : 0)];
            int i = 0;
            if (commandFd >= 0)
            {
                all[i++] = commandFd;
            }
            System.arraycopy(listFds, 0, all, i, listFds.length);
            return all;
        }
    }

    /**
     * What a successor took from the holder, which it owns (close what it does not keep).
     *
     * @param link      the link to the holder, which this daemon now owns.
     * @param epoch     the epoch of the daemon that deposited them.
     * @param commandFd the device's command file, or -1.
     * @param listFds   the memory lists' backing files, by list index.
     */
    public record Taken(HolderLink link, long epoch, int commandFd, int[] listFds)
    {
        /** Closes the descriptors taken (those not handed on to whatever keeps them). */
        public void closeDescriptors()
        {
            if (commandFd >= 0)
            {
                Posix.close(commandFd);
            }
            for (final int fd : listFds)
            {
                Posix.close(fd);
            }
        }
    }

    private final Path dir;
    private final long graceMs;
    private final long epoch;
    private volatile Supplier<Descriptors> descriptors;
    private volatile UnixSocket connection;
    private volatile boolean closing;
    /** When the watch last started a holder: only the watch thread reads and writes it. */
    private long startedNs = System.nanoTime();
    private final Thread watch;

    private HolderLink(final Path dir, final long graceMs, final long epoch, final Supplier<Descriptors> descriptors,
        final UnixSocket connection)
    {
        this.dir = dir;
        this.graceMs = graceMs;
        this.epoch = epoch;
        this.descriptors = descriptors;
        this.connection = connection;
        this.watch = Thread.ofPlatform().name("mrd-holder-watch").daemon(true).unstarted(this::watch);
    }

    /**
     * Starts a holder for this daemon and deposits the descriptors with it.
     *
     * @param descriptors what to deposit, read again whenever a new holder must be started.
     * @param cancelled   true once the daemon stops: a holder still starting is killed, not waited for.
     * @throws MrdException when the holder does not start listening within 20 s (its log is
     *                      {@code DIR/mrd-hold.log}), or the start was cancelled.
     */
    public static HolderLink launch(final Path dir, final long graceMs, final long epoch,
        final Supplier<Descriptors> descriptors, final BooleanSupplier cancelled)
    {
        final HolderLink link = new HolderLink(dir, graceMs, epoch, descriptors, startAndDeposit(dir, graceMs, epoch,
            descriptors.get(), cancelled));
        link.watch.start();
        return link;
    }

    /**
     * Takes the descriptors from the holder a dead predecessor left in {@code dir}, making this daemon its owner.
     * The caller holds the run directory's lock, so no other daemon can be taking them.
     *
     * @return what was taken, with the link; empty when no holder listens there (none was started, or it gave up
     *         after its grace period) or it holds nothing for a successor.
     */
    public static Optional<Taken> take(final Path dir, final long graceMs, final long epoch)
    {
        final Path socket = dir.resolve(RunDirectoryPath.HOLD_SOCKET_FILE);
        if (!Files.exists(socket))
        {
            return Optional.empty();
        }
        final UnixSocket connection;
        try
        {
            connection = UnixSocket.connect(socket);
        }
        catch (final MrdException ex)
        {
            LOG.info("no descriptor holder answers on {} ({}): nothing to adopt from it", socket, ex.oneLine());
            return Optional.empty();
        }
        try
        {
            connection.receiveTimeout(5_000);
            HolderChannel.send(connection, HolderMessage.TAKE, 0, 0, new int[0]);
            final HolderChannel.Received received = HolderChannel.receive(connection);
            if (null == received || received.fds().length == 0)
            {
                connection.close();
                return Optional.empty();
            }
            connection.receiveTimeout(0);
            final boolean hasCommandFd = received.frame().hasCommandFd();
            final int[] fds = received.fds();
            final int[] lists = Arrays.copyOfRange(fds, hasCommandFd ? 1 : 0, fds.length);
            final HolderLink link = new HolderLink(dir, graceMs, epoch, null, connection);
            return Optional.of(new Taken(link, received.frame().epoch(), hasCommandFd ? fds[0] : -1, lists));
        }
        catch (final MrdException ex)
        {
            connection.close();
            throw ex;
        }
    }

    /**
     * Starts watching the holder (a successor calls it once it serves: until then a dead holder is its own
     * failure to adopt).
     *
     * @param descriptors what to deposit with a new holder, should this one die.
     */
    public void watchHolder(final Supplier<Descriptors> descriptors)
    {
        this.descriptors = descriptors;
        watch.start();
    }

    /**
     * Tells the holder to close everything and exit, and waits (up to 5 s) until it has let go of the lists'
     * files: a clean stop, or a successor that starts afresh and needs them unlocked.
     */
    public void release()
    {
        closing = true;
        final UnixSocket current = connection;
        try
        {
            HolderChannel.send(current, HolderMessage.RELEASE, 0, epoch, new int[0]);
            current.shutdownOutput();
            current.awaitHangup(5_000);
        }
        catch (final MrdException ex)
        {
            LOG.warn("releasing the descriptor holder: {}", ex.oneLine());
        }
        finally
        {
            current.close();
        }
    }

    /** Lets go of the holder without releasing it (as a crash would): for tests of adoption. */
    public void close()
    {
        closing = true;
        connection.close();
    }

    private void watch()
    {
        while (!closing)
        {
            final UnixSocket current = connection;
            if (!current.awaitHangup(-1) || closing)
            {
                continue;
            }
            LOG.warn("the descriptor holder exited: starting another, or a successor could not adopt this daemon's " +
                "registrations");
            current.close();
            // A holder that cannot keep running (its socket taken, no memory for a JVM) must not be restarted in
            // a tight loop: at most one start per RESTART_INTERVAL_MS.
            final long sinceMs = (System.nanoTime() - startedNs) / 1_000_000;
            if (sinceMs < RESTART_INTERVAL_MS)
            {
                LockSupport.parkNanos((RESTART_INTERVAL_MS - sinceMs) * 1_000_000);
            }
            startedNs = System.nanoTime();
            try
            {
                connection = startAndDeposit(dir, graceMs, epoch, descriptors.get(), () -> closing);
            }
            catch (final MrdException ex)
            {
                LOG.error("cannot start another descriptor holder: a successor will start afresh: {}", ex.oneLine());
                return;
            }
        }
    }

    private static UnixSocket startAndDeposit(final Path dir, final long graceMs, final long epoch,
        final Descriptors descriptors, final BooleanSupplier cancelled)
    {
        final Path socket = dir.resolve(RunDirectoryPath.HOLD_SOCKET_FILE);
        final Process process = start(dir, graceMs);
        final long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
        MrdException last = null;
        while (System.currentTimeMillis() < deadline && process.isAlive() && !cancelled.getAsBoolean())
        {
            if (Files.exists(socket))
            {
                try
                {
                    final UnixSocket connection = UnixSocket.connect(socket);
                    final int[] fds = descriptors.all();
                    HolderChannel.send(connection, HolderMessage.DEPOSIT,
                        descriptors.commandFd() >= 0 ? HolderMessage.FLAG_COMMAND_FD : 0, epoch, fds);
                    LOG.info("descriptor holder pid {} holds {} descriptors (log {})", process.pid(), fds.length,
                        dir.resolve(RunDirectoryPath.HOLD_LOG_FILE));
                    return connection;
                }
                catch (final MrdException ex)
                {
                    last = ex;
                }
            }
            try
            {
                Thread.sleep(20);
            }
            catch (final InterruptedException ex)
            {
                Thread.currentThread().interrupt();
                break;
            }
        }
        process.destroyForcibly();
        if (cancelled.getAsBoolean())
        {
            throw new MrdException(ErrorCode.ECANCELED, "the daemon stopped while its descriptor holder started");
        }
        throw new MrdException(ErrorCode.ETIMEDOUT, "the descriptor holder did not start listening on " + socket +
            " within " + START_TIMEOUT_MS + " ms" + (process.isAlive() ? "" : " (it exited)") +
            (null == last ? "" : ": " + last.oneLine()) + "; see " + dir.resolve(RunDirectoryPath.HOLD_LOG_FILE));
    }

    private static Process start(final Path dir, final long graceMs)
    {
        final List<String> command = new ArrayList<>();
        if (Files.isExecutable(Path.of("/usr/bin/setsid")))
        {
            command.add("/usr/bin/setsid");
        }
        command.add(ProcessHandle.current().info().command()
            .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        command.addAll(List.of("-Xmx24m", "-Xss512k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-XX:CICompilerCount=1", "--enable-native-access=ALL-UNNAMED", "-cp",
            System.getProperty("java.class.path"), DescriptorHolder.class.getName(), dir.toString(),
            Long.toString(graceMs)));
        try
        {
            return new ProcessBuilder(command)
                .redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve(RunDirectoryPath.HOLD_LOG_FILE).toFile()))
                .redirectInput(ProcessBuilder.Redirect.from(Path.of("/dev/null").toFile()))
                .start();
        }
        catch (final IOException ex)
        {
            throw new MrdException(ErrorCode.EIO, "cannot start the descriptor holder (" + command.getFirst() + "): " +
                ex.getMessage());
        }
    }
}
