/*
 * datapath.c - what runs in the posting and polling processes: the ops that
 * verbs.h's inline ibv_post_send, ibv_post_recv and ibv_poll_cq call.
 *
 * Posting writes work requests into the queue's shared ring and rings the
 * doorbell; it checks what a NIC's driver checks at post time (the QP state,
 * the number of SGEs, the opcode, a full ring) and nothing the HCA checks at
 * execution (keys, ranges, access: engine.c). A slot of the ring is free
 * again only once the completion of its work request, or of a later one of
 * the same queue, has been polled, as with mlx5: a send queue whose requests
 * are all unsignaled fills up.
 *
 * The QP's state is checked under the queue's post lock, which RESET takes
 * to empty the queue: a post either lands before the RESET and is discarded
 * with the rest, or sees the RESET and fails.
 *
 * Polling reads the CQ's ring: no system call, no lock held against the
 * engine, only against other pollers of the same CQ. A completion of a QP
 * destroyed or reset since it was made is dropped there, unseen, as mlx5
 * cleans a destroyed QP's completions out of its CQ.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

void emu_ring_doorbell(struct emu_shared *sh)
{
	/* Sequentially consistent on both sides, with engine_sleeping: the engine never sleeps through a post. */
	atomic_fetch_add(&sh->doorbell, 1);
	if (atomic_load(&sh->engine_sleeping))
		emu_futex_wake(&sh->doorbell, 1);
}

static struct emu_qp_entry *posting_qp(struct ibv_qp *qp, struct emu_shared **sh_out)
{
	struct emu_qp *eqp = (struct emu_qp *)qp;
	struct emu_shared *sh = emu_sh(qp->context);
	struct emu_qp_entry *e;

	*sh_out = sh;
	if (eqp->index >= EMU_MAX_QP)
		return NULL;
	e = emu_qp(sh, eqp->index);
	return atomic_load_explicit(&e->live, memory_order_acquire) && e->gen == eqp->gen ? e : NULL;
}

static int opcode_supported(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return 1;
	default:
		return 0;
	}
}

static int is_atomic(enum ibv_wr_opcode op)
{
	return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* The SGE list of a send or a receive: at most the queue's max_sge, and there when counted. */
static int sges_ok(const struct emu_queue *q, int num_sge, const struct ibv_sge *sg_list)
{
	return num_sge >= 0 && (uint32_t)num_sge <= q->max_sge && (num_sge == 0 || sg_list);
}

/* What a driver refuses at post time: EINVAL, as mlx5 does. */
static int send_wr_ok(const struct emu_queue *q, const struct ibv_send_wr *wr)
{
	if (!sges_ok(q, wr->num_sge, wr->sg_list) || !opcode_supported(wr->opcode))
		return 0;
	/* No inline data: the device reports max_inline_data 0. */
	if (wr->send_flags & IBV_SEND_INLINE)
		return 0;
	if (is_atomic(wr->opcode) && (wr->num_sge != 1 || wr->sg_list[0].length != 8))
		return 0;
	return 1;
}

static uint32_t in_use(struct emu_queue *q, uint32_t prod)
{
	return prod - atomic_load_explicit(&q->retired, memory_order_acquire);
}

/*
 * Ends a post: the engine reads the WQEs only after it sees the producer index (release), and a send
 * waiting for a receive (RNR) goes on as soon as the engine wakes.
 */
static void publish(struct emu_shared *sh, struct emu_queue *q, uint32_t prod, uint32_t posted)
{
	atomic_store_explicit(&q->prod, prod, memory_order_release);
	emu_spin_unlock(&q->post_lock);
	if (posted)
		emu_ring_doorbell(sh);
}

int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr)
{
	struct emu_shared *sh;
	struct emu_qp_entry *e = posting_qp(qp, &sh);
	struct emu_queue *q;
	uint32_t state, prod, posted = 0;
	int rc = 0;

	if (emu_gone(emu_ctx(qp->context))) {
		*bad_wr = wr;
		return EIO;
	}
	if (!e) {
		*bad_wr = wr;
		return EINVAL;
	}
	q = &e->sq;
	emu_spin_lock(&q->post_lock);
	state = atomic_load_explicit(&e->state, memory_order_acquire);
	/* A QP in the error state takes work requests and flushes them, as a NIC does. */
	if (state != IBV_QPS_RTS && state != IBV_QPS_ERR) {
		emu_spin_unlock(&q->post_lock);
		*bad_wr = wr;
		return EINVAL;
	}
	prod = atomic_load_explicit(&q->prod, memory_order_relaxed);
	for (; wr; wr = wr->next) {
		struct emu_swqe *w;

		if (!send_wr_ok(q, wr)) {
			rc = EINVAL;
			break;
		}
		if (in_use(q, prod) >= q->capacity) {
			rc = ENOMEM;
			break;
		}
		w = emu_wqe(sh, q, prod);
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->flags = wr->send_flags;
		w->imm = wr->imm_data;
		w->num_sge = (uint32_t)wr->num_sge;
		if (is_atomic(wr->opcode)) {
			w->remote_addr = wr->wr.atomic.remote_addr;
			w->rkey = wr->wr.atomic.rkey;
			w->compare_add = wr->wr.atomic.compare_add;
			w->swap = wr->wr.atomic.swap;
		} else {
			w->remote_addr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
			w->compare_add = w->swap = 0;
		}
		w->signaled = (wr->send_flags & IBV_SEND_SIGNALED) || e->sq_sig_all;
		if (wr->num_sge > 0)
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		prod++;
		posted++;
	}
	publish(sh, q, prod, posted);
	if (rc)
		*bad_wr = wr;
	return rc;
}

