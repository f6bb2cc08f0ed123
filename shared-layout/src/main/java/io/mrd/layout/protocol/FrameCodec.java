package io.mrd.layout.protocol;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

import static io.mrd.layout.protocol.FrameDescriptor.*;
import static org.agrona.BitUtil.SIZE_OF_INT;
import static org.agrona.BitUtil.SIZE_OF_LONG;
import static org.agrona.BitUtil.SIZE_OF_SHORT;

/**
 * The one codec of the socket protocol ({@link FrameDescriptor}), used by the primary's server, the
 * secondary's client and the tests that fuzz them.
 * <p>
 * Decoding trusts nothing: every length is checked against the frame and the limits, a payload must be
 * consumed exactly, and any violation is an {@link MrdException} with {@link ErrorCode#EPROTO} saying what
 * was wrong: never an exception of another type, never a read outside the frame.
 */
public final class FrameCodec
{
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    private FrameCodec()
    {
    }

    /**
     * Reads the length of the frame starting at {@code offset}.
     *
     * @param available bytes readable from {@code offset}.
     * @return the frame length, or -1 when fewer than 4 bytes are available.
     * @throws MrdException EPROTO when the length is below the header or above {@link FrameDescriptor#MAX_FRAME_LENGTH}.
     */
    public static int frameLength(final DirectBuffer buffer, final int offset, final int available)
    {
        if (available < SIZE_OF_INT)
        {
            return -1;
        }
        final int length = buffer.getInt(offset + LENGTH_OFFSET, ORDER);
        if (length < HEADER_LENGTH || length > MAX_FRAME_LENGTH)
        {
            throw protocol("frame length " + Integer.toUnsignedString(length) + " is outside [" + HEADER_LENGTH + ", " +
                MAX_FRAME_LENGTH + "]");
        }
        return length;
    }

    /**
     * Encodes a frame.
     *
     * @return the frame length.
     * @throws MrdException EMSGSIZE when the frame would exceed {@link FrameDescriptor#MAX_FRAME_LENGTH}.
     */
    public static int encode(
        final MutableDirectBuffer buffer, final int offset, final long correlationId, final int flags, final Message message)
    {
        int at = offset + HEADER_LENGTH;
        final boolean reply = message instanceof Message.Reply;
        switch (message)
        {
            case Message.Hello m ->
            {
                buffer.putInt(at, m.version(), ORDER);
                at = putString(buffer, at + SIZE_OF_INT, m.name(), MAX_NAME_LENGTH);
                if (0 != m.resumeClientId())
                {
                    at = putInt(buffer, at, m.resumeClientId());
                }
            }
            case Message.CreateMr m -> at = putLongs(buffer, at, m.address(), m.length());
            case Message.Alloc m -> at = putInt(buffer, putLongs(buffer, at, m.length()), m.access());
            case Message.Free m -> at = putLongs(buffer, at, m.address(), m.length());
            case Message.RegExternal m -> at = putInt(buffer, putLongs(buffer, at, m.length()), m.access());
            case Message.DeregExternal m -> at = putLongs(buffer, at, m.address());
            case Message.Stop m ->
            {
            }
            case Message.ImportPd m -> at = putInt(buffer, at, m.device());
            case Message.Queues m ->
            {
                buffer.putInt(at, m.operation(), ORDER);
                buffer.putInt(at + SIZE_OF_INT, m.kind(), ORDER);
                buffer.putInt(at + 2 * SIZE_OF_INT, m.handle(), ORDER);
                buffer.putInt(at + 3 * SIZE_OF_INT, m.device(), ORDER);
                at += 4 * SIZE_OF_INT;
            }
            case Message.Reply r -> at = encodeReply(buffer, at, r);
        }
        final int length = at - offset;
        // The codec owns FLAG_REGISTER: it says how the ALLOC payload reads, so it follows the message.
        final int allFlags = flags | (registers(message) ? FLAG_REGISTER : 0) |
            (message instanceof Message.Hello h && 0 != h.resumeClientId() ? FLAG_RESUME : 0) |
            (message instanceof Message.Stop s && s.handover() ? FLAG_HANDOVER : 0);
        if (length > MAX_FRAME_LENGTH)
        {
            throw new MrdException(ErrorCode.EMSGSIZE, message.type() + " frame of " + length + " bytes exceeds " +
                MAX_FRAME_LENGTH);
        }
        buffer.putInt(offset + LENGTH_OFFSET, length, ORDER);
        buffer.putShort(offset + TYPE_OFFSET, (short)(reply ? message.type().replyCode() : message.type().code()), ORDER);
        buffer.putShort(offset + FLAGS_OFFSET, (short)allFlags, ORDER);
        buffer.putLong(offset + CORRELATION_ID_OFFSET, correlationId, ORDER);
        return length;
    }

