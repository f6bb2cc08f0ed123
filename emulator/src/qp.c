/*
 * qp.c - queue pairs: created and destroyed in the shared tables under the
 * device lock, and the RC state machine (what the kernel's ib_modify_qp_is_ok
 * allows, with its EINVAL).
 *
 * RESET empties both queues under each queue's post lock, after the engine
 * has let go of the QP: a post racing the RESET either lands before it (and
 * is discarded with the rest) or after it (on the empty queue), never with a
 * producer index from before. A QP's completions still in its CQs when it is
 * destroyed or reset are dropped by poll_cq (its number or epoch no longer
 * match), as mlx5 cleans them out of the CQ.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *fail_null(int err)
{
	errno = err;
	return NULL;
}

/* ---- queue pairs ------------------------------------------------------------------------ */

/* A live CQ of context ctx: a QP's CQs are of its own context, as uverbs handles are. */
static struct emu_cq_entry *live_cq(struct emu_shared *sh, uint32_t ctx, struct ibv_cq *cq)
{
	struct emu_cq *ecq = (struct emu_cq *)cq;
	struct emu_cq_entry *e;

	if (!cq || emu_sh(cq->context) != sh || ecq->index >= EMU_MAX_CQ)
		return NULL;
	e = emu_cq(sh, ecq->index);
	return atomic_load(&e->live) && e->gen == ecq->gen && e->ctx == ctx ? e : NULL;
}

/* A queue of a new QP: nobody can post to it yet. */
static void init_queue(struct emu_queue *q, uint32_t capacity, uint32_t max_sge, uint32_t stride, uint64_t ring)
{
	q->capacity = capacity;
	q->max_sge = max_sge;
	q->stride = stride;
	q->ring = ring;
	atomic_store(&q->post_lock, 0);
	atomic_store(&q->prod, 0);
	atomic_store(&q->cons, 0);
	atomic_store(&q->retired, 0);
}

/*
 * Empties a queue of a live QP, under its post lock: a post that took the
 * lock first is discarded with the rest, one that takes it after finds the
 * queue empty. The engine has let go of the QP (RESET waited), so nothing
 * else writes cons.
 */
