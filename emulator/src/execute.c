/*
 * execute.c - one work request at the head of a send queue, as a requester
 * and its responder would carry it out: the connection checks of an RC
 * transport, the key checks of an HCA, and the copy.
 *
 * Connection, as rxe has it. A request reaches a responder only if the
 * requester's DLID is the port's LID (or it is routed by GID), dest_qp_num
 * names a live QP in RTR or RTS, and that QP's dest_qp_num names the
 * requester back; otherwise nobody answers and the requester's ACK timer
 * (4.096 us << timeout) runs out retry_cnt + 1 times before RETRY_EXC_ERR
 * (timeout 0: it waits as long as it takes, as the IB specification says).
 * PSNs: a message takes one PSN per path-MTU packet (at least one; a READ
 * as many as its response has packets, an atomic one), and both sides
 * advance by that when it is carried out. A request ahead of the
 * responder's expected PSN is NAKed (sequence error) and retried retry_cnt
 * times to no avail: RETRY_EXC_ERR, nothing moves. One behind it is a
 * duplicate: a SEND or WRITE is acknowledged without being carried out
 * again, a READ is read again, an atomic is not answered (RETRY_EXC_ERR).
 * A READ or atomic to a responder with max_dest_rd_atomic 0 is an invalid
 * request (REM_INV_REQ_ERR); from a requester with max_rd_atomic 0 the
 * emulator says LOC_QP_OP_ERR (rxe would wait for ever). A send that finds
 * no receive waits its RNR budget: rnr_retry times the responder's
 * min_rnr_timer (IB encoding), rnr_retry 7 for ever.
 *
 * Keys and pages, with the completion status a NIC gives (the requester's;
 * the responder's where it has one):
 *   lkey not a live MR of the QP's PD, range not covered, access missing
 *   (LOCAL_WRITE for the buffer an RDMA READ or atomic writes)   LOC_PROT_ERR
 *   message longer than max_msg_sz                                LOC_LEN_ERR
 *   receive buffers' lkey bad at the responder       REM_OP_ERR / LOC_PROT_ERR
 *   receive buffers too small                    REM_INV_REQ_ERR / LOC_LEN_ERR
 *   responder QP without REMOTE_WRITE/READ/ATOMIC in its
 *   qp_access_flags, or a misaligned atomic                       REM_INV_REQ_ERR
 *   rkey not a live MR of the responder QP's PD, range not
 *   covered, REMOTE_WRITE/READ/ATOMIC missing (an rkey of 0,
 *   what an MR without remote access reports, is no MR's)         REM_ACCESS_ERR
 * and a page an MR was bound to that is gone (pages.c) fails like a bad key
 * of that MR, and is counted in the MR's context and the device
 * (mrdemu_unbound_transfers): an HCA would have reached the pinned page.
 * A violation moves no byte, completes the work request with that status
 * (signaled or not) and moves the requester QP to the error state; an error
 * the responder detects (REM_*) moves the responder QP to the error state
 * too, as for an RC responder's NAK. Zero-length SGEs, and the rkey of a
 * zero-length RDMA, are not checked (nothing is accessed), as the IB
 * specification allows.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <limits.h>
#include <string.h>

/* A memcpy never longer than this, so that a long transfer writes its target front to back. */
#define EMU_COPY_CHUNK (1u << 20)
#define EMU_MAX_HOLDS (2 * EMU_MAX_SGE + 2)
#define EMU_MAX_SEGS (EMU_MAX_SGE * EMU_MR_EXTENTS)
#define PSN_MASK 0xffffffu

/* The IB RNR NAK timer encoding (min_rnr_timer), in units of 10 us. */
static const uint32_t rnr_timer_10us[32] = {
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
};

enum key_result { KEY_OK, KEY_BAD, KEY_UNBOUND };

struct holds {
	uint32_t mr[EMU_MAX_HOLDS];
	int n;
};

