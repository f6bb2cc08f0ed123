package io.mrd.cli.reliability;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.fixture.Proc;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.mrd.layout.sys.Posix;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.Wait;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Hostile input against a real daemon process ({@code mrd start --foreground}): malformed frames (fixed cases
 * for every rule of the codec, then 2,000 mutations of valid frames), file descriptors sent where none is
 * expected, and 20,000 connections opened and dropped. Every connection must end with EPROTO or a regular
 * answer and the daemon's close, never a hang and never an internal error (EIO); afterwards the daemon is
 * alive, {@code mrd status} and {@code mrd check} exit 0, and its fds, RSS, memory and pins are back where
 * they were. The primary's in-process tests (MalformedInputTest) check the messages one by one; this one
 * checks the real process under volume.
 */
final class FuzzTest
{
    static final int MUTATED_FRAMES = 2_000;
    static final int CONNECTIONS = 20_000;
    static final Duration REPLY_WAIT = Duration.ofSeconds(10);
    static final long RSS_SLACK_KIB = 128 * 1024;
    /**
     * How far above its level before a burst of connections the daemon's resident memory may stay once they are
     * gone: the heap G1 commits for the burst (some 150 MiB) must be given back, code the JIT compiled meanwhile
     * may stay.
     */
    static final long RSS_RETURN_KIB = 32 * 1024;
    /** Time for HeapPolicy's periodic collection and native trim (5 s each) to act, with a margin for a busy host. */
    static final Duration RSS_RETURN_WAIT = Duration.ofSeconds(30);
    private static final long SEGMENT = 2 * Sizes.MIB;

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    // ---------------------------------------------------------------------------------------------------------

    /** A fixed bad input and what the daemon's EPROTO must say. */
    record Case(String name, byte[] bytes, boolean helloFirst, String expected)
    {
    }

    @Test
    void malformedAndMutatedFramesGetEprotoOrAnAnswerAndNeverHurtTheDaemon()
    {
        final long seed = System.nanoTime();
        final Random random = new Random(seed);
        try (LiveDaemon daemon = daemons.start("fuzz", "--max-memory", "256MiB", "--list-size", "64MiB"))
        {
            warmUp(daemon);
            daemon.awaitHolder();
            final long baseFds = daemon.fdCount();
            final long baseRss = daemon.rssKib();
            final long baseProtocolErrors = daemon.counter(MrdCounter.PROTOCOL_ERRORS);
            final Map<ErrorCode, Integer> statuses = new EnumMap<>(ErrorCode.class);
            int eproto = 0;

            final long base = daemon.baseVirtaddr();
            final List<Case> cases = fixedCases(base);
            for (final Case c : cases)
            {
                final List<Frame> replies = exchange(daemon, c.bytes(), c.helloFirst(), c.name());
                final Message.Reply last = (Message.Reply)replies.getLast().message();
                assertEquals(ErrorCode.EPROTO, last.status(), () -> c.name() + ": " + replies);
                assertTrue(last.message().contains(c.expected()), () -> c.name() + ": " + last.message());
                eproto += count(replies, statuses);
            }

            int skipped = 0;
            final long start = System.nanoTime();
            for (int i = 0; i < MUTATED_FRAMES; i++)
            {
                final boolean helloFirst = random.nextBoolean();
                final byte[] bytes = mutate(baseFrame(random, base), random, base);
                if (runsStop(bytes))
                {
                    // would stop the daemon: STOP is allowed for this uid; not fuzz's business
                    skipped++;
                    continue;
                }
                final List<Frame> replies = exchange(daemon, bytes, helloFirst, "mutated frame " + i + " (seed " +
                    seed + "): " + HexFormat.of().formatHex(bytes));
                eproto += count(replies, statuses);
                if (!daemon.isAlive())
                {
                    fail("the daemon died on mutated frame " + i + " (seed " + seed + "): " +
                        HexFormat.of().formatHex(bytes) + "\n" + daemon.process().output());
                }
            }
            final long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(!statuses.containsKey(ErrorCode.EIO), "internal errors: " + statuses);

            Wait.await("every fuzz client reclaimed", REPLY_WAIT.multipliedBy(3), () -> daemon.counters(
                MrdCounter.CLIENTS_CONNECTED, MrdCounter.BYTES_ALLOCATED, MrdCounter.BYTES_PINNED),
                LiveDaemon::allZero);
            Wait.await("the daemon's fds back to " + baseFds, REPLY_WAIT.multipliedBy(3), daemon::fdCount,
                fds -> fds <= baseFds);
            final long rss = daemon.rssKib();
            assertTrue(rss < baseRss + RSS_SLACK_KIB, "RSS " + rss + " KiB, baseline " + baseRss + " KiB");
            assertEquals(eproto, daemon.counter(MrdCounter.PROTOCOL_ERRORS) - baseProtocolErrors,
                "every EPROTO received was counted by the daemon, and only those");
            daemon.assertHealthy("after the fuzz");
            System.out.println("FIGURE fuzz frames fixed=" + cases.size() + " mutated=" + (MUTATED_FRAMES - skipped) +
                " skippedStop=" + skipped + " seed=" + seed + " elapsedMs=" + elapsedMs + " replies=" + statuses +
                " protocolErrors=" + daemon.counter(MrdCounter.PROTOCOL_ERRORS) + " fds=" + daemon.fdCount() +
                " (baseline " + baseFds + ") rssKiB=" + rss + " (baseline " + baseRss + ")");
        }
    }