static void empty_queue(struct emu_queue *q)
{
	emu_spin_lock(&q->post_lock);
	atomic_store(&q->prod, 0);
	atomic_store(&q->cons, 0);
	atomic_store(&q->retired, 0);
	emu_spin_unlock(&q->post_lock);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct emu_context *c = emu_ctx(pd->context);
	struct emu_shared *sh = c->sh;
	struct ibv_qp_cap *cap = &init->cap;
	struct emu_pd_entry *pde;
	struct emu_cq_entry *scq, *rcq;
	struct emu_qp_entry *e;
	struct emu_qp *eqp;
	uint32_t index, sq_cap, rq_cap, sq_sge, rq_sge, sq_stride, rq_stride, sq_pages, pages;
	uint64_t ring;

	if (emu_gone(c))
		return fail_null(EIO);
	if (init->qp_type != IBV_QPT_RC || init->srq)
		return fail_null(EOPNOTSUPP);
	if (cap->max_send_wr > EMU_MAX_QP_WR || cap->max_recv_wr > EMU_MAX_QP_WR ||
	    cap->max_send_sge > EMU_MAX_SGE || cap->max_recv_sge > EMU_MAX_SGE || cap->max_inline_data > 0)
		return fail_null(EINVAL);
	sq_cap = emu_pow2_at_least(cap->max_send_wr ? cap->max_send_wr : 1);
	rq_cap = emu_pow2_at_least(cap->max_recv_wr ? cap->max_recv_wr : 1);
	sq_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	rq_sge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	sq_stride = (uint32_t)EMU_ALIGN(sizeof(struct emu_swqe) + sq_sge * sizeof(struct ibv_sge), 64);
	rq_stride = (uint32_t)EMU_ALIGN(sizeof(struct emu_rwqe) + rq_sge * sizeof(struct ibv_sge), 64);
	sq_pages = emu_pages_for((uint64_t)sq_cap * sq_stride);
	pages = sq_pages + emu_pages_for((uint64_t)rq_cap * rq_stride);
	eqp = calloc(1, sizeof(*eqp));
	if (!eqp)
		return fail_null(ENOMEM);
	emu_lock(sh);
	pde = pd->handle < EMU_MAX_PD ? emu_pd(sh, pd->handle) : NULL;
	if (pde && (!atomic_load(&pde->live) || pde->gen != ((struct emu_pd *)pd)->gen || pde->ctx != c->ctx))
		pde = NULL;
	scq = live_cq(sh, c->ctx, init->send_cq);
	rcq = live_cq(sh, c->ctx, init->recv_cq);
	if (!pde || !scq || !rcq) {
		emu_unlock(sh);
		free(eqp);
		return fail_null(EINVAL);
	}
	index = emu_slot_take(sh, EMU_QP);
	ring = index == UINT32_MAX ? 0 : emu_heap_alloc(sh, pages);
	if (!ring) {
		if (index != UINT32_MAX)
			emu_slot_give(sh, EMU_QP, index);
		emu_unlock(sh);
		free(eqp);
		return fail_null(ENOMEM);
	}
	e = emu_qp(sh, index);
	/* The QP number carries 8 bits of generation: a stale dest_qp_num does not reach a new QP. */
	do
		e->gen++;
	while ((e->gen & 0xffu) == 0);
	e->qp_num = (e->gen & 0xffu) << 16 | index;
	atomic_store(&e->state, IBV_QPS_RESET);
	e->epoch++;
	e->pd = pd->handle;
	e->send_cq = ((struct emu_cq *)init->send_cq)->index;
	e->recv_cq = ((struct emu_cq *)init->recv_cq)->index;
	e->sq_sig_all = init->sq_sig_all ? 1 : 0;
	e->creator_pid = (uint32_t)getpid();
	e->ctx = c->ctx;
	e->ring_base = ring;
	e->ring_pages = pages;
	e->dest_qp_num = 0;
	e->qp_access_flags = 0;
	e->rq_psn = e->sq_psn = 0;
	e->path_mtu = IBV_MTU_1024;
	e->pkey_index = 0;
	e->port_num = 1;
	e->min_rnr_timer = e->timeout = e->retry_cnt = e->rnr_retry = 0;
	e->max_rd_atomic = e->max_dest_rd_atomic = 0;
	memset(&e->ah_attr, 0, sizeof(e->ah_attr));
	e->wait = EMU_WAIT_NONE;
	init_queue(&e->sq, sq_cap, sq_sge, sq_stride, ring);
	init_queue(&e->rq, rq_cap, rq_sge, rq_stride, ring + (uint64_t)sq_pages * EMU_PAGE);
	atomic_fetch_add(&pde->users, 1);
	atomic_fetch_add(&scq->users, 1);
	atomic_fetch_add(&rcq->users, 1);
	atomic_store(&e->live, 1);
	emu_count(sh, c->ctx, EMU_QP, 1);
	emu_unlock(sh);

	cap->max_send_wr = sq_cap;
	cap->max_recv_wr = rq_cap;
	cap->max_send_sge = sq_sge;
	cap->max_recv_sge = rq_sge;
	cap->max_inline_data = 0;
	eqp->qp.context = pd->context;
	eqp->qp.qp_context = init->qp_context;
	eqp->qp.pd = pd;
	eqp->qp.send_cq = init->send_cq;
	eqp->qp.recv_cq = init->recv_cq;
	eqp->qp.handle = index;
	eqp->qp.qp_num = e->qp_num;
	eqp->qp.state = IBV_QPS_RESET;
	eqp->qp.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&eqp->qp.mutex, NULL);
	pthread_cond_init(&eqp->qp.cond, NULL);
	eqp->index = index;
	eqp->gen = e->gen;
	return &eqp->qp;
}