struct exec {
	struct emu_device *d;
	struct emu_shared *sh;
	struct emu_qp_entry *qp;	/* requester, held by the caller */
	const struct emu_swqe *w;
	struct holds holds;
	struct emu_seg local[EMU_MAX_SEGS];
	struct emu_seg recv[EMU_MAX_SEGS];
	uint32_t nlocal;
	uint64_t total;
	uint32_t peer_index;
	int peer_held;
};

static void release_mrs(struct emu_shared *sh, struct holds *h)
{
	for (int i = 0; i < h->n; i++) {
		struct emu_mr_entry *e = emu_mr(sh, h->mr[i]);

		if (atomic_fetch_sub(&e->inflight, 1) == 1 && atomic_load(&e->waiters))
			emu_futex_wake(&e->inflight, INT_MAX);
	}
	h->n = 0;
}

static void count_unbound(struct emu_shared *sh, const struct emu_mr_entry *e)
{
	if (e->ctx < EMU_MAX_CTX)
		atomic_fetch_add(&emu_ctxe(sh, e->ctx)->unbound, 1);
	atomic_fetch_add(&sh->unbound, 1);
}

/*
 * The HCA's key check: key names a live MR of pd whose range covers
 * [iova, iova + len) with every bit of need; then its bound pages, as
 * pointers of this process, appended to out[*n]. On any result the MR stays
 * pinned in h (dereg waits for it) until release_mrs.
 */
static enum key_result check_key(struct exec *x, uint32_t key, uint32_t pd, uint64_t iova, uint64_t len,
				 uint32_t need, struct emu_seg *out, uint32_t *n)
{
	uint32_t index = emu_key_index(key);
	struct emu_mr_entry *e;
	int got;

	if (len == 0)
		return KEY_OK;
	/* Another device's key names nothing here, whatever this device's table holds at its index. */
	if (key == 0 || emu_key_device(key) != x->d->index || x->holds.n == EMU_MAX_HOLDS)
		return KEY_BAD;
	e = emu_mr(x->sh, index);
	/* Pin, then look: dereg clears the key, then waits for inflight (seq_cst both). */
	atomic_fetch_add(&e->inflight, 1);
	x->holds.mr[x->holds.n++] = index;
	if (atomic_load(&e->key) != key)
		return KEY_BAD;
	if (e->pd != pd || (e->access & need) != need)
		return KEY_BAD;
	if (iova < e->iova || iova + len < iova || iova + len > e->iova + e->length)
		return KEY_BAD;
	got = emu_pages_reach(x->d, index, (iova - e->iova) + (e->addr - e->base), len, 0, out + *n,
			      (int)(EMU_MAX_SEGS - *n));
	if (got == -2)
		return KEY_BAD;
	if (got < 0) {
		count_unbound(x->sh, e);
		return KEY_UNBOUND;
	}
	*n += (uint32_t)got;
	return KEY_OK;
}

static enum key_result check_sges(struct exec *x, const struct ibv_sge *sge, uint32_t count, uint32_t pd,
				  uint32_t need, struct emu_seg *out, uint32_t *n, uint64_t *total)
{
	*total = 0;
	*n = 0;
	for (uint32_t i = 0; i < count; i++) {
		enum key_result r = check_key(x, sge[i].lkey, pd, sge[i].addr, sge[i].length, need, out, n);

		if (r != KEY_OK)
			return r;
		*total += sge[i].length;
	}
	return KEY_OK;
}

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
static void copy_segs(struct emu_seg *dst, uint32_t nd, const struct emu_seg *src, uint32_t ns)
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

/* ---- the connection ---------------------------------------------------------------------- */

/* The QP a request of x->qp reaches, held; NULL when none takes it (nobody answers). */
static struct emu_qp_entry *reach_peer(struct exec *x)
{
	struct emu_qp_entry *qp = x->qp, *peer;
	uint32_t index = emu_qpn_index(qp->dest_qp_num), state;

