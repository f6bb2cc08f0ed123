/*
 * engine.c - the DMA engine: one thread in the process that opened the
 * device, executing every QP's send queue in order and checking every SGE
 * as an HCA does before it moves a byte.
 *
 * It sleeps on the doorbell futex when no QP has work, so an idle device
 * costs no CPU; a send waiting for a receive (RNR) sleeps with a timeout of
 * its retry budget.
 *
 * Checks, with the completion status a NIC gives (the requester's; the
 * responder's where it has one):
 *   lkey not a live MR of the QP's PD, range not covered, access missing
 *   (LOCAL_WRITE for the buffer an RDMA READ or atomic writes)   LOC_PROT_ERR
 *   message longer than max_msg_sz                                LOC_LEN_ERR
 *   dest_qp_num not a QP in RTR or RTS on this device             RETRY_EXC_ERR
 *   no receive posted within rnr_retry x the responder's
 *   min_rnr_timer (rnr_retry 7: waits as long as it takes)        RNR_RETRY_EXC_ERR
 *   receive buffers' lkey bad at the responder       REM_OP_ERR / LOC_PROT_ERR
 *   receive buffers too small                    REM_INV_REQ_ERR / LOC_LEN_ERR
 *   responder QP without REMOTE_WRITE/READ/ATOMIC in its
 *   qp_access_flags, or a misaligned atomic                       REM_INV_REQ_ERR
 *   rkey not a live MR of the responder QP's PD, range not
 *   covered, REMOTE_WRITE/READ/ATOMIC missing                     REM_ACCESS_ERR
 * A violation moves no byte, completes the work request with that status
 * (signaled or not) and moves the requester QP to the error state; an error
 * the responder detects (REM_*) moves the responder QP to the error state
 * too, as for an RC responder's NAK. A QP in the error state has every work
 * request it holds or is given completed with WR_FLUSH_ERR. Zero-length
 * SGEs, and the rkey of a zero-length RDMA, are not checked (nothing is
 * accessed), as the IB specification allows.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>

/* A memcpy never longer than this, so that a long transfer writes its target front to back. */
#define EMU_COPY_CHUNK (1u << 20)
/* Work requests of one QP per pass before the next QP's turn. */
#define EMU_QP_BUDGET 64
#define EMU_MAX_HOLDS (2 * EMU_MAX_SGE + 2)

enum exec_result { EXEC_DONE, EXEC_RNR };

