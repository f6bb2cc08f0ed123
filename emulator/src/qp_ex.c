/*
 * qp_ex.c - the extended QP: ibv_create_qp_ex (verbs_context.create_qp_ex),
 * ibv_qp_to_qp_ex, and the work request builder verbs.h's inline ibv_wr_*
 * functions call through struct ibv_qp_ex.
 *
 * An extended QP is an ordinary RC QP of the core (objects.c) whose struct
 * is an ibv_qp_ex (struct emu_qp's union). With IBV_QP_INIT_ATTR_SEND_OPS_
 * FLAGS it gets a batch as deep as its send queue: ibv_wr_start empties it,
 * each ibv_wr_<opcode> appends a struct ibv_send_wr (wr_id and flags from
 * qp_ex.wr_id / wr_flags), ibv_wr_set_sge(_list) gives the last one its
 * SGEs, and ibv_wr_complete posts the list through ops.post_send, the path
 * ibv_post_send takes: the same checks, the same ring, the same errors
 * (EINVAL for a QP not in RTS, ENOMEM for a full send queue, in which case
 * the requests before the one that did not fit are posted, as ibv_post_send
 * does). A builder call that cannot be honoured (an opcode not asked for at
 * creation, too many SGEs, inline data, a UD or XRC address on an RC QP)
 * makes ibv_wr_complete return EINVAL and post nothing; ibv_wr_abort drops
 * the batch.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define EMU_SEND_OPS                                                                                   \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |         \
	 IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |  \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
/* What a QP of this device can be created with: no XRC domain, RSS, TSO or creation flags. */
#define EMU_QP_INIT_MASKS (IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

struct emu_wr_batch {
	uint32_t capacity;
	uint32_t max_sge;
	uint32_t n;			/* built since wr_start */
	int error;			/* a builder call failed: wr_complete returns it */
	uint64_t ops;			/* send_ops_flags */
	struct ibv_send_wr *wr;		/* [capacity] */
	struct ibv_sge *sge;		/* [capacity * max_sge] */
};

static struct emu_wr_batch *batch_of(struct ibv_qp_ex *qp)
{
	return ((struct emu_qp *)qp)->batch;
}

static void fail(struct emu_wr_batch *b, int err)
{
	if (!b->error)
		b->error = err;
}

/* Appends a WR of opcode, which needs op among the QP's send_ops_flags; NULL when it cannot. */
static struct ibv_send_wr *append(struct ibv_qp_ex *qp, enum ibv_wr_opcode opcode, uint64_t op)
{
	struct emu_wr_batch *b = batch_of(qp);
	struct ibv_send_wr *wr;

	if (!(b->ops & op)) {
		fail(b, EINVAL);
		return NULL;
	}
	if (b->n == b->capacity) {
		fail(b, ENOMEM);
		return NULL;
	}
	wr = &b->wr[b->n];
	memset(wr, 0, sizeof(*wr));
	wr->wr_id = qp->wr_id;
	wr->send_flags = qp->wr_flags;
	wr->opcode = opcode;
	wr->sg_list = &b->sge[(size_t)b->n * b->max_sge];
	b->n++;
	return wr;
}

static struct ibv_send_wr *last(struct ibv_qp_ex *qp)
{
	struct emu_wr_batch *b = batch_of(qp);

	if (b->n == 0) {
		fail(b, EINVAL);
		return NULL;
	}
	return &b->wr[b->n - 1];
}

static void wr_rdma(struct ibv_qp_ex *qp, enum ibv_wr_opcode opcode, uint64_t op, uint32_t rkey,
		    uint64_t remote_addr, __be32 imm)
{
	struct ibv_send_wr *wr = append(qp, opcode, op);

	if (wr) {
		wr->wr.rdma.rkey = rkey;
		wr->wr.rdma.remote_addr = remote_addr;
		wr->imm_data = imm;
	}
}

