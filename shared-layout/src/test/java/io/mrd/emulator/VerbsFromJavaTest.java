package io.mrd.emulator;

import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.Wait;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.time.Duration;

import static io.mrd.testing.EmulatedDevice.layoutOf;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;

/**
 * The emulated device driven from a JVM the way mrd drives it: exported verbs by downcall, and
 * {@code ibv_post_send} / {@code ibv_poll_cq} through the function pointers in {@code ibv_context.ops}, as
 * verbs.h's inline functions call them, with every offset taken from the installed header
 * ({@link EmulatedDevice#verbsLayout()}). The DMA engine thread runs inside this JVM and copies between
 * segments it allocated.
 */
@SuppressWarnings("restricted")
final class VerbsFromJavaTest
{
    private static final Linker LINKER = Linker.nativeLinker();
    private static final int LOCAL_WRITE = 1;
    private static final int REMOTE_WRITE = 2;
    private static final int REMOTE_READ = 4;

    private static SymbolLookup lib;

    @BeforeAll
    static void load()
    {
        lib = SymbolLookup.libraryLookup(EmulatedDevice.library(), Arena.global());
    }

    @Test
    void aJvmPostsAndPollsThroughTheContextOpsAsTheVerbsHeaderInlinesDo() throws Throwable
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment count = arena.allocate(JAVA_INT);
            final MemorySegment list = ((MemorySegment)bind("ibv_get_device_list", ADDRESS, ADDRESS)
                .invokeExact(count)).reinterpret(ADDRESS.byteSize() * 2);
            assertEquals(1, count.get(JAVA_INT, 0), "one device by default");
            final MemorySegment ctx = ((MemorySegment)bind("ibv_open_device", ADDRESS, ADDRESS)
                .invokeExact(list.get(ADDRESS, 0))).reinterpret(layoutOf("sizeof.ibv_context"));
            bind("ibv_free_device_list", null, ADDRESS).invokeExact(list);
            assertNotEquals(MemorySegment.NULL, ctx);
            final MemorySegment pd = (MemorySegment)bind("ibv_alloc_pd", ADDRESS, ADDRESS).invokeExact(ctx);

            final MemorySegment buffer = arena.allocate(8192, 4096);
            final MemorySegment mr = ((MemorySegment)bind("ibv_reg_mr", ADDRESS, ADDRESS, ADDRESS, JAVA_LONG,
                JAVA_INT).invokeExact(pd, buffer, 8192L, LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ))
                .reinterpret(layoutOf("sizeof.ibv_mr"));
            final int lkey = mr.get(JAVA_INT, layoutOf("ibv_mr.lkey"));
            final int rkey = mr.get(JAVA_INT, layoutOf("ibv_mr.rkey"));

            final MethodHandle createCq = bind("ibv_create_cq", ADDRESS, ADDRESS, JAVA_INT, ADDRESS, ADDRESS,
                JAVA_INT);
            final MemorySegment cq = (MemorySegment)createCq.invokeExact(ctx, 16, MemorySegment.NULL,
                MemorySegment.NULL, 0);
            final MemorySegment qa = createQp(arena, pd, cq);
            final MemorySegment qb = createQp(arena, pd, cq);
            connect(arena, qa, qb.get(JAVA_INT, layoutOf("ibv_qp.qp_num")));
            connect(arena, qb, qa.get(JAVA_INT, layoutOf("ibv_qp.qp_num")));

            // RDMA WRITE of "from java" from the first page to the second, signaled.
            final byte[] payload = "from java".getBytes();
            MemorySegment.copy(payload, 0, buffer, JAVA_BYTE, 0, payload.length);
            final MemorySegment sge = arena.allocate(layoutOf("sizeof.ibv_sge"), 8);
            sge.set(JAVA_LONG, layoutOf("ibv_sge.addr"), buffer.address());
            sge.set(JAVA_INT, layoutOf("ibv_sge.length"), payload.length);
            sge.set(JAVA_INT, layoutOf("ibv_sge.lkey"), lkey);
            final MemorySegment wr = arena.allocate(layoutOf("sizeof.ibv_send_wr"), 8);
            wr.set(JAVA_LONG, layoutOf("ibv_send_wr.wr_id"), 42L);
            wr.set(ADDRESS, layoutOf("ibv_send_wr.sg_list"), sge);
            wr.set(JAVA_INT, layoutOf("ibv_send_wr.num_sge"), 1);
            wr.set(JAVA_INT, layoutOf("ibv_send_wr.opcode"), (int)layoutOf("IBV_WR_RDMA_WRITE"));
            wr.set(JAVA_INT, layoutOf("ibv_send_wr.send_flags"), (int)layoutOf("IBV_SEND_SIGNALED"));
            wr.set(JAVA_LONG, layoutOf("ibv_send_wr.wr.rdma.remote_addr"), buffer.address() + 4096);
            wr.set(JAVA_INT, layoutOf("ibv_send_wr.wr.rdma.rkey"), rkey);
            final MemorySegment badWr = arena.allocate(ADDRESS);