int emu_destroy_qp_entry(struct emu_context *ctx, uint32_t index)
{
	struct emu_shared *sh = ctx->sh;
	struct emu_qp_entry *e = emu_qp(sh, index);

	emu_lock(sh);
	if (!atomic_load(&e->live)) {
		emu_unlock(sh);
		return EINVAL;
	}
	atomic_store(&e->live, 0);
	emu_unlock(sh);
	/* Not under the lock: the engine may be in the middle of a copy for this QP. */
	emu_qp_wait_idle(sh, index);
	emu_lock(sh);
	if (e->send_cq < EMU_MAX_CQ)
		atomic_fetch_sub(&emu_cq(sh, e->send_cq)->users, 1);
	if (e->recv_cq < EMU_MAX_CQ)
		atomic_fetch_sub(&emu_cq(sh, e->recv_cq)->users, 1);
	if (e->pd < EMU_MAX_PD)
		atomic_fetch_sub(&emu_pd(sh, e->pd)->users, 1);
	emu_heap_free(sh, ctx->dev->fd, e->ring_base, e->ring_pages);
	emu_slot_give(sh, EMU_QP, index);
	emu_count(sh, e->ctx, EMU_QP, -1);
	emu_unlock(sh);
	return 0;
}

static struct emu_qp_entry *live_qp(struct ibv_qp *qp)
{
	struct emu_qp *eqp = (struct emu_qp *)qp;
	struct emu_qp_entry *e;

	if (eqp->index >= EMU_MAX_QP)
		return NULL;
	e = emu_qp(emu_sh(qp->context), eqp->index);
	return atomic_load(&e->live) && e->gen == eqp->gen && e->ctx == emu_ctx(qp->context)->ctx ? e : NULL;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct emu_qp *eqp = (struct emu_qp *)qp;
	struct emu_context *ctx = emu_ctx(qp->context);
	int rc;

	if (emu_gone(ctx)) {
		emu_qp_surface_free(eqp);
		free(eqp);
		return 0;
	}
	if (!live_qp(qp))
		return EINVAL;
	rc = emu_destroy_qp_entry(ctx, eqp->index);
	if (rc)
		return rc;
	emu_qp_surface_free(eqp);
	pthread_mutex_destroy(&qp->mutex);
	pthread_cond_destroy(&qp->cond);
	free(eqp);
	return 0;
}

/* ---- the QP state machine ----------------------------------------------------------------- */

struct transition {
	int required;
	int optional;
};

/* What the kernel's ib_modify_qp_is_ok asks of an RC QP, for the transitions the emulator has. */
static int transition_of(enum ibv_qp_state cur, enum ibv_qp_state next, struct transition *t)
{
	t->required = IBV_QP_STATE;
	t->optional = 0;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return 1;
	if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
		t->required |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 1;
	}
	if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
		t->optional = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 1;
	}
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		t->required |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		t->optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		return 1;
	}
	if (cur == IBV_QPS_RTR && next == IBV_QPS_RTS) {
		t->required |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			       IBV_QP_MAX_QP_RD_ATOMIC;
		t->optional = IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
			      IBV_QP_PATH_MIG_STATE;
		return 1;
	}
	if (cur == IBV_QPS_RTS && next == IBV_QPS_RTS) {
		t->optional = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE |
			      IBV_QP_MIN_RNR_TIMER;
		return 1;
	}
	return 0;
}

static int attr_values_ok(const struct ibv_qp_attr *a, int mask)
{
	const unsigned int remote = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	if ((mask & IBV_QP_PORT) && a->port_num != 1)
		return 0;
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0)
		return 0;
	if ((mask & IBV_QP_ACCESS_FLAGS) && (a->qp_access_flags & ~(remote | IBV_ACCESS_LOCAL_WRITE)))
		return 0;
	if ((mask & IBV_QP_PATH_MTU) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return 0;
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > EMU_MAX_RD_ATOM)
		return 0;
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > EMU_MAX_RD_ATOM)
		return 0;
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31)
		return 0;
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31)
		return 0;
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7)
		return 0;
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7)
		return 0;
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffffu)
		return 0;
	return 1;
}

