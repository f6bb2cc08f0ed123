/*
 * engine.c - the DMA engine: one thread on the host for the whole device,
 * executing every QP's send queue in order (execute.c) and writing the
 * completions.
 *
 * Every process with a context on the device runs a candidate thread; the
 * one that holds sh->engine_lease (a robust, process-shared mutex) is the
 * engine, the others wait for the lease in timed locks so that they can
 * stop when their process closes its last context. When the engine's
 * process closes its last context the lease is unlocked and a candidate
 * takes it at once; when the process dies the kernel marks the lease
 * owner-died and wakes a candidate, which resets the holds the dead engine
 * had (QP busy, MR inflight: nobody but the engine takes them) and goes on
 * with the head WR of each queue: a WR the dead engine was in the middle of
 * is carried out again (a SEND or WRITE lands twice, an atomic applies
 * twice). One thread serialises every QP of the host, as the emulator did
 * per device before: simple, and enough for tests, not for throughput.
 *
 * It sleeps on the doorbell futex when no QP has work, so an idle device
 * costs no CPU; a send waiting for a receive (RNR) or an ACK that does not
 * come sleeps with a timeout of its retry budget.
 *
 * Completions: a QP in the error state has every work request it holds or is
 * given completed with WR_FLUSH_ERR. A CQ that is full takes no more: the
 * completion is dropped, the CQ is marked overrun and the QP goes to the
 * error state, as a NIC reports a CQ error and errors the QPs on it.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Work requests of one QP per pass before the next QP's turn. */
#define EMU_QP_BUDGET 64
/* How long a candidate waits for the lease before it looks whether its process stopped it. */
#define EMU_CANDIDATE_WAIT_NS (25 * 1000 * 1000)

/* ---- pinning QPs --------------------------------------------------------------------------- */

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
	/* A new engine resets the holds of a dead one: look again now and then. */
	while ((v = atomic_load(&e->busy)) != 0)
		emu_futex_wait(&e->busy, v, &emu_recheck);
	atomic_fetch_sub(&e->busy_waiters, 1);
}

/* ---- completions ------------------------------------------------------------------------- */

void emu_to_error(struct emu_qp_entry *e)
{
	atomic_store(&e->state, IBV_QPS_ERR);
}

