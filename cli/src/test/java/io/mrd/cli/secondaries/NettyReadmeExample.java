package io.mrd.cli.secondaries;

// README-BEGIN
import io.mrd.layout.Access;
import io.mrd.secondary.MrdClient;
import io.mrd.secondary.pool.BufferPool;
import io.mrd.secondary.pool.MrdByteBuf;
import io.mrd.secondary.pool.MrdByteBufAllocator;
import io.mrd.secondary.pool.PoolContext;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.local.LocalAddress;
import io.netty.channel.local.LocalChannel;
import io.netty.channel.local.LocalIoHandler;
import io.netty.channel.local.LocalServerChannel;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

public final class NettyReadmeExample
{
    public static void main(final String[] args) throws InterruptedException
    {
        try (MrdClient client = MrdClient.attach(Path.of(args[0]));
             // Registered buffers of 4 KiB to 1 MiB, carved from 2 MiB allocations that peers may RDMA WRITE
             BufferPool pool = BufferPool.open(client, new PoolContext().access(Access.REMOTE_WRITE)))
        {
            final MrdByteBufAllocator allocator = new MrdByteBufAllocator(pool);
            final CountDownLatch read = new CountDownLatch(1);
            final EventLoopGroup group = new MultiThreadIoEventLoopGroup(1, LocalIoHandler.newFactory());
            try
            {
                final LocalAddress address = new LocalAddress("netty-readme");
                new ServerBootstrap().group(group).channel(LocalServerChannel.class)
                    .childOption(ChannelOption.ALLOCATOR, allocator)
                    .childHandler(new SimpleChannelInboundHandler<ByteBuf>()
                    {
                        protected void channelRead0(final ChannelHandlerContext ctx, final ByteBuf msg)
                        {
                            // Registered memory, as it came through the pipeline: its keys, no lookup.
                            final MrdByteBuf registered = MrdByteBuf.of(msg);
                            System.out.printf("read %d bytes at 0x%x lkey 0x%x rkey 0x%x%n", msg.readableBytes(),
                                MrdByteBuf.address(msg), registered.lkey(), registered.rkey());
                            read.countDown();
                        }
                    })
                    .bind(address).sync();
                final Channel channel = new Bootstrap().group(group).channel(LocalChannel.class)
                    .option(ChannelOption.ALLOCATOR, allocator)
                    .handler(new ChannelInboundHandlerAdapter())
                    .connect(address).sync().channel();
                final ByteBuf out = channel.alloc().buffer(); // a pooled, registered direct buffer
                out.writeCharSequence("hello, registered world", StandardCharsets.US_ASCII);
                channel.writeAndFlush(out).sync();            // the pipeline releases it once written
                read.await();
                channel.close().sync();
            }
            finally
            {
                // Before the pool closes: the event loop releases the last buffers; close fails while any is out.
                group.shutdownGracefully(0, 0, java.util.concurrent.TimeUnit.SECONDS).sync();
            }
        }
    }
}
// README-END