int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	struct emu_shared *sh;
	struct emu_qp_entry *e = posting_qp(qp, &sh);
	struct emu_queue *q;
	uint32_t prod, posted = 0;
	int rc = 0;

	if (emu_gone(emu_ctx(qp->context))) {
		*bad_wr = wr;
		return EIO;
	}
	if (!e) {
		*bad_wr = wr;
		return EINVAL;
	}
	q = &e->rq;
	emu_spin_lock(&q->post_lock);
	if (atomic_load_explicit(&e->state, memory_order_acquire) == IBV_QPS_RESET) {
		emu_spin_unlock(&q->post_lock);
		*bad_wr = wr;
		return EINVAL;
	}
	prod = atomic_load_explicit(&q->prod, memory_order_relaxed);
	for (; wr; wr = wr->next) {
		struct emu_rwqe *w;

		if (!sges_ok(q, wr->num_sge, wr->sg_list)) {
			rc = EINVAL;
			break;
		}
		if (in_use(q, prod) >= q->capacity) {
			rc = ENOMEM;
			break;
		}
		w = emu_wqe(sh, q, prod);
		w->wr_id = wr->wr_id;
		w->num_sge = (uint32_t)wr->num_sge;
		if (wr->num_sge > 0)
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		prod++;
		posted++;
	}
	publish(sh, q, prod, posted);
	if (rc)
		*bad_wr = wr;
	return rc;
}

/*
 * Frees the slots of the queue this completion belongs to, up to and
 * including its work request. Returns 0 when the completion's QP was
 * destroyed (not live, or another QP's number at that index) or reset (a
 * later epoch) since: the completion is dropped.
 */
static int retire(struct emu_shared *sh, const struct emu_cqe *c)
{
	struct emu_qp_entry *e;
	struct emu_queue *q;

	if (c->qp_index >= EMU_MAX_QP)
		return 0;
	e = emu_qp(sh, c->qp_index);
	if (!atomic_load_explicit(&e->live, memory_order_acquire) || e->qp_num != c->wc.qp_num ||
	    e->epoch != c->qp_epoch)
		return 0;
	q = c->queue == 0 ? &e->sq : &e->rq;
	if ((int32_t)(c->retire_to - atomic_load_explicit(&q->retired, memory_order_relaxed)) > 0)
		atomic_store_explicit(&q->retired, c->retire_to, memory_order_release);
	return 1;
}

/*
 * Returns the completions polled; -EOVERFLOW once the CQ has overrun and what
 * fit in it has been polled (the overrun is sticky: the CQ is in error, as a
 * NIC's CQ is after an overrun, and the QP whose completion was lost is in the
 * error state); -EINVAL for a CQ destroyed under the caller; -EIO when the
 * device is gone.
 */
int emu_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc)
{
	struct emu_cq *ecq = (struct emu_cq *)cq;
	struct emu_shared *sh = emu_sh(cq->context);
	struct emu_cq_entry *e;
	uint32_t cons, prod;
	int n = 0;

	if (emu_gone(emu_ctx(cq->context)))
		return -EIO;
	if (ecq->index >= EMU_MAX_CQ)
		return -EINVAL;
	e = emu_cq(sh, ecq->index);
	if (!atomic_load_explicit(&e->live, memory_order_acquire) || e->gen != ecq->gen)
		return -EINVAL;
	emu_spin_lock(&e->poll_lock);
	cons = atomic_load_explicit(&e->cons, memory_order_relaxed);
	prod = atomic_load_explicit(&e->prod, memory_order_acquire);
	while (n < num_entries && cons != prod) {
		const struct emu_cqe *c = emu_cqe_at(sh, e, cons);

		if (retire(sh, c))
			wc[n++] = c->wc;
		cons++;
	}
	/* Release: the engine reuses the entries only after it sees them consumed. */
	atomic_store_explicit(&e->cons, cons, memory_order_release);
	emu_spin_unlock(&e->poll_lock);
	if (n == 0 && atomic_load_explicit(&e->overrun, memory_order_acquire))
		return -EOVERFLOW;
	return n;
}