    private static boolean registers(final Message message)
    {
        return message instanceof Message.Alloc a && a.register() ||
            message instanceof Message.Allocated r && r.status() == ErrorCode.OK && r.registered();
    }

    private static int encodeReply(final MutableDirectBuffer buffer, final int offset, final Message.Reply reply)
    {
        buffer.putInt(offset, reply.status().errno(), ORDER);
        int at = offset + SIZE_OF_INT;
        if (reply.status() == ErrorCode.OK)
        {
            switch (reply)
            {
                case Message.Welcome w ->
                {
                    buffer.putInt(at, w.clientId(), ORDER);
                    buffer.putLong(at + SIZE_OF_INT, w.epoch(), ORDER);
                    buffer.putInt(at + SIZE_OF_INT + SIZE_OF_LONG, w.layoutVersion(), ORDER);
                    at = putString(buffer, at + 2 * SIZE_OF_INT + SIZE_OF_LONG, w.controlFile(), MAX_MESSAGE_LENGTH);
                }
                case Message.MrCreated m ->
                    at = putInts(buffer, putLongs(buffer, at, m.start(), m.end()), m.lkey(), m.rkey(), m.access());
                case Message.Allocated m ->
                {
                    at = putInt(buffer, putLongs(buffer, at, m.address(), m.length()), m.access());
                    if (m.registered())
                    {
                        at = putInts(buffer, at, m.lkey(), m.rkey());
                    }
                }
                case Message.ExternalRegistered m -> at = putInts(buffer,
                    putLongs(buffer, at, m.address(), m.length()), m.lkey(), m.rkey(), m.access());
                case Message.PdImported m ->
                {
                    buffer.putInt(at, m.pdHandle(), ORDER);
                    at = putString(buffer, at + SIZE_OF_INT, m.device(), MAX_MESSAGE_LENGTH);
                }
                case Message.Status s ->
                {
                }
            }
        }
        return putString(buffer, at, null == reply.message() ? "" : reply.message(), MAX_MESSAGE_LENGTH);
    }

    /**
     * Decodes a request frame (what the primary reads).
     *
     * @param length the frame length, as {@link #frameLength} returned it.
     * @throws MrdException EPROTO naming what is wrong with the frame.
     */
    public static Frame decodeRequest(final DirectBuffer buffer, final int offset, final int length)
    {
        final Cursor c = header(buffer, offset, length);
        if ((c.rawType & MessageType.REPLY_BIT) != 0)
        {
            throw protocol("frame type 0x" + Integer.toHexString(c.rawType) + " is a reply, expected a request");
        }
        final MessageType type = MessageType.of(c.rawType);
        final boolean register = c.register(type == MessageType.ALLOC);
        c.resume(type == MessageType.HELLO);
        c.allowed(FLAG_HANDOVER, "FLAG_HANDOVER", MessageType.STOP, type == MessageType.STOP);
        final Message body = switch (null == type ? MessageType.ERROR : type)
        {
            case HELLO ->
            {
                final int version = c.i32();
                final String name = c.string(MAX_NAME_LENGTH);
                yield new Message.Hello(version, name, 0 != (c.flags & FLAG_RESUME) ? c.positiveI32("resumed client id")
                    : 0);
            }
            case CREATE_MR -> new Message.CreateMr(c.i64(), c.i64());
            case ALLOC -> new Message.Alloc(c.i64(), c.i32(), register);
            case FREE -> new Message.Free(c.i64(), c.i64());
            case REG_EXTERNAL -> new Message.RegExternal(c.i64(), c.i32());
            case DEREG_EXTERNAL -> new Message.DeregExternal(c.i64());
            case STOP -> new Message.Stop(0 != (c.flags & FLAG_HANDOVER));
            case IMPORT_PD -> new Message.ImportPd(c.i32());
            case QUEUES -> new Message.Queues(c.i32(), c.i32(), c.i32(), c.i32());
            case SEND_FD, ERROR -> throw protocol("unknown request type " + c.rawType);
        };
        c.end();
        return new Frame(c.correlationId, c.flags, body);
    }