	if (!qp->ah_attr.is_global && qp->ah_attr.dlid != emu_port_lid(x->sh))
		return NULL;
	if (index >= EMU_MAX_QP || !emu_qp_hold(x->sh, index))
		return NULL;
	x->peer_index = index;
	x->peer_held = 1;
	peer = emu_qp(x->sh, index);
	state = atomic_load(&peer->state);
	if (peer->qp_num != qp->dest_qp_num || (state != IBV_QPS_RTR && state != IBV_QPS_RTS) ||
	    peer->dest_qp_num != qp->qp_num)
		return NULL;
	return peer;
}

/* Starts or goes on with a wait of kind for the head WR; returns whether it may go on waiting. */
static int may_wait(struct emu_qp_entry *qp, uint32_t kind, uint32_t retries, uint64_t step_ns, uint64_t *deadline)
{
	uint32_t head = atomic_load_explicit(&qp->sq.cons, memory_order_relaxed);
	uint64_t now = emu_now_ns();

	if (qp->wait != kind || qp->wait_head != head) {
		qp->wait = kind;
		qp->wait_head = head;
		qp->retries_left = retries;
		qp->wait_deadline_ns = step_ns ? now + step_ns : 0;
	}
	if (qp->wait_deadline_ns == 0)
		return 1;
	while (now >= qp->wait_deadline_ns) {
		if (qp->retries_left == 0)
			return 0;
		qp->retries_left--;
		qp->wait_deadline_ns += step_ns;
	}
	if (*deadline == 0 || qp->wait_deadline_ns < *deadline)
		*deadline = qp->wait_deadline_ns;
	return 1;
}

/* Nobody answers: the ACK timeout, retry_cnt retries after the first try; timeout 0 waits for ever. */
static int ack_may_wait(struct emu_qp_entry *qp, uint64_t *deadline)
{
	return may_wait(qp, EMU_WAIT_ACK, qp->retry_cnt, qp->timeout ? 4096ull << qp->timeout : 0, deadline);
}

/* An RNR NAK: rnr_retry retries, min_rnr_timer of the responder apart; 7 for ever. */
static int rnr_may_wait(struct emu_qp_entry *qp, struct emu_qp_entry *peer, uint64_t *deadline)
{
	if (qp->rnr_retry == 0)
		return 0;
	if (qp->rnr_retry == 7)
		return may_wait(qp, EMU_WAIT_RNR, 0, 0, deadline);
	/* The first try was NAKed: the deadline is the end of the last retry's wait. */
	return may_wait(qp, EMU_WAIT_RNR, 0, qp->rnr_retry * (uint64_t)rnr_timer_10us[peer->min_rnr_timer & 31] * 10000ull,
			deadline);
}

static uint32_t packets(const struct emu_qp_entry *qp, const struct emu_swqe *w, uint64_t total)
{
	uint64_t mtu = 128ull << (qp->path_mtu >= IBV_MTU_256 && qp->path_mtu <= IBV_MTU_4096 ? qp->path_mtu : 3);
	uint64_t n = (total + mtu - 1) / mtu;

	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	return n ? (uint32_t)n : 1;
}

/* ---- carrying it out --------------------------------------------------------------------- */

static int rq_empty(struct emu_qp_entry *peer)
{
	return atomic_load_explicit(&peer->rq.cons, memory_order_relaxed) ==
	       atomic_load_explicit(&peer->rq.prod, memory_order_acquire);
}

static enum ibv_wc_status exec_send(struct exec *x, struct emu_qp_entry *peer)
{
	const struct emu_rwqe *r = emu_wqe(x->sh, &peer->rq, atomic_load(&peer->rq.cons));
	uint64_t room;
	uint32_t nrecv;
	/* Bounded by the ring's stride whatever a process wrote there: the engine never reads past a WQE. */
	uint32_t n = r->num_sge <= peer->rq.max_sge ? r->num_sge : peer->rq.max_sge;

