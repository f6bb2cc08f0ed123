package io.mrd.layout.protocol;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.Example;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Supplier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

/**
 * Properties of the one frame codec (issue 7, fuzz): whatever bytes arrive, {@link FrameCodec#decodeRequest}
 * and {@link FrameCodec#decodeReply} return a frame or throw {@link MrdException} EPROTO, never another
 * exception and never a read outside the frame (each decode gets a buffer exactly as long as the bytes, so an
 * out-of-bounds read would throw IndexOutOfBoundsException); and every message of every type survives
 * encode then decode unchanged.
 */
class FrameCodecPropertyTest
{
    /** Reply types a successful Status may carry: those whose success has no fields. */
    private static final List<MessageType> STATUS_OK_TYPES = List.of(MessageType.FREE, MessageType.DEREG_EXTERNAL,
        MessageType.STOP, MessageType.SEND_FD, MessageType.QUEUES, MessageType.ERROR);

    // ---------------------------------------------------------------------------------------------------------
    // Any input

    @Property(tries = 2000)
    void anyBytesAreAFrameOrAProtocolError(@ForAll @Size(max = 300) final byte[] bytes)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        decodesOrRefuses(() -> FrameCodec.decodeRequest(buffer, 0, bytes.length), bytes);
        decodesOrRefuses(() -> FrameCodec.decodeReply(buffer, 0, bytes.length), bytes);
        decodesOrRefuses(() -> lengthThenRequest(buffer, bytes.length), bytes);
    }

    /**
     * Random bodies behind headers that pass the header checks, so that every payload parser is reached.
     */
    @Property(tries = 3000)
    void anyPayloadBehindAPlausibleHeaderIsAFrameOrAProtocolError(
        @ForAll @Size(min = 16, max = 300) final byte[] bytes,
        @ForAll @IntRange(min = 0, max = 14) final int typeChoice,
        @ForAll final boolean reply,
        @ForAll final boolean fd)
    {
        final int type = typeChoice < 11 ? typeChoice : new int[]{0x7FFF, 0x42, 0xFFFF, 0x8008}[typeChoice - 11];
        ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN)
            .putInt(FrameDescriptor.LENGTH_OFFSET, bytes.length)
            .putShort(FrameDescriptor.TYPE_OFFSET, (short)(reply ? type | MessageType.REPLY_BIT : type))
            .putShort(FrameDescriptor.FLAGS_OFFSET, (short)(fd ? FrameDescriptor.FLAG_FD : 0));
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        decodesOrRefuses(() -> FrameCodec.decodeRequest(buffer, 0, bytes.length), bytes);
        decodesOrRefuses(() -> FrameCodec.decodeReply(buffer, 0, bytes.length), bytes);
    }

    /**
     * Offsets and lengths that do not fit the buffer are refused, not read.
     */
    @Property(tries = 2000)
    void anyOffsetAndLengthIsAFrameOrAProtocolError(
        @ForAll @Size(max = 600) final byte[] bytes,
        @ForAll @IntRange(min = -32, max = 700) final int offset,
        @ForAll @IntRange(min = -32, max = 5000) final int length)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        decodesOrRefuses(() -> FrameCodec.decodeRequest(buffer, offset, length), bytes);
        decodesOrRefuses(() -> FrameCodec.decodeReply(buffer, offset, length), bytes);
    }

    @Property(tries = 1000)
    void frameLengthOfAnyPrefixIsMinusOneALengthOrAProtocolError(@ForAll @Size(max = 8) final byte[] bytes)
    {
        try
        {
            final int length = FrameCodec.frameLength(new UnsafeBuffer(bytes), 0, bytes.length);
            if (bytes.length < 4)
            {
                assertEquals(-1, length);
            }
            else if (length < FrameDescriptor.HEADER_LENGTH || length > FrameDescriptor.MAX_FRAME_LENGTH)
            {
                fail("frameLength returned " + length + " for " + Arrays.toString(bytes));
            }
        }
        catch (final MrdException ex)
        {
            assertEquals(ErrorCode.EPROTO, ex.code(), ex::toString);
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Valid input, whole or mutated

    @Property(tries = 3000)
    void everyMessageSurvivesEncodeThenDecode(
        @ForAll("messages") final Message message,
        @ForAll final long correlationId,
        @ForAll final boolean fd)
    {
        final int flags = fd ? FrameDescriptor.FLAG_FD : 0;
        final byte[] bytes = encode(correlationId, flags, message);
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        assertEquals(bytes.length, FrameCodec.frameLength(buffer, 0, bytes.length));
        final Frame frame = message instanceof Message.Reply ? FrameCodec.decodeReply(buffer, 0, bytes.length) :
            FrameCodec.decodeRequest(buffer, 0, bytes.length);
        final boolean registers = message instanceof Message.Alloc a && a.register() ||
            message instanceof Message.Allocated r && r.registered();
        // the codec owns the flags that say how a payload reads or what a request asks: they follow the message
        final int owned = (registers ? FrameDescriptor.FLAG_REGISTER : 0) |
            (message instanceof Message.Hello h && 0 != h.resumeClientId() ? FrameDescriptor.FLAG_RESUME : 0) |
            (message instanceof Message.Stop s && s.handover() ? FrameDescriptor.FLAG_HANDOVER : 0);
        assertEquals(new Frame(correlationId, flags | owned, message), frame);
        // and a request is never taken for a reply, nor a reply for a request
        final MrdException wrongSide = org.junit.jupiter.api.Assertions.assertThrows(MrdException.class, () ->
        {
            if (message instanceof Message.Reply)
            {
                FrameCodec.decodeRequest(buffer, 0, bytes.length);
            }
            else
            {
                FrameCodec.decodeReply(buffer, 0, bytes.length);
            }
        });
        assertEquals(ErrorCode.EPROTO, wrongSide.code());
    }

    @Example
    void everyMessageTypeRoundTrips()
    {
        final List<Message> all = new ArrayList<>(List.of(
            new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "secondary-1"),
            new Message.CreateMr(0x1000_0000_0000L, 4096),
            new Message.Alloc(64L << 20, Access.LOCAL_WRITE | Access.REMOTE_READ),
            new Message.Free(0x1000_0020_0000L, 2L << 20),
            new Message.RegExternal(1L << 20, Access.REMOTE_WRITE),
            new Message.DeregExternal(0x1100_0000_0000L),
            new Message.Stop(),
            new Message.ImportPd(),
            new Message.Queues(Message.Queues.ADD, Message.Queues.QP, 0x2A),
            new Message.PdImported(ErrorCode.OK, "", 0x11, "mrdemu0"),
            new Message.Welcome(ErrorCode.OK, "", 7, 0x1234_5678_9ABC_DEF0L, 1, "/dev/shm/mrd-0/mrd.ctl"),
            new Message.MrCreated(ErrorCode.OK, "", 0x1000_0000_0000L, 0x1000_0040_0000L, 0x100, 0x100,
                Access.LOCAL_WRITE | Access.REMOTE_READ),
            new Message.Allocated(ErrorCode.OK, "", 0x1000_0000_0000L, 4L << 20, Access.LOCAL_WRITE),
            new Message.Alloc(2L << 20, Access.REMOTE_WRITE, true),
            new Message.Allocated(ErrorCode.OK, "", 0x1000_0000_0000L, 2L << 20, Access.LOCAL_WRITE |
                Access.REMOTE_WRITE, true, 0x301, 0x302),
            new Message.ExternalRegistered(ErrorCode.OK, "", 0x1100_0000_0000L, 1L << 20, 0x201, Access.NO_RKEY,
                Access.LOCAL_WRITE)));
        for (final MessageType type : STATUS_OK_TYPES)
        {
            all.add(new Message.Status(type, ErrorCode.OK, "ok"));
        }
        for (final MessageType type : MessageType.values())
        {
            for (final ErrorCode code : ErrorCode.values())
            {
                if (code != ErrorCode.OK)
                {
                    all.add(new Message.Status(type, code, code.name() + " for " + type));
                }
            }
        }
        long id = 1;
        for (final Message message : all)
        {
            everyMessageSurvivesEncodeThenDecode(message, id++, false);
        }
    }

    @Example
    void registerOnAllocCarriesTheKeysAndTheFlagRidesOnNothingElse()
    {
        final byte[] request = encode(5, 0, new Message.Alloc(2L << 20, Access.REMOTE_READ, true));
        final UnsafeBuffer requestBuffer = new UnsafeBuffer(request);
        assertEquals(FrameDescriptor.FLAG_REGISTER, requestBuffer.getShort(FrameDescriptor.FLAGS_OFFSET) & 0xFFFF);
        assertEquals(new Message.Alloc(2L << 20, Access.REMOTE_READ, true),
            FrameCodec.decodeRequest(requestBuffer, 0, request.length).message());

        // a registered reply is 8 bytes longer than one without: the keys, and nothing else changes
        final Message.Allocated plain = new Message.Allocated(ErrorCode.OK, "", 0x1000_0000_0000L, 2L << 20, 1);
        final Message.Allocated keyed =
            new Message.Allocated(ErrorCode.OK, "", 0x1000_0000_0000L, 2L << 20, 1, true, 0x11, 0x22);
        final byte[] plainBytes = encode(6, 0, plain);
        final byte[] keyedBytes = encode(6, 0, keyed);
        assertEquals(plainBytes.length + 8, keyedBytes.length);
        assertEquals(keyed, FrameCodec.decodeReply(new UnsafeBuffer(keyedBytes), 0, keyedBytes.length).message());

        // the flag on a frame that is not ALLOC, on an error reply, or an unknown flag bit: refused, naming it
        refused(encodeWithFlag(new Message.Free(0x1000_0000_0000L, 2L << 20), FrameDescriptor.FLAG_REGISTER), false,
            "FLAG_REGISTER");
        refused(encodeWithFlag(new Message.Status(MessageType.ALLOC, ErrorCode.ENOMEM, "full"),
            FrameDescriptor.FLAG_REGISTER), true, "FLAG_REGISTER");
        refused(encodeWithFlag(new Message.MrCreated(ErrorCode.OK, "", 1, 2, 3, 4, 1), FrameDescriptor.FLAG_REGISTER),
            true, "FLAG_REGISTER");
        refused(encodeWithFlag(new Message.Alloc(2L << 20, 0, true), 0x10), false, "unknown flags 0x12");
        // and a registered reply cut before its keys is truncated, not read as a plain one
        final byte[] plainFlagged = encodeWithFlag(plain, FrameDescriptor.FLAG_REGISTER);
        refused(plainFlagged, true, "truncated");
    }

    @Example
    void resumeOnHelloCarriesTheClientIdAndRidesOnNothingElse()
    {
        final Message.Hello resume = new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "worker", 42);
        final byte[] bytes = encode(1, 0, resume);
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        assertEquals(FrameDescriptor.FLAG_RESUME, buffer.getShort(FrameDescriptor.FLAGS_OFFSET) & 0xFFFF);
        assertEquals(resume, FrameCodec.decodeRequest(buffer, 0, bytes.length).message());
        final byte[] plain = encode(1, 0, new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "worker"));
        assertEquals(plain.length + 4, bytes.length, "the id, and nothing else, is added");
        assertEquals(0, new UnsafeBuffer(plain).getShort(FrameDescriptor.FLAGS_OFFSET));

        refused(encodeWithFlag(new Message.Free(0x1000_0000_0000L, 2L << 20), FrameDescriptor.FLAG_RESUME), false,
            "FLAG_RESUME");
        refused(encodeWithFlag(new Message.Status(MessageType.HELLO, ErrorCode.ESRCH, "gone"),
            FrameDescriptor.FLAG_RESUME), true, "FLAG_RESUME");
        // a HELLO flagged without its id is truncated; an id that is not positive is refused
        refused(encodeWithFlag(new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "w"), FrameDescriptor.FLAG_RESUME),
            false, "truncated");
        final byte[] zero = encode(1, 0, resume);
        new UnsafeBuffer(zero).putInt(zero.length - 4, 0, java.nio.ByteOrder.LITTLE_ENDIAN);
        refused(zero, false, "must be positive");
    }

    @Example
    void handoverRidesOnStopAndOnNothingElse()
    {
        final byte[] handover = encode(2, 0, new Message.Stop(true));
        assertEquals(FrameDescriptor.FLAG_HANDOVER, new UnsafeBuffer(handover).getShort(FrameDescriptor.FLAGS_OFFSET));
        assertEquals(new Message.Stop(true),
            FrameCodec.decodeRequest(new UnsafeBuffer(handover), 0, handover.length).message());
        final byte[] stop = encode(2, 0, new Message.Stop());
        assertEquals(new Message.Stop(false), FrameCodec.decodeRequest(new UnsafeBuffer(stop), 0, stop.length).message());
        assertEquals(stop.length, handover.length, "the flag, and nothing else");
        refused(encodeWithFlag(new Message.Free(0x1000_0000_0000L, 2L << 20), FrameDescriptor.FLAG_HANDOVER), false,
            "FLAG_HANDOVER");
        refused(encodeWithFlag(new Message.Status(MessageType.STOP, ErrorCode.OK, "handing over"),
            FrameDescriptor.FLAG_HANDOVER), true, "FLAG_HANDOVER");
    }

    private static byte[] encodeWithFlag(final Message message, final int flag)
    {
        final byte[] bytes = encode(9, 0, message);
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        buffer.putShort(FrameDescriptor.FLAGS_OFFSET, (short)(buffer.getShort(FrameDescriptor.FLAGS_OFFSET) | flag));
        return bytes;
    }

    private static void refused(final byte[] bytes, final boolean reply, final String what)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
        final MrdException ex = org.junit.jupiter.api.Assertions.assertThrows(MrdException.class, () ->
        {
            if (reply)
            {
                FrameCodec.decodeReply(buffer, 0, bytes.length);
            }
            else
            {
                FrameCodec.decodeRequest(buffer, 0, bytes.length);
            }
        });
        assertEquals(ErrorCode.EPROTO, ex.code());
        org.junit.jupiter.api.Assertions.assertTrue(ex.getMessage().contains(what), ex.getMessage());
    }

    @Property(tries = 3000)
    void mutatedFramesAreAFrameOrAProtocolError(
        @ForAll("messages") final Message message,
        @ForAll final long correlationId,
        @ForAll @Size(min = 1, max = 4) final List<@IntRange(min = 0, max = 7) Integer> kinds,
        @ForAll @Size(min = 4, max = 4) final List<@IntRange(min = 0, max = Integer.MAX_VALUE) Integer> positions,
        @ForAll @Size(min = 4, max = 4) final List<Integer> values)
    {
        byte[] bytes = encode(correlationId, 0, message);
        for (int i = 0; i < kinds.size(); i++)
        {
            bytes = mutate(bytes, kinds.get(i), positions.get(i), values.get(i));
        }
        final byte[] mutated = bytes;
        final UnsafeBuffer buffer = new UnsafeBuffer(mutated);
        decodesOrRefuses(() -> FrameCodec.decodeRequest(buffer, 0, mutated.length), mutated);
        decodesOrRefuses(() -> FrameCodec.decodeReply(buffer, 0, mutated.length), mutated);
        decodesOrRefuses(() -> lengthThenRequest(buffer, mutated.length), mutated);
    }

    // ---------------------------------------------------------------------------------------------------------

    private static void decodesOrRefuses(final Supplier<Frame> decode, final byte[] input)
    {
        final Frame frame;
        try
        {
            frame = decode.get();
        }
        catch (final MrdException ex)
        {
            if (ex.code() != ErrorCode.EPROTO)
            {
                fail("refused with " + ex.code() + " instead of EPROTO: " + ex.getMessage() + " for " +
                    Arrays.toString(input));
            }
            return;
        }
        catch (final RuntimeException | Error ex)
        {
            throw new AssertionError("neither a frame nor EPROTO but " + ex + " for " + Arrays.toString(input), ex);
        }
        assertNotNull(frame);
        assertNotNull(frame.message());
    }

    /**
     * What the daemon's accumulator does: the length first, then the frame.
     */
    private static Frame lengthThenRequest(final UnsafeBuffer buffer, final int available)
    {
        final int length = FrameCodec.frameLength(buffer, 0, available);
        if (length < 0 || length > available)
        {
            throw new MrdException(ErrorCode.EPROTO, "incomplete");
        }
        return FrameCodec.decodeRequest(buffer, 0, length);
    }

    private static byte[] encode(final long correlationId, final int flags, final Message message)
    {
        final UnsafeBuffer buffer = new UnsafeBuffer(new byte[FrameDescriptor.MAX_FRAME_LENGTH]);
        final int length = FrameCodec.encode(buffer, 0, correlationId, flags, message);
        return Arrays.copyOf(buffer.byteArray(), length);
    }

    private static byte[] mutate(final byte[] frame, final int kind, final int position, final int value)
    {
        final int at = frame.length == 0 ? 0 : position % frame.length;
        final byte[] b = frame.clone();
        switch (kind)
        {
            case 0 ->
            {
                if (b.length > 0)
                {
                    b[at] ^= (byte)(1 << (value & 7));
                }
                return b;
            }
            case 1 ->
            {
                if (b.length > 0)
                {
                    b[at] = (byte)value;
                }
                return b;
            }
            case 2 ->
            {
                final byte[] grown = new byte[b.length + 1 + (value & 15)];
                System.arraycopy(b, 0, grown, 0, at);
                Arrays.fill(grown, at, at + 1 + (value & 15), (byte)(value >>> 8));
                System.arraycopy(b, at, grown, at + 1 + (value & 15), b.length - at);
                return grown;
            }
            case 3 ->
            {
                final int n = Math.min(1 + (value & 15), b.length - at);
                final byte[] shrunk = new byte[b.length - n];
                System.arraycopy(b, 0, shrunk, 0, at);
                System.arraycopy(b, at + n, shrunk, at, b.length - at - n);
                return shrunk;
            }
            case 4 ->
            {
                return Arrays.copyOf(b, at);
            }
            case 5 ->
            {
                if (b.length >= 4)
                {
                    ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putInt(FrameDescriptor.LENGTH_OFFSET, value);
                }
                return b;
            }
            case 6 ->
            {
                // a string length field, wherever one may be: the two bytes at the position
                if (b.length >= 2)
                {
                    ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putShort(Math.min(at, b.length - 2), (short)value);
                }
                return b;
            }
            default ->
            {
                if (b.length >= FrameDescriptor.HEADER_LENGTH)
                {
                    ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putShort(FrameDescriptor.TYPE_OFFSET, (short)value);
                }
                return b;
            }
        }
    }

    // ---------------------------------------------------------------------------------------------------------
    // Messages

    @Provide
    Arbitrary<Message> messages()
    {
        final Arbitrary<Long> longs = Arbitraries.longs();
        final Arbitrary<Integer> ints = Arbitraries.integers();
        final Arbitrary<String> message = text(FrameDescriptor.MAX_MESSAGE_LENGTH);
        return Arbitraries.oneOf(List.of(
            Combinators.combine(ints, text(FrameDescriptor.MAX_NAME_LENGTH)).as(Message.Hello::new),
            Combinators.combine(ints, text(FrameDescriptor.MAX_NAME_LENGTH), Arbitraries.integers().between(1,
                Integer.MAX_VALUE)).as(Message.Hello::new),
            Combinators.combine(longs, longs).as(Message.CreateMr::new),
            Combinators.combine(longs, ints, Arbitraries.of(true, false)).as(Message.Alloc::new),
            Combinators.combine(longs, longs).as(Message.Free::new),
            Combinators.combine(longs, ints).as(Message.RegExternal::new),
            longs.map(Message.DeregExternal::new),
            Arbitraries.of(new Message.Stop(), new Message.Stop(true)),
            Arbitraries.just(new Message.ImportPd()),
            Combinators.combine(ints, ints, ints).as(Message.Queues::new),
            Combinators.combine(message, ints, text(FrameDescriptor.MAX_MESSAGE_LENGTH))
                .as((m, handle, device) -> new Message.PdImported(ErrorCode.OK, m, handle, device)),
            Combinators.combine(message, ints, longs, ints, text(FrameDescriptor.MAX_MESSAGE_LENGTH))
                .as((m, id, epoch, version, path) -> new Message.Welcome(ErrorCode.OK, m, id, epoch, version, path)),
            Combinators.combine(message, longs, longs, ints, ints, ints)
                .as((m, start, end, lkey, rkey, access) ->
                    new Message.MrCreated(ErrorCode.OK, m, start, end, lkey, rkey, access)),
            Combinators.combine(message, longs, longs, ints)
                .as((m, address, length, access) -> new Message.Allocated(ErrorCode.OK, m, address, length, access)),
            Combinators.combine(message, longs, longs, ints, ints, ints)
                .as((m, address, length, access, lkey, rkey) ->
                    new Message.Allocated(ErrorCode.OK, m, address, length, access, true, lkey, rkey)),
            Combinators.combine(message, longs, longs, ints, ints, ints)
                .as((m, address, length, lkey, rkey, access) ->
                    new Message.ExternalRegistered(ErrorCode.OK, m, address, length, lkey, rkey, access)),
            Combinators.combine(Arbitraries.of(STATUS_OK_TYPES), message)
                .as((type, m) -> new Message.Status(type, ErrorCode.OK, m)),
            Combinators.combine(Arbitraries.of(MessageType.class),
                    Arbitraries.of(ErrorCode.class).filter(c -> c != ErrorCode.OK), message)
                .as(Message.Status::new)));
    }

    /**
     * Text of any Unicode code points whose UTF-8 encoding fits {@code maxBytes} (the codec truncates longer
     * text, which then does not round-trip by design).
     */
    private static Arbitrary<String> text(final int maxBytes)
    {
        final Arbitrary<Integer> codePoint = Arbitraries.frequencyOf(
            net.jqwik.api.Tuple.of(6, Arbitraries.integers().between(0x20, 0x7E)),
            net.jqwik.api.Tuple.of(1, Arbitraries.integers().between(0, 0xD7FF)),
            net.jqwik.api.Tuple.of(1, Arbitraries.integers().between(0xE000, 0x10FFFF)));
        return codePoint.list().ofMaxSize(maxBytes)
            .map(points ->
            {
                final StringBuilder s = new StringBuilder();
                int bytes = 0;
                for (final int p : points)
                {
                    bytes += p < 0x80 ? 1 : p < 0x800 ? 2 : p < 0x10000 ? 3 : 4;
                    if (bytes > maxBytes)
                    {
                        break;
                    }
                    s.appendCodePoint(p);
                }
                return s.toString();
            });
    }
}
