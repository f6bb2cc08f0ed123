package io.mrd.primary.server;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.mrd.layout.protocol.MessageType;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The server's framing: frames come out whole however the bytes are cut, nothing beyond one frame is ever
 * held, and bad input is EPROTO and nothing else.
 */
class FrameAccumulatorTest
{
    private static final List<Message.Request> REQUESTS = List.of(
        new Message.Hello(FrameDescriptor.PROTOCOL_VERSION, "worker"),
        new Message.CreateMr(0x1000_0000_0000L, 4096),
        new Message.Alloc(2 << 20, 0),
        new Message.Free(0x1000_0000_0000L, 2 << 20),
        new Message.RegExternal(1 << 20, Access.LOCAL),
        new Message.DeregExternal(0x1000_4000_0000L),
        new Message.Stop());

    @Test
    void oversizedLengthIsRefusedAfterFourBytes()
    {
        final FrameAccumulator frames = new FrameAccumulator();
        final ByteBuf in = Unpooled.buffer().writeIntLE(1 << 30).writeBytes(new byte[100]);
        final MrdException ex = assertThrows(MrdException.class, () -> frames.poll(in));
        assertEquals(ErrorCode.EPROTO, ex.code());
        assertEquals(100, in.readableBytes(), "nothing past the length is read");
        assertEquals(0, frames.lastCorrelationId());
        assertEquals(MessageType.ERROR, frames.lastType());
    }

    @Test
    void aBadBodyNamesItsRequestAndCorrelationId()
    {
        final byte[] bytes = RawClient.encode(1234, new Message.Free(1, 2));
        ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).putInt(0, bytes.length - 1);
        final FrameAccumulator frames = new FrameAccumulator();
        assertThrows(MrdException.class, () -> frames.poll(Unpooled.wrappedBuffer(bytes, 0, bytes.length - 1)));
        assertEquals(1234, frames.lastCorrelationId());
        assertEquals(MessageType.FREE, frames.lastType());
    }

    @Test
    void aPartialFrameIsHeldUntilComplete()
    {
        final byte[] bytes = RawClient.encode(5, REQUESTS.get(0));
        final FrameAccumulator frames = new FrameAccumulator();
        assertNull(frames.poll(Unpooled.wrappedBuffer(bytes, 0, 2)));
        assertEquals(-1, frames.pendingFrameLength());
        assertNull(frames.poll(Unpooled.wrappedBuffer(bytes, 2, 5)));
        assertEquals(bytes.length, frames.pendingFrameLength());
        assertEquals(7, frames.buffered());
        final Frame frame = frames.poll(Unpooled.wrappedBuffer(bytes, 7, bytes.length - 7));
        assertEquals(REQUESTS.get(0), frame.message());
        assertEquals(0, frames.buffered());
    }

    @Property(tries = 300)
    void framesSurviveAnyCutting(
        @ForAll @Size(min = 1, max = 20) final List<@IntRange(min = 0, max = 6) Integer> picks,
        @ForAll @Size(min = 1, max = 30) final List<@IntRange(min = 1, max = 64) Integer> cuts)
    {
        final ByteBuf stream = Unpooled.buffer();
        for (int i = 0; i < picks.size(); i++)
        {
            stream.writeBytes(RawClient.encode(i, REQUESTS.get(picks.get(i))));
        }
        final FrameAccumulator frames = new FrameAccumulator();
        final List<Frame> decoded = new ArrayList<>();
        int cut = 0;
        while (stream.isReadable())
        {
            final ByteBuf piece = stream.readSlice(Math.min(cuts.get(cut++ % cuts.size()), stream.readableBytes()));
            while (piece.isReadable())
            {
                final Frame frame = frames.poll(piece);
                if (null != frame)
                {
                    decoded.add(frame);
                }
                assertTrue(frames.buffered() <= FrameDescriptor.MAX_FRAME_LENGTH);
            }
        }
        assertEquals(picks.size(), decoded.size());
        for (int i = 0; i < picks.size(); i++)
        {
            assertEquals(i, decoded.get(i).correlationId());
            assertEquals(REQUESTS.get(picks.get(i)), decoded.get(i).message());
        }
    }

    @Property(tries = 1000)
    void anyBytesGiveFramesOrEproto(@ForAll("streams") final byte[] bytes)
    {
        final FrameAccumulator frames = new FrameAccumulator();
        final ByteBuf in = Unpooled.wrappedBuffer(bytes);
        try
        {
            while (in.isReadable())
            {
                frames.poll(in);
                assertTrue(frames.buffered() <= FrameDescriptor.MAX_FRAME_LENGTH);
            }
        }
        catch (final MrdException ex)
        {
            assertEquals(ErrorCode.EPROTO, ex.code(), ex::getMessage);
        }
    }

    /**
     * Random bytes, half of them behind a plausible header so that the body decoder is reached.
     */
    @Provide
    Arbitrary<byte[]> streams()
    {
        final Arbitrary<byte[]> raw = Arbitraries.bytes().array(byte[].class).ofMaxSize(200);
        return Arbitraries.oneOf(raw, raw.flatMap(body -> Arbitraries.integers().between(0, 9).map(type ->
        {
            final ByteBuffer frame = ByteBuffer.allocate(FrameDescriptor.HEADER_LENGTH + body.length)
                .order(ByteOrder.LITTLE_ENDIAN);
            frame.putInt(frame.capacity()).putShort(type.shortValue()).putShort((short)0).putLong(42).put(body);
            return frame.array();
        })));
    }
}
