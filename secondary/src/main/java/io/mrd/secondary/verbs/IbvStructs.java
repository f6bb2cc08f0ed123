package io.mrd.secondary.verbs;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.StructLayout;

import static java.lang.foreign.MemoryLayout.PathElement.groupElement;
import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static java.lang.foreign.ValueLayout.JAVA_SHORT;

/**
 * The structs of rdma-core's {@code <infiniband/verbs.h>} the datapath reads and writes, as FFM layouts (LP64),
 * and the offsets it uses, taken from the layouts. Fields mrd does not touch are padding of the right size, so
 * that every offset and size is the header's; VerbsLayoutTest checks each one against {@code offsetof} and
 * {@code sizeof} compiled from the installed header.
 * <p>
 * The hot three, drawn (the others are set up once per queue and listed field by field):
 * <pre>
 *  struct ibv_sge (16)
 *   0                   1                   2                   3
 *   0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
 *  +---------------------------------------------------------------+
 *  |                         uint64_t addr                         |  0
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                        uint32_t length                        |  8
 *  +---------------------------------------------------------------+
 *  |                         uint32_t lkey                         | 12
 *  +---------------------------------------------------------------+
 *
 *  struct ibv_send_wr (128): the rdma member of the wr union; atomics, UD, XRC, MW and TSO are padding
 *  +---------------------------------------------------------------+
 *  |                        uint64_t wr_id                         |  0
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   struct ibv_send_wr *next                    |  8
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   struct ibv_sge *sg_list                     | 16
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                          int num_sge                          | 24
 *  +---------------------------------------------------------------+
 *  |                   enum ibv_wr_opcode opcode                   | 28
 *  +---------------------------------------------------------------+
 *  |                   unsigned int send_flags                     | 32
 *  +---------------------------------------------------------------+
 *  |                        __be32 imm_data                        | 36
 *  +---------------------------------------------------------------+
 *  |                   uint64_t wr.rdma.remote_addr                | 40
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                      uint32_t wr.rdma.rkey                    | 48
 *  +---------------------------------------------------------------+
 *  |                 (rest of the unions, 76 bytes)                | 52
 *  +---------------------------------------------------------------+
 *
 *  struct ibv_wc (48)
 *  +---------------------------------------------------------------+
 *  |                        uint64_t wr_id                         |  0
 *  |                                                               |
 *  +---------------------------------------------------------------+
 *  |                   enum ibv_wc_status status                   |  8
 *  +---------------------------------------------------------------+
 *  |                   enum ibv_wc_opcode opcode                   | 12
 *  +---------------------------------------------------------------+
 *  |                       uint32_t vendor_err                     | 16
 *  +---------------------------------------------------------------+
 *  |                        uint32_t byte_len                      | 20
 *  +---------------------------------------------------------------+
 *  |                        __be32 imm_data                        | 24
 *  +---------------------------------------------------------------+
 *  |                        uint32_t qp_num                        | 28
 *  +---------------------------------------------------------------+
 *  |                        uint32_t src_qp                        | 32
 *  +---------------------------------------------------------------+
 *  |                     unsigned int wc_flags                     | 36
 *  +-------------------------------+-------------------------------+
 *  |      uint16_t pkey_index      |         uint16_t slid         | 40
 *  +---------------+---------------+-------------------------------+
 *  |   uint8_t sl  | dlid_path_bits|           (padding)           | 44
 *  +---------------+---------------+-------------------------------+
 * </pre>
 */
