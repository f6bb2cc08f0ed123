package io.mrd.secondary.pool;

import io.mrd.layout.Access;
import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.testing.Wait;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.channel.Channel;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.SimpleChannelInboundHandler;
import io.netty.channel.local.LocalAddress;
import io.netty.channel.local.LocalChannel;
import io.netty.channel.local.LocalIoHandler;
import io.netty.channel.local.LocalServerChannel;
import io.netty.util.IllegalReferenceCountException;
import io.netty.util.ResourceLeakDetector;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * {@link MrdByteBufAllocator} in a real Netty pipeline: a {@link LocalChannel} pair, both sides allocating
 * from it ({@code ChannelOption.ALLOCATOR}), Netty's leak detector at PARANOID and its leak listener
 * counting reports. A buffer never released is reported ({@link #aBufferNeverReleasedIsReportedAsALeak}), so
 * the no-leak assertion of the channel test can fail.
 */
class MrdByteBufAllocatorTest
{
    private static final List<String> LEAKS = new CopyOnWriteArrayList<>();
    private static ResourceLeakDetector.Level previousLevel;

    private final FakeSlabSource source = new FakeSlabSource();
    private BufferPool pool;
    private MrdByteBufAllocator allocator;

    @BeforeAll
    static void paranoid()
    {
        previousLevel = ResourceLeakDetector.getLevel();
        ResourceLeakDetector.setLevel(ResourceLeakDetector.Level.PARANOID);
        ByteBufUtil.setLeakListener((resourceType, records) -> LEAKS.add(resourceType + ": " + records));
    }

    @AfterAll
    static void restore()
    {
        ByteBufUtil.setLeakListener(null);
        ResourceLeakDetector.setLevel(previousLevel);
    }

    @BeforeEach
    void open()
    {
        pool = BufferPool.open(source, new PoolContext().access(Access.REMOTE_WRITE));
        allocator = new MrdByteBufAllocator(pool);
        LEAKS.clear();
    }

    @AfterEach
    void close()
    {
        if (pool.acquiredBuffers() == 0)
        {
            pool.close();
            assertEquals(List.of(), source.live());
        }
    }

    @Test
    void aChannelPairMovesDataThroughRegisteredBuffersWithoutLeaks() throws Exception
    {
        final int messages = 200;
        final BlockingQueue<String> received = new ArrayBlockingQueue<>(messages + 1);
        final List<String> problems = new CopyOnWriteArrayList<>();
        final EventLoopGroup group = new MultiThreadIoEventLoopGroup(2, LocalIoHandler.newFactory());
        try
        {
            final LocalAddress address = new LocalAddress("mrd-pool-" + System.nanoTime());
            final Channel server = new ServerBootstrap().group(group).channel(LocalServerChannel.class)
                .childOption(ChannelOption.ALLOCATOR, allocator)
                .childHandler(new ChannelInitializer<LocalChannel>()
                {
                    protected void initChannel(final LocalChannel ch)
                    {
                        ch.pipeline().addLast(new SimpleChannelInboundHandler<ByteBuf>()
                        {
                            protected void channelRead0(final ChannelHandlerContext ctx, final ByteBuf msg)
                            {
                                checkRegistered("server read", msg, problems);
                                // echo in a buffer of the server's own allocator: a copy, upper-cased
                                final ByteBuf reply = ctx.alloc().directBuffer(msg.readableBytes());
                                for (int i = msg.readerIndex(); i < msg.writerIndex(); i++)
                                {
                                    reply.writeByte(Character.toUpperCase(msg.getByte(i)));
                                }
                                ctx.writeAndFlush(reply);
                            }
                        });
                    }
                }).bind(address).sync().channel();
            final Channel client = new Bootstrap().group(group).channel(LocalChannel.class)
                .option(ChannelOption.ALLOCATOR, allocator)
                .handler(new SimpleChannelInboundHandler<ByteBuf>()
                {
                    protected void channelRead0(final ChannelHandlerContext ctx, final ByteBuf msg)
                    {
                        checkRegistered("client read", msg, problems);
                        received.add(msg.toString(java.nio.charset.StandardCharsets.US_ASCII));
                    }
                }).connect(address).sync().channel();
            assertTrue(client.alloc() instanceof MrdByteBufAllocator);
            for (int i = 0; i < messages; i++)
            {
                final String text = "message " + i + " " + "x".repeat(i * 37); // up to ~7 KiB: two classes
                final ByteBuf out = client.alloc().buffer(16);                 // grows as it is written
                out.writeCharSequence(text, java.nio.charset.StandardCharsets.US_ASCII);
                client.writeAndFlush(out).sync();
                assertEquals(text.toUpperCase(java.util.Locale.ROOT), received.poll(30, TimeUnit.SECONDS),
                    "echo of message " + i);
            }
            client.close().sync();
            server.close().sync();
        }
        finally
        {
            group.shutdownGracefully(0, 0, TimeUnit.SECONDS).sync();
        }
        assertEquals(List.of(), problems);
        assertEquals(0, pool.acquiredBuffers(), "every buffer went back to the pool");
        triggerLeakDetection(3);
        assertEquals(List.of(), LEAKS, "no leak reported at PARANOID");
    }

    @Test
    void aBufferNeverReleasedIsReportedAsALeak() throws InterruptedException
    {
        plantLeak();
        Wait.await("the planted leak to be reported", Duration.ofSeconds(60), () ->
        {
            triggerLeakDetection(1);
            return !LEAKS.isEmpty();
        });
        assertEquals(1, LEAKS.size(), "the planted leak is reported: " + LEAKS);
        assertTrue(LEAKS.getFirst().contains("plantLeak"), "the report shows where it was allocated: " + LEAKS);
        assertEquals(1, pool.acquiredBuffers(), "its pool buffer was never given back");
    }

    private void plantLeak()
    {
        final ByteBuf leaked = allocator.directBuffer(100);
        leaked.writeLong(42);
    }

    /** Drops references, collects, and allocates so the detector polls its reference queue. */
    private void triggerLeakDetection(final int rounds) throws InterruptedException
    {
        for (int round = 0; round < rounds; round++)
        {
            System.gc();
            Thread.sleep(20); // not a synchronisation: lets the reference handler enqueue what the GC found
            for (int i = 0; i < 100; i++)
            {
                allocator.directBuffer(64).release();
            }
        }
    }

    @Test
    void releaseToZeroReturnsTheMemoryAndTheBufferThenRefusesAccess()
    {
        final ByteBuf buf = allocator.directBuffer(4096);
        final MrdByteBuf registered = MrdByteBuf.of(buf);
        final PooledBuffer memory = registered.memory();
        buf.retain();
        assertFalse(buf.release(), "count 2 → 1: still live");
        assertEquals(1, pool.acquiredBuffers());
        assertTrue(buf.release(), "count 1 → 0: deallocated");
        assertEquals(0, pool.acquiredBuffers(), "the memory is the pool's again");
        assertTrue(memory.isReleased());
        assertThrows(IllegalReferenceCountException.class, () -> buf.getByte(0));
        assertThrows(IllegalReferenceCountException.class, registered::lkey);
        assertThrows(IllegalReferenceCountException.class, buf::release);
    }

    @Test
    void growingPastTheClassMovesTheBytesToALargerOne()
    {
        final ByteBuf buf = allocator.directBuffer(1000);
        final MrdByteBuf registered = MrdByteBuf.of(buf);
        final PooledBuffer first = registered.memory();
        assertEquals(4096, first.capacity());
        for (int i = 0; i < 4096; i++)
        {
            buf.writeByte(i);
        }
        assertEquals(first, registered.memory(), "growth within the 4 KiB class keeps the memory");
        buf.writeByte(7);
        final PooledBuffer second = registered.memory();
        assertNotEquals(first, second);
        assertTrue(first.isReleased(), "the smaller buffer went back");
        assertEquals(8192, second.capacity());
        for (int i = 0; i < 4096; i++)
        {
            assertEquals((byte)i, buf.getByte(i), "byte " + i + " moved");
        }
        assertEquals(7, buf.getByte(4096));
        assertEquals(MrdByteBuf.address(buf), second.address(), "the readable bytes are in the new buffer");
        assertEquals(1, pool.acquiredBuffers());
        buf.release();
    }

    @Test
    void theKeysAreFoundUnderWrappersAndSlices()
    {
        final ByteBuf buf = allocator.directBuffer(4096);
        assertFalse(buf instanceof MrdByteBuf, "PARANOID wraps it: " + buf.getClass());
        buf.writeZero(100);
        final MrdByteBuf registered = MrdByteBuf.of(buf);
        final SlabMemory slab = pool.slabs().getFirst();
        assertEquals(slab.lkey(), registered.lkey());
        assertEquals(slab.rkey(), registered.rkey());
        assertNotEquals(Access.NO_RKEY, registered.rkey());
        final ByteBuf slice = buf.slice(10, 50);
        assertEquals(registered.keyPair(), MrdByteBuf.of(slice).keyPair());
        assertEquals(registered.address() + 10, MrdByteBuf.address(slice));
        buf.readerIndex(3);
        assertEquals(registered.address() + 3, MrdByteBuf.address(buf.duplicate()));
        buf.release();
    }

    @Test
    void heapBuffersArePlainAndHaveNoKeys()
    {
        final ByteBuf heap = allocator.heapBuffer(64);
        assertTrue(heap.hasArray());
        final MrdException ex = assertThrows(MrdException.class, () -> MrdByteBuf.of(heap));
        assertEquals(ErrorCode.EINVAL, ex.code());
        assertTrue(ex.getMessage().startsWith(heap + " is not registered memory"), ex.getMessage());
        assertTrue(ex.getMessage().contains("pass allocator.directBuffer(...) of an MrdByteBufAllocator"),
            ex.getMessage());
        heap.release();
        assertEquals(0, source.requested().size(), "no slab for heap buffers");
        final ByteBuf empty = allocator.directBuffer(0);
        assertInstanceOf(MrdByteBufAllocator.class, empty.alloc(), "a direct buffer of capacity 0 is pooled too");
        empty.writeByte(1);
        assertEquals(1, MrdByteBuf.of(empty).memory().segment().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0));
        empty.release();
    }

    private static void checkRegistered(final String where, final ByteBuf msg, final List<String> problems)
    {
        try
        {
            MrdByteBuf.of(msg).lkey();
        }
        catch (final RuntimeException ex)
        {
            problems.add(where + ": " + ex);
        }
    }
}