            final MethodHandle postSend = op(ctx, "ibv_context.ops.post_send", JAVA_INT, ADDRESS, ADDRESS, ADDRESS);
            assertEquals(0, (int)postSend.invokeExact(qa, wr, badWr), "ops.post_send");

            final MethodHandle pollCq = op(ctx, "ibv_context.ops.poll_cq", JAVA_INT, ADDRESS, JAVA_INT, ADDRESS);
            final MemorySegment wc = arena.allocate(layoutOf("sizeof.ibv_wc"), 8);
            final int polled = Wait.await("a completion on the CQ", Duration.ofSeconds(10),
                () -> pollOnce(pollCq, cq, wc), n -> 0 != n);
            assertEquals(1, polled, "ops.poll_cq");
            assertEquals(42L, wc.get(JAVA_LONG, layoutOf("ibv_wc.wr_id")));
            assertEquals((int)layoutOf("IBV_WC_SUCCESS"), wc.get(JAVA_INT, layoutOf("ibv_wc.status")));
            assertEquals((int)layoutOf("IBV_WC_RDMA_WRITE"), wc.get(JAVA_INT, layoutOf("ibv_wc.opcode")));
            assertArrayEquals(payload, buffer.asSlice(4096, payload.length).toArray(JAVA_BYTE));

            final MemorySegment live = arena.allocate(JAVA_INT, 4);
            final MethodHandle liveObjects = bind("mrdemu_live_objects", JAVA_INT, ADDRESS, ADDRESS);
            assertEquals(0, (int)liveObjects.invokeExact(ctx, live));
            assertArrayEquals(new int[] {1, 1, 1, 2}, live.toArray(JAVA_INT), "PDs, MRs, CQs, QPs");

