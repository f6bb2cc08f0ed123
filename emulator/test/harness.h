/*
 * harness.h - the emulator tests' assertions and verbs helpers.
 *
 * A failed CHECK prints file:line, the condition and a message, and exits 1;
 * EmulatorTest (JUnit) runs one case per process and shows this output.
 */
#ifndef MRDEMU_HARNESS_H
#define MRDEMU_HARNESS_H

#define _GNU_SOURCE
#include <infiniband/verbs.h>

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../src/mrdemu.h"

#define CHECK(cond, ...)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                      \
			fputc('\n', stderr);                                               \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

#define CHECK_EQ(actual, expected, what)                                                           \
	do {                                                                                       \
		long long a_ = (long long)(actual), e_ = (long long)(expected);                    \
		CHECK(a_ == e_, "%s: expected %lld (0x%llx), got %lld (0x%llx)", what, e_,        \
		      (unsigned long long)e_, a_, (unsigned long long)a_);                         \
	} while (0)

static inline const char *status_name(int s)
{
	static const char *names[] = {
		"SUCCESS", "LOC_LEN_ERR", "LOC_QP_OP_ERR", "LOC_EEC_OP_ERR", "LOC_PROT_ERR", "WR_FLUSH_ERR",
		"MW_BIND_ERR", "BAD_RESP_ERR", "LOC_ACCESS_ERR", "REM_INV_REQ_ERR", "REM_ACCESS_ERR",
		"REM_OP_ERR", "RETRY_EXC_ERR", "RNR_RETRY_EXC_ERR",
	};
	return s >= 0 && s < (int)(sizeof(names) / sizeof(names[0])) ? names[s] : "?";
}

/* wc is evaluated once: it is often poll_one(cq), and a second poll would wait for a completion that never comes. */
#define CHECK_STATUS(wc, expected)                                                                \
	do {                                                                                       \
		struct ibv_wc w_ = (wc);                                                           \
		CHECK(w_.status == (expected), "wr_id %" PRIu64 ": expected status %s, got %s",    \
		      (uint64_t)w_.wr_id, status_name(expected), status_name(w_.status));          \
	} while (0)

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Memory every process forked afterwards sees at the same address, as mrd's shared memory. */
static inline void *shared_memory(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	CHECK(p != MAP_FAILED, "mmap %zu: %s", len, strerror(errno));
	return p;
}

static inline struct ibv_context *open_device(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;

	CHECK(list && n >= 1, "no device (n=%d)", n);
	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "ibv_open_device: %s", strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

static inline struct ibv_pd *alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	CHECK(pd, "ibv_alloc_pd: %s", strerror(errno));
	return pd;
}

static inline struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	struct ibv_mr *mr = ibv_reg_mr(pd, addr, len, access);

	CHECK(mr, "ibv_reg_mr(%p, %zu, 0x%x): %s", addr, len, access, strerror(errno));
	return mr;
}

static inline struct ibv_cq *create_cq(struct ibv_context *ctx, int cqe)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);

	CHECK(cq, "ibv_create_cq(%d): %s", cqe, strerror(errno));
	return cq;
}

static inline struct ibv_qp *create_qp_caps(struct ibv_pd *pd, struct ibv_cq *scq, struct ibv_cq *rcq,
					    uint32_t send_wr, uint32_t recv_wr, uint32_t sge, int sig_all)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp *qp;

	memset(&init, 0, sizeof(init));
	init.send_cq = scq;
	init.recv_cq = rcq;
	init.qp_type = IBV_QPT_RC;
	init.sq_sig_all = sig_all;
	init.cap.max_send_wr = send_wr;
	init.cap.max_recv_wr = recv_wr;
	init.cap.max_send_sge = sge;
	init.cap.max_recv_sge = sge;
	qp = ibv_create_qp(pd, &init);
	CHECK(qp, "ibv_create_qp: %s", strerror(errno));
	return qp;
}

static inline struct ibv_qp *create_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	return create_qp_caps(pd, cq, cq, 64, 64, 4, 0);
}

#define ALL_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* RESET -> INIT -> RTR -> RTS with the attributes an RC QP needs. */
static inline void connect_qp_opts(struct ibv_qp *qp, uint32_t dest_qpn, unsigned int access, int rnr_retry,
				   int min_rnr_timer)
{
	struct ibv_qp_attr a;
	struct ibv_port_attr port;
	int rc;

	/* A loopback: the destination is this device's own port (each emulated device has its own LID). */
	rc = ibv_query_port(qp->context, 1, &port);
	CHECK(rc == 0, "ibv_query_port: %s", strerror(rc));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = 1;
	a.qp_access_flags = access;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	CHECK(rc == 0, "to INIT: %s", strerror(rc));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dest_qpn;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = (uint8_t)min_rnr_timer;
	a.ah_attr.dlid = port.lid;
	a.ah_attr.port_num = 1;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					   IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	CHECK(rc == 0, "to RTR: %s", strerror(rc));

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = (uint8_t)rnr_retry;
	a.sq_psn = 0;
	a.max_rd_atomic = 1;
	rc = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	CHECK(rc == 0, "to RTS: %s", strerror(rc));
}