static void wr_rdma_write(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr)
{
	wr_rdma(qp, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, rkey, remote_addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, __be32 imm_data)
{
	wr_rdma(qp, IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm_data);
}

static void wr_rdma_read(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr)
{
	wr_rdma(qp, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, rkey, remote_addr, 0);
}

static void wr_send(struct ibv_qp_ex *qp)
{
	append(qp, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qp, __be32 imm_data)
{
	struct ibv_send_wr *wr = append(qp, IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm_data;
}

static void wr_atomic(struct ibv_qp_ex *qp, enum ibv_wr_opcode opcode, uint64_t op, uint32_t rkey,
		      uint64_t remote_addr, uint64_t compare_add, uint64_t swap)
{
	struct ibv_send_wr *wr = append(qp, opcode, op);

	if (wr) {
		wr->wr.atomic.rkey = rkey;
		wr->wr.atomic.remote_addr = remote_addr;
		wr->wr.atomic.compare_add = compare_add;
		wr->wr.atomic.swap = swap;
	}
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	wr_atomic(qp, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare,
		  swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, uint64_t add)
{
	wr_atomic(qp, IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}

static void wr_set_sge_list(struct ibv_qp_ex *qp, size_t num_sge, const struct ibv_sge *sg_list)
{
	struct emu_wr_batch *b = batch_of(qp);
	struct ibv_send_wr *wr = last(qp);

	if (!wr)
		return;
	if (num_sge > b->max_sge) {
		fail(b, EINVAL);
		return;
	}
	if (num_sge)
		memcpy(wr->sg_list, sg_list, num_sge * sizeof(*sg_list));
	wr->num_sge = (int)num_sge;
}

static void wr_set_sge(struct ibv_qp_ex *qp, uint32_t lkey, uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(qp, 1, &sge);
}

/* Opcodes and attributes an RC QP of this device does not have (never in send_ops_flags). */
static void wr_bind_mw(struct ibv_qp_ex *qp, struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	(void)mw, (void)rkey, (void)info;
	fail(batch_of(qp), EINVAL);
}

static void wr_with_rkey(struct ibv_qp_ex *qp, uint32_t rkey)
{
	(void)rkey;
	fail(batch_of(qp), EINVAL);
}

static void wr_send_tso(struct ibv_qp_ex *qp, void *hdr, uint16_t hdr_sz, uint16_t mss)
{
	(void)hdr, (void)hdr_sz, (void)mss;
	fail(batch_of(qp), EINVAL);
}

static void wr_set_ud_addr(struct ibv_qp_ex *qp, struct ibv_ah *ah, uint32_t remote_qpn, uint32_t remote_qkey)
{
	(void)ah, (void)remote_qpn, (void)remote_qkey;
	fail(batch_of(qp), EINVAL);
}

static void wr_set_inline_data(struct ibv_qp_ex *qp, void *addr, size_t length)
{
	(void)addr, (void)length;
	fail(batch_of(qp), EINVAL);	/* max_inline_data is 0 */
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qp, size_t num_buf, const struct ibv_data_buf *buf_list)
{
	(void)num_buf, (void)buf_list;
	fail(batch_of(qp), EINVAL);
}

static void wr_atomic_write(struct ibv_qp_ex *qp, uint32_t rkey, uint64_t remote_addr, const void *atomic_wr)
{
	(void)rkey, (void)remote_addr, (void)atomic_wr;
	fail(batch_of(qp), EINVAL);
}

static void wr_start(struct ibv_qp_ex *qp)
{
	struct emu_wr_batch *b = batch_of(qp);

	b->n = 0;
	b->error = 0;
}

static int wr_complete(struct ibv_qp_ex *qp)
{
	struct emu_wr_batch *b = batch_of(qp);
	struct ibv_send_wr *bad = NULL;
	int rc = b->error;

	if (!rc && b->n > 0) {
		for (uint32_t i = 0; i + 1 < b->n; i++)
			b->wr[i].next = &b->wr[i + 1];
		b->wr[b->n - 1].next = NULL;
		rc = qp->qp_base.context->ops.post_send(&qp->qp_base, b->wr, &bad);
	}
	b->n = 0;
	b->error = 0;
	return rc;
}

static void wr_abort(struct ibv_qp_ex *qp)
{
	wr_start(qp);
}

static int add_batch(struct emu_qp *eqp, uint64_t ops, uint32_t capacity, uint32_t max_sge)
{
	struct emu_wr_batch *b = calloc(1, sizeof(*b));
	struct ibv_qp_ex *ex = &eqp->qp_ex;

	if (!b)
		return ENOMEM;
	b->capacity = capacity;
	b->max_sge = max_sge ? max_sge : 1;
	b->ops = ops;
	b->wr = calloc(capacity, sizeof(*b->wr));
	b->sge = calloc((size_t)capacity * b->max_sge, sizeof(*b->sge));
	if (!b->wr || !b->sge) {
		free(b->wr);
		free(b->sge);
		free(b);
		return ENOMEM;
	}
	eqp->batch = b;
	ex->comp_mask = 0;
	ex->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	ex->wr_atomic_fetch_add = wr_atomic_fetch_add;
	ex->wr_bind_mw = wr_bind_mw;
	ex->wr_local_inv = wr_with_rkey;
	ex->wr_rdma_read = wr_rdma_read;
	ex->wr_rdma_write = wr_rdma_write;
	ex->wr_rdma_write_imm = wr_rdma_write_imm;
	ex->wr_send = wr_send;
	ex->wr_send_imm = wr_send_imm;
	ex->wr_send_inv = wr_with_rkey;
	ex->wr_send_tso = wr_send_tso;
	ex->wr_set_ud_addr = wr_set_ud_addr;
	ex->wr_set_xrc_srqn = wr_with_rkey;
	ex->wr_set_inline_data = wr_set_inline_data;
	ex->wr_set_inline_data_list = wr_set_inline_data_list;
	ex->wr_set_sge = wr_set_sge;
	ex->wr_set_sge_list = wr_set_sge_list;
	ex->wr_start = wr_start;
	ex->wr_complete = wr_complete;
	ex->wr_abort = wr_abort;
	ex->wr_atomic_write = wr_atomic_write;
	return 0;
}

struct ibv_qp *emu_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp *qp;
	uint64_t ops = 0;
	int rc;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd || attr->pd->context != context) {
		errno = EINVAL;	/* only an XRC target QP goes without a PD, and there is no XRC */
		return NULL;
	}
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		ops = attr->send_ops_flags;
	if ((attr->comp_mask & ~(uint32_t)EMU_QP_INIT_MASKS) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && attr->create_flags) ||
	    (ops & ~(uint64_t)EMU_SEND_OPS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	memset(&init, 0, sizeof(init));
	init.qp_context = attr->qp_context;
	init.send_cq = attr->send_cq;
	init.recv_cq = attr->recv_cq;
	init.srq = attr->srq;
	init.cap = attr->cap;
	init.qp_type = attr->qp_type;
	init.sq_sig_all = attr->sq_sig_all;
	qp = ibv_create_qp(attr->pd, &init);
	if (!qp)
		return NULL;
	attr->cap = init.cap;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		rc = add_batch((struct emu_qp *)qp, ops, init.cap.max_send_wr, init.cap.max_send_sge);
		if (rc) {
			ibv_destroy_qp(qp);
			errno = rc;
			return NULL;
		}
	}
	return qp;
}

/* NULL for a QP created without send_ops_flags, as libibverbs (it has no builder). */
struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct emu_qp *eqp = (struct emu_qp *)qp;

	return eqp->batch ? &eqp->qp_ex : NULL;
}

void emu_qp_surface_free(struct emu_qp *eqp)
{
	struct emu_wr_batch *b = eqp->batch;

	if (b) {
		free(b->wr);
		free(b->sge);
		free(b);
		eqp->batch = NULL;
	}
}