final class IbvStructs
{
    /** The 32 function pointers of {@code struct ibv_context_ops}, in the header's order. */
    static final String[] CONTEXT_OPS = {
        "_compat_query_device", "_compat_query_port", "_compat_alloc_pd", "_compat_dealloc_pd", "_compat_reg_mr",
        "_compat_rereg_mr", "_compat_dereg_mr", "alloc_mw", "bind_mw", "dealloc_mw", "_compat_create_cq", "poll_cq",
        "req_notify_cq", "_compat_cq_event", "_compat_resize_cq", "_compat_destroy_cq", "_compat_create_srq",
        "_compat_modify_srq", "_compat_query_srq", "_compat_destroy_srq", "post_srq_recv", "_compat_create_qp",
        "_compat_query_qp", "_compat_modify_qp", "_compat_destroy_qp", "post_send", "post_recv", "_compat_create_ah",
        "_compat_destroy_ah", "_compat_attach_mcast", "_compat_detach_mcast", "_compat_async_event"};

    /** {@code struct ibv_context_ops}: what verbs.h's inline post and poll functions call through. */
    static final StructLayout IBV_CONTEXT_OPS = MemoryLayout.structLayout(
        java.util.Arrays.stream(CONTEXT_OPS).map(ADDRESS::withName).toArray(MemoryLayout[]::new))
        .withName("ibv_context_ops");

    /** {@code struct ibv_context} up to {@code num_comp_vectors} (a mutex and a pointer follow). */
    static final StructLayout IBV_CONTEXT = MemoryLayout.structLayout(
        ADDRESS.withName("device"),
        IBV_CONTEXT_OPS.withName("ops"),
        JAVA_INT.withName("cmd_fd"),
        JAVA_INT.withName("async_fd"),
        JAVA_INT.withName("num_comp_vectors")).withName("ibv_context");

    /** {@code struct ibv_pd}. */
    static final StructLayout IBV_PD = MemoryLayout.structLayout(
        ADDRESS.withName("context"),
        JAVA_INT.withName("handle"),
        MemoryLayout.paddingLayout(4)).withName("ibv_pd");

    /** {@code struct ibv_cq} up to {@code cqe} (a mutex, a condition and counters follow). */
    static final StructLayout IBV_CQ = MemoryLayout.structLayout(
        ADDRESS.withName("context"),
        ADDRESS.withName("channel"),
        ADDRESS.withName("cq_context"),
        JAVA_INT.withName("handle"),
        JAVA_INT.withName("cqe")).withName("ibv_cq");

    /** {@code struct ibv_qp} up to {@code qp_type} (a mutex, a condition and a counter follow). */
    static final StructLayout IBV_QP = MemoryLayout.structLayout(
        ADDRESS.withName("context"),
        ADDRESS.withName("qp_context"),
        ADDRESS.withName("pd"),
        ADDRESS.withName("send_cq"),
        ADDRESS.withName("recv_cq"),
        ADDRESS.withName("srq"),
        JAVA_INT.withName("handle"),
        JAVA_INT.withName("qp_num"),
        JAVA_INT.withName("state"),
        JAVA_INT.withName("qp_type")).withName("ibv_qp");

    /** {@code struct ibv_qp_cap}. */
    static final StructLayout IBV_QP_CAP = MemoryLayout.structLayout(
        JAVA_INT.withName("max_send_wr"),
        JAVA_INT.withName("max_recv_wr"),
        JAVA_INT.withName("max_send_sge"),
        JAVA_INT.withName("max_recv_sge"),
        JAVA_INT.withName("max_inline_data")).withName("ibv_qp_cap");

    /** {@code struct ibv_qp_init_attr}. */
    static final StructLayout IBV_QP_INIT_ATTR = MemoryLayout.structLayout(
        ADDRESS.withName("qp_context"),
        ADDRESS.withName("send_cq"),
        ADDRESS.withName("recv_cq"),
        ADDRESS.withName("srq"),
        IBV_QP_CAP.withName("cap"),
        JAVA_INT.withName("qp_type"),
        JAVA_INT.withName("sq_sig_all"),
        MemoryLayout.paddingLayout(4)).withName("ibv_qp_init_attr");