/* The IB RNR NAK timer encoding (min_rnr_timer), in units of 10 us. */
static const uint32_t rnr_timer_10us[32] = {
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

struct seg {
	char *va;
	uint64_t len;
};

struct holds {
	uint32_t mr[EMU_MAX_HOLDS];
	int n;
};

/* ---- pinning QPs and MRs ------------------------------------------------------------- */

int emu_qp_hold(struct emu_shared *sh, uint32_t index)
{
	struct emu_qp_entry *e = emu_qp(sh, index);

	/* Count first, then look: destroy clears live first, then waits for the count (seq_cst both). */
	atomic_fetch_add(&e->busy, 1);
	if (atomic_load(&e->live))
		return 1;
	emu_qp_release(sh, index);
	return 0;
}

void emu_qp_release(struct emu_shared *sh, uint32_t index)
{
	struct emu_qp_entry *e = emu_qp(sh, index);

	if (atomic_fetch_sub(&e->busy, 1) == 1 && atomic_load(&e->busy_waiters))
		emu_futex_wake(&e->busy, INT_MAX);
}

void emu_qp_wait_idle(struct emu_shared *sh, uint32_t index)
{
	struct emu_qp_entry *e = emu_qp(sh, index);
	uint32_t v;

	atomic_fetch_add(&e->busy_waiters, 1);
	while ((v = atomic_load(&e->busy)) != 0 && !emu_gone(sh))
		emu_futex_wait(&e->busy, v, &emu_recheck);
	atomic_fetch_sub(&e->busy_waiters, 1);
}

static void release_mrs(struct emu_shared *sh, struct holds *h)
{
	for (int i = 0; i < h->n; i++) {
		struct emu_mr_entry *e = emu_mr(sh, h->mr[i]);

		if (atomic_fetch_sub(&e->inflight, 1) == 1 && atomic_load(&e->waiters))
			emu_futex_wake(&e->inflight, INT_MAX);
	}
	h->n = 0;
}

/*
 * The HCA's key check: key names a live MR of pd whose range covers
 * [iova, iova + len) with every bit of need. On success the MR is pinned in
 * h (dereg waits for it) and *va is where the range is in this process.
 */
static int check_key(struct emu_shared *sh, struct holds *h, uint32_t key, uint32_t pd, uint64_t iova,
		     uint64_t len, uint32_t need, char **va)
{
	uint32_t index = key >> 8;
	struct emu_mr_entry *e;

	if (len == 0) {
		*va = NULL;
		return 1;
	}
	if (index >= EMU_MAX_MR || h->n == EMU_MAX_HOLDS)
		return 0;
	e = emu_mr(sh, index);
	/* Pin, then look: dereg clears the key, then waits for inflight (seq_cst both). */
	atomic_fetch_add(&e->inflight, 1);
	h->mr[h->n++] = index;
	if (atomic_load(&e->key) != key)
		return 0;
	if (e->pd != pd || (e->access & need) != need)
		return 0;
	if (iova < e->iova || iova + len < iova || iova + len > e->iova + e->length)
		return 0;
	*va = (char *)(uintptr_t)(e->addr + (iova - e->iova));
	return 1;
}

static int check_sges(struct emu_shared *sh, struct holds *h, const struct ibv_sge *sge, uint32_t n,
		      uint32_t pd, uint32_t need, struct seg *out, uint64_t *total)
{
	*total = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!check_key(sh, h, sge[i].lkey, pd, sge[i].addr, sge[i].length, need, &out[i].va))
			return 0;
		out[i].len = sge[i].length;
		*total += sge[i].length;
	}
	return 1;
}

/* ---- moving bytes ------------------------------------------------------------------------ */

static void copy_chunked(char *dst, const char *src, uint64_t len)
{
	while (len > 0) {
		uint64_t n = len < EMU_COPY_CHUNK ? len : EMU_COPY_CHUNK;

		memcpy(dst, src, n);
		dst += n;
		src += n;
		len -= n;
	}
}

/* Gathers src into dst, both scatter lists; copies min(total src, total dst). */
static void copy_segs(struct seg *dst, uint32_t nd, const struct seg *src, uint32_t ns)
{
	uint32_t di = 0, si = 0;
	uint64_t doff = 0, soff = 0;

	while (di < nd && si < ns) {
		uint64_t n = dst[di].len - doff;

		if (src[si].len - soff < n)
			n = src[si].len - soff;
		if (n > 0)
			copy_chunked(dst[di].va + doff, src[si].va + soff, n);
		doff += n;
		soff += n;
		if (doff == dst[di].len) {
			di++;
			doff = 0;
		}
		if (soff == src[si].len) {
			si++;
			soff = 0;
		}
	}
}

/* ---- completions ------------------------------------------------------------------------- */

static void to_error(struct emu_qp_entry *e)
{
	atomic_store(&e->state, IBV_QPS_ERR);
}

/*
 * A CQ that is full takes no more: the completion is dropped, the CQ is
 * marked overrun (poll_cq reports it) and the QP goes to the error state,
 * as a NIC reports a CQ error and errors the QPs on it.
 */
static void push_cqe(struct emu_shared *sh, struct emu_qp_entry *qp, uint32_t cq_index, const struct emu_cqe *c)
{
	if (cq_index >= EMU_MAX_CQ) {
		to_error(qp);
		return;
	}
	struct emu_cq_entry *cq = emu_cq(sh, cq_index);
	uint32_t prod = atomic_load_explicit(&cq->prod, memory_order_relaxed);

	if (atomic_load(&cq->overrun) ||
	    prod - atomic_load_explicit(&cq->cons, memory_order_acquire) >= cq->capacity) {
		atomic_store(&cq->overrun, 1);
		cq->dropped++;
		to_error(qp);
		return;
	}
	*emu_cqe_at(sh, cq, prod) = *c;
	atomic_store_explicit(&cq->prod, prod + 1, memory_order_release);
	emu_cq_completed(sh, cq, c);
}

