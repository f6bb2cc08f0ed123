package io.mrd.cli.rdma;

import io.mrd.layout.Access;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.verbs.CompletionQueue;
import io.mrd.secondary.verbs.Opcode;
import io.mrd.secondary.verbs.QpCaps;
import io.mrd.secondary.verbs.QueuePair;
import io.mrd.secondary.verbs.SgeList;
import io.mrd.secondary.verbs.Verbs;
import io.mrd.secondary.verbs.WorkCompletions;

import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * One side of two secondaries moving data into each other's memory with mrd's keys, over the daemon's device
 * imported into each ({@code client.verbs()}): what {@code mrd worker --rdma-peer} and the RDMA end-to-end test
 * run. It creates an RC queue pair, trades cards with its peer through files in an exchange directory (qp_num,
 * the address of its window and the rkey its MrCache gives for it), connects, and for the time given moves data
 * both ways, each message {@code seq}:
 * <ol>
 *   <li>an RDMA WRITE of 64 B..16 KiB over 1 to 3 SGEs into the peer's inbox slot {@code seq % W};</li>
 *   <li>a SEND of a 64-byte header and 0..1 KiB of payload (2 SGEs): RC delivers it after the write, so the
 *       peer then checks the inbox slot and the payload word by word ({@link WordPattern});</li>
 *   <li>an RDMA READ of 64 B..8 KiB over 1 or 2 SGEs from the peer's readable region, checked on completion;</li>
 * </ol>
 * and the receiver RDMA-WRITEs how far it has checked into the sender's ack word, which opens the sender's
 * window of {@code W} messages. Every lkey comes from the MrCache at the moment of the post; the rkeys are the
 * peer's. Every 250 ms it swaps its staging memory (the source of its writes and sends, the target of its
 * reads) for a spare, frees the old and allocates the next spare, which often lands where the old one was: a
 * cache that kept a key across the memory free event would post a dead key there.
 * Every 300 ms it runs a {@link StaleKeyProbe} on a loopback pair of its own.
 * <p>
 * The requests to the daemon run on a thread of their own ({@link DaemonRequests}): while no daemon runs, the
 * RDMA goes on with the staging memory it has, and a rotation or probe waits until its memory came.
 * <p>
 * Logs {@code connected ...}, {@code progress ...} and {@code error ...} lines; {@link #result()} says what it
 * counted. One datapath thread.
 */
public final class RdmaExchange
{
    static final int W = 16;
    static final int RECEIVES = 2 * W;
    static final long SEGMENT = 2L << 20;

    // the window, remotely writable and readable: what the peer reaches with its rkey
    static final long INBOX = 0;
    static final int INBOX_SLOT = 16 << 10;
    static final long READABLE = INBOX + (long)W * INBOX_SLOT;
    static final int READABLE_LENGTH = 256 << 10;
    static final long RECV = READABLE + READABLE_LENGTH;
    static final int RECV_SLOT = 2 << 10;
    static final long ACK = RECV + (long)RECEIVES * RECV_SLOT;
    static final long CANARY = ACK + 4096;
    static final int CANARY_LENGTH = 4096;
    /** The readable region's words are those of this message of its owner. */
    static final long READABLE_SEQ = -1;

    // staging, local: what this side writes from and reads into
    static final long WRITE_SOURCE = 0;
    static final long SEND_SOURCE = WRITE_SOURCE + (long)W * INBOX_SLOT;
    static final int SEND_SLOT = RECV_SLOT;
    static final long READ_TARGET = SEND_SOURCE + (long)W * SEND_SLOT;
    static final int READ_SLOT = 8 << 10;
    static final long ACK_SOURCE = READ_TARGET + (long)W * READ_SLOT;
    static final long FIN_SOURCE = ACK_SOURCE + 16 * 16;

    static final int HEADER = 64;
    static final long OP_DATA = 1;
    static final long OP_FIN = 2;
    /** Payload words are numbered from here, so they never equal the written words of the same message. */
    static final long PAYLOAD_WORDS = 1L << 20;

    static final long KIND_WRITE = 1;
    static final long KIND_SEND = 2;
    static final long KIND_READ = 3;
    static final long KIND_ACK = 4;
    static final long KIND_RECV = 5;
    static final long KIND_FIN = 6;

    private final String name;
    private final PrintWriter log;
    private final int id;
    private final MrCache cache;
    private final Verbs verbs;
    private final CompletionQueue cq;
    private final QueuePair qp;
    private final MemorySegment window;
    private MemorySegment staging;
    private final DaemonRequests requests;
    private final StagingRotation rotation;
    private final SplittableRandom random;
    private final SgeList sges = new SgeList(3);
    private final WorkCompletions completions = new WorkCompletions(32);
    private final StaleKeyProbe probe;
    private final UnboundTransfers unbound;
    private final long unboundAtStart;

    private int peerId;
    private long peerWindow;
    private int peerRkey;

    private long nextSeq = 1;
    private long peerAck;
    private long peerVerified;
    private long lastAckSent;
    private int ackSlot;
    private int sendsInFlight;
    private final int[] pending = new int[W];
    private final int[] readLength = new int[W];
    private final int[] readOffset = new int[W];
    private boolean finSent;
    private boolean finReceived;

    private long wrs;
    private long bytesVerified;
    private long wrongBytes;
    private long liveProtectionErrors;
    private long otherErrors;
    private String firstError = "";

    /**
     * What one side counted.
     *
     * @param wrs                  work requests completed successfully, sends and receives.
     * @param bytesVerified        bytes checked right at their target (inbox, payload, read).
     * @param wrongBytes           bytes that were not what the sender wrote.
     * @param protectionErrors     work requests on live keys completed with a protection error (LOC_PROT_ERR,
     *                             REM_ACCESS_ERR, LOC_ACCESS_ERR).
     * @param otherErrors          work requests completed with another error (flushes after one included).
     * @param staleKeyRequests     requests posted on purpose with the key of memory just freed.
     * @param staleKeyRefusals     those that completed with a protection error and changed no byte.
     * @param staleTargetsChecked  those whose target could be read back (the memory was allocated again there).
     * @param rotations            times the staging memory was freed and allocated again.
     * @param rotationsSameAddress of those, how many got the same address back (a stale key would reach it).
     * @param unboundTransfers     transfers the emulated device refused during the run because an MR's page was
     *                             gone (a key of freed memory that an HCA would have honoured; any side's, the
     *                             count is the daemon's context's), -1 when the device cannot say.
     * @param firstError           what went wrong first, "" when nothing did.
     */
    public record Result(
        long wrs, long bytesVerified, long wrongBytes, long protectionErrors, long otherErrors, long staleKeyRequests,
        long staleKeyRefusals, long staleTargetsChecked, long rotations, long rotationsSameAddress,
        long unboundTransfers, String firstError)
    {
        /** @return true when nothing was wrong, no transfer was unbound and every stale-key request was refused. */
        public boolean clean()
        {
            return wrongBytes == 0 && protectionErrors == 0 && otherErrors == 0 && staleKeyRequests == staleKeyRefusals &&
                unboundTransfers <= 0 && firstError.isEmpty();
        }
    }

    /**
     * On device 0: {@link #RdmaExchange(MrdClient, String, PrintWriter, int)}.
     */
    public RdmaExchange(final MrdClient client, final String name, final PrintWriter log)
    {
        this(client, name, log, 0);
    }

    /**
     * Allocates the window and the staging memory, imports the daemon's PD of {@code device} and creates the
     * queues there; every key this side posts or hands its peer is that device's (both sides must name the same
     * device: a queue pair accepts only its own device's keys).
     *
     * @param name   this side's name, as the peer passes it ({@code --rdma-peer}).
     * @param log    where the progress lines go.
     * @param device the daemon's device number ({@code --rdma-device}).
     */
    public RdmaExchange(final MrdClient client, final String name, final PrintWriter log, final int device)
    {
        this.name = name;
        this.log = log;
        this.id = name.hashCode() & 0x7FFF_FFFF;
        this.random = new SplittableRandom(System.nanoTime());
        this.cache = client.newCache(device);
        this.window = client.allocate(SEGMENT, Access.REMOTE_WRITE | Access.REMOTE_READ);
        this.staging = client.allocate(SEGMENT, Access.REMOTE_READ);
        this.requests = new DaemonRequests(client, name, device);
        this.rotation = new StagingRotation(requests, SEGMENT);
        WordPattern.fill(window, READABLE, READABLE_LENGTH, id, READABLE_SEQ, 0);
        this.verbs = client.verbs(device);
        this.cq = verbs.createCq(4 * W + RECEIVES + 64);
        this.qp = verbs.createRcQp(cq, cq, new QpCaps(4 * W + 32, RECEIVES, 3, 2));
        this.probe = new StaleKeyProbe(requests, cache, verbs, window);
        this.unbound = new UnboundTransfers(verbs);
        this.unboundAtStart = unbound.read();
    }

    /**
     * @return what was counted so far.
     */
    public Result result()
    {
        final long unboundNow = unbound.read();
        return new Result(wrs, bytesVerified, wrongBytes, liveProtectionErrors, otherErrors, probe.probes,
            probe.refused, probe.targetsChecked, rotation.rotations, rotation.rotationsSameAddress,
            unboundNow < 0 ? -1 : unboundNow - unboundAtStart,
            !firstError.isEmpty() || probe.notRefused.isEmpty() ? firstError :
            "a stale-key request completed with " + probe.notRefused);
    }

    /**
     * Trades cards with the peer through {@code exchange} (both sides name the same directory) and connects.
     *
     * @throws IOException when the exchange directory cannot be written; IllegalStateException when the peer's
     *                     card does not come within 60 s.
     */
    public void connect(final Path exchange, final String peerName) throws IOException
    {
        // what a run that ended half-way left of this side; the peer's leftovers are its own to replace
        Files.deleteIfExists(exchange.resolve(name + ".card"));
        Files.deleteIfExists(exchange.resolve(name + ".ready"));
        final long rkey = KeyPair.rkey(cache.keyPair(window));
        write(exchange.resolve(name + ".card"), qp.qpNum() + " " + window.address() + " " + rkey + " " + id + " " +
            verbs.deviceName());
        final String[] card = await(exchange.resolve(peerName + ".card")).split(" ");
        // QueuePair.connect reaches its peer through its own port (loopback): the peer must be on this device.
        if (card.length < 5 || !card[4].equals(verbs.deviceName()))
        {
            throw new IllegalStateException(peerName + " is on device " + (card.length < 5 ? "?" : card[4]) +
                " and " + name + " on " + verbs.deviceName() + ": a queue pair connects to a peer on its own " +
                "device; give both workers the same --rdma-device");
        }
        peerWindow = Long.parseLong(card[1]);
        peerRkey = (int)Long.parseLong(card[2]);
        peerId = Integer.parseInt(card[3]);
        qp.connect(Integer.parseInt(card[0]));
        for (int slot = 0; slot < RECEIVES; slot++)
        {
            postRecv(slot);
        }
        // the peer sends only once this side's receives are posted and its queue pair is ready
        write(exchange.resolve(name + ".ready"), "ready");
        await(exchange.resolve(peerName + ".ready"));
        // both sides read both cards before writing their own "ready": the directory can be reused
        Files.deleteIfExists(exchange.resolve(peerName + ".card"));
        Files.deleteIfExists(exchange.resolve(peerName + ".ready"));
        log.println("connected qp=" + qp.qpNum() + " peer=" + card[0] + " window=0x" +
            Long.toHexString(window.address()) + " rkey=0x" + Long.toHexString(rkey));
        log.flush();
    }

    /**
     * Moves data for {@code durationNs}, then finishes with the peer (each side sends FIN once all its messages
     * were acknowledged) and returns once its requests to the daemon are done; or returns early when a work
     * request failed.
     */
    public void run(final long durationNs)
    {
        final long start = System.nanoTime();
        long nextProgress = start + TimeUnit.MILLISECONDS.toNanos(500);
        long nextRotation = start + TimeUnit.MILLISECONDS.toNanos(250);
        long nextProbe = start + TimeUnit.MILLISECONDS.toNanos(300);
        boolean rotating = false;
        int idle = 0;
        while (!(finSent && finReceived && sendsInFlight == 0))
        {
            final long now = System.nanoTime();
            final boolean finishing = now - start > durationNs || !firstError.isEmpty();
            final int done = poll();
            readAck();
            if (peerVerified > lastAckSent && (peerVerified - lastAckSent >= 4 || done == 0))
            {
                postAck();
            }
            if (now - nextProgress > 0)
            {
                progress();
                nextProgress = now + TimeUnit.MILLISECONDS.toNanos(500);
            }
            requests.rethrowFailure();
            // a rotation drains the window first: begin one only once its spare came
            rotating |= !finishing && now - nextRotation > 0 && rotation.ready();
            final boolean quiet = quiet();
            if (rotating && quiet)
            {
                staging = rotation.rotate(staging);
                rotating = false;
                nextRotation = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(250);
            }
            else if (!finishing && now - nextProbe > 0 && probe.ready())
            {
                probe.run(peerId);
                nextProbe = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(300);
            }
            else if (finishing && quiet && !finSent)
            {
                postFin();
            }
            int posted = 0;
            while (!finishing && !rotating && canPost())
            {
                postMessage();
                posted++;
            }
            idle = done == 0 && posted == 0 ? idle + 1 : 0;
            if (idle > 64)
            {
                LockSupport.parkNanos(20_000); // two cores: leave one to the device's DMA engine
            }
        }
        progress();
        requests.finish();
    }

    private boolean canPost()
    {
        final int slot = (int)(nextSeq % W);
        return nextSeq - peerAck <= W && pending[slot] == 0 && sendsInFlight + 3 <= qp.caps().maxSendWr() - 2;
    }

    private boolean quiet()
    {
        if (sendsInFlight != 0 || peerAck != nextSeq - 1)
        {
            return false;
        }
        for (final int p : pending)
        {
            if (p != 0)
            {
                return false;
            }
        }
        return true;
    }

    private void postMessage()
    {
        final long seq = nextSeq++;
        final int slot = (int)(seq % W);
        final int writeLength = 8 * (8 + random.nextInt(INBOX_SLOT / 8 - 7));
        final int payload = 8 * random.nextInt((SEND_SLOT - HEADER) / 8 / 2 + 1);
        final int readLen = 8 * (8 + random.nextInt(READ_SLOT / 8 - 7));
        final int readOff = 8 * random.nextInt((READABLE_LENGTH - readLen) / 8 + 1);

        final long writeSource = staging.address() + WRITE_SOURCE + (long)slot * INBOX_SLOT;
        WordPattern.fill(staging, WRITE_SOURCE + (long)slot * INBOX_SLOT, writeLength, id, seq, 0);
        gather(writeSource, writeLength, 1 + random.nextInt(3));
        qp.postSend(wrId(KIND_WRITE, seq), Opcode.RDMA_WRITE, sges, peerWindow + INBOX + (long)slot * INBOX_SLOT,
            peerRkey, true);

        final long header = SEND_SOURCE + (long)slot * SEND_SLOT;
        staging.set(JAVA_LONG, header, OP_DATA);
        staging.set(JAVA_LONG, header + 8, seq);
        staging.set(JAVA_LONG, header + 16, writeLength);
        staging.set(JAVA_LONG, header + 24, payload);
        WordPattern.fill(staging, header + HEADER, payload, id, seq, PAYLOAD_WORDS);
        sges.clear().add(staging.address() + header, HEADER, lkey(staging.address() + header, HEADER));
        if (payload > 0)
        {
            sges.add(staging.address() + header + HEADER, payload, lkey(staging.address() + header + HEADER, payload));
        }
        qp.postSend(wrId(KIND_SEND, seq), Opcode.SEND, sges, 0, 0, true);

        readLength[slot] = readLen;
        readOffset[slot] = readOff;
        gather(staging.address() + READ_TARGET + (long)slot * READ_SLOT, readLen, 1 + random.nextInt(2));
        qp.postSend(wrId(KIND_READ, seq), Opcode.RDMA_READ, sges, peerWindow + READABLE + readOff, peerRkey, true);

        pending[slot] = 3;
        sendsInFlight += 3;
    }

    /**
     * Fills {@link #sges} with {@code parts} pieces of {@code [address, address + length)}, each with the lkey
     * the cache gives now.
     */
    private void gather(final long address, final int length, final int parts)
    {
        sges.clear();
        int at = 0;
        for (int p = 0; p < parts; p++)
        {
            final int piece = p == parts - 1 ? length - at : 8 * ((length - at) / 8 / (parts - p));
            if (piece > 0)
            {
                sges.add(address + at, piece, lkey(address + at, piece));
                at += piece;
            }
        }
    }

    private int lkey(final long address, final int length)
    {
        return KeyPair.lkey(cache.keyPair(address, length));
    }

    private void postRecv(final int slot)
    {
        final long at = window.address() + RECV + (long)slot * RECV_SLOT;
        sges.clear().add(at, HEADER, lkey(at, HEADER)).add(at + HEADER, RECV_SLOT - HEADER,
            lkey(at + HEADER, RECV_SLOT - HEADER));
        qp.postRecv(wrId(KIND_RECV, slot), sges);
    }

    private void postAck()
    {
        final long at = ACK_SOURCE + 16L * (ackSlot++ & 15);
        staging.set(JAVA_LONG, at, peerVerified);
        staging.set(JAVA_LONG, at + 8, ~peerVerified);
        sges.clear().add(staging.address() + at, 16, lkey(staging.address() + at, 16));
        qp.postSend(wrId(KIND_ACK, peerVerified), Opcode.RDMA_WRITE, sges, peerWindow + ACK, peerRkey, true);
        sendsInFlight++;
        lastAckSent = peerVerified;
    }

    private void postFin()
    {
        staging.set(JAVA_LONG, FIN_SOURCE, OP_FIN);
        staging.set(JAVA_LONG, FIN_SOURCE + 8, nextSeq - 1);
        sges.clear().add(staging.address() + FIN_SOURCE, HEADER, lkey(staging.address() + FIN_SOURCE, HEADER));
        qp.postSend(wrId(KIND_FIN, 0), Opcode.SEND, sges, 0, 0, true);
        sendsInFlight++;
        finSent = true;
    }

    private void readAck()
    {
        final long seq = window.get(JAVA_LONG, ACK);
        if (window.get(JAVA_LONG, ACK + 8) == ~seq && seq > peerAck)
        {
            peerAck = seq;
        }
    }

    private int poll()
    {
        final int n = cq.poll(completions);
        for (int i = 0; i < n; i++)
        {
            final long wrId = completions.wrId(i);
            final long kind = wrId >>> 56;
            final long value = wrId & ((1L << 56) - 1);
            if (completions.status(i) != WorkCompletions.SUCCESS)
            {
                failed(completions.status(i), kind, value);
                if (kind != KIND_RECV)
                {
                    sendsInFlight--;
                }
                continue;
            }
            wrs++;
            if (kind == KIND_RECV)
            {
                received((int)value);
                continue;
            }
            sendsInFlight--;
            if (kind == KIND_WRITE || kind == KIND_SEND || kind == KIND_READ)
            {
                final int slot = (int)(value % W);
                pending[slot]--;
                if (kind == KIND_READ)
                {
                    final long wrong = WordPattern.wrongBytes(staging, READ_TARGET + (long)slot * READ_SLOT,
                        readLength[slot], peerId, READABLE_SEQ, readOffset[slot] / 8);
                    count(readLength[slot], wrong, "RDMA READ of message " + value);
                }
            }
        }
        return n;
    }

    private void received(final int slot)
    {
        final long at = RECV + (long)slot * RECV_SLOT;
        final long op = window.get(JAVA_LONG, at);
        final long seq = window.get(JAVA_LONG, at + 8);
        if (op == OP_FIN)
        {
            finReceived = true;
            postRecv(slot);
            return;
        }
        final int writeLength = (int)window.get(JAVA_LONG, at + 16);
        final int payload = (int)window.get(JAVA_LONG, at + 24);
        if (op != OP_DATA || seq != peerVerified + 1 || writeLength <= 0 || writeLength > INBOX_SLOT ||
            payload < 0 || payload > RECV_SLOT - HEADER)
        {
            count(HEADER, HEADER, "a header out of order or garbled: op " + op + " seq " + seq + " after " +
                peerVerified);
            return;
        }
        final long inbox = INBOX + (seq % W) * INBOX_SLOT;
        count(writeLength, WordPattern.wrongBytes(window, inbox, writeLength, peerId, seq, 0),
            "RDMA WRITE of message " + seq);
        count(payload, WordPattern.wrongBytes(window, at + HEADER, payload, peerId, seq, PAYLOAD_WORDS),
            "SEND payload of message " + seq);
        peerVerified = seq;
        postRecv(slot);
    }

    private void count(final long length, final long wrong, final String what)
    {
        bytesVerified += length - wrong;
        if (wrong > 0)
        {
            wrongBytes += wrong;
            if (firstError.isEmpty())
            {
                firstError = wrong + " wrong bytes in the " + what;
                log.println("error " + firstError);
                log.flush();
            }
        }
    }

    private void failed(final int status, final long kind, final long value)
    {
        final boolean protection = status == WorkCompletions.LOC_PROT_ERR || status == WorkCompletions.REM_ACCESS_ERR ||
            status == WorkCompletions.LOC_ACCESS_ERR;
        if (protection)
        {
            liveProtectionErrors++;
        }
        else
        {
            otherErrors++;
        }
        if (firstError.isEmpty())
        {
            firstError = WorkCompletions.statusName(status) + " on live keys, work request kind " + kind + " #" +
                value;
        }
        if (kind == KIND_WRITE || kind == KIND_SEND || kind == KIND_READ)
        {
            pending[(int)(value % W)]--;
        }
        if (status != WorkCompletions.WR_FLUSH_ERR)
        {
            log.println("error " + firstError);
            log.flush();
        }
        // the queue pair is in the error state: nothing more will come from the peer
        finReceived = true;
        finSent = true;
    }

    private void progress()
    {
        log.println("progress wrs=" + wrs + " bytesVerified=" + bytesVerified + " wrongBytes=" + wrongBytes +
            " liveProtectionErrors=" + liveProtectionErrors + " otherErrors=" + otherErrors + " staleProbes=" +
            probe.probes + " staleRefused=" + probe.refused + " rotations=" + rotation.rotations);
        log.flush();
    }

    private static long wrId(final long kind, final long value)
    {
        return kind << 56 | (value & ((1L << 56) - 1));
    }

    private static void write(final Path file, final String text) throws IOException
    {
        final Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        Files.writeString(tmp, text);
        Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    }

    private static String await(final Path file) throws IOException
    {
        final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (!Files.exists(file))
        {
            if (System.nanoTime() - deadline > 0)
            {
                throw new IllegalStateException("no " + file + " within 60 s");
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
        }
        return Files.readString(file).trim();
    }
}