    /** {@code struct ibv_ah_attr}: {@code struct ibv_global_route grh} (24 bytes, unused: no GRH) first. */
    static final StructLayout IBV_AH_ATTR = MemoryLayout.structLayout(
        MemoryLayout.sequenceLayout(3, JAVA_LONG).withName("grh"),
        JAVA_SHORT.withName("dlid"),
        JAVA_BYTE.withName("sl"),
        JAVA_BYTE.withName("src_path_bits"),
        JAVA_BYTE.withName("static_rate"),
        JAVA_BYTE.withName("is_global"),
        JAVA_BYTE.withName("port_num"),
        MemoryLayout.paddingLayout(1)).withName("ibv_ah_attr");

    /** {@code struct ibv_qp_attr}: what {@code ibv_modify_qp} reads for the fields its mask names. */
    static final StructLayout IBV_QP_ATTR = MemoryLayout.structLayout(
        JAVA_INT.withName("qp_state"),
        JAVA_INT.withName("cur_qp_state"),
        JAVA_INT.withName("path_mtu"),
        JAVA_INT.withName("path_mig_state"),
        JAVA_INT.withName("qkey"),
        JAVA_INT.withName("rq_psn"),
        JAVA_INT.withName("sq_psn"),
        JAVA_INT.withName("dest_qp_num"),
        JAVA_INT.withName("qp_access_flags"),
        IBV_QP_CAP.withName("cap"),
        IBV_AH_ATTR.withName("ah_attr"),
        IBV_AH_ATTR.withName("alt_ah_attr"),
        JAVA_SHORT.withName("pkey_index"),
        JAVA_SHORT.withName("alt_pkey_index"),
        JAVA_BYTE.withName("en_sqd_async_notify"),
        JAVA_BYTE.withName("sq_draining"),
        JAVA_BYTE.withName("max_rd_atomic"),
        JAVA_BYTE.withName("max_dest_rd_atomic"),
        JAVA_BYTE.withName("min_rnr_timer"),
        JAVA_BYTE.withName("port_num"),
        JAVA_BYTE.withName("timeout"),
        JAVA_BYTE.withName("retry_cnt"),
        JAVA_BYTE.withName("rnr_retry"),
        JAVA_BYTE.withName("alt_port_num"),
        JAVA_BYTE.withName("alt_timeout"),
        MemoryLayout.paddingLayout(1),
        JAVA_INT.withName("rate_limit"),
        MemoryLayout.paddingLayout(4)).withName("ibv_qp_attr");

    /** {@code struct ibv_port_attr} up to {@code link_layer} (what {@code ibv_query_port} fills is longer). */
    static final StructLayout IBV_PORT_ATTR = MemoryLayout.structLayout(
        JAVA_INT.withName("state"),
        JAVA_INT.withName("max_mtu"),
        JAVA_INT.withName("active_mtu"),
        JAVA_INT.withName("gid_tbl_len"),
        JAVA_INT.withName("port_cap_flags"),
        JAVA_INT.withName("max_msg_sz"),
        JAVA_INT.withName("bad_pkey_cntr"),
        JAVA_INT.withName("qkey_viol_cntr"),
        JAVA_SHORT.withName("pkey_tbl_len"),
        JAVA_SHORT.withName("lid"),
        JAVA_SHORT.withName("sm_lid"),
        JAVA_BYTE.withName("lmc"),
        JAVA_BYTE.withName("max_vl_num"),
        JAVA_BYTE.withName("sm_sl"),
        JAVA_BYTE.withName("subnet_timeout"),
        JAVA_BYTE.withName("init_type_reply"),
        JAVA_BYTE.withName("active_width"),
        JAVA_BYTE.withName("active_speed"),
        JAVA_BYTE.withName("phys_state"),
        JAVA_BYTE.withName("link_layer")).withName("ibv_port_attr");
    /** Room given to {@code ibv_query_port}: more than any rdma-core's {@code struct ibv_port_attr}. */
    static final long PORT_ATTR_ROOM = 128;

