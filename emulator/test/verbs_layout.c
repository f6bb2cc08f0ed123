/*
 * verbs_layout.c - prints the offsets, sizes and constants of the installed
 * <infiniband/verbs.h> that mrd's FFM bindings mirror, one "name value" per
 * line, so Java tests can check their layouts against what the C compiler
 * sees (io.mrd.testing.EmulatedDevice.verbsLayout()):
 *
 *   ibv_mr.lkey 36          offsetof(struct ibv_mr, lkey)
 *   sizeof.ibv_mr 48        sizeof(struct ibv_mr)
 *   IBV_QP_STATE 1          an enum or macro value
 */
#include <infiniband/verbs.h>

#include <stddef.h>
#include <stdio.h>

#define OFF(s, f) printf("%s.%s %zu\n", #s, #f, offsetof(struct s, f))
#define SIZE(s) printf("sizeof.%s %zu\n", #s, sizeof(struct s))
#define VAL(e) printf("%s %lld\n", #e, (long long)(e))

int main(void)
{
	SIZE(ibv_device);
	OFF(ibv_device, name);

	SIZE(ibv_context);
	OFF(ibv_context, device);
	OFF(ibv_context, ops.poll_cq);
	OFF(ibv_context, ops.req_notify_cq);
	OFF(ibv_context, ops.post_send);
	OFF(ibv_context, ops.post_recv);
	OFF(ibv_context, cmd_fd);
	OFF(ibv_context, async_fd);
	OFF(ibv_context, num_comp_vectors);

	SIZE(ibv_pd);
	OFF(ibv_pd, context);
	OFF(ibv_pd, handle);

	SIZE(ibv_mr);
	OFF(ibv_mr, context);
	OFF(ibv_mr, pd);
	OFF(ibv_mr, addr);
	OFF(ibv_mr, length);
	OFF(ibv_mr, handle);
	OFF(ibv_mr, lkey);
	OFF(ibv_mr, rkey);

	SIZE(ibv_cq);
	OFF(ibv_cq, context);
	OFF(ibv_cq, channel);
	OFF(ibv_cq, cq_context);
	OFF(ibv_cq, handle);
	OFF(ibv_cq, cqe);

	SIZE(ibv_qp);
	OFF(ibv_qp, context);
	OFF(ibv_qp, qp_context);
	OFF(ibv_qp, pd);
	OFF(ibv_qp, send_cq);
	OFF(ibv_qp, recv_cq);
	OFF(ibv_qp, srq);
	OFF(ibv_qp, handle);
	OFF(ibv_qp, qp_num);
	OFF(ibv_qp, state);
	OFF(ibv_qp, qp_type);

	SIZE(ibv_sge);
	OFF(ibv_sge, addr);
	OFF(ibv_sge, length);
	OFF(ibv_sge, lkey);

	SIZE(ibv_send_wr);
	OFF(ibv_send_wr, wr_id);
	OFF(ibv_send_wr, next);
	OFF(ibv_send_wr, sg_list);
	OFF(ibv_send_wr, num_sge);
	OFF(ibv_send_wr, opcode);
	OFF(ibv_send_wr, send_flags);
	OFF(ibv_send_wr, imm_data);
	OFF(ibv_send_wr, wr.rdma.remote_addr);
	OFF(ibv_send_wr, wr.rdma.rkey);
	OFF(ibv_send_wr, wr.atomic.remote_addr);
	OFF(ibv_send_wr, wr.atomic.compare_add);
	OFF(ibv_send_wr, wr.atomic.swap);
	OFF(ibv_send_wr, wr.atomic.rkey);

	SIZE(ibv_recv_wr);
	OFF(ibv_recv_wr, wr_id);
	OFF(ibv_recv_wr, next);
	OFF(ibv_recv_wr, sg_list);
	OFF(ibv_recv_wr, num_sge);

	SIZE(ibv_wc);
	OFF(ibv_wc, wr_id);
	OFF(ibv_wc, status);
	OFF(ibv_wc, opcode);
	OFF(ibv_wc, vendor_err);
	OFF(ibv_wc, byte_len);
	OFF(ibv_wc, imm_data);
	OFF(ibv_wc, qp_num);
	OFF(ibv_wc, src_qp);
	OFF(ibv_wc, wc_flags);
	OFF(ibv_wc, pkey_index);
	OFF(ibv_wc, slid);
	OFF(ibv_wc, sl);
	OFF(ibv_wc, dlid_path_bits);

	SIZE(ibv_qp_cap);
	OFF(ibv_qp_cap, max_send_wr);
	OFF(ibv_qp_cap, max_recv_wr);
	OFF(ibv_qp_cap, max_send_sge);
	OFF(ibv_qp_cap, max_recv_sge);
	OFF(ibv_qp_cap, max_inline_data);

	SIZE(ibv_qp_init_attr);
	OFF(ibv_qp_init_attr, qp_context);
	OFF(ibv_qp_init_attr, send_cq);
	OFF(ibv_qp_init_attr, recv_cq);
	OFF(ibv_qp_init_attr, srq);
	OFF(ibv_qp_init_attr, cap);
	OFF(ibv_qp_init_attr, qp_type);
	OFF(ibv_qp_init_attr, sq_sig_all);

	SIZE(ibv_global_route);
	SIZE(ibv_ah_attr);
	OFF(ibv_ah_attr, grh);
	OFF(ibv_ah_attr, dlid);
	OFF(ibv_ah_attr, sl);
	OFF(ibv_ah_attr, src_path_bits);
	OFF(ibv_ah_attr, static_rate);
	OFF(ibv_ah_attr, is_global);
	OFF(ibv_ah_attr, port_num);

	SIZE(ibv_qp_attr);
	OFF(ibv_qp_attr, qp_state);
	OFF(ibv_qp_attr, cur_qp_state);
	OFF(ibv_qp_attr, path_mtu);
	OFF(ibv_qp_attr, path_mig_state);
	OFF(ibv_qp_attr, qkey);
	OFF(ibv_qp_attr, rq_psn);
	OFF(ibv_qp_attr, sq_psn);
	OFF(ibv_qp_attr, dest_qp_num);
	OFF(ibv_qp_attr, qp_access_flags);
	OFF(ibv_qp_attr, cap);
	OFF(ibv_qp_attr, ah_attr);
	OFF(ibv_qp_attr, alt_ah_attr);
	OFF(ibv_qp_attr, pkey_index);
	OFF(ibv_qp_attr, alt_pkey_index);
	OFF(ibv_qp_attr, en_sqd_async_notify);
	OFF(ibv_qp_attr, sq_draining);
	OFF(ibv_qp_attr, max_rd_atomic);
	OFF(ibv_qp_attr, max_dest_rd_atomic);
	OFF(ibv_qp_attr, min_rnr_timer);
	OFF(ibv_qp_attr, port_num);
	OFF(ibv_qp_attr, timeout);
	OFF(ibv_qp_attr, retry_cnt);
	OFF(ibv_qp_attr, rnr_retry);
	OFF(ibv_qp_attr, alt_port_num);
	OFF(ibv_qp_attr, alt_timeout);
	OFF(ibv_qp_attr, rate_limit);

	SIZE(ibv_port_attr);
	OFF(ibv_port_attr, state);
	OFF(ibv_port_attr, max_mtu);
	OFF(ibv_port_attr, active_mtu);
	OFF(ibv_port_attr, lid);
	OFF(ibv_port_attr, link_layer);
	/* The exported ibv_query_port writes struct _compat_ibv_port_attr: everything before this field. */
	OFF(ibv_port_attr, port_cap_flags2);

	SIZE(ibv_device_attr);
	OFF(ibv_device_attr, max_mr_size);
	OFF(ibv_device_attr, max_qp);
	OFF(ibv_device_attr, max_qp_wr);
	OFF(ibv_device_attr, max_sge);
	OFF(ibv_device_attr, max_cq);
	OFF(ibv_device_attr, max_cqe);
	OFF(ibv_device_attr, max_mr);
	OFF(ibv_device_attr, max_pd);
	OFF(ibv_device_attr, max_qp_rd_atom);
	OFF(ibv_device_attr, max_qp_init_rd_atom);
	OFF(ibv_device_attr, atomic_cap);
	OFF(ibv_device_attr, phys_port_cnt);

	VAL(IBV_ACCESS_LOCAL_WRITE);
	VAL(IBV_ACCESS_REMOTE_WRITE);
	VAL(IBV_ACCESS_REMOTE_READ);
	VAL(IBV_ACCESS_REMOTE_ATOMIC);
	VAL(IBV_ACCESS_RELAXED_ORDERING);
	VAL(IBV_ACCESS_OPTIONAL_RANGE);

	VAL(IBV_QPT_RC);
	VAL(IBV_QPS_RESET);
	VAL(IBV_QPS_INIT);
	VAL(IBV_QPS_RTR);
	VAL(IBV_QPS_RTS);
	VAL(IBV_QPS_SQD);
	VAL(IBV_QPS_SQE);
	VAL(IBV_QPS_ERR);
	VAL(IBV_MTU_1024);
	VAL(IBV_MTU_4096);
	VAL(IBV_PORT_ACTIVE);

	VAL(IBV_QP_STATE);
	VAL(IBV_QP_CUR_STATE);
	VAL(IBV_QP_EN_SQD_ASYNC_NOTIFY);
	VAL(IBV_QP_ACCESS_FLAGS);
	VAL(IBV_QP_PKEY_INDEX);
	VAL(IBV_QP_PORT);
	VAL(IBV_QP_QKEY);
	VAL(IBV_QP_AV);
	VAL(IBV_QP_PATH_MTU);
	VAL(IBV_QP_TIMEOUT);
	VAL(IBV_QP_RETRY_CNT);
	VAL(IBV_QP_RNR_RETRY);
	VAL(IBV_QP_RQ_PSN);
	VAL(IBV_QP_MAX_QP_RD_ATOMIC);
	VAL(IBV_QP_ALT_PATH);
	VAL(IBV_QP_MIN_RNR_TIMER);
	VAL(IBV_QP_SQ_PSN);
	VAL(IBV_QP_MAX_DEST_RD_ATOMIC);
	VAL(IBV_QP_PATH_MIG_STATE);
	VAL(IBV_QP_CAP);
	VAL(IBV_QP_DEST_QPN);

	VAL(IBV_WR_RDMA_WRITE);
	VAL(IBV_WR_RDMA_WRITE_WITH_IMM);
	VAL(IBV_WR_SEND);
	VAL(IBV_WR_SEND_WITH_IMM);
	VAL(IBV_WR_RDMA_READ);
	VAL(IBV_WR_ATOMIC_CMP_AND_SWP);
	VAL(IBV_WR_ATOMIC_FETCH_AND_ADD);
	VAL(IBV_SEND_FENCE);
	VAL(IBV_SEND_SIGNALED);
	VAL(IBV_SEND_SOLICITED);
	VAL(IBV_SEND_INLINE);

	VAL(IBV_WC_SEND);
	VAL(IBV_WC_RDMA_WRITE);
	VAL(IBV_WC_RDMA_READ);
	VAL(IBV_WC_COMP_SWAP);
	VAL(IBV_WC_FETCH_ADD);
	VAL(IBV_WC_RECV);
	VAL(IBV_WC_RECV_RDMA_WITH_IMM);
	VAL(IBV_WC_WITH_IMM);

	VAL(IBV_WC_SUCCESS);
	VAL(IBV_WC_LOC_LEN_ERR);
	VAL(IBV_WC_LOC_QP_OP_ERR);
	VAL(IBV_WC_LOC_PROT_ERR);
	VAL(IBV_WC_WR_FLUSH_ERR);
	VAL(IBV_WC_LOC_ACCESS_ERR);
	VAL(IBV_WC_REM_INV_REQ_ERR);
	VAL(IBV_WC_REM_ACCESS_ERR);
	VAL(IBV_WC_REM_OP_ERR);
	VAL(IBV_WC_RETRY_EXC_ERR);
	VAL(IBV_WC_RNR_RETRY_EXC_ERR);
	VAL(IBV_WC_GENERAL_ERR);
	return 0;
}
