/*
 * objects.c - the control path: protection domains, memory regions,
 * completion queues and queue pairs, created and destroyed in the shared
 * tables under the device lock, and the QP state machine.
 *
 * Every check a kernel driver makes here is made here with its errno: a
 * dealloc of a PD still used is EBUSY, a registration of unmapped memory is
 * EFAULT, a modify_qp without the attributes its transition requires is
 * EINVAL. The struct ibv_* returned is process-local; its handle indexes the
 * shared table.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static uint32_t pages_for(uint64_t bytes)
{
	return (uint32_t)((bytes + EMU_PAGE - 1) / EMU_PAGE);
}

static void *fail_null(int err)
{
	errno = err;
	return NULL;
}

/* ---- protection domains ------------------------------------------------------------ */

static struct emu_pd_entry *live_pd(struct ibv_pd *pd)
{
	struct emu_pd *epd = (struct emu_pd *)pd;
	struct emu_pd_entry *e;

	if (pd->handle >= EMU_MAX_PD)
		return NULL;
	e = emu_pd(emu_sh(pd->context), pd->handle);
	return atomic_load(&e->live) && e->gen == epd->gen ? e : NULL;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct emu_shared *sh = emu_sh(context);
	struct emu_pd *epd;
	struct emu_pd_entry *e;
	uint32_t index;

	if (emu_gone(sh))
		return fail_null(EIO);
	epd = calloc(1, sizeof(*epd));
	if (!epd)
		return fail_null(ENOMEM);
	emu_lock(sh);
	index = emu_slot_take(sh, EMU_PD);
	if (index == UINT32_MAX) {
		emu_unlock(sh);
		free(epd);
		return fail_null(ENOMEM);
	}
	e = emu_pd(sh, index);
	e->gen++;
	atomic_store(&e->users, 0);
	e->creator_pid = (uint32_t)getpid();
	atomic_store(&e->live, 1);
	atomic_fetch_add(&sh->live[EMU_PD], 1);
	emu_unlock(sh);
	epd->pd.context = context;
	epd->pd.handle = index;
	epd->gen = e->gen;
	return &epd->pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct emu_shared *sh = emu_sh(pd->context);
	struct emu_pd_entry *e;

	if (emu_gone(sh)) {
		free(pd);
		return 0;
	}
	emu_lock(sh);
	e = live_pd(pd);
	if (!e) {
		emu_unlock(sh);
		return EINVAL;
	}
	if (atomic_load(&e->users) > 0) {
		emu_unlock(sh);
		return EBUSY;
	}
	atomic_store(&e->live, 0);
	emu_slot_give(sh, EMU_PD, pd->handle);
	atomic_fetch_sub(&sh->live[EMU_PD], 1);
	emu_unlock(sh);
	free(pd);
	return 0;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct emu_shared *sh = emu_sh(context);
	struct emu_pd *epd;
	struct emu_pd_entry *e;

	if (emu_gone(sh))
		return fail_null(EIO);
	if (pd_handle >= EMU_MAX_PD)
		return fail_null(EINVAL);
	epd = calloc(1, sizeof(*epd));
	if (!epd)
		return fail_null(ENOMEM);
	emu_lock(sh);
	e = emu_pd(sh, pd_handle);
	if (!atomic_load(&e->live)) {
		emu_unlock(sh);
		free(epd);
		return fail_null(EINVAL);
	}
	epd->gen = e->gen;
	emu_unlock(sh);
	epd->pd.context = context;
	epd->pd.handle = pd_handle;
	epd->imported = 1;
	return &epd->pd;
}

/* Releases this process's struct only: the PD stays for whoever else uses it. */
void ibv_unimport_pd(struct ibv_pd *pd)
{
	free(pd);
}

/* ---- memory regions ---------------------------------------------------------------- */

#define EMU_KNOWN_ACCESS                                                                         \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |             \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_OPTIONAL_RANGE)