	if (check_sges(x, r->sge, n, peer->pd, IBV_ACCESS_LOCAL_WRITE, x->recv, &nrecv, &room) != KEY_OK) {
		emu_complete_recv(x->sh, peer, r, IBV_WC_LOC_PROT_ERR, IBV_WC_RECV, 0, x->w, x->qp->qp_num);
		return IBV_WC_REM_OP_ERR;
	}
	if (room < x->total) {
		emu_complete_recv(x->sh, peer, r, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, 0, x->w, x->qp->qp_num);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	copy_segs(x->recv, nrecv, x->local, x->nlocal);
	emu_complete_recv(x->sh, peer, r, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)x->total, x->w, x->qp->qp_num);
	return IBV_WC_SUCCESS;
}

static enum ibv_wc_status exec_rdma(struct exec *x, struct emu_qp_entry *peer, uint32_t access)
{
	const struct emu_swqe *w = x->w;
	struct emu_seg remote[EMU_MR_EXTENTS];
	uint32_t nremote = 0;

	if (!(peer->qp_access_flags & access)) {
		emu_to_error(peer);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	if (check_key(x, w->rkey, peer->pd, w->remote_addr, x->total, access, remote, &nremote) != KEY_OK) {
		emu_to_error(peer);
		return IBV_WC_REM_ACCESS_ERR;
	}
	if (w->opcode == IBV_WR_RDMA_READ)
		copy_segs(x->local, x->nlocal, remote, nremote);
	else
		copy_segs(remote, nremote, x->local, x->nlocal);
	if (w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		emu_complete_recv(x->sh, peer, emu_wqe(x->sh, &peer->rq, atomic_load(&peer->rq.cons)),
				  IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, (uint32_t)x->total, w, x->qp->qp_num);
	return IBV_WC_SUCCESS;
}

static enum ibv_wc_status exec_atomic(struct exec *x, struct emu_qp_entry *peer)
{
	const struct emu_swqe *w = x->w;
	struct emu_seg target[1];
	uint32_t ntarget = 0;
	uint64_t old;

	/* post_send took one 8-byte SGE; a ring rewritten since is the requester's own fault. */
	if (x->nlocal != 1 || x->local[0].len != 8)
		return IBV_WC_LOC_QP_OP_ERR;
	if (!(peer->qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) || (w->remote_addr & 7)) {
		emu_to_error(peer);
		return IBV_WC_REM_INV_REQ_ERR;
	}
	/* 8 aligned bytes never cross a page, so never an extent: one piece. */
	if (check_key(x, w->rkey, peer->pd, w->remote_addr, 8, IBV_ACCESS_REMOTE_ATOMIC, target, &ntarget) !=
		    KEY_OK ||
	    ntarget != 1) {
		emu_to_error(peer);
		return IBV_WC_REM_ACCESS_ERR;
	}
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP) {
		old = w->compare_add;
		__atomic_compare_exchange_n((uint64_t *)target[0].va, &old, w->swap, 0, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
	} else {
		old = __atomic_fetch_add((uint64_t *)target[0].va, w->compare_add, __ATOMIC_SEQ_CST);
	}
	memcpy(x->local[0].va, &old, sizeof(old));
	return IBV_WC_SUCCESS;
}

static int is_read_or_atomic(uint32_t op)
{
	return op == IBV_WR_RDMA_READ || op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

/* Carries out a request that reached peer with the expected PSN. */
static enum ibv_wc_status carry_out(struct exec *x, struct emu_qp_entry *peer)
{
	enum ibv_wc_status status;

	switch (x->w->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		status = exec_send(x, peer);
		if (status != IBV_WC_SUCCESS)
			emu_to_error(peer);
		return status;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return exec_rdma(x, peer, IBV_ACCESS_REMOTE_WRITE);
	case IBV_WR_RDMA_READ:
		return exec_rdma(x, peer, IBV_ACCESS_REMOTE_READ);
	default:
		x->total = 8;
		return exec_atomic(x, peer);
	}
}

enum emu_exec_result emu_execute(struct emu_device *d, struct emu_qp_entry *qp, uint64_t *deadline)
{
	struct emu_shared *sh = d->sh;
	struct exec x;
	const struct emu_swqe *w = emu_wqe(sh, &qp->sq, atomic_load_explicit(&qp->sq.cons, memory_order_relaxed));
	struct emu_qp_entry *peer;
	enum ibv_wc_status status;
	uint32_t need = 0, n = w->num_sge <= qp->sq.max_sge ? w->num_sge : qp->sq.max_sge, npkts, diff;
	int needs_recv = w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM ||
			 w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	x.d = d;
	x.sh = sh;
	x.qp = qp;
	x.w = w;
	x.holds.n = 0;
	x.peer_held = 0;
	if (is_read_or_atomic(w->opcode))
		need = IBV_ACCESS_LOCAL_WRITE;
	if (check_sges(&x, w->sge, n, qp->pd, need, x.local, &x.nlocal, &x.total) != KEY_OK) {
		status = IBV_WC_LOC_PROT_ERR;
		goto done;
	}
	if (x.total > EMU_MAX_MSG_SZ) {
		status = IBV_WC_LOC_LEN_ERR;
		goto done;
	}
	if (is_read_or_atomic(w->opcode) && qp->max_rd_atomic == 0) {
		status = IBV_WC_LOC_QP_OP_ERR;
		goto done;
	}
	peer = reach_peer(&x);
	if (!peer) {
		if (ack_may_wait(qp, deadline))
			goto wait;
		status = IBV_WC_RETRY_EXC_ERR;
		goto done;
	}
	npkts = packets(qp, w, x.total);
	diff = (qp->sq_psn - peer->rq_psn) & PSN_MASK;
	if (diff != 0 && diff < PSN_MASK / 2) {
		/* Ahead of the responder: NAKed, retried, NAKed again; neither side moves. */
		status = IBV_WC_RETRY_EXC_ERR;
		goto done;
	}
	if (diff != 0 && w->opcode != IBV_WR_RDMA_READ) {
		/* A duplicate: acknowledged (SEND, WRITE) without being carried out, or never answered (atomic). */
		status = is_read_or_atomic(w->opcode) ? IBV_WC_RETRY_EXC_ERR : IBV_WC_SUCCESS;
		if (status == IBV_WC_SUCCESS) {
			qp->sq_psn = (qp->sq_psn + npkts) & PSN_MASK;
			x.total = 0;
		}
		goto done;
	}
	if (is_read_or_atomic(w->opcode) && peer->max_dest_rd_atomic == 0) {
		emu_to_error(peer);
		status = IBV_WC_REM_INV_REQ_ERR;
		goto done;
	}
	if (needs_recv && rq_empty(peer)) {
		if (rnr_may_wait(qp, peer, deadline))
			goto wait;
		status = IBV_WC_RNR_RETRY_EXC_ERR;
		goto done;
	}
	qp->wait = EMU_WAIT_NONE;
	status = carry_out(&x, peer);
	if (status == IBV_WC_SUCCESS) {
		qp->sq_psn = (qp->sq_psn + npkts) & PSN_MASK;
		/* A duplicate READ is read again but is not new to the responder. */
		if (diff == 0)
			peer->rq_psn = (peer->rq_psn + npkts) & PSN_MASK;
	}
done:
	/* The copies are over: dereg and destroy may go on. */
	release_mrs(sh, &x.holds);
	if (x.peer_held)
		emu_qp_release(sh, x.peer_index);
	qp->wait = EMU_WAIT_NONE;
	emu_complete_send(sh, qp, w, status, status == IBV_WC_SUCCESS ? (uint32_t)x.total : 0);
	return EMU_EXEC_DONE;
wait:
	release_mrs(sh, &x.holds);
	if (x.peer_held)
		emu_qp_release(sh, x.peer_index);
	return EMU_EXEC_WAIT;
}