    /** {@code struct ibv_sge}. */
    static final StructLayout IBV_SGE = MemoryLayout.structLayout(
        JAVA_LONG.withName("addr"),
        JAVA_INT.withName("length"),
        JAVA_INT.withName("lkey")).withName("ibv_sge");

    /** {@code struct ibv_send_wr}, the {@code wr.rdma} member of its first union named. */
    static final StructLayout IBV_SEND_WR = MemoryLayout.structLayout(
        JAVA_LONG.withName("wr_id"),
        ADDRESS.withName("next"),
        ADDRESS.withName("sg_list"),
        JAVA_INT.withName("num_sge"),
        JAVA_INT.withName("opcode"),
        JAVA_INT.withName("send_flags"),
        JAVA_INT.withName("imm_data"),
        JAVA_LONG.withName("remote_addr"),
        JAVA_INT.withName("rkey"),
        MemoryLayout.paddingLayout(76)).withName("ibv_send_wr");

    /** {@code struct ibv_recv_wr}. */
    static final StructLayout IBV_RECV_WR = MemoryLayout.structLayout(
        JAVA_LONG.withName("wr_id"),
        ADDRESS.withName("next"),
        ADDRESS.withName("sg_list"),
        JAVA_INT.withName("num_sge"),
        MemoryLayout.paddingLayout(4)).withName("ibv_recv_wr");

    /** {@code struct ibv_wc}. */
    static final StructLayout IBV_WC = MemoryLayout.structLayout(
        JAVA_LONG.withName("wr_id"),
        JAVA_INT.withName("status"),
        JAVA_INT.withName("opcode"),
        JAVA_INT.withName("vendor_err"),
        JAVA_INT.withName("byte_len"),
        JAVA_INT.withName("imm_data"),
        JAVA_INT.withName("qp_num"),
        JAVA_INT.withName("src_qp"),
        JAVA_INT.withName("wc_flags"),
        JAVA_SHORT.withName("pkey_index"),
        JAVA_SHORT.withName("slid"),
        JAVA_BYTE.withName("sl"),
        JAVA_BYTE.withName("dlid_path_bits"),
        MemoryLayout.paddingLayout(2)).withName("ibv_wc");

    static final long CONTEXT_POLL_CQ = offset(IBV_CONTEXT, "ops", "poll_cq");
    static final long CONTEXT_POST_SEND = offset(IBV_CONTEXT, "ops", "post_send");
    static final long CONTEXT_POST_RECV = offset(IBV_CONTEXT, "ops", "post_recv");
    static final long PD_HANDLE = offset(IBV_PD, "handle");
    static final long CQ_HANDLE = offset(IBV_CQ, "handle");
    static final long CQ_CQE = offset(IBV_CQ, "cqe");
    static final long QP_HANDLE = offset(IBV_QP, "handle");
    static final long QP_NUM = offset(IBV_QP, "qp_num");

    static final long INIT_SEND_CQ = offset(IBV_QP_INIT_ATTR, "send_cq");
    static final long INIT_RECV_CQ = offset(IBV_QP_INIT_ATTR, "recv_cq");
    static final long INIT_MAX_SEND_WR = offset(IBV_QP_INIT_ATTR, "cap", "max_send_wr");
    static final long INIT_MAX_RECV_WR = offset(IBV_QP_INIT_ATTR, "cap", "max_recv_wr");
    static final long INIT_MAX_SEND_SGE = offset(IBV_QP_INIT_ATTR, "cap", "max_send_sge");
    static final long INIT_MAX_RECV_SGE = offset(IBV_QP_INIT_ATTR, "cap", "max_recv_sge");
    static final long INIT_QP_TYPE = offset(IBV_QP_INIT_ATTR, "qp_type");