    /**
     * Sends the bytes (after a valid HELLO when asked) on a new connection, half-closes, and reads every reply
     * until the daemon closes.
     */
    private static List<Frame> exchange(final LiveDaemon daemon, final byte[] bytes, final boolean helloFirst,
        final String what)
    {
        try (RawConnection connection = RawConnection.connect(daemon.socket()))
        {
            if (helloFirst)
            {
                connection.send(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "fuzz"));
            }
            connection.send(bytes).shutdownOutput();
            try
            {
                return connection.drain(REPLY_WAIT);
            }
            catch (final AssertionError | MrdException ex)
            {
                throw new AssertionError(what + ": " + ex.getMessage() + "\ndaemon output:\n" +
                    daemon.process().output(), ex);
            }
        }
    }

    /**
     * @return the EPROTO replies among {@code replies}, each status tallied.
     */
    private static int count(final List<Frame> replies, final Map<ErrorCode, Integer> statuses)
    {
        int eproto = 0;
        for (final Frame frame : replies)
        {
            final ErrorCode status = ((Message.Reply)frame.message()).status();
            statuses.merge(status, 1, Integer::sum);
            eproto += status == ErrorCode.EPROTO ? 1 : 0;
        }
        return eproto;
    }

    /**
     * @param base the daemon's base address, for the requests' addresses.
     */
    private static List<Case> fixedCases(final long base)
    {
        final List<Case> cases = new ArrayList<>();
        for (final int length : new int[]{0, 3, 15, 4097, 65536, Integer.MAX_VALUE, -1, Integer.MIN_VALUE})
        {
            cases.add(new Case("length " + Integer.toUnsignedString(length), le(length), false,
                "frame length " + Integer.toUnsignedString(length) + " is outside [16, 4096]"));
        }
        final byte[] hello = RawConnection.encode(7, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "cut"));
        for (int k = 1; k < hello.length; k++)
        {
            cases.add(new Case("HELLO cut after " + k + " bytes", Arrays.copyOf(hello, k), false, "truncated"));
        }
        final byte[] create = RawConnection.encode(8, new Message.CreateMr(base, 64));
        for (int k = 1; k < create.length; k++)
        {
            cases.add(new Case("CREATE_MR cut after " + k + " bytes", Arrays.copyOf(create, k), true, "truncated"));
        }
        for (final int version : new int[]{0, FrameDescriptor.PROTOCOL_VERSION - 1, FrameDescriptor.PROTOCOL_VERSION + 1, -1,
            65536})
        {
            cases.add(new Case("HELLO version " + version, RawConnection.encode(9, new Message.Hello(version, "v")),
                false, "expected HELLO version " + FrameDescriptor.PROTOCOL_VERSION + ", got version " + version));
        }
        cases.add(new Case("CREATE_MR before HELLO", create, false, "as the first request"));
        for (final int type : new int[]{0, 8, 11, 0x42, 0x7FFF})
        {
            cases.add(new Case("type " + type, withType(create, type), true, "unknown request type " + type));
        }
        for (final int type : new int[]{0x8001, 0x8002, 0xFFFF})
        {
            cases.add(new Case("reply type " + Integer.toHexString(type), withType(create, type), true, "is a reply"));
        }
        cases.add(new Case("HELLO name of 33 bytes", helloWithName(33, 33), false, "string of 33 bytes exceeds 32"));
        cases.add(new Case("HELLO name length 65535 in a short frame", helloWithName(0xFFFF, 4), false,
            "string of 65535 bytes exceeds 32"));
        cases.add(new Case("HELLO name longer than its frame", helloWithName(20, 4), false, "payload is truncated"));
        final byte[] trailing = Arrays.copyOf(create, create.length + 3);
        ByteBuffer.wrap(trailing).order(ByteOrder.LITTLE_ENDIAN).putInt(0, trailing.length);
        cases.add(new Case("CREATE_MR with 3 trailing bytes", trailing, true, "3 trailing bytes"));
        final byte[] flags = create.clone();
        ByteBuffer.wrap(flags).order(ByteOrder.LITTLE_ENDIAN).putShort(FrameDescriptor.FLAGS_OFFSET, (short)0x80);
        cases.add(new Case("unknown flags", flags, true, "unknown flags 0x80"));
        cases.add(new Case("HELLO twice", hello, true, "HELLO sent twice"));
        return cases;
    }

    private static byte[] le(final int value)
    {
        return ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putInt(value).array();
    }

    private static byte[] withType(final byte[] frame, final int type)
    {
        final byte[] copy = frame.clone();
        ByteBuffer.wrap(copy).order(ByteOrder.LITTLE_ENDIAN).putShort(FrameDescriptor.TYPE_OFFSET, (short)type);
        return copy;
    }

    /**
     * A HELLO whose name field says {@code declared} bytes and carries {@code present}.
     */
    private static byte[] helloWithName(final int declared, final int present)
    {
        final int length = FrameDescriptor.HEADER_LENGTH + 4 + 2 + present;
        final ByteBuffer b = ByteBuffer.allocate(length).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(length).putShort((short)MessageType.HELLO.code()).putShort((short)0).putLong(11)
            .putInt(FrameDescriptor.PROTOCOL_VERSION).putShort((short)declared);
        b.put("x".repeat(present).getBytes(StandardCharsets.US_ASCII));
        return b.array();
    }

    /**
     * A valid request other than STOP, with values from the interesting ranges.
     *
     * @param base the daemon's base address.
     */
    static byte[] baseFrame(final Random random, final long base)
    {
        final long[] addresses = {0, -1, 1, 0x1000, base, base + random.nextInt(1 << 28),
            0x7FFF_FFFF_F000L, Long.MIN_VALUE, Long.MAX_VALUE, random.nextLong()};
        final long[] lengths = {0, 1, -1, 64, SEGMENT, 3 * SEGMENT, 255 * Sizes.MIB, 256 * Sizes.MIB, Sizes.GIB,
            Long.MAX_VALUE, Long.MIN_VALUE, random.nextLong()};
        final long address = addresses[random.nextInt(addresses.length)];
        final long length = lengths[random.nextInt(lengths.length)];
        final Message message = switch (random.nextInt(6))
        {
            case 0 -> new Message.Hello(random.nextInt(4) == 0 ? random.nextInt() : FrameDescriptor.PROTOCOL_VERSION,
                "f".repeat(random.nextInt(40)));
            case 1 -> new Message.CreateMr(address, length);
            case 2 -> new Message.Alloc(length, random.nextInt(4) == 0 ? random.nextInt() : 0);
            case 3 -> new Message.Free(address, length);
            case 4 -> new Message.RegExternal(length, random.nextInt(4) == 0 ? random.nextInt() : 0);
            default -> new Message.DeregExternal(address);
        };
        return RawConnection.encode(random.nextLong(), random.nextInt(8) == 0 ? FrameDescriptor.FLAG_FD : 0, message);
    }

    /**
     * One to three random mutations: bit flips, overwritten, inserted or deleted bytes, truncation, a rewritten
     * length, type or flags field, another frame appended.
     *
     * @param base the daemon's base address, for an appended frame.
     */
    static byte[] mutate(final byte[] frame, final Random random, final long base)
    {
        byte[] b = frame;
        final int mutations = 1 + random.nextInt(3);
        for (int i = 0; i < mutations; i++)
        {
            final int at = b.length == 0 ? 0 : random.nextInt(b.length);
            switch (random.nextInt(9))
            {
                case 0 ->
                {
                    if (b.length > 0)
                    {
                        b = b.clone();
                        b[at] ^= (byte)(1 << random.nextInt(8));
                    }
                }
                case 1 ->
                {
                    if (b.length > 0)
                    {
                        b = b.clone();
                        b[at] = (byte)random.nextInt(256);
                    }
                }
                case 2 ->
                {
                    final byte[] insert = new byte[1 + random.nextInt(16)];
                    random.nextBytes(insert);
                    final byte[] grown = new byte[b.length + insert.length];
                    System.arraycopy(b, 0, grown, 0, at);
                    System.arraycopy(insert, 0, grown, at, insert.length);
                    System.arraycopy(b, at, grown, at + insert.length, b.length - at);
                    b = grown;
                }
                case 3 ->
                {
                    final int n = Math.min(1 + random.nextInt(16), b.length - at);
                    final byte[] shrunk = new byte[b.length - n];
                    System.arraycopy(b, 0, shrunk, 0, at);
                    System.arraycopy(b, at + n, shrunk, at, b.length - at - n);
                    b = shrunk;
                }
                case 4 -> b = Arrays.copyOf(b, b.length == 0 ? 0 : random.nextInt(b.length));
                case 5 -> b = field(b, FrameDescriptor.LENGTH_OFFSET, 4, new long[]{0, 1, 15, 16, 17, b.length - 1,
                    b.length + 1, 4096, 4097, Integer.MAX_VALUE, -1, Integer.MIN_VALUE, random.nextInt()}[random.nextInt(13)]);
                case 6 -> b = field(b, FrameDescriptor.TYPE_OFFSET, 2, new long[]{0, 1, 2, 3, 4, 5, 6, 8, 9, 0x7FFF,
                    0x8001, 0x8003, random.nextInt(65536)}[random.nextInt(13)]);
                case 7 -> b = field(b, FrameDescriptor.FLAGS_OFFSET, 2, random.nextBoolean() ? 1 : random.nextInt(65536));
                default ->
                {
                    final byte[] more = baseFrame(random, base);
                    final byte[] joined = Arrays.copyOf(b, b.length + more.length);
                    System.arraycopy(more, 0, joined, b.length, more.length);
                    b = joined;
                }
            }
        }
        return b;
    }

    private static byte[] field(final byte[] frame, final int offset, final int size, final long value)
    {
        if (frame.length < offset + size)
        {
            return frame;
        }
        final byte[] b = frame.clone();
        final ByteBuffer buffer = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        if (size == 4)
        {
            buffer.putInt(offset, (int)value);
        }
        else
        {
            buffer.putShort(offset, (short)value);
        }
        return b;
    }

    /**
     * @return true when the daemon, cutting the stream as it does, would reach a STOP.
     */
    static boolean runsStop(final byte[] bytes)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        int at = 0;
        while (true)
        {
            final int length;
            final Frame frame;
            try
            {
                length = FrameCodec.frameLength(buffer, at, bytes.length - at);
                if (length < 0 || bytes.length - at < length)
                {
                    return false;
                }
                frame = FrameCodec.decodeRequest(buffer, at, length);
            }
            catch (final MrdException ex)
            {
                return false;
            }
            if (frame.message() instanceof Message.Stop)
            {
                return true;
            }
            at += length;
        }
    }

    private static void warmUp(final LiveDaemon daemon)
    {
        for (int i = 0; i < 50; i++)
        {
            exchange(daemon, RawConnection.encode(2, new Message.Alloc(SEGMENT, 0)), true, "warm-up");
            exchange(daemon, le(1 << 20), false, "warm-up");
        }
        Wait.await("warm-up clients reclaimed", REPLY_WAIT,
            () -> daemon.counters(MrdCounter.CLIENTS_CONNECTED, MrdCounter.BYTES_ALLOCATED), LiveDaemon::allZero);
    }

    // ---------------------------------------------------------------------------------------------------------

    @Test
    void fdsSentWhereNoneIsExpectedAreDroppedAndEndOnlyTheirConnection()
    {
        final int repeats = 50;
        final int memfd = Posix.memfdCreate("mrd-fuzz-stray", Posix.MFD_CLOEXEC | Posix.MFD_ALLOW_SEALING);
        try (LiveDaemon daemon = daemons.start("fuzz", "--max-memory", "256MiB", "--list-size", "64MiB"))
        {
            Posix.ftruncate(memfd, SEGMENT);
            warmUp(daemon);
            daemon.awaitHolder();
            final long baseFds = daemon.fdCount();
            final long protocolErrors = daemon.counter(MrdCounter.PROTOCOL_ERRORS);
            final byte[] hello = RawConnection.encode(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "stray"));
            final byte[] alloc = RawConnection.encode(2, new Message.Alloc(SEGMENT, 0));
            final byte[] allocFlagged = RawConnection.encode(3, FrameDescriptor.FLAG_FD, new Message.Alloc(SEGMENT, 0));
            final byte[] create = RawConnection.encode(4, new Message.CreateMr(daemon.baseVirtaddr(), 64));
            final byte[] register = RawConnection.encode(5, FrameDescriptor.FLAG_FD, new Message.RegExternal(SEGMENT, 0));
            int connections = 0;
            int eproto = 0;
            for (int i = 0; i < repeats; i++)
            {
                // an fd before HELLO: its byte (0) shifts HELLO, whose length then reads 0x2?00 > 4096
                eproto += strayFd(daemon, memfd, c -> c.sendFd(memfd).send(hello));
                // an fd after HELLO, before a request
                eproto += strayFd(daemon, memfd, c -> c.send(hello).sendFd(memfd).send(alloc));
                // an fd in the middle of a frame
                eproto += strayFd(daemon, memfd, c -> c.send(hello).send(Arrays.copyOf(create, 10)).sendFd(memfd)
                    .send(Arrays.copyOfRange(create, 10, create.length)));
                // FLAG_FD on a request that takes no fd, and the fd after it
                eproto += strayFd(daemon, memfd, c -> c.send(hello).send(allocFlagged).sendFd(memfd));
                // the fd REG_EXTERNAL asked for, then a second one nobody asked for, then a request
                eproto += strayFd(daemon, memfd, c ->
                {
                    c.send(hello).send(register);
                    awaitSendFd(c);
                    c.sendFd(memfd);
                    c.sendFd(memfd).send(alloc);
                });
                connections += 5;
            }
            Wait.await("every stray-fd client reclaimed", REPLY_WAIT.multipliedBy(3), () -> daemon.counters(
                MrdCounter.CLIENTS_CONNECTED, MrdCounter.BYTES_ALLOCATED, MrdCounter.BYTES_PINNED,
                MrdCounter.MRS_ACTIVE), LiveDaemon::allZero);
            Wait.await("the daemon's fds back to " + baseFds, REPLY_WAIT.multipliedBy(3), daemon::fdCount,
                fds -> fds <= baseFds);
            final List<String> leaked = Proc.fdTargets(daemon.pid()).stream().filter(t -> t.contains("mrd-fuzz")).toList();
            assertEquals(List.of(), leaked, "fds of the stray memfd left open in the daemon");
            Wait.await("the registered memfd unmapped", REPLY_WAIT,
                () -> Proc.mapsContaining(daemon.pid(), "mrd-fuzz"), List::isEmpty);
            assertEquals(eproto, daemon.counter(MrdCounter.PROTOCOL_ERRORS) - protocolErrors);
            daemon.assertHealthy("after the stray fds");
            System.out.println("FIGURE fuzz strayFds connections=" + connections + " eproto=" + eproto + " fds=" +
                daemon.fdCount() + " (baseline " + baseFds + ") externalRegistrations=" +
                daemon.counter(MrdCounter.EXTERNAL_REGISTRATIONS));
        }
        finally
        {
            Posix.close(memfd);
        }
    }

    private interface Script
    {
        void run(FdConnection connection);
    }

    /**
     * Runs the script, half-closes, and expects an EPROTO among the replies and the daemon's close.
     *
     * @return the EPROTO replies received.
     */
    private static int strayFd(final LiveDaemon daemon, final int memfd, final Script script)
    {
        try (FdConnection connection = new FdConnection(daemon.socket()))
        {
            script.run(connection);
            connection.shutdownOutput();
            final List<Frame> replies = connection.drain(REPLY_WAIT);
            final long eproto = replies.stream()
                .filter(f -> ((Message.Reply)f.message()).status() == ErrorCode.EPROTO).count();
            assertTrue(eproto >= 1, () -> "no EPROTO among " + replies);
            assertTrue(replies.stream().noneMatch(f -> ((Message.Reply)f.message()).status() == ErrorCode.EIO),
                replies::toString);
            return (int)eproto;
        }
    }

    private static void awaitSendFd(final FdConnection connection)
    {
        Frame frame;
        do
        {
            frame = connection.receive(REPLY_WAIT);
            assertTrue(null != frame, "the daemon closed before SEND_FD");
        }
        while (frame.message().type() != MessageType.SEND_FD);
    }

    // ---------------------------------------------------------------------------------------------------------

    @Test
    void twentyThousandConnectionsOpenedAndDroppedLeaveNothingBehind()
    {
        // A gone client keeps its slot, and its segment, until the reclaim thread gets to it, which on a busy host
        // lags by up to some 170 clients (half of them with a segment): room for 1,024, so that no HELLO or ALLOC
        // is refused for that lag.
        try (LiveDaemon daemon = daemons.launch("fuzz").jvmFlags(LiveDaemon.DEPLOYED_JVM).start("--max-memory",
            "1GiB", "--list-size", "256MiB", "--max-clients", "1024"))
        {
            warmUp(daemon);
            daemon.awaitHolder();
            final long baseFds = daemon.fdCount();
            final long baseRss = daemon.rssKib();
            final byte[] hello = RawConnection.encode(1, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "drop"));
            final byte[] helloAlloc = Arrays.copyOf(hello, hello.length + 28);
            System.arraycopy(RawConnection.encode(2, new Message.Alloc(SEGMENT, 0)), 0, helloAlloc, hello.length, 28);
            final byte[] garbage = new byte[4096];
            new Random(CONNECTIONS).nextBytes(garbage);
            final UnixDomainSocketAddress address = UnixDomainSocketAddress.of(daemon.socket());
            final long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(240);
            final long start = System.nanoTime();
            long maxFds = 0;
            int done = 0;
            while (done < CONNECTIONS && System.nanoTime() < deadline)
            {
                if (done % 10 == 9)
                {
                    // a client that got memory and vanished without freeing it
                    try (RawConnection client = RawConnection.connect(daemon.socket()))
                    {
                        client.send(helloAlloc);
                        final Frame welcome = client.receive(REPLY_WAIT);
                        final Frame allocated = client.receive(REPLY_WAIT);
                        final int connection = done;
                        assertTrue(null != allocated && allocated.message() instanceof Message.Allocated,
                            () -> "connection " + connection + ": HELLO answered " + welcome + ", ALLOC answered " +
                                allocated + "; clients connected " + daemon.counter(MrdCounter.CLIENTS_CONNECTED));
                    }
                }
                else
                {
                    try (SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX))
                    {
                        channel.connect(address);
                        switch (done % 10)
                        {
                            // half a frame header, then gone
                            case 6, 7 -> channel.write(ByteBuffer.wrap(le(FrameDescriptor.HEADER_LENGTH + 8)));
                            // a page of garbage, then gone
                            case 4, 5 -> channel.write(ByteBuffer.wrap(garbage));
                            // a client that said HELLO, then gone
                            case 8 -> channel.write(ByteBuffer.wrap(hello));
                            default ->
                            {
                                // connect and drop
                            }
                        }
                    }
                    catch (final IOException ex)
                    {
                        fail("connection " + done + " failed: " + ex + "\ndaemon output:\n" +
                            daemon.process().output());
                    }
                }
                done++;
                if (done % 500 == 0)
                {
                    maxFds = Math.max(maxFds, daemon.fdCount());
                    assertTrue(daemon.isAlive(), "daemon alive after " + done + " connections");
                }
            }
            final long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertEquals(CONNECTIONS, done, "connections made within 240 s");
            Wait.await("every dropped client reclaimed", Duration.ofSeconds(60),
                () -> daemon.counters(MrdCounter.CLIENTS_CONNECTED, MrdCounter.BYTES_ALLOCATED), LiveDaemon::allZero);
            Wait.await("the daemon's fds back to " + baseFds, Duration.ofSeconds(60), daemon::fdCount,
                fds -> fds <= baseFds);
            final long afterRss = daemon.rssKib();
            // The heap the burst made G1 commit is uncommitted at HeapPolicy's first periodic collection after it.
            final long rss;
            try
            {
                rss = Wait.await("the daemon's RSS (KiB) back under " + RSS_RETURN_KIB + " KiB above its baseline",
                    RSS_RETURN_WAIT, daemon::rssKib, kib -> kib < baseRss + RSS_RETURN_KIB);
            }
            catch (final AssertionError ex)
            {
                throw new AssertionError(ex.getMessage() + ": " + baseRss + " KiB before the connections, " +
                    afterRss + " KiB after them (RssAnon " + Proc.statusKib(daemon.pid(), "RssAnon") + " KiB)", ex);
            }
            daemon.assertHealthy("after " + CONNECTIONS + " connections");
            System.out.println("FIGURE fuzz connections=" + done + " elapsedMs=" + elapsedMs + " clientsTotal=" +
                daemon.counter(MrdCounter.CLIENTS_TOTAL) + " allocs=" + daemon.counter(MrdCounter.ALLOCS) +
                " protocolErrors=" + daemon.counter(MrdCounter.PROTOCOL_ERRORS) + " maxFds=" + maxFds + " fds=" +
                daemon.fdCount() + " (baseline " + baseFds + ") rssKiB=" + rss + " (baseline " + baseRss +
                ", after the connections " + afterRss + ", VmHWM " + Proc.statusKib(daemon.pid(), "VmHWM") + ")");
        }
    }
}
