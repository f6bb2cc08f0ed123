package io.mrd.primary.server;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.UnixSocket;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.unix.PeerCredentials;
import io.netty.util.concurrent.EventExecutor;
import io.netty.util.concurrent.ScheduledFuture;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;

/**
 * Who is at the other end of one connection, and how it becomes a client: the peer check at connect (its
 * credentials, {@code SO_PEERCRED} and its supplementary groups, against the {@link PeerPolicy}), HELLO within
 * {@link #HELLO_TIMEOUT_MS} (the protocol version, a slot of the client table, a client id), and the one later
 * check of the peer, whether it may STOP the daemon. Refusals are journaled, counted and logged here; the
 * session answers them and closes.
 * <p>
 * <b>Threads.</b> Written on the event loop only: the credentials at connect, the client's id, slot and name
 * at HELLO, before any request of the client is handed to a worker. Workers read them (logs, the client id
 * and pid a request runs as, the reclaim) only for requests submitted after HELLO, so the executor's hand-off
 * orders those reads after the writes; the client id is volatile besides, for the reads that are not.
 */
final class PeerHandshake
{
    /** A connection must say HELLO within this. */
    static final long HELLO_TIMEOUT_MS = 10_000;

    private static final Logger LOG = LoggerFactory.getLogger(ClientSession.class);

    private final SessionServices services;
    private final EpollDomainSocketChannel channel;
    private int pid = -1;
    private int uid = -1;
    private int gid = -1;
    private int slot = -1;
    private String name = "";
    private volatile int clientId;
    private ScheduledFuture<?> helloTimer;

    PeerHandshake(final SessionServices services, final EpollDomainSocketChannel channel)
    {
        this.services = services;
        this.channel = channel;
    }

    /**
     * @return the client's id once it said HELLO, 0 before.
     */
    int clientId()
    {
        return clientId;
    }

    int pid()
    {
        return pid;
    }

    /**
     * @return the client's slot of the client table once it said HELLO, -1 before.
     */
    int slot()
    {
        return slot;
    }

    /**
     * @return the name the client gave in HELLO, made printable; empty before.
     */
    String name()
    {
        return name;
    }

    /**
     * Reads the peer's credentials and checks them, at connect.
     *
     * @return why the peer is refused (journaled, counted and logged), or null when it is admitted.
     */
    String admit()
    {
        final int[] gids;
        try
        {
            final PeerCredentials credentials = channel.peerCredentials();
            pid = credentials.pid();
            uid = credentials.uid();
            gid = credentials.gids().length > 0 ? credentials.gids()[0] : -1;
            gids = IntStream.concat(Arrays.stream(credentials.gids()),
                Arrays.stream(UnixSocket.peerGroups(channel.fd().intValue()))).distinct().toArray();
        }
        catch (final IOException | RuntimeException ex)
        {
            return refused("cannot read the peer's credentials (SO_PEERCRED): " + ex);
        }
        final String refusal = services.peerPolicy().refusal(pid, uid, gids);
        if (null != refusal)
        {
            return refused(refusal);
        }
        LOG.debug("connection from pid {} uid {} gids {}", pid, uid, gids);
        return null;
    }

    private String refused(final String why)
    {
        services.journal().clientRefused(pid, uid, ErrorCode.EPERM);
        services.counters().increment(MrdCounter.PEERS_REJECTED);
        services.refusals().refused(why);
        return why;
    }

    /**
     * Runs {@code timedOut} on {@code executor} (the event loop) unless HELLO comes first or
     * {@link #cancelHelloTimer()} is called.
     */
    void awaitHello(final EventExecutor executor, final Runnable timedOut)
    {
        helloTimer = executor.schedule(timedOut, HELLO_TIMEOUT_MS, TimeUnit.MILLISECONDS);
    }

    void cancelHelloTimer()
    {
        if (null != helloTimer)
        {
            helloTimer.cancel(false);
            helloTimer = null;
        }
    }

    /**
     * @return why a HELLO is refused as a protocol error (a version the daemon does not speak), or null.
     */
    static String versionRefusal(final Message.Hello hello)
    {
        if (hello.version() == FrameDescriptor.PROTOCOL_VERSION)
        {
            return null;
        }
        return "expected HELLO version " + FrameDescriptor.PROTOCOL_VERSION + ", got version " + hello.version() +
            ": use a client library that speaks the daemon's protocol version";
    }

    /**
     * Makes the peer a client: a slot of the client table and an id. The version is checked already.
     *
     * @return the WELCOME to answer, or EBUSY (logged and journaled) when the client table is full.
     */
    Message.Reply hello(final Message.Hello hello)
    {
        final String clean = ClientTable.printable(hello.name());
        if (0 != hello.resumeClientId())
        {
            try
            {
                services.adopted().claim(hello.resumeClientId(), pid, uid);
            }
            catch (final MrdException ex)
            {
                services.refusals().refused("client pid " + pid + " (" + clean + ") cannot resume: " + ex.oneLine());
                return new Message.Status(MessageType.HELLO, ex.code(), ex.getMessage());
            }
        }
        final int id = 0 != hello.resumeClientId() ? hello.resumeClientId() : services.clientIds().getAsInt();
        final int taken = services.clients().add(id, pid, uid, gid, clean);
        if (taken < 0)
        {
            final String why = "the daemon has " + services.clients().capacity() + " clients connected, its " +
                "--max-clients: close a client or start the daemon with a larger --max-clients";
            services.refusals().refused("client pid " + pid + " (" + clean + ") refused: " + why);
            services.journal().clientRefused(pid, uid, ErrorCode.EBUSY);
            return new Message.Status(MessageType.HELLO, ErrorCode.EBUSY, why);
        }
        cancelHelloTimer();
        slot = taken;
        name = clean;
        clientId = id;
        services.counters().increment(MrdCounter.CLIENTS_TOTAL);
        services.journal().clientAttached(id, pid, uid);
        LOG.info("client {} (pid {}, uid {}, {}) {}", id, pid, uid, clean.isEmpty() ? "no name" : clean,
            0 != hello.resumeClientId() ? "resumed, keeping what it held" : "connected");
        return new Message.Welcome(ErrorCode.OK, "", id, services.epoch(), HeaderDescriptor.LAYOUT_VERSION,
            services.controlFilePath());
    }

    /**
     * @return why this client may not STOP the daemon (logged), or null when it may.
     */
    String stopRefusal()
    {
        final PeerPolicy policy = services.peerPolicy();
        if (policy.mayStop(uid))
        {
            LOG.info("STOP from client {} (pid {}, uid {})", clientId, pid, uid);
            return null;
        }
        final String why = "STOP refused for client " + clientId + " (pid " + pid + " uid " + uid + "): only the " +
            "daemon's uid " + policy.daemonUid() + " or root may stop it; run 'mrd stop' as that user";
        services.refusals().refused(why);
        return why;
    }

    /**
     * @return the peer for a log line: its client id once it has one, its pid, uid and name.
     */
    String describe()
    {
        return (clientId == 0 ? "peer" : "client " + clientId) + " (pid " + pid + " uid " + uid +
            (name.isEmpty() ? "" : ", " + name) + ")";
    }
}