static enum ibv_wc_opcode send_wc_opcode(uint32_t op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

/*
 * The fields every CQE of qp has: which queue (0 send, 1 receive) and the consumer index its poll retires the
 * queue to, besides the work completion's own.
 */
static void init_cqe(struct emu_cqe *c, const struct emu_qp_entry *qp, uint32_t queue, uint32_t retire_to,
		     uint64_t wr_id, enum ibv_wc_status status, enum ibv_wc_opcode opcode, uint32_t byte_len)
{
	memset(c, 0, sizeof(*c));
	c->wc.wr_id = wr_id;
	c->wc.status = status;
	c->wc.opcode = opcode;
	c->wc.byte_len = byte_len;
	c->wc.qp_num = qp->qp_num;
	c->qp_index = emu_qpn_index(qp->qp_num);
	c->qp_epoch = qp->epoch;
	c->queue = queue;
	c->retire_to = retire_to;
}

/* Completes the send queue's head WR: a CQE if signaled or failed, then the slot moves on. */
static void complete_send(struct emu_shared *sh, struct emu_qp_entry *qp, const struct emu_swqe *w,
			  enum ibv_wc_status status, uint32_t byte_len)
{
	uint32_t cons = atomic_load_explicit(&qp->sq.cons, memory_order_relaxed);

	if (status != IBV_WC_SUCCESS || w->signaled) {
		struct emu_cqe c;

		init_cqe(&c, qp, 0, cons + 1, w->wr_id, status, send_wc_opcode(w->opcode), byte_len);
		push_cqe(sh, qp, qp->send_cq, &c);
	}
	atomic_store_explicit(&qp->sq.cons, cons + 1, memory_order_release);
	if (status != IBV_WC_SUCCESS)
		to_error(qp);
}

/* Completes the receive queue's head WR of qp (the responder). */
static void complete_recv(struct emu_shared *sh, struct emu_qp_entry *qp, const struct emu_rwqe *r,
			  enum ibv_wc_status status, enum ibv_wc_opcode opcode, uint32_t byte_len,
			  const struct emu_swqe *w, uint32_t src_qp)
{
	uint32_t cons = atomic_load_explicit(&qp->rq.cons, memory_order_relaxed);
	struct emu_cqe c;

	init_cqe(&c, qp, 1, cons + 1, r->wr_id, status, opcode, byte_len);
	c.wc.src_qp = src_qp;
	c.solicited = w && (w->flags & IBV_SEND_SOLICITED);
	if (w && (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)) {
		c.wc.wc_flags = IBV_WC_WITH_IMM;
		c.wc.imm_data = w->imm;
	}
	push_cqe(sh, qp, qp->recv_cq, &c);
	atomic_store_explicit(&qp->rq.cons, cons + 1, memory_order_release);
	if (status != IBV_WC_SUCCESS)
		to_error(qp);
}

/* Flushes what a QP in the error state holds; returns whether there was anything. */
static int flush(struct emu_shared *sh, struct emu_qp_entry *qp)
{
	int any = 0;

	while (atomic_load_explicit(&qp->sq.cons, memory_order_relaxed) !=
	       atomic_load_explicit(&qp->sq.prod, memory_order_acquire)) {
		complete_send(sh, qp, emu_wqe(sh, &qp->sq, atomic_load(&qp->sq.cons)), IBV_WC_WR_FLUSH_ERR, 0);
		any = 1;
	}
	while (atomic_load_explicit(&qp->rq.cons, memory_order_relaxed) !=
	       atomic_load_explicit(&qp->rq.prod, memory_order_acquire)) {
		complete_recv(sh, qp, emu_wqe(sh, &qp->rq, atomic_load(&qp->rq.cons)), IBV_WC_WR_FLUSH_ERR,
			      IBV_WC_RECV, 0, NULL, 0);
		any = 1;
	}
	qp->rnr_waiting = 0;
	return any;
}

/* ---- executing one work request ---------------------------------------------------------- */

struct exec {
	struct emu_shared *sh;
	struct emu_qp_entry *qp;	/* requester, held by the caller */
	const struct emu_swqe *w;
	struct holds holds;
	struct seg local[EMU_MAX_SGE];
	struct seg recv[EMU_MAX_SGE];
	uint64_t total;
	uint32_t nlocal;
	uint32_t peer_index;
	int peer_held;
};

static struct emu_qp_entry *hold_peer(struct exec *x)
{
	uint32_t index = emu_qpn_index(x->qp->dest_qp_num);
	struct emu_qp_entry *peer;
	uint32_t state;

	if (index >= EMU_MAX_QP || !emu_qp_hold(x->sh, index))
		return NULL;
	x->peer_index = index;
	x->peer_held = 1;
	peer = emu_qp(x->sh, index);
	state = atomic_load(&peer->state);
	if (peer->qp_num != x->qp->dest_qp_num || (state != IBV_QPS_RTR && state != IBV_QPS_RTS))
		return NULL;
	return peer;
}

/*
 * Whether the head WR may wait for a receive at peer: until rnr_retry times
 * the responder's RNR timer has passed since the first RNR NAK.
 */
static int rnr_may_wait(struct emu_qp_entry *qp, struct emu_qp_entry *peer, uint64_t *deadline)
{
	uint32_t head = atomic_load_explicit(&qp->sq.cons, memory_order_relaxed);
	uint64_t now = emu_now_ns();

	if (qp->rnr_retry == 0)
		return 0;
	if (!qp->rnr_waiting || qp->rnr_head != head) {
		qp->rnr_waiting = 1;
		qp->rnr_head = head;
		qp->rnr_deadline_ns = qp->rnr_retry == 7 ? 0 :
			now + (uint64_t)qp->rnr_retry * rnr_timer_10us[peer->min_rnr_timer & 31] * 10000ull;
	}
	if (qp->rnr_deadline_ns == 0)
		return 1;
	if (now >= qp->rnr_deadline_ns)
		return 0;
	if (*deadline == 0 || qp->rnr_deadline_ns < *deadline)
		*deadline = qp->rnr_deadline_ns;
	return 1;
}

static int rq_empty(struct emu_qp_entry *peer)
{
	return atomic_load_explicit(&peer->rq.cons, memory_order_relaxed) ==
	       atomic_load_explicit(&peer->rq.prod, memory_order_acquire);
}

static enum ibv_wc_status exec_send(struct exec *x, struct emu_qp_entry *peer)
{
	const struct emu_rwqe *r = emu_wqe(x->sh, &peer->rq, atomic_load(&peer->rq.cons));
	uint64_t room;
	/* Bounded by the ring's stride whatever a process wrote there: the engine never reads past a WQE. */
	uint32_t n = r->num_sge <= peer->rq.max_sge ? r->num_sge : peer->rq.max_sge;

	if (!check_sges(x->sh, &x->holds, r->sge, n, peer->pd, IBV_ACCESS_LOCAL_WRITE, x->recv, &room)) {
		complete_recv(x->sh, peer, r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, x->w, x->qp->qp_num);
		return IBV_WC_REM_OP_ERR;
	}
	if (room < x->total) {
		complete_recv(x->sh, peer, r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, x->w, x->qp->qp_num);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	copy_segs(x->recv, n, x->local, x->nlocal);
	complete_recv(x->sh, peer, r, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)x->total, x->w, x->qp->qp_num);
	return IBV_WC_SUCCESS;
}

static enum ibv_wc_status exec_rdma(struct exec *x, struct emu_qp_entry *peer, uint32_t qp_access,
				    uint32_t mr_access)
{
	const struct emu_swqe *w = x->w;
	struct seg remote;

	if (!(peer->qp_access_flags & qp_access)) {
		to_error(peer);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	if (!check_key(x->sh, &x->holds, w->rkey, peer->pd, w->remote_addr, x->total, mr_access, &remote.va)) {
		to_error(peer);
		return IBV_WC_REM_ACCESS_ERR;
	}
	remote.len = x->total;
	if (w->opcode == IBV_WR_RDMA_READ)
		copy_segs(x->local, x->nlocal, &remote, 1);
	else
		copy_segs(&remote, 1, x->local, x->nlocal);
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		complete_recv(x->sh, peer, emu_wqe(x->sh, &peer->rq, atomic_load(&peer->rq.cons)), IBV_WC_SUCCESS,
			      IBV_WC_RECV_RDMA_WITH_IMM, (uint32_t)x->total, w, x->qp->qp_num);
	return IBV_WC_SUCCESS;
}

static enum ibv_wc_status exec_atomic(struct exec *x, struct emu_qp_entry *peer)
{
	const struct emu_swqe *w = x->w;
	char *target;
	uint64_t old;

	/* post_send took one 8-byte SGE; a ring rewritten since is the requester's own fault. */
	if (x->nlocal != 1 || x->local[0].len != 8)
		return IBV_WC_LOC_QP_OP_ERR;
	if (!(peer->qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) || (w->remote_addr & 7)) {
		to_error(peer);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	if (!check_key(x->sh, &x->holds, w->rkey, peer->pd, w->remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC,
		       &target)) {
		to_error(peer);
		return IBV_WC_REM_ACCESS_ERR;
	}
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		old = w->compare_add;
		__atomic_compare_exchange_n((uint64_t *)target, &old, w->swap, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		old = __atomic_fetch_add((uint64_t *)target, w->compare_add, __ATOMIC_SEQ_CST);
	}
	memcpy(x->local[0].va, &old, sizeof(old));
	return IBV_WC_SUCCESS;
}

static enum exec_result execute(struct emu_shared *sh, struct emu_qp_entry *qp, uint64_t *deadline)
{
	struct exec x;
	const struct emu_swqe *w = emu_wqe(sh, &qp->sq, atomic_load_explicit(&qp->sq.cons, memory_order_relaxed));
	struct emu_qp_entry *peer;
	enum ibv_wc_status status;
	uint32_t need = 0, n = w->num_sge <= qp->sq.max_sge ? w->num_sge : qp->sq.max_sge;
	int needs_recv = w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM ||
			 w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	x.sh = sh;
	x.qp = qp;
	x.w = w;
	x.holds.n = 0;
	x.peer_held = 0;
	x.nlocal = n;
	if (w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		need = IBV_ACCESS_LOCAL_WRITE;
	if (!check_sges(sh, &x.holds, w->sge, n, qp->pd, need, x.local, &x.total)) {
		status = IBV_WC_LOC_PROT_ERR;
		goto done;
	}
	if (x.total > EMU_MAX_MSG_SZ) {
		status = IBV_WC_LOC_LEN_ERR;
		goto done;
	}
	peer = hold_peer(&x);
	if (!peer) {
		/* Nobody answers: the requester's transport retries run out. No timing model: at once. */
		status = IBV_WC_RETRY_EXC_ERR;
		goto done;
	}
	if (needs_recv && rq_empty(peer)) {
		if (rnr_may_wait(qp, peer, deadline)) {
			release_mrs(sh, &x.holds);
			emu_qp_release(sh, x.peer_index);
			return EXEC_RNR;
		}
		status = IBV_WC_RNR_RETRY_EXC_ERR;
		goto done;
	}
	qp->rnr_waiting = 0;
	switch (w->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		status = exec_send(&x, peer);
		if (status != IBV_WC_SUCCESS)
			to_error(peer);
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		status = exec_rdma(&x, peer, IBV_ACCESS_REMOTE_WRITE, IBV_ACCESS_REMOTE_WRITE);
		break;
	case IBV_WR_RDMA_READ:
		status = exec_rdma(&x, peer, IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_READ);
		break;
	default:
		status = exec_atomic(&x, peer);
		x.total = 8;
		break;
	}
done:
	/* The copies are over: dereg and destroy may go on. */
	release_mrs(sh, &x.holds);
	if (x.peer_held)
		emu_qp_release(sh, x.peer_index);
	complete_send(sh, qp, w, status, status == IBV_WC_SUCCESS ? (uint32_t)x.total : 0);
	return EXEC_DONE;
}

/* ---- the loop ---------------------------------------------------------------------------- */

static int run_qp(struct emu_shared *sh, struct emu_qp_entry *qp, uint64_t *deadline)
{
	int progress = 0;

	for (int budget = EMU_QP_BUDGET; budget > 0; budget--) {
		uint32_t state = atomic_load(&qp->state);

		if (state == IBV_QPS_ERR)
			return flush(sh, qp) || progress;
		if (state != IBV_QPS_RTS || atomic_load_explicit(&qp->sq.cons, memory_order_relaxed) ==
						    atomic_load_explicit(&qp->sq.prod, memory_order_acquire))
			return progress;
		if (execute(sh, qp, deadline) == EXEC_RNR)
			return progress;
		progress = 1;
	}
	return progress;
}

static int pass(struct emu_shared *sh, uint64_t *deadline)
{
	uint32_t high = __atomic_load_n(&sh->slots[EMU_QP].high_water, __ATOMIC_ACQUIRE);
	int progress = 0;

	/* Every importer can write the shared state: an index read from it is bounded before use. */
	if (high > EMU_MAX_QP)
		high = EMU_MAX_QP;

	for (uint32_t i = 0; i < high; i++) {
		struct emu_qp_entry *qp = emu_qp(sh, i);
		uint32_t state;

		if (!atomic_load_explicit(&qp->live, memory_order_relaxed))
			continue;
		state = atomic_load_explicit(&qp->state, memory_order_relaxed);
		if (state != IBV_QPS_RTS && state != IBV_QPS_ERR)
			continue;
		if (!emu_qp_hold(sh, i))
			continue;
		progress |= run_qp(sh, qp, deadline);
		emu_qp_release(sh, i);
	}
	sh->engine_passes++;
	return progress;
}

void *emu_engine_main(void *arg)
{
	struct emu_context *ctx = arg;
	struct emu_shared *sh = ctx->sh;

	/* Held until this thread returns; if the process dies first, importers see the owner die. */
	pthread_mutex_lock(&sh->engine_alive);
	while (!atomic_load(&sh->engine_stop)) {
		uint32_t seq = atomic_load(&sh->doorbell);
		uint64_t deadline = 0;

		if (pass(sh, &deadline))
			continue;
		atomic_store(&sh->engine_sleeping, 1);
		/* A post after the pass looked at its queue has bumped the doorbell: look again. */
		if (atomic_load(&sh->doorbell) == seq && !atomic_load(&sh->engine_stop)) {
			struct timespec ts, *timeout = NULL;

			if (deadline) {
				uint64_t now = emu_now_ns();
				uint64_t wait = deadline > now ? deadline - now : 1;

				ts.tv_sec = (time_t)(wait / 1000000000ull);
				ts.tv_nsec = (long)(wait % 1000000000ull);
				timeout = &ts;
			}
			emu_futex_wait(&sh->doorbell, seq, timeout);
		}
		atomic_store(&sh->engine_sleeping, 0);
	}
	pthread_mutex_unlock(&sh->engine_alive);
	return NULL;
}

/* Lets the engine finish the pass it is in, then joins it. */
void emu_engine_stop(struct emu_context *ctx)
{
	struct emu_shared *sh = ctx->sh;

	atomic_store(&sh->engine_stop, 1);
	atomic_fetch_add(&sh->doorbell, 1);
	emu_futex_wake(&sh->doorbell, INT_MAX);
	pthread_join(ctx->engine, NULL);
}