/* As ibv_reg_mr's pinning does: every page of the range must be mapped. */
static int range_mapped(uint64_t addr, uint64_t length)
{
	unsigned char vec[4096];
	uint64_t start = addr & ~(uint64_t)(EMU_PAGE - 1);
	uint64_t end = addr + length;

	while (start < end) {
		uint64_t chunk = end - start;

		if (chunk > sizeof(vec) * (uint64_t)EMU_PAGE)
			chunk = sizeof(vec) * (uint64_t)EMU_PAGE;
		if (mincore((void *)(uintptr_t)start, chunk, vec) != 0)
			return 0;
		start += chunk;
	}
	return 1;
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct emu_shared *sh = emu_sh(pd->context);
	struct emu_pd_entry *pde;
	struct emu_mr_entry *e;
	struct emu_mr *emr;
	uint32_t index, key;

	if (emu_gone(sh))
		return fail_null(EIO);
	if (length == 0 || (access & ~(unsigned int)EMU_KNOWN_ACCESS))
		return fail_null(EINVAL);
	/* The verbs specification: remote write or atomic access needs local write. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
		return fail_null(EINVAL);
	/* A driver refuses an MR longer than the max_mr_size it reports with EINVAL (as erdma does). */
	if (length > sh->max_mr_size)
		return fail_null(EINVAL);
	if ((uintptr_t)addr + length < (uintptr_t)addr || iova + length < iova)
		return fail_null(EINVAL);
	if (!range_mapped((uintptr_t)addr, length))
		return fail_null(EFAULT);
	emr = calloc(1, sizeof(*emr));
	if (!emr)
		return fail_null(ENOMEM);
	emu_lock(sh);
	pde = live_pd(pd);
	if (!pde) {
		emu_unlock(sh);
		free(emr);
		return fail_null(EINVAL);
	}
	index = emu_slot_take(sh, EMU_MR);
	if (index == UINT32_MAX) {
		emu_unlock(sh);
		free(emr);
		return fail_null(ENOMEM);
	}
	e = emu_mr(sh, index);
	/* A new variant on every registration of this index: keys of its earlier MRs never match again. */
	e->variant = (e->variant + 1) & 0xffu;
	if (e->variant == 0)
		e->variant = 1;
	e->pd = pd->handle;
	e->access = access;
	e->addr = (uintptr_t)addr;
	e->length = length;
	e->iova = iova;
	e->creator_pid = (uint32_t)getpid();
	key = index << 8 | e->variant;
	atomic_fetch_add(&pde->users, 1);
	atomic_fetch_add(&sh->live[EMU_MR], 1);
	/* Published last: the engine trusts the fields once it sees the key. */
	atomic_store(&e->key, key);
	emu_unlock(sh);
	emr->mr.context = pd->context;
	emr->mr.pd = pd;
	emr->mr.addr = addr;
	emr->mr.length = length;
	emr->mr.handle = index;
	emr->mr.lkey = key;
	emr->mr.rkey = key;
	emr->index = index;
	return &emr->mr;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

#undef ibv_reg_mr_iova
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return reg(pd, addr, length, iova, (unsigned int)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return reg(pd, addr, length, iova, access);
}

/*
 * Invalidates the key first, so the engine starts no new DMA on the MR, then
 * waits for the DMA already holding it: when this returns no copy touches the
 * range any more, and the caller may unmap it.
 */
int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct emu_mr *emr = (struct emu_mr *)mr;
	struct emu_shared *sh = emu_sh(mr->context);
	struct emu_mr_entry *e;
	uint32_t key;
	uint32_t v;

	if (emu_gone(sh)) {
		free(emr);
		return 0;
	}
	if (emr->index >= EMU_MAX_MR)
		return EINVAL;
	e = emu_mr(sh, emr->index);
	key = mr->lkey;
	if (!atomic_compare_exchange_strong(&e->key, &key, 0))
		return EINVAL;
	atomic_fetch_add(&e->waiters, 1);
	/* A dead engine holds nothing: stop waiting once the device is gone. */
	while ((v = atomic_load(&e->inflight)) != 0 && !emu_gone(sh))
		emu_futex_wait(&e->inflight, v, &emu_recheck);
	atomic_fetch_sub(&e->waiters, 1);
	emu_lock(sh);
	/* Indexes in the shared state are bounded before use: every importer can write them. */
	if (e->pd < EMU_MAX_PD)
		atomic_fetch_sub(&emu_pd(sh, e->pd)->users, 1);
	emu_slot_give(sh, EMU_MR, emr->index);
	atomic_fetch_sub(&sh->live[EMU_MR], 1);
	emu_unlock(sh);
	free(emr);
	return 0;
}