    /**
     * Decodes a reply frame (what a secondary reads).
     *
     * @throws MrdException EPROTO naming what is wrong with the frame.
     */
    public static Frame decodeReply(final DirectBuffer buffer, final int offset, final int length)
    {
        final Cursor c = header(buffer, offset, length);
        if ((c.rawType & MessageType.REPLY_BIT) == 0)
        {
            throw protocol("frame type 0x" + Integer.toHexString(c.rawType) + " is a request, expected a reply");
        }
        final MessageType type = MessageType.of(c.rawType & ~MessageType.REPLY_BIT);
        if (null == type)
        {
            throw protocol("unknown reply type 0x" + Integer.toHexString(c.rawType));
        }
        final int errno = c.i32();
        final ErrorCode status = ErrorCode.of(errno);
        final boolean registered = c.register(type == MessageType.ALLOC && status == ErrorCode.OK);
        c.resume(false);
        c.allowed(FLAG_HANDOVER, "FLAG_HANDOVER", MessageType.STOP, false);
        final Message.Reply body;
        if (status != ErrorCode.OK)
        {
            body = new Message.Status(type, status, c.string(MAX_MESSAGE_LENGTH));
        }
        else
        {
            body = switch (type)
            {
                case HELLO ->
                {
                    final int clientId = c.i32();
                    final long epoch = c.i64();
                    final int layoutVersion = c.i32();
                    final String path = c.string(MAX_MESSAGE_LENGTH);
                    yield new Message.Welcome(status, c.string(MAX_MESSAGE_LENGTH), clientId, epoch, layoutVersion, path);
                }
                case CREATE_MR ->
                {
                    final long start = c.i64();
                    final long end = c.i64();
                    final int lkey = c.i32();
                    final int rkey = c.i32();
                    final int access = c.i32();
                    yield new Message.MrCreated(status, c.string(MAX_MESSAGE_LENGTH), start, end, lkey, rkey, access);
                }
                case ALLOC ->
                {
                    final long address = c.i64();
                    final long len = c.i64();
                    final int access = c.i32();
                    final int lkey = registered ? c.i32() : 0;
                    final int rkey = registered ? c.i32() : 0;
                    yield new Message.Allocated(
                        status, c.string(MAX_MESSAGE_LENGTH), address, len, access, registered, lkey, rkey);
                }
                case REG_EXTERNAL ->
                {
                    final long address = c.i64();
                    final long len = c.i64();
                    final int lkey = c.i32();
                    final int rkey = c.i32();
                    final int access = c.i32();
                    yield new Message.ExternalRegistered(
                        status, c.string(MAX_MESSAGE_LENGTH), address, len, lkey, rkey, access);
                }
                case IMPORT_PD ->
                {
                    final int pdHandle = c.i32();
                    final String device = c.string(MAX_MESSAGE_LENGTH);
                    yield new Message.PdImported(status, c.string(MAX_MESSAGE_LENGTH), pdHandle, device);
                }
                case FREE, DEREG_EXTERNAL, STOP, SEND_FD, QUEUES, ERROR ->
                    new Message.Status(type, status, c.string(MAX_MESSAGE_LENGTH));
            };
        }
        c.end();
        return new Frame(c.correlationId, c.flags, body);
    }

    /**
     * Reads the correlation id of a frame whose body may be undecodable, so an EPROTO reply can still name it.
     *
     * @return the id, or 0 when the frame is too short to hold one.
     */
    public static long correlationIdOf(final DirectBuffer buffer, final int offset, final int available)
    {
        return available >= HEADER_LENGTH ? buffer.getLong(offset + CORRELATION_ID_OFFSET, ORDER) : 0;
    }

    private static Cursor header(final DirectBuffer buffer, final int offset, final int length)
    {
        if (length < HEADER_LENGTH || length > MAX_FRAME_LENGTH || offset < 0 || offset + length > buffer.capacity())
        {
            throw protocol("frame of " + length + " bytes is outside [" + HEADER_LENGTH + ", " + MAX_FRAME_LENGTH + "]");
        }
        final int declared = buffer.getInt(offset + LENGTH_OFFSET, ORDER);
        if (declared != length)
        {
            throw protocol("frame length field says " + declared + " but the frame has " + length + " bytes");
        }
        final int flags = buffer.getShort(offset + FLAGS_OFFSET, ORDER) & 0xFFFF;
        if ((flags & ~(FLAG_FD | FLAG_REGISTER | FLAG_RESUME | FLAG_HANDOVER)) != 0)
        {
            throw protocol("unknown flags 0x" + Integer.toHexString(flags));
        }
        return new Cursor(buffer, offset, length, buffer.getShort(offset + TYPE_OFFSET, ORDER) & 0xFFFF, flags,
            buffer.getLong(offset + CORRELATION_ID_OFFSET, ORDER));
    }