            final MethodHandle destroyQp = bind("ibv_destroy_qp", JAVA_INT, ADDRESS);
            assertEquals(0, (int)destroyQp.invokeExact(qa));
            assertEquals(0, (int)destroyQp.invokeExact(qb));
            assertEquals(0, (int)bind("ibv_destroy_cq", JAVA_INT, ADDRESS).invokeExact(cq));
            assertEquals(0, (int)bind("ibv_dereg_mr", JAVA_INT, ADDRESS).invokeExact(mr));
            assertEquals(0, (int)bind("ibv_dealloc_pd", JAVA_INT, ADDRESS).invokeExact(pd));
            assertEquals(0, (int)liveObjects.invokeExact(ctx, live));
            assertArrayEquals(new int[] {0, 0, 0, 0}, live.toArray(JAVA_INT));
            assertEquals(0, (int)bind("ibv_close_device", JAVA_INT, ADDRESS).invokeExact(ctx));
        }
    }

    private static MemorySegment createQp(final Arena arena, final MemorySegment pd, final MemorySegment cq)
        throws Throwable
    {
        final MemorySegment init = arena.allocate(layoutOf("sizeof.ibv_qp_init_attr"), 8);
        init.set(ADDRESS, layoutOf("ibv_qp_init_attr.send_cq"), cq);
        init.set(ADDRESS, layoutOf("ibv_qp_init_attr.recv_cq"), cq);
        init.set(JAVA_INT, layoutOf("ibv_qp_init_attr.qp_type"), (int)layoutOf("IBV_QPT_RC"));
        final long cap = layoutOf("ibv_qp_init_attr.cap");
        init.set(JAVA_INT, cap + layoutOf("ibv_qp_cap.max_send_wr"), 8);
        init.set(JAVA_INT, cap + layoutOf("ibv_qp_cap.max_recv_wr"), 8);
        init.set(JAVA_INT, cap + layoutOf("ibv_qp_cap.max_send_sge"), 1);
        init.set(JAVA_INT, cap + layoutOf("ibv_qp_cap.max_recv_sge"), 1);
        final MemorySegment qp = (MemorySegment)bind("ibv_create_qp", ADDRESS, ADDRESS, ADDRESS)
            .invokeExact(pd, init);
        assertNotEquals(MemorySegment.NULL, qp, "ibv_create_qp");
        return qp.reinterpret(layoutOf("sizeof.ibv_qp"));
    }

    /** RESET to INIT to RTR to RTS, with the attributes and masks an RC QP needs. */
    private static void connect(final Arena arena, final MemorySegment qp, final int destQpNum) throws Throwable
    {
        final MethodHandle modify = bind("ibv_modify_qp", JAVA_INT, ADDRESS, ADDRESS, JAVA_INT);
        final MemorySegment attr = arena.allocate(layoutOf("sizeof.ibv_qp_attr"), 8);
        attr.set(JAVA_INT, layoutOf("ibv_qp_attr.qp_state"), (int)layoutOf("IBV_QPS_INIT"));
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.port_num"), (byte)1);
        attr.set(JAVA_INT, layoutOf("ibv_qp_attr.qp_access_flags"), REMOTE_WRITE | REMOTE_READ);
        assertEquals(0, (int)modify.invokeExact(qp, attr, (int)(layoutOf("IBV_QP_STATE") |
            layoutOf("IBV_QP_PKEY_INDEX") | layoutOf("IBV_QP_PORT") | layoutOf("IBV_QP_ACCESS_FLAGS"))), "INIT");

        attr.fill((byte)0);
        attr.set(JAVA_INT, layoutOf("ibv_qp_attr.qp_state"), (int)layoutOf("IBV_QPS_RTR"));
        attr.set(JAVA_INT, layoutOf("ibv_qp_attr.path_mtu"), (int)layoutOf("IBV_MTU_4096"));
        attr.set(JAVA_INT, layoutOf("ibv_qp_attr.dest_qp_num"), destQpNum);
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.max_dest_rd_atomic"), (byte)1);
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.min_rnr_timer"), (byte)12);
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.ah_attr") + layoutOf("ibv_ah_attr.port_num"), (byte)1);
        // the port's LID (ibv_query_port): the device delivers a request only to the DLID of its port
        attr.set(JAVA_SHORT, layoutOf("ibv_qp_attr.ah_attr") + layoutOf("ibv_ah_attr.dlid"), (short)1);
        assertEquals(0, (int)modify.invokeExact(qp, attr, (int)(layoutOf("IBV_QP_STATE") | layoutOf("IBV_QP_AV") |
            layoutOf("IBV_QP_PATH_MTU") | layoutOf("IBV_QP_DEST_QPN") | layoutOf("IBV_QP_RQ_PSN") |
            layoutOf("IBV_QP_MAX_DEST_RD_ATOMIC") | layoutOf("IBV_QP_MIN_RNR_TIMER"))), "RTR");

        attr.fill((byte)0);
        attr.set(JAVA_INT, layoutOf("ibv_qp_attr.qp_state"), (int)layoutOf("IBV_QPS_RTS"));
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.timeout"), (byte)14);
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.retry_cnt"), (byte)7);
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.rnr_retry"), (byte)7);
        attr.set(JAVA_BYTE, layoutOf("ibv_qp_attr.max_rd_atomic"), (byte)1);
        assertEquals(0, (int)modify.invokeExact(qp, attr, (int)(layoutOf("IBV_QP_STATE") |
            layoutOf("IBV_QP_TIMEOUT") | layoutOf("IBV_QP_RETRY_CNT") | layoutOf("IBV_QP_RNR_RETRY") |
            layoutOf("IBV_QP_SQ_PSN") | layoutOf("IBV_QP_MAX_QP_RD_ATOMIC"))), "RTS");
    }

    /** A function pointer of {@code ibv_context.ops}, read at its header offset. */
    private static MethodHandle op(final MemorySegment ctx, final String field, final MemoryLayout result,
        final MemoryLayout... args)
    {
        final MemorySegment pointer = ctx.get(ADDRESS, layoutOf(field));
        assertNotEquals(MemorySegment.NULL, pointer, field);
        return LINKER.downcallHandle(pointer, FunctionDescriptor.of(result, args));
    }

    private static MethodHandle bind(final String symbol, final MemoryLayout result, final MemoryLayout... args)
    {
        final MemorySegment address = lib.find(symbol).orElseThrow(() ->
            new AssertionError("libmrdemu.so does not export " + symbol));
        return LINKER.downcallHandle(address, null == result ? FunctionDescriptor.ofVoid(args) :
            FunctionDescriptor.of(result, args));
    }

    /**
     * @return what one {@code ops.poll_cq} of one completion returned.
     */
    private static int pollOnce(final MethodHandle pollCq, final MemorySegment cq, final MemorySegment wc)
    {
        try
        {
            return (int)pollCq.invokeExact(cq, 1, wc);
        }
        catch (final Throwable ex)
        {
            throw new AssertionError("ops.poll_cq failed", ex);
        }
    }
}