    static final long ATTR_QP_STATE = offset(IBV_QP_ATTR, "qp_state");
    static final long ATTR_PATH_MTU = offset(IBV_QP_ATTR, "path_mtu");
    static final long ATTR_RQ_PSN = offset(IBV_QP_ATTR, "rq_psn");
    static final long ATTR_SQ_PSN = offset(IBV_QP_ATTR, "sq_psn");
    static final long ATTR_DEST_QP_NUM = offset(IBV_QP_ATTR, "dest_qp_num");
    static final long ATTR_QP_ACCESS_FLAGS = offset(IBV_QP_ATTR, "qp_access_flags");
    static final long ATTR_AH_DLID = offset(IBV_QP_ATTR, "ah_attr", "dlid");
    static final long ATTR_AH_PORT_NUM = offset(IBV_QP_ATTR, "ah_attr", "port_num");
    static final long ATTR_PKEY_INDEX = offset(IBV_QP_ATTR, "pkey_index");
    static final long ATTR_MAX_RD_ATOMIC = offset(IBV_QP_ATTR, "max_rd_atomic");
    static final long ATTR_MAX_DEST_RD_ATOMIC = offset(IBV_QP_ATTR, "max_dest_rd_atomic");
    static final long ATTR_MIN_RNR_TIMER = offset(IBV_QP_ATTR, "min_rnr_timer");
    static final long ATTR_PORT_NUM = offset(IBV_QP_ATTR, "port_num");
    static final long ATTR_TIMEOUT = offset(IBV_QP_ATTR, "timeout");
    static final long ATTR_RETRY_CNT = offset(IBV_QP_ATTR, "retry_cnt");
    static final long ATTR_RNR_RETRY = offset(IBV_QP_ATTR, "rnr_retry");

    static final long PORT_ACTIVE_MTU = offset(IBV_PORT_ATTR, "active_mtu");
    static final long PORT_LID = offset(IBV_PORT_ATTR, "lid");
    static final long PORT_LINK_LAYER = offset(IBV_PORT_ATTR, "link_layer");

    static final long SGE_ADDR = offset(IBV_SGE, "addr");
    static final long SGE_LENGTH = offset(IBV_SGE, "length");
    static final long SGE_LKEY = offset(IBV_SGE, "lkey");

    static final long SEND_WR_ID = offset(IBV_SEND_WR, "wr_id");
    static final long SEND_NEXT = offset(IBV_SEND_WR, "next");
    static final long SEND_SG_LIST = offset(IBV_SEND_WR, "sg_list");
    static final long SEND_NUM_SGE = offset(IBV_SEND_WR, "num_sge");
    static final long SEND_OPCODE = offset(IBV_SEND_WR, "opcode");
    static final long SEND_FLAGS = offset(IBV_SEND_WR, "send_flags");
    static final long SEND_REMOTE_ADDR = offset(IBV_SEND_WR, "remote_addr");
    static final long SEND_RKEY = offset(IBV_SEND_WR, "rkey");

    static final long RECV_WR_ID = offset(IBV_RECV_WR, "wr_id");
    static final long RECV_NEXT = offset(IBV_RECV_WR, "next");
    static final long RECV_SG_LIST = offset(IBV_RECV_WR, "sg_list");
    static final long RECV_NUM_SGE = offset(IBV_RECV_WR, "num_sge");

    static final long WC_WR_ID = offset(IBV_WC, "wr_id");
    static final long WC_STATUS = offset(IBV_WC, "status");
    static final long WC_OPCODE = offset(IBV_WC, "opcode");
    static final long WC_VENDOR_ERR = offset(IBV_WC, "vendor_err");
    static final long WC_BYTE_LEN = offset(IBV_WC, "byte_len");
    static final long WC_QP_NUM = offset(IBV_WC, "qp_num");

    private IbvStructs()
    {
    }

    private static long offset(final StructLayout layout, final String... path)
    {
        final MemoryLayout.PathElement[] elements = new MemoryLayout.PathElement[path.length];
        for (int i = 0; i < path.length; i++)
        {
            elements[i] = groupElement(path[i]);
        }
        return layout.byteOffset(elements);
    }
}