    private static int putLongs(final MutableDirectBuffer buffer, final int offset, final long... values)
    {
        int at = offset;
        for (final long value : values)
        {
            buffer.putLong(at, value, ORDER);
            at += SIZE_OF_LONG;
        }
        return at;
    }

    private static int putInt(final MutableDirectBuffer buffer, final int offset, final int value)
    {
        buffer.putInt(offset, value, ORDER);
        return offset + SIZE_OF_INT;
    }

    private static int putInts(final MutableDirectBuffer buffer, final int offset, final int... values)
    {
        int at = offset;
        for (final int value : values)
        {
            at = putInt(buffer, at, value);
        }
        return at;
    }

    private static int putString(final MutableDirectBuffer buffer, final int offset, final String value, final int max)
    {
        byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
        if (bytes.length > max)
        {
            bytes = java.util.Arrays.copyOf(bytes, max);
        }
        buffer.putShort(offset, (short)bytes.length, ORDER);
        buffer.putBytes(offset + SIZE_OF_SHORT, bytes);
        return offset + SIZE_OF_SHORT + bytes.length;
    }

    private static MrdException protocol(final String what)
    {
        return new MrdException(ErrorCode.EPROTO, "malformed frame: " + what);
    }

    /**
     * Reads fields in order, never past the frame.
     */
    private static final class Cursor
    {
        private final DirectBuffer buffer;
        private final int end;
        private final int rawType;
        private final int flags;
        private final long correlationId;
        private int at;

        Cursor(final DirectBuffer buffer, final int offset, final int length, final int rawType, final int flags,
            final long correlationId)
        {
            this.buffer = buffer;
            this.end = offset + length;
            this.at = offset + HEADER_LENGTH;
            this.rawType = rawType;
            this.flags = flags;
            this.correlationId = correlationId;
        }

        int i32()
        {
            need(SIZE_OF_INT);
            final int value = buffer.getInt(at, ORDER);
            at += SIZE_OF_INT;
            return value;
        }

        long i64()
        {
            need(SIZE_OF_LONG);
            final long value = buffer.getLong(at, ORDER);
            at += SIZE_OF_LONG;
            return value;
        }

        String string(final int max)
        {
            need(SIZE_OF_SHORT);
            final int length = buffer.getShort(at, ORDER) & 0xFFFF;
            at += SIZE_OF_SHORT;
            if (length > max)
            {
                throw protocol("string of " + length + " bytes exceeds " + max);
            }
            need(length);
            final byte[] bytes = new byte[length];
            buffer.getBytes(at, bytes);
            at += length;
            return new String(bytes, StandardCharsets.UTF_8);
        }

        /**
         * @param allowed whether this frame may carry {@link FrameDescriptor#FLAG_REGISTER} (ALLOC, and of its
         *                replies only a successful one).
         * @return whether it does.
         */
        int positiveI32(final String what)
        {
            final int value = i32();
            if (value <= 0)
            {
                throw protocol("type 0x" + Integer.toHexString(rawType) + " carries " + what + " " + value +
                    ", which must be positive");
            }
            return value;
        }

        void resume(final boolean allowed)
        {
            allowed(FLAG_RESUME, "FLAG_RESUME", MessageType.HELLO, allowed);
        }

        /**
         * @throws MrdException EPROTO when the frame has {@code flag} but its type may not carry it.
         */
        void allowed(final int flag, final String name, final MessageType carrier, final boolean allowed)
        {
            if ((flags & flag) != 0 && !allowed)
            {
                throw protocol("type 0x" + Integer.toHexString(rawType) + " has " + name + ", which only " + carrier +
                    " may carry");
            }
        }

        boolean register(final boolean allowed)
        {
            final boolean register = (flags & FLAG_REGISTER) != 0;
            if (register && !allowed)
            {
                throw protocol("type 0x" + Integer.toHexString(rawType) + " has FLAG_REGISTER, which only ALLOC " +
                    "and its successful reply may carry");
            }
            return register;
        }

        void need(final int bytes)
        {
            if (end - at < bytes)
            {
                throw protocol("type 0x" + Integer.toHexString(rawType) + " payload is truncated");
            }
        }

        void end()
        {
            if (at != end)
            {
                throw protocol("type 0x" + Integer.toHexString(rawType) + " has " + (end - at) + " trailing bytes");
            }
        }
    }
}