static void apply_attrs(struct emu_qp_entry *e, const struct ibv_qp_attr *a, int mask)
{
	if (mask & IBV_QP_ACCESS_FLAGS)
		e->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_PKEY_INDEX)
		e->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		e->port_num = a->port_num;
	if (mask & IBV_QP_AV)
		e->ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		e->path_mtu = a->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		e->dest_qp_num = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		e->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		e->sq_psn = a->sq_psn;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		e->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		e->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		e->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		e->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		e->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		e->rnr_retry = a->rnr_retry;
}

/* RESET discards what the queues hold, without completions, once the engine has let go. */
static void reset_queues(struct emu_shared *sh, struct emu_qp_entry *e, uint32_t index)
{
	emu_qp_wait_idle(sh, index);
	/* First: poll_cq drops the completions of the epoch that ends here. */
	e->epoch++;
	e->wait = EMU_WAIT_NONE;
	empty_queue(&e->sq);
	empty_queue(&e->rq);
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct emu_context *c = emu_ctx(qp->context);
	struct emu_shared *sh = c->sh;
	struct emu_qp *eqp = (struct emu_qp *)qp;
	struct emu_qp_entry *e;
	enum ibv_qp_state cur, next;
	struct transition t;

	if (emu_gone(c))
		return EIO;
	emu_lock(sh);
	e = live_qp(qp);
	if (!e) {
		emu_unlock(sh);
		return EINVAL;
	}
	cur = atomic_load(&e->state);
	next = (attr_mask & IBV_QP_STATE) ? attr->qp_state : cur;
	if (!(attr_mask & IBV_QP_STATE) || !transition_of(cur, next, &t) ||
	    (attr_mask & t.required) != t.required || (attr_mask & ~(t.required | t.optional)) ||
	    ((attr_mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) || !attr_values_ok(attr, attr_mask)) {
		emu_unlock(sh);
		return EINVAL;
	}
	apply_attrs(e, attr, attr_mask);
	/* Release: the engine reads the attributes after it sees the state they belong to. */
	atomic_store(&e->state, next);
	emu_unlock(sh);
	if (next == IBV_QPS_RESET)
		reset_queues(sh, e, eqp->index);
	/* The engine flushes what an ERR QP holds, and a requester waiting for this one as its peer looks again. */
	emu_ring_doorbell(sh);
	qp->state = next;
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct emu_context *c = emu_ctx(qp->context);
	struct emu_qp_entry *e;

	(void)attr_mask;
	if (emu_gone(c))
		return EIO;
	e = live_qp(qp);
	if (!e)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = atomic_load(&e->state);
	attr->cur_qp_state = attr->qp_state;
	attr->path_mtu = e->path_mtu;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	attr->rq_psn = e->rq_psn;
	attr->sq_psn = e->sq_psn;
	attr->dest_qp_num = e->dest_qp_num;
	attr->qp_access_flags = e->qp_access_flags;
	attr->cap.max_send_wr = e->sq.capacity;
	attr->cap.max_recv_wr = e->rq.capacity;
	attr->cap.max_send_sge = e->sq.max_sge;
	attr->cap.max_recv_sge = e->rq.max_sge;
	attr->ah_attr = e->ah_attr;
	attr->pkey_index = e->pkey_index;
	attr->max_rd_atomic = e->max_rd_atomic;
	attr->max_dest_rd_atomic = e->max_dest_rd_atomic;
	attr->min_rnr_timer = e->min_rnr_timer;
	attr->port_num = e->port_num;
	attr->timeout = e->timeout;
	attr->retry_cnt = e->retry_cnt;
	attr->rnr_retry = e->rnr_retry;
	if (init_attr) {
		memset(init_attr, 0, sizeof(*init_attr));
		init_attr->qp_context = qp->qp_context;
		init_attr->send_cq = qp->send_cq;
		init_attr->recv_cq = qp->recv_cq;
		init_attr->cap = attr->cap;
		init_attr->qp_type = IBV_QPT_RC;
		init_attr->sq_sig_all = (int)e->sq_sig_all;
	}
	qp->state = attr->qp_state;
	return 0;
}