/* ---- completion queues ---------------------------------------------------------------- */

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct emu_shared *sh = emu_sh(context);
	struct emu_cq_entry *e;
	struct emu_cq *ecq;
	uint32_t index, capacity, pages;
	uint64_t ring;

	if (emu_gone(sh))
		return fail_null(EIO);
	if (cqe < 1 || (uint32_t)cqe > EMU_MAX_CQE || comp_vector != 0)
		return fail_null(EINVAL);
	capacity = pow2_at_least((uint32_t)cqe);
	pages = pages_for((uint64_t)capacity * sizeof(struct emu_cqe));
	ecq = calloc(1, sizeof(*ecq));
	if (!ecq)
		return fail_null(ENOMEM);
	emu_lock(sh);
	index = emu_slot_take(sh, EMU_CQ);
	ring = index == UINT32_MAX ? 0 : emu_heap_alloc(sh, pages);
	if (!ring) {
		if (index != UINT32_MAX)
			emu_slot_give(sh, EMU_CQ, index);
		emu_unlock(sh);
		free(ecq);
		return fail_null(ENOMEM);
	}
	e = emu_cq(sh, index);
	e->gen++;
	atomic_store(&e->users, 0);
	e->capacity = capacity;
	e->ring = ring;
	e->ring_pages = pages;
	atomic_store(&e->overrun, 0);
	e->dropped = 0;
	e->creator_pid = (uint32_t)getpid();
	atomic_store(&e->prod, 0);
	atomic_store(&e->cons, 0);
	atomic_store(&e->poll_lock, 0);
	atomic_store(&e->live, 1);
	atomic_fetch_add(&sh->live[EMU_CQ], 1);
	emu_unlock(sh);
	ecq->cq.context = context;
	ecq->cq.cq_context = cq_context;
	ecq->cq.handle = index;
	ecq->cq.cqe = (int)capacity;
	pthread_mutex_init(&ecq->cq.mutex, NULL);
	pthread_cond_init(&ecq->cq.cond, NULL);
	ecq->index = index;
	ecq->gen = e->gen;
	emu_cq_bind(ecq, channel);
	return &ecq->cq;
}

int emu_destroy_cq_entry(struct emu_context *ctx, uint32_t index)
{
	struct emu_shared *sh = ctx->sh;
	struct emu_cq_entry *e = emu_cq(sh, index);

	emu_lock(sh);
	if (!atomic_load(&e->live)) {
		emu_unlock(sh);
		return EINVAL;
	}
	if (atomic_load(&e->users) > 0) {
		emu_unlock(sh);
		return EBUSY;
	}
	atomic_store(&e->live, 0);
	emu_heap_free(sh, ctx->vctx.context.cmd_fd, e->ring, e->ring_pages);
	emu_slot_give(sh, EMU_CQ, index);
	atomic_fetch_sub(&sh->live[EMU_CQ], 1);
	emu_unlock(sh);
	return 0;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct emu_cq *ecq = (struct emu_cq *)cq;
	struct emu_context *ctx = emu_ctx(cq->context);
	int rc;

	if (emu_gone(ctx->sh)) {
		emu_cq_unbind(ecq);
		free(ecq);
		return 0;
	}
	if (emu_cq(ctx->sh, ecq->index)->gen != ecq->gen)
		return EINVAL;
	rc = emu_destroy_cq_entry(ctx, ecq->index);
	if (rc)
		return rc;
	emu_cq_unbind(ecq);
	pthread_mutex_destroy(&cq->mutex);
	pthread_cond_destroy(&cq->cond);
	free(ecq);
	return 0;
}

/* ---- queue pairs ------------------------------------------------------------------------ */

static struct emu_cq_entry *live_cq(struct emu_shared *sh, struct ibv_cq *cq)
{
	struct emu_cq *ecq = (struct emu_cq *)cq;
	struct emu_cq_entry *e;

