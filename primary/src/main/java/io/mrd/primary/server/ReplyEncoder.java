package io.mrd.primary.server;

import io.mrd.layout.protocol.FrameCodec;
import io.mrd.layout.protocol.FrameDescriptor;
import io.mrd.layout.protocol.Message;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Encodes replies into buffers of a channel's allocator, through a scratch buffer per thread (the event loop
 * and each worker encode their own replies). Any thread.
 */
final class ReplyEncoder
{
    private static final ThreadLocal<UnsafeBuffer> SCRATCH =
        ThreadLocal.withInitial(() -> new UnsafeBuffer(new byte[FrameDescriptor.MAX_FRAME_LENGTH]));

    private ReplyEncoder()
    {
    }

    static ByteBuf encode(final Channel channel, final long correlationId, final Message.Reply reply)
    {
        return encode(channel, correlationId, 0, reply);
    }

    /**
     * Encodes a reply with frame flags ({@code FLAG_FD}).
     */
    static ByteBuf encode(final Channel channel, final long correlationId, final int flags, final Message.Reply reply)
    {
        final UnsafeBuffer scratch = SCRATCH.get();
        final int length = FrameCodec.encode(scratch, 0, correlationId, flags, reply);
        final ByteBuf buf = channel.alloc().buffer(length);
        buf.writeBytes(scratch.byteArray(), 0, length);
        return buf;
    }
}