static void push_cqe(struct emu_shared *sh, struct emu_qp_entry *qp, uint32_t cq_index, const struct emu_cqe *c)
{
	struct emu_cq_entry *cq;
	uint32_t prod;

	if (cq_index >= EMU_MAX_CQ) {
		emu_to_error(qp);
		return;
	}
	cq = emu_cq(sh, cq_index);
	prod = atomic_load_explicit(&cq->prod, memory_order_relaxed);
	if (atomic_load(&cq->overrun) ||
	    prod - atomic_load_explicit(&cq->cons, memory_order_acquire) >= cq->capacity) {
		atomic_store(&cq->overrun, 1);
		cq->dropped++;
		emu_to_error(qp);
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
void emu_complete_send(struct emu_shared *sh, struct emu_qp_entry *qp, const struct emu_swqe *w,
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
		emu_to_error(qp);
}

/* Completes the receive queue's head WR of qp (the responder). */
void emu_complete_recv(struct emu_shared *sh, struct emu_qp_entry *qp, const struct emu_rwqe *r,
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
		emu_to_error(qp);
}

/* Flushes what a QP in the error state holds; returns whether there was anything. */
static int flush(struct emu_shared *sh, struct emu_qp_entry *qp)
{
	int any = 0;

	while (atomic_load_explicit(&qp->sq.cons, memory_order_relaxed) !=
	       atomic_load_explicit(&qp->sq.prod, memory_order_acquire)) {
		emu_complete_send(sh, qp, emu_wqe(sh, &qp->sq, atomic_load(&qp->sq.cons)), IBV_WC_WR_FLUSH_ERR, 0);
		any = 1;
	}
	while (atomic_load_explicit(&qp->rq.cons, memory_order_relaxed) !=
	       atomic_load_explicit(&qp->rq.prod, memory_order_acquire)) {
		emu_complete_recv(sh, qp, emu_wqe(sh, &qp->rq, atomic_load(&qp->rq.cons)), IBV_WC_WR_FLUSH_ERR,
				  IBV_WC_RECV, 0, NULL, 0);
		any = 1;
	}
	qp->wait = EMU_WAIT_NONE;
	return any;
}

/* ---- the loop ---------------------------------------------------------------------------- */

static int run_qp(struct emu_device *d, struct emu_qp_entry *qp, uint64_t *deadline)
{
	struct emu_shared *sh = d->sh;
	int progress = 0;

	for (int budget = EMU_QP_BUDGET; budget > 0; budget--) {
		uint32_t state = atomic_load(&qp->state);

		if (state == IBV_QPS_ERR)
			return flush(sh, qp) || progress;
		if (state != IBV_QPS_RTS || atomic_load_explicit(&qp->sq.cons, memory_order_relaxed) ==
						    atomic_load_explicit(&qp->sq.prod, memory_order_acquire))
			return progress;
		if (emu_execute(d, qp, deadline) == EMU_EXEC_WAIT)
			return progress;
		progress = 1;
	}
	return progress;
}

static int pass(struct emu_device *d, uint64_t *deadline)
{
	struct emu_shared *sh = d->sh;
	uint32_t high = __atomic_load_n(&sh->slots[EMU_QP].high_water, __ATOMIC_ACQUIRE);
	int progress = 0;

	/* Every process can write the shared state: an index read from it is bounded before use. */
	if (high > EMU_MAX_QP)
		high = EMU_MAX_QP;
	if (atomic_load(&sh->mr_frees) != d->seen_mr_frees) {
		d->seen_mr_frees = atomic_load(&sh->mr_frees);
		emu_pages_sweep(d, 0);
	}
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
		progress |= run_qp(d, qp, deadline);
		emu_qp_release(sh, i);
	}
	sh->engine_passes++;
	return progress;
}

/* Runs the device until this process stops its candidate. */
static void run(struct emu_device *d)
{
	struct emu_shared *sh = d->sh;

	while (!atomic_load(&d->engine_stop)) {
		uint32_t seq = atomic_load(&sh->doorbell);
		uint64_t deadline = 0;

		if (pass(d, &deadline))
			continue;
		atomic_store(&sh->engine_sleeping, 1);
		/* A post after the pass looked at its queue has bumped the doorbell: look again. */
		if (atomic_load(&sh->doorbell) == seq && !atomic_load(&d->engine_stop)) {
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
}

/* The dead engine's holds: only an engine takes them, and it is gone. */
static void take_over(struct emu_shared *sh)
{
	uint32_t high = __atomic_load_n(&sh->slots[EMU_QP].high_water, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < high && i < EMU_MAX_QP; i++) {
		atomic_store(&emu_qp(sh, i)->busy, 0);
		emu_futex_wake(&emu_qp(sh, i)->busy, INT_MAX);
	}
	high = __atomic_load_n(&sh->slots[EMU_MR].high_water, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < high && i < EMU_MAX_MR; i++) {
		if (atomic_load(&emu_mr(sh, i)->inflight)) {
			atomic_store(&emu_mr(sh, i)->inflight, 0);
			emu_futex_wake(&emu_mr(sh, i)->inflight, INT_MAX);
		}
	}
	atomic_fetch_add(&sh->engine_takeovers, 1);
}

static void *candidate(void *arg)
{
	struct emu_device *d = arg;
	struct emu_shared *sh = d->sh;

	/* Named here, not by the creator: the name says whether this thread is the engine right now. */
	pthread_setname_np(pthread_self(), "mrdemu-standby");
	while (!atomic_load(&d->engine_stop)) {
		struct timespec ts;
		int rc;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += EMU_CANDIDATE_WAIT_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		rc = pthread_mutex_timedlock(&sh->engine_lease, &ts);
		if (rc == EOWNERDEAD) {
			take_over(sh);
			pthread_mutex_consistent(&sh->engine_lease);
			rc = 0;
		}
		if (rc != 0)
			continue;
		sh->engine_pid = (uint32_t)getpid();
		pthread_setname_np(pthread_self(), "mrdemu-dma");
		run(d);
		/* The next engine maps what it needs itself. */
		emu_pages_sweep(d, 1);
		pthread_setname_np(pthread_self(), "mrdemu-standby");
		pthread_mutex_unlock(&sh->engine_lease);
	}
	return NULL;
}

int emu_engine_start(struct emu_device *d)
{
	return pthread_create(&d->engine, NULL, candidate, d);
}

/* Lets the engine finish the pass it is in (or the candidate its wait), then joins it. */
void emu_engine_stop(struct emu_device *d)
{
	struct emu_shared *sh = d->sh;

	atomic_store(&d->engine_stop, 1);
	atomic_fetch_add(&sh->doorbell, 1);
	emu_futex_wake(&sh->doorbell, INT_MAX);
	pthread_join(d->engine, NULL);
}
