package io.mrd.primary.server;

import io.mrd.layout.MrdException;
import io.mrd.layout.protocol.Frame;
import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.MessageType;
import io.netty.buffer.ByteBuf;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteOrder;

/**
 * Cuts one connection's byte stream into request frames with {@link FrameCodec}, holding at most one frame
 * ({@link FrameDescriptor#MAX_FRAME_LENGTH} bytes) however the bytes arrive: a frame is copied in only as far
 * as its declared length, so a peer announcing a huge frame is refused after 4 bytes instead of being
 * buffered. Not thread-safe: the connection's event loop owns it.
 */
final class FrameAccumulator
{
    private final byte[] bytes = new byte[FrameDescriptor.MAX_FRAME_LENGTH];
    private final UnsafeBuffer buffer = new UnsafeBuffer(bytes);
    private int filled;
    private int frameLength = -1;
    /** True once the current frame's bytes are all in: its header can be trusted to name an EPROTO reply. */
    private boolean whole;

    /**
     * Takes bytes from {@code in} until one frame is complete or {@code in} is empty.
     *
     * @return the frame, or null when more bytes are needed.
     * @throws MrdException EPROTO for a length outside the limits or a body the codec refuses; the
     *                      accumulator is then spent (the connection is to be closed).
     */
    Frame poll(final ByteBuf in)
    {
        if (frameLength < 0)
        {
            whole = false;
            final int want = Integer.BYTES - filled;
            final int n = Math.min(want, in.readableBytes());
            in.readBytes(bytes, filled, n);
            filled += n;
            frameLength = FrameCodec.frameLength(buffer, 0, filled);
            if (frameLength < 0)
            {
                return null;
            }
        }
        final int n = Math.min(frameLength - filled, in.readableBytes());
        in.readBytes(bytes, filled, n);
        filled += n;
        if (filled < frameLength)
        {
            return null;
        }
        final int length = frameLength;
        whole = true;
        filled = 0;
        frameLength = -1;
        return FrameCodec.decodeRequest(buffer, 0, length);
    }

    /**
     * @return bytes of an incomplete frame held (0 between frames).
     */
    int buffered()
    {
        return filled;
    }

    /**
     * @return the declared length of the incomplete frame, or -1 when fewer than 4 bytes of it arrived.
     */
    int pendingFrameLength()
    {
        return frameLength;
    }

    /**
     * @return the correlation id of the last frame taken whole (what an EPROTO reply to it echoes), or 0 when
     * the frame was refused before it was whole.
     */
    long lastCorrelationId()
    {
        return whole ? FrameCodec.correlationIdOf(buffer, 0, FrameDescriptor.HEADER_LENGTH) : 0;
    }

    /**
     * @return the request type named by the header of the last frame, or {@link MessageType#ERROR} when it
     * names none (a reply type, an unknown code).
     */
    MessageType lastType()
    {
        if (!whole)
        {
            return MessageType.ERROR;
        }
        final int raw = buffer.getShort(FrameDescriptor.TYPE_OFFSET, ByteOrder.LITTLE_ENDIAN) & 0xFFFF;
        final MessageType type = (raw & MessageType.REPLY_BIT) != 0 ? null : MessageType.of(raw);
        return null == type || type == MessageType.SEND_FD ? MessageType.ERROR : type;
    }
}