	if (!cq || emu_sh(cq->context)->nonce != sh->nonce || ecq->index >= EMU_MAX_CQ)
		return NULL;
	e = emu_cq(sh, ecq->index);
	return atomic_load(&e->live) && e->gen == ecq->gen ? e : NULL;
}

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

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	struct emu_shared *sh = emu_sh(pd->context);
	struct ibv_qp_cap *cap = &init->cap;
	struct emu_pd_entry *pde;
	struct emu_cq_entry *scq, *rcq;
	struct emu_qp_entry *e;
	struct emu_qp *eqp;
	uint32_t index, sq_cap, rq_cap, sq_sge, rq_sge, sq_stride, rq_stride, sq_pages, pages;
	uint64_t ring;

	if (emu_gone(sh))
		return fail_null(EIO);
	if (init->qp_type != IBV_QPT_RC || init->srq)
		return fail_null(EOPNOTSUPP);
	if (cap->max_send_wr > EMU_MAX_QP_WR || cap->max_recv_wr > EMU_MAX_QP_WR ||
	    cap->max_send_sge > EMU_MAX_SGE || cap->max_recv_sge > EMU_MAX_SGE || cap->max_inline_data > 0)
		return fail_null(EINVAL);
	sq_cap = pow2_at_least(cap->max_send_wr ? cap->max_send_wr : 1);
	rq_cap = pow2_at_least(cap->max_recv_wr ? cap->max_recv_wr : 1);
	sq_sge = cap->max_send_sge ? cap->max_send_sge : 1;
	rq_sge = cap->max_recv_sge ? cap->max_recv_sge : 1;
	sq_stride = (uint32_t)EMU_ALIGN(sizeof(struct emu_swqe) + sq_sge * sizeof(struct ibv_sge), 64);
	rq_stride = (uint32_t)EMU_ALIGN(sizeof(struct emu_rwqe) + rq_sge * sizeof(struct ibv_sge), 64);
	sq_pages = pages_for((uint64_t)sq_cap * sq_stride);
	pages = sq_pages + pages_for((uint64_t)rq_cap * rq_stride);
	eqp = calloc(1, sizeof(*eqp));
	if (!eqp)
		return fail_null(ENOMEM);
	emu_lock(sh);
	pde = live_pd(pd);
	scq = live_cq(sh, init->send_cq);
	rcq = live_cq(sh, init->recv_cq);
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
	e->rnr_waiting = 0;
	init_queue(&e->sq, sq_cap, sq_sge, sq_stride, ring);
	init_queue(&e->rq, rq_cap, rq_sge, rq_stride, ring + (uint64_t)sq_pages * EMU_PAGE);
	atomic_fetch_add(&pde->users, 1);
	atomic_fetch_add(&scq->users, 1);
	atomic_fetch_add(&rcq->users, 1);
	atomic_store(&e->live, 1);
	atomic_fetch_add(&sh->live[EMU_QP], 1);
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
	emu_heap_free(sh, ctx->vctx.context.cmd_fd, e->ring_base, e->ring_pages);
	emu_slot_give(sh, EMU_QP, index);
	atomic_fetch_sub(&sh->live[EMU_QP], 1);
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
	return atomic_load(&e->live) && e->gen == eqp->gen ? e : NULL;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct emu_qp *eqp = (struct emu_qp *)qp;
	struct emu_context *ctx = emu_ctx(qp->context);
	int rc;

	if (emu_gone(ctx->sh)) {
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
	e->epoch++;
	e->rnr_waiting = 0;
	init_queue(&e->sq, e->sq.capacity, e->sq.max_sge, e->sq.stride, e->sq.ring);
	init_queue(&e->rq, e->rq.capacity, e->rq.max_sge, e->rq.stride, e->rq.ring);
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask)
{
	struct emu_shared *sh = emu_sh(qp->context);
	struct emu_qp *eqp = (struct emu_qp *)qp;
	struct emu_qp_entry *e;
	enum ibv_qp_state cur, next;
	struct transition t;

	if (emu_gone(sh))
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
	if (next == IBV_QPS_ERR)
		emu_ring_doorbell(sh);	/* the engine flushes what is queued */
	qp->state = next;
	return 0;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct emu_shared *sh = emu_sh(qp->context);
	struct emu_qp_entry *e;

	(void)attr_mask;
	if (emu_gone(sh))
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