static inline void connect_qp(struct ibv_qp *qp, uint32_t dest_qpn)
{
	connect_qp_opts(qp, dest_qpn, ALL_REMOTE, 7, 1);
}

static inline enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;
	int rc = ibv_query_qp(qp, &a, IBV_QP_STATE, &init);

	CHECK(rc == 0, "ibv_query_qp: %s", strerror(rc));
	return a.qp_state;
}

/* Waits (10 s at most) for one completion. */
static inline struct ibv_wc poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	uint64_t deadline = now_ms() + 10000;

	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);

		CHECK(n >= 0, "ibv_poll_cq: %d", n);
		if (n == 1)
			return wc;
		CHECK(now_ms() < deadline, "no completion within 10 s");
		sched_yield();
	}
}

static inline int post_send_op(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
			       int num_sge, uint64_t remote_addr, uint32_t rkey, unsigned int flags)
{
	struct ibv_send_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = sge;
	wr.num_sge = num_sge;
	wr.opcode = op;
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;
	rc = ibv_post_send(qp, &wr, &bad);
	CHECK(rc == 0 ? bad == NULL : bad == &wr, "bad_wr %p for rc %d", (void *)bad, rc);
	return rc;
}

static inline void post_send_ok(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sge,
				int num_sge, uint64_t remote_addr, uint32_t rkey)
{
	int rc = post_send_op(qp, wr_id, op, sge, num_sge, remote_addr, rkey, IBV_SEND_SIGNALED);

	CHECK(rc == 0, "ibv_post_send: %s", strerror(rc));
}

static inline int post_recv_sges(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int num_sge)
{
	struct ibv_recv_wr wr, *bad = NULL;
	int rc;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = sge;
	wr.num_sge = num_sge;
	rc = ibv_post_recv(qp, &wr, &bad);
	CHECK(rc == 0 ? bad == NULL : bad == &wr, "bad_wr %p for rc %d", (void *)bad, rc);
	return rc;
}

static inline void post_recv_ok(struct ibv_qp *qp, uint64_t wr_id, struct ibv_sge *sge, int num_sge)
{
	int rc = post_recv_sges(qp, wr_id, sge, num_sge);

	CHECK(rc == 0, "ibv_post_recv: %s", strerror(rc));
}

static inline struct ibv_sge sge_of(void *addr, uint32_t len, struct ibv_mr *mr)
{
	struct ibv_sge s = { .addr = (uintptr_t)addr, .length = len, .lkey = mr->lkey };

	return s;
}

static inline void check_live(struct ibv_context *ctx, uint32_t pds, uint32_t mrs, uint32_t cqs, uint32_t qps)
{
	uint32_t live[4];

	CHECK_EQ(mrdemu_live_objects(ctx, live), 0, "mrdemu_live_objects");
	CHECK(live[0] == pds && live[1] == mrs && live[2] == cqs && live[3] == qps,
	      "live PDs/MRs/CQs/QPs: expected %u/%u/%u/%u, got %u/%u/%u/%u", pds, mrs, cqs, qps, live[0], live[1],
	      live[2], live[3]);
}

/* Whether every byte of [p, p + len) is b. */
static inline int all_bytes(const void *p, size_t len, unsigned char b)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < len; i++)
		if (c[i] != b)
			return 0;
	return 1;
}

/* ---- running cases ------------------------------------------------------------------- */

struct test_case {
	const char *name;
	void (*run)(void);
};

/* A u32 over a pipe or socket, between the processes of a case. */
static inline void write_u32(int fd, uint32_t v)
{
	CHECK(write(fd, &v, sizeof(v)) == sizeof(v), "pipe write");
}

static inline uint32_t read_u32(int fd)
{
	uint32_t v;

	CHECK(read(fd, &v, sizeof(v)) == sizeof(v), "pipe read");
	return v;
}

#define CASE(f) { #f, f }

/* --list prints the cases; names run those; no argument runs them all. */
static inline int run_cases(const struct test_case *cases, size_t n, int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 2 && strcmp(argv[1], "--list") == 0) {
		for (size_t i = 0; i < n; i++)
			printf("%s\n", cases[i].name);
		return 0;
	}
	for (int a = 1; a < argc; a++) {
		size_t i;

		for (i = 0; i < n && strcmp(cases[i].name, argv[a]) != 0; i++)
			;
		if (i == n) {
			fprintf(stderr, "no test case %s (--list shows them)\n", argv[a]);
			return 2;
		}
		cases[i].run();
		printf("%s: passed\n", argv[a]);
	}
	if (argc == 1) {
		for (size_t i = 0; i < n; i++) {
			cases[i].run();
			printf("%s: passed\n", cases[i].name);
		}
	}
	return 0;
}

#endif
