/*
 * mrdemu_test.c - the emulated device's tests, compiled against verbs.h and
 * linked with libmrdemu.so, so that every call goes through the same inline
 * functions and exported names a verbs program (or mrd's FFM binding) uses.
 *
 *   mrdemu_test --list      the case names
 *   mrdemu_test NAME        runs one case; exit 0 when it passes
 */
#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB 1024u
#define MIB (1024u * 1024u)

/* Two connected RC QPs on one device, each with its own CQ, in one PD. */
struct pair {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *a, *b;
};

static struct pair pair_on(struct ibv_context *ctx, struct ibv_pd *pd, unsigned int b_access)
{
	struct pair p = { .ctx = ctx, .pd = pd };

	p.cqa = create_cq(ctx, 256);
	p.cqb = create_cq(ctx, 256);
	p.a = create_qp(pd, p.cqa);
	p.b = create_qp(pd, p.cqb);
	connect_qp(p.a, p.b->qp_num);
	connect_qp_opts(p.b, p.a->qp_num, b_access, 7, 1);
	return p;
}

static void pair_destroy(struct pair *p)
{
	CHECK_EQ(ibv_destroy_qp(p->a), 0, "destroy qp a");
	CHECK_EQ(ibv_destroy_qp(p->b), 0, "destroy qp b");
	CHECK_EQ(ibv_destroy_cq(p->cqa), 0, "destroy cq a");
	CHECK_EQ(ibv_destroy_cq(p->cqb), 0, "destroy cq b");
}

/* ---- the happy path ------------------------------------------------------------------ */

static void send_write_read_move_the_bytes_and_complete(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	char *a = shared_memory(64 * KIB), *b = shared_memory(64 * KIB);
	struct ibv_mr *ma = reg(pd, a, 64 * KIB, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct ibv_mr *mb = reg(pd, b, 64 * KIB, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct ibv_sge recv[2] = { sge_of(b, 10, mb), sge_of(b + 100, 100, mb) };
	struct ibv_sge send[3] = { sge_of(a, 5, ma), sge_of(a + 50, 5, ma), sge_of(a + 200, 20, ma) };
	struct ibv_sge local;
	struct ibv_wc wc;

	memset(a, 0, 64 * KIB);
	memset(b, 0, 64 * KIB);
	memcpy(a, "hello", 5);
	memcpy(a + 50, "world", 5);
	memcpy(a + 200, "0123456789abcdefghij", 20);

	/* SEND gathers three SGEs and scatters into the two of the posted receive. */
	post_recv_ok(p.b, 77, recv, 2);
	post_send_ok(p.a, 1, IBV_WR_SEND, send, 3, 0, 0);
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 1, "send wr_id");
	CHECK_EQ(wc.opcode, IBV_WC_SEND, "send opcode");
	CHECK_EQ(wc.qp_num, p.a->qp_num, "send qp_num");
	wc = poll_one(p.cqb);
	CHECK_STATUS(wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 77, "recv wr_id");
	CHECK_EQ(wc.opcode, IBV_WC_RECV, "recv opcode");
	CHECK_EQ(wc.byte_len, 30, "recv byte_len");
	CHECK_EQ(wc.qp_num, p.b->qp_num, "recv qp_num");
	CHECK_EQ(wc.src_qp, p.a->qp_num, "recv src_qp");
	CHECK(memcmp(b, "helloworld", 10) == 0, "first receive SGE: %.10s", b);
	CHECK(memcmp(b + 100, "0123456789abcdefghij", 20) == 0, "second receive SGE: %.20s", b + 100);

	/* RDMA WRITE copies the local SGEs to remote_addr, contiguously. */
	post_send_ok(p.a, 2, IBV_WR_RDMA_WRITE, send, 2, (uintptr_t)(b + 1000), mb->rkey);
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_WRITE, "write opcode");
	CHECK_EQ(wc.byte_len, 10, "write byte_len");
	CHECK(memcmp(b + 1000, "helloworld", 10) == 0, "written: %.10s", b + 1000);

	/* RDMA READ copies from remote_addr into the local SGE. */
	memcpy(b + 3000, "read me", 7);
	local = sge_of(a + 4000, 7, ma);
	post_send_ok(p.a, 3, IBV_WR_RDMA_READ, &local, 1, (uintptr_t)(b + 3000), mb->rkey);
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RDMA_READ, "read opcode");
	CHECK_EQ(wc.byte_len, 7, "read byte_len");
	CHECK(memcmp(a + 4000, "read me", 7) == 0, "read: %.7s", a + 4000);

	/* WRITE with immediate consumes a receive at the target. */
	post_recv_ok(p.b, 78, NULL, 0);
	{
		struct ibv_send_wr wr, *bad;

		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 4;
		wr.sg_list = send;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.imm_data = htonl(0xabcd);
		wr.wr.rdma.remote_addr = (uintptr_t)(b + 5000);
		wr.wr.rdma.rkey = mb->rkey;
		CHECK_EQ(ibv_post_send(p.a, &wr, &bad), 0, "post write with imm");
	}
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	wc = poll_one(p.cqb);
	CHECK_STATUS(wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM, "write-with-imm receive opcode");
	CHECK(wc.wc_flags & IBV_WC_WITH_IMM, "IBV_WC_WITH_IMM");
	CHECK_EQ(ntohl(wc.imm_data), 0xabcd, "imm_data");
	CHECK_EQ(wc.byte_len, 5, "write-with-imm byte_len");
	CHECK(memcmp(b + 5000, "hello", 5) == 0, "written with imm: %.5s", b + 5000);

	CHECK_EQ(ibv_dereg_mr(ma), 0, "dereg a");
	CHECK_EQ(ibv_dereg_mr(mb), 0, "dereg b");
	pair_destroy(&p);
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "dealloc pd");
	check_live(ctx, 0, 0, 0, 0);
	CHECK_EQ(ibv_close_device(ctx), 0, "close");
}

static void atomics_fetch_add_and_compare_swap(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	uint64_t *target = shared_memory(4096), *result = shared_memory(4096);
	struct ibv_mr *mt = reg(pd, target, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	struct ibv_mr *mr = reg(pd, result, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge s = sge_of(result, 8, mr);
	struct ibv_send_wr wr, *bad;

	target[0] = 40;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1;
	wr.sg_list = &s;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = (uintptr_t)target;
	wr.wr.atomic.rkey = mt->rkey;
	wr.wr.atomic.compare_add = 2;
	CHECK_EQ(ibv_post_send(p.a, &wr, &bad), 0, "post fetch-add");
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	CHECK_EQ(target[0], 42, "after fetch-add");
	CHECK_EQ(result[0], 40, "fetched");

	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 42;
	wr.wr.atomic.swap = 7;
	CHECK_EQ(ibv_post_send(p.a, &wr, &bad), 0, "post compare-swap");
	{
		struct ibv_wc wc = poll_one(p.cqa);

		CHECK_STATUS(wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.opcode, IBV_WC_COMP_SWAP, "opcode");
	}
	CHECK_EQ(target[0], 7, "after compare-swap");
	CHECK_EQ(result[0], 42, "compared");
	ibv_close_device(ctx);
}

static void query_device_and_port_report_an_active_hca(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_device_attr attr;
	struct ibv_device_attr_ex ex;
	struct ibv_port_attr port;
	struct _compat_ibv_port_attr *compat;
	unsigned char raw[sizeof(struct ibv_port_attr) + 16];

	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	CHECK(attr.max_mr_size >= (1ull << 32), "max_mr_size %" PRIu64, attr.max_mr_size);
	CHECK(attr.max_qp_wr >= 1024 && attr.max_sge >= 4 && attr.max_cqe >= 4096, "limits");
	CHECK_EQ(attr.phys_port_cnt, 1, "ports");
	/* The inline ibv_query_device_ex goes through the verbs_context. */
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ex), 0, "ibv_query_device_ex");
	CHECK_EQ(ex.orig_attr.max_qp_wr, attr.max_qp_wr, "max_qp_wr via _ex");
	/* The macro ibv_query_port is the inline ___ibv_query_port, which calls verbs_context.query_port. */
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "ibv_query_port");
	CHECK_EQ(port.state, IBV_PORT_ACTIVE, "port state");
	CHECK(port.lid != 0, "lid");
	CHECK_EQ(port.link_layer, IBV_LINK_LAYER_INFINIBAND, "link layer");
	CHECK(ibv_query_port(ctx, 2, &port) != 0, "port 2 does not exist");
	/* The exported symbol, as an FFM binding calls it, writes the compat struct and nothing past it. */
	memset(raw, 0xee, sizeof(raw));
	compat = (struct _compat_ibv_port_attr *)raw;
	CHECK_EQ((ibv_query_port)(ctx, 1, compat), 0, "exported ibv_query_port");
	CHECK_EQ(((struct ibv_port_attr *)raw)->state, IBV_PORT_ACTIVE, "compat state");
	CHECK(all_bytes(raw + offsetof(struct ibv_port_attr, port_cap_flags2),
			sizeof(raw) - offsetof(struct ibv_port_attr, port_cap_flags2), 0xee),
	      "wrote past struct _compat_ibv_port_attr");
	CHECK(strcmp(ibv_get_device_name(ctx->device), "mrdemu0") == 0, "name %s", ibv_get_device_name(ctx->device));
	ibv_close_device(ctx);
}

/* ---- keys ------------------------------------------------------------------------------ */

static void keys_are_mlx5_mkeys_and_a_stale_key_never_matches(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	char *a = shared_memory(4096), *b = shared_memory(4096);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = reg(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	uint32_t stale = mb->rkey, fresh;
	struct pair p;
	struct ibv_sge s;
	struct ibv_wc wc;

	/* As mlx5: the rkey is the key, usable only with remote access (an_mr_without_remote_access_...). */
	CHECK_EQ(ma->rkey, ma->lkey, "rkey of an MR without remote access");
	CHECK_EQ(mb->rkey, mb->lkey, "rkey of an MR with remote access");
	CHECK((ma->lkey & 0xff) != 0, "variant never 0: 0x%x", ma->lkey);
	CHECK(ma->lkey >> 8 != mb->lkey >> 8, "two MRs, two indexes");
	CHECK_EQ(mb->handle, mb->lkey >> 8, "handle is the index");
	/* Re-register the same index until it comes back (freed indexes are reused after EMU_REUSE_DISTANCE). */
	CHECK_EQ(ibv_dereg_mr(mb), 0, "dereg");
	mb = NULL;
	for (int i = 0; i < 1000; i++) {
		struct ibv_mr *m = reg(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

		if (m->lkey >> 8 == stale >> 8) {
			mb = m;
			break;
		}
		CHECK_EQ(ibv_dereg_mr(m), 0, "dereg");
	}
	CHECK(mb, "index of key 0x%x never reused", stale);
	fresh = mb->rkey;
	CHECK(fresh != stale, "same index, new variant: 0x%x vs 0x%x", fresh, stale);

	/* The stale rkey is refused at the target and no byte moves; the fresh one works. */
	p = pair_on(ctx, pd, ALL_REMOTE);
	memset(a, 'x', 4096);
	memset(b, 0, 4096);
	s = sge_of(a, 64, ma);
	post_send_ok(p.a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)b, stale);
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_REM_ACCESS_ERR);
	CHECK(all_bytes(b, 4096, 0), "a refused write moved bytes");
	pair_destroy(&p);
	p = pair_on(ctx, pd, ALL_REMOTE);
	post_send_ok(p.a, 2, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)b, fresh);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	CHECK(all_bytes(b, 64, 'x'), "the write with the live key");
	pair_destroy(&p);

	/* A stale lkey is refused locally. */
	p = pair_on(ctx, pd, ALL_REMOTE);
	s = sge_of(b, 64, mb);
	s.lkey = stale;
	post_send_ok(p.a, 3, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)a, fresh);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_LOC_PROT_ERR);
	ibv_close_device(ctx);
}

struct lkey_case {
	const char *what;
	enum ibv_wr_opcode op;
	int bad;	/* 0 other PD, 1 range past the MR, 2 no LOCAL_WRITE for a READ, 3 garbage key */
};

static void a_bad_lkey_range_or_access_is_a_local_protection_error(void)
{
	static const struct lkey_case cases[] = {
		{ "lkey of another PD", IBV_WR_RDMA_WRITE, 0 },
		{ "SGE past the end of the MR", IBV_WR_SEND, 1 },
		{ "READ into an MR without LOCAL_WRITE", IBV_WR_RDMA_READ, 2 },
		{ "a key no MR has", IBV_WR_RDMA_WRITE, 3 },
	};
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx), *other = alloc_pd(ctx);
	char *a = shared_memory(8192), *b = shared_memory(8192);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *ro = reg(pd, a + 4096, 4096, 0);
	struct ibv_mr *foreign = reg(other, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = reg(pd, b, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct lkey_case *c = &cases[i];
		struct pair p = pair_on(ctx, pd, ALL_REMOTE);
		struct ibv_sge s = sge_of(a, 64, ma), rs = sge_of(b, 8192, mb);
		struct ibv_wc wc;

		fprintf(stderr, "case: %s\n", c->what);
		memset(a, 'a', 8192);
		memset(b, 'b', 8192);
		if (c->bad == 0)
			s.lkey = foreign->lkey;
		if (c->bad == 1)
			s.length = 4097;
		if (c->bad == 2)
			s = sge_of(a + 4096, 64, ro);
		if (c->bad == 3)
			s.lkey = 0x00fffe42;
		if (c->op == IBV_WR_SEND)
			post_recv_ok(p.b, 9, &rs, 1);
		post_send_ok(p.a, 1, c->op, &s, 1, (uintptr_t)b, mb->rkey);
		wc = poll_one(p.cqa);
		CHECK_STATUS(wc, IBV_WC_LOC_PROT_ERR);
		CHECK(all_bytes(a, 8192, 'a') && all_bytes(b, 8192, 'b'), "%s moved bytes", c->what);
		CHECK_EQ(qp_state(p.a), IBV_QPS_ERR, "requester in the error state");
		CHECK_EQ(qp_state(p.b), IBV_QPS_RTS, "a local error leaves the responder alone");
		pair_destroy(&p);
	}
	ibv_close_device(ctx);
}

struct rkey_case {
	const char *what;
	enum ibv_wr_opcode op;
	int bad;	/* 0 MR lacks the access, 1 range past the MR, 2 MR of another PD, 3 QP lacks the access */
	enum ibv_wc_status expected;
};

static void a_bad_rkey_range_or_access_at_the_target_is_refused(void)
{
	static const struct rkey_case cases[] = {
		{ "WRITE with an rkey lacking REMOTE_WRITE", IBV_WR_RDMA_WRITE, 0, IBV_WC_REM_ACCESS_ERR },
		{ "READ with an rkey lacking REMOTE_READ", IBV_WR_RDMA_READ, 0, IBV_WC_REM_ACCESS_ERR },
		{ "WRITE past the end of the remote MR", IBV_WR_RDMA_WRITE, 1, IBV_WC_REM_ACCESS_ERR },
		{ "READ past the end of the remote MR", IBV_WR_RDMA_READ, 1, IBV_WC_REM_ACCESS_ERR },
		{ "WRITE with an rkey of another PD than the target QP's", IBV_WR_RDMA_WRITE, 2, IBV_WC_REM_ACCESS_ERR },
		{ "WRITE to a QP without REMOTE_WRITE", IBV_WR_RDMA_WRITE, 3, IBV_WC_REM_INV_REQ_ERR },
		{ "READ from a QP without REMOTE_READ", IBV_WR_RDMA_READ, 3, IBV_WC_REM_INV_REQ_ERR },
	};
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx), *other = alloc_pd(ctx);
	char *a = shared_memory(8192), *b = shared_memory(8192);
	struct ibv_mr *ma = reg(pd, a, 8192, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *read_only = reg(pd, b, 4096, IBV_ACCESS_REMOTE_READ);
	struct ibv_mr *write_only = reg(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_mr *both = reg(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct ibv_mr *foreign = reg(other, b, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rkey_case *c = &cases[i];
		int read = c->op == IBV_WR_RDMA_READ;
		unsigned int qp_access = ALL_REMOTE;
		uint32_t rkey = both->rkey;
		uint64_t remote = (uintptr_t)b;
		struct ibv_sge s = sge_of(a, 64, ma);
		struct pair p;
		struct ibv_wc wc;

		fprintf(stderr, "case: %s\n", c->what);
		if (c->bad == 0)
			rkey = read ? write_only->rkey : read_only->rkey;
		if (c->bad == 1)
			remote = (uintptr_t)b + 4096 - 32;
		if (c->bad == 2)
			rkey = foreign->rkey;
		if (c->bad == 3)
			qp_access = read ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
		p = pair_on(ctx, pd, qp_access);
		memset(a, 'a', 8192);
		memset(b, 'b', 8192);
		post_send_ok(p.a, 1, c->op, &s, 1, remote, rkey);
		wc = poll_one(p.cqa);
		CHECK_STATUS(wc, c->expected);
		CHECK(all_bytes(a, 8192, 'a') && all_bytes(b, 8192, 'b'), "%s moved bytes", c->what);
		CHECK_EQ(qp_state(p.a), IBV_QPS_ERR, "requester in the error state");
		CHECK_EQ(qp_state(p.b), IBV_QPS_ERR, "responder in the error state (NAK)");
		pair_destroy(&p);
	}
	ibv_close_device(ctx);
}

static void a_receive_too_small_fails_both_sides(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	char *a = shared_memory(4096), *b = shared_memory(4096);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = reg(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge s = sge_of(a, 100, ma), r = sge_of(b, 99, mb);
	struct ibv_wc wc;

	memset(a, 'a', 4096);
	memset(b, 'b', 4096);
	post_recv_ok(p.b, 5, &r, 1);
	post_send_ok(p.a, 1, IBV_WR_SEND, &s, 1, 0, 0);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_REM_INV_REQ_ERR);
	wc = poll_one(p.cqb);
	CHECK_STATUS(wc, IBV_WC_LOC_LEN_ERR);
	CHECK_EQ(wc.wr_id, 5, "the receive that was too small");
	CHECK(all_bytes(b, 4096, 'b'), "bytes moved into a receive that was too small");

	/* A receive buffer whose lkey is bad at the responder: its local protection error, our remote one. */
	pair_destroy(&p);
	p = pair_on(ctx, pd, ALL_REMOTE);
	r = sge_of(b, 4096, mb);
	r.lkey ^= 0x10;
	post_recv_ok(p.b, 6, &r, 1);
	post_send_ok(p.a, 2, IBV_WR_SEND, &s, 1, 0, 0);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_REM_OP_ERR);
	CHECK_STATUS(poll_one(p.cqb), IBV_WC_LOC_PROT_ERR);
	CHECK(all_bytes(b, 4096, 'b'), "bytes moved into a receive with a bad lkey");
	ibv_close_device(ctx);
}

/* ---- RNR, error state, flush ----------------------------------------------------------------- */

static void a_send_without_receive_waits_its_rnr_budget(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	char *a = shared_memory(4096), *b = shared_memory(4096);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = reg(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge s = sge_of(a, 16, ma), r = sge_of(b, 16, mb);
	struct ibv_cq *cqa = create_cq(ctx, 16), *cqb = create_cq(ctx, 16);
	struct ibv_qp *qa, *qb;
	struct ibv_wc wc;
	uint64_t start;

	/* rnr_retry 0: the first RNR NAK is final. */
	qa = create_qp(pd, cqa);
	qb = create_qp(pd, cqb);
	connect_qp_opts(qa, qb->qp_num, 0, 0, 1);
	connect_qp_opts(qb, qa->qp_num, 0, 0, 1);
	post_send_ok(qa, 1, IBV_WR_SEND, &s, 1, 0, 0);
	CHECK_STATUS(poll_one(cqa), IBV_WC_RNR_RETRY_EXC_ERR);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);

	/* rnr_retry 7: waits as long as it takes, and goes on when the receive is posted. */
	qa = create_qp(pd, cqa);
	qb = create_qp(pd, cqb);
	connect_qp_opts(qa, qb->qp_num, 0, 7, 1);
	connect_qp_opts(qb, qa->qp_num, 0, 7, 1);
	memcpy(a, "late receive", 12);
	post_send_ok(qa, 2, IBV_WR_SEND, &s, 1, 0, 0);
	CHECK_EQ(ibv_poll_cq(cqa, 1, &wc), 0, "no completion before the receive");
	post_recv_ok(qb, 20, &r, 1);
	CHECK_STATUS(poll_one(cqa), IBV_WC_SUCCESS);
	CHECK_STATUS(poll_one(cqb), IBV_WC_SUCCESS);
	CHECK(memcmp(b, "late receive", 12) == 0, "received %.12s", b);
	ibv_destroy_qp(qa);
	ibv_destroy_qp(qb);

	/* rnr_retry 3 x min_rnr_timer 20 (10.24 ms): fails after about 30 ms, not before. */
	qa = create_qp(pd, cqa);
	qb = create_qp(pd, cqb);
	connect_qp_opts(qa, qb->qp_num, 0, 3, 20);
	connect_qp_opts(qb, qa->qp_num, 0, 3, 20);
	start = now_ms();
	post_send_ok(qa, 3, IBV_WR_SEND, &s, 1, 0, 0);
	CHECK_STATUS(poll_one(cqa), IBV_WC_RNR_RETRY_EXC_ERR);
	CHECK(now_ms() - start >= 30, "RNR retries exhausted after %" PRIu64 " ms", now_ms() - start);
	ibv_close_device(ctx);
}

static void an_error_flushes_every_later_work_request(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	char *a = shared_memory(4096), *b = shared_memory(4096);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mb = reg(pd, b, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_sge s = sge_of(a, 16, ma), bad = s, r = sge_of(b, 16, mb);
	struct ibv_send_wr wrs[4], *badwr;
	struct ibv_wc wc;

	memset(b, 'b', 4096);
	bad.lkey ^= 0x01;
	/* One post of four: the second fails, the two after it are flushed, unsignaled or not. */
	memset(wrs, 0, sizeof(wrs));
	for (int i = 0; i < 4; i++) {
		wrs[i].wr_id = 100 + (uint64_t)i;
		wrs[i].sg_list = i == 1 ? &bad : &s;
		wrs[i].num_sge = 1;
		wrs[i].opcode = IBV_WR_RDMA_WRITE;
		wrs[i].send_flags = i == 2 ? 0 : IBV_SEND_SIGNALED;
		wrs[i].wr.rdma.remote_addr = (uintptr_t)b;
		wrs[i].wr.rdma.rkey = mb->rkey;
		wrs[i].next = i < 3 ? &wrs[i + 1] : NULL;
	}
	memset(a, 'a', 16);
	CHECK_EQ(ibv_post_send(p.a, wrs, &badwr), 0, "post four");
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_SUCCESS);
	CHECK_EQ(wc.wr_id, 100, "in order");
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_LOC_PROT_ERR);
	CHECK_EQ(wc.wr_id, 101, "in order");
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 102, "an unsignaled WR is flushed with a completion");
	wc = poll_one(p.cqa);
	CHECK_STATUS(wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 103, "in order");
	CHECK_EQ(qp_state(p.a), IBV_QPS_ERR, "error state");

	/* Posting to a QP in the error state is accepted and flushed, as a NIC does. */
	post_send_ok(p.a, 104, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)b, mb->rkey);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_WR_FLUSH_ERR);
	CHECK(all_bytes(b + 16, 4096 - 16, 'b'), "bytes moved by a flushed WR");

	/* Receives are flushed when the QP goes to the error state, as ibv_modify_qp(ERR) does. */
	post_recv_ok(p.b, 200, &r, 1);
	post_recv_ok(p.b, 201, &r, 1);
	{
		struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

		CHECK_EQ(ibv_modify_qp(p.b, &attr, IBV_QP_STATE), 0, "to ERR");
	}
	wc = poll_one(p.cqb);
	CHECK_STATUS(wc, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc.wr_id, 200, "flushed receive");
	CHECK_EQ(poll_one(p.cqb).wr_id, 201, "flushed receive");
	ibv_close_device(ctx);
}

static void work_requests_of_one_qp_execute_in_order(void)
{
	enum { N = 2000 };
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 4096);
	struct ibv_qp *qa = create_qp_caps(pd, cq, cq, 4096, 16, 1, 1), *qb = create_qp(pd, cq);
	uint64_t *src = shared_memory(N * 8), *dst = shared_memory(4096);
	struct ibv_mr *ms = reg(pd, src, N * 8, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = reg(pd, dst, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

	connect_qp(qa, qb->qp_num);
	connect_qp(qb, qa->qp_num);
	for (uint64_t i = 0; i < N; i++) {
		struct ibv_sge s = sge_of(&src[i], 8, ms);

		src[i] = i + 1;
		/* sq_sig_all: every WR completes, though posted unsignaled. */
		CHECK_EQ(post_send_op(qa, i, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)dst, md->rkey, 0), 0, "post");
	}
	for (uint64_t i = 0; i < N; i++) {
		struct ibv_wc wc = poll_one(cq);

		CHECK_STATUS(wc, IBV_WC_SUCCESS);
		CHECK_EQ(wc.wr_id, i, "completions in posting order");
	}
	CHECK_EQ(dst[0], N, "the last write is the one that stays");
	ibv_close_device(ctx);
}

/* ---- rings ------------------------------------------------------------------------------ */

static void a_full_ring_is_enomem_until_completions_are_polled(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 64);
	struct ibv_qp *qa = create_qp_caps(pd, cq, cq, 4, 4, 1, 0), *qb = create_qp_caps(pd, cq, cq, 4, 4, 1, 0);
	char *a = shared_memory(4096);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_sge s = sge_of(a, 8, ma), r = sge_of(a + 1024, 8, ma);
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	struct ibv_wc wc;

	CHECK_EQ(ibv_query_qp(qa, &attr, IBV_QP_CAP, &init), 0, "query");
	CHECK_EQ(init.cap.max_send_wr, 4, "send ring as asked");
	CHECK_EQ(init.cap.max_recv_wr, 4, "receive ring as asked");
	/* In RESET nothing can be posted; receives from INIT on. */
	CHECK_EQ(post_recv_sges(qb, 1, &r, 1), EINVAL, "post_recv in RESET");
	connect_qp(qa, qb->qp_num);
	connect_qp(qb, qa->qp_num);
	CHECK_EQ(post_recv_sges(qb, 1, &r, 1), 0, "recv 1");
	CHECK_EQ(post_recv_sges(qb, 2, &r, 1), 0, "recv 2");
	CHECK_EQ(post_recv_sges(qb, 3, &r, 1), 0, "recv 3");
	CHECK_EQ(post_recv_sges(qb, 4, &r, 1), 0, "recv 4");
	CHECK_EQ(post_recv_sges(qb, 5, &r, 1), ENOMEM, "the fifth receive does not fit");

	/*
	 * Three unsignaled WRs and a signaled one fill the send ring; their slots are free again only when that
	 * completion is polled, not when the engine has executed them (as with a NIC's WQE counter in the CQE).
	 */
	memset(a, 0, 64);
	for (int i = 0; i < 4; i++) {
		struct ibv_sge v = sge_of(a + 3000 + i, 1, ma);

		a[3000 + i] = (char)('1' + i);
		CHECK_EQ(post_send_op(qa, 10 + (uint64_t)i, IBV_WR_RDMA_WRITE, &v, 1, (uintptr_t)(a + 16 + i), ma->rkey,
				      i == 3 ? IBV_SEND_SIGNALED : 0),
			 0, "fill the send ring");
	}
	{
		uint64_t deadline = now_ms() + 10000;

		/* The last write has landed: the engine has executed all four. */
		while (__atomic_load_n(&a[19], __ATOMIC_ACQUIRE) != '4')
			CHECK(now_ms() < deadline, "the writes never landed");
	}
	CHECK_EQ(post_send_op(qa, 14, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(a + 2048), ma->rkey, IBV_SEND_SIGNALED),
		 ENOMEM, "a full send ring: executed but not polled");
	wc = poll_one(cq);
	CHECK_EQ(wc.wr_id, 13, "the signaled one");
	CHECK_EQ(post_send_op(qa, 14, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(a + 2048), ma->rkey, IBV_SEND_SIGNALED),
		 0, "room again once its completion was polled");
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);

	/* More SGEs than the QP was created with is EINVAL. */
	{
		struct ibv_sge two[2] = { s, s };

		CHECK_EQ(post_send_op(qa, 15, IBV_WR_SEND, two, 2, 0, 0, IBV_SEND_SIGNALED), EINVAL, "two SGEs > 1");
	}
	ibv_close_device(ctx);
}

static void a_cq_overrun_is_reported_and_errors_the_qp(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cqa = create_cq(ctx, 4), *cqb = create_cq(ctx, 16);
	struct ibv_qp *qa = create_qp_caps(pd, cqa, cqa, 16, 4, 1, 1), *qb = create_qp(pd, cqb);
	char *a = shared_memory(4096);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_sge s = sge_of(a, 8, ma);
	struct ibv_wc wc[8];
	int n = 0, rc;
	uint64_t deadline = now_ms() + 10000;

	CHECK_EQ(cqa->cqe, 4, "CQ as asked");
	connect_qp(qa, qb->qp_num);
	connect_qp(qb, qa->qp_num);
	for (int i = 0; i < 5; i++)
		CHECK_EQ(post_send_op(qa, (uint64_t)i, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(a + 1024), ma->rkey, 0), 0,
			 "post");
	/* Nothing polled until the fifth completion found the CQ full and errored the QP. */
	while (qp_state(qa) != IBV_QPS_ERR)
		CHECK(now_ms() < deadline, "no overrun within 10 s");
	/* The four that fit are delivered, then the overrun. */
	while ((rc = ibv_poll_cq(cqa, 8, wc + n)) >= 0) {
		n += rc;
		CHECK(now_ms() < deadline, "no overrun within 10 s (%d polled)", n);
		sched_yield();
	}
	CHECK_EQ(rc, -EOVERFLOW, "poll_cq after an overrun");
	CHECK_EQ(n, 4, "completions that fit");
	CHECK_EQ(qp_state(qa), IBV_QPS_ERR, "the QP whose completion was lost");
	ibv_close_device(ctx);
}

/* ---- deregistration and DMA ------------------------------------------------------------------ */

static void dereg_returns_only_after_the_dma_on_the_mr_is_over(void)
{
	const size_t len = 64 * MIB;
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	unsigned char *src = shared_memory(len), *dst = shared_memory(len);
	struct ibv_mr *ms = reg(pd, src, len, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *md = reg(pd, dst, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_sge s = sge_of(src, (uint32_t)len, ms);
	unsigned char *first = dst, *last = dst + len - 1;
	struct ibv_wc wc;
	int caught = 0;

	for (int round = 0; round < 50 && !caught; round++) {
		memset(src, 0xa0 + round, len);
		memset(dst, 0, len);
		post_send_ok(p.a, (uint64_t)round, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)dst, md->rkey);
		/* Wait until the copy is under way (its first chunk has landed), then deregister the target. */
		while (__atomic_load_n(first, __ATOMIC_ACQUIRE) == 0)
			;
		if (__atomic_load_n(last, __ATOMIC_ACQUIRE) != 0) {
			/* The copy finished before we got here: nothing proved; try again. */
			CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
			continue;
		}
		CHECK_EQ(ibv_dereg_mr(md), 0, "dereg during the copy");
		/* The copy held the MR: it must be over, every byte in place, before dereg returned. */
		CHECK(*last == 0xa0 + round, "ibv_dereg_mr returned while DMA into the MR was in flight (last byte %u)",
		      *last);
		CHECK(all_bytes(dst, len, (unsigned char)(0xa0 + round)), "incomplete copy after dereg");
		wc = poll_one(p.cqa);
		CHECK_STATUS(wc, IBV_WC_SUCCESS);
		caught = 1;
	}
	CHECK(caught, "never caught the copy in flight in 50 rounds of 64 MiB");
	ibv_close_device(ctx);
}

/* ---- objects and handles --------------------------------------------------------------------- */

static void live_objects_count_and_busy_objects_refuse_destruction(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *a = shared_memory(4096);
	uint32_t live[4];

	check_live(ctx, 0, 0, 0, 0);
	pd = alloc_pd(ctx);
	mr = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	cq = create_cq(ctx, 16);
	qp = create_qp(pd, cq);
	check_live(ctx, 1, 1, 1, 1);
	CHECK_EQ(mrdemu_live_objects(NULL, live), 1, "contexts open in this process");
	CHECK(live[0] == 1 && live[1] == 1 && live[2] == 1 && live[3] == 1, "process-wide counts");
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY, "a PD with an MR and a QP");
	CHECK_EQ(ibv_destroy_cq(cq), EBUSY, "a CQ with a QP");
	CHECK_EQ(ibv_destroy_qp(qp), 0, "destroy qp");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy cq");
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY, "a PD with an MR");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "dealloc");
	check_live(ctx, 0, 0, 0, 0);

	/* By handle, from any context of the device. */
	pd = alloc_pd(ctx);
	cq = create_cq(ctx, 16);
	qp = create_qp(pd, cq);
	CHECK_EQ(mrdemu_destroy_by_handle(ctx, MRDEMU_HANDLE_CQ, cq->handle), EBUSY, "CQ in use");
	CHECK_EQ(mrdemu_destroy_by_handle(ctx, MRDEMU_HANDLE_QP, qp->handle), 0, "QP by handle");
	CHECK_EQ(mrdemu_destroy_by_handle(ctx, MRDEMU_HANDLE_QP, qp->handle), EINVAL, "twice");
	CHECK_EQ(mrdemu_destroy_by_handle(ctx, MRDEMU_HANDLE_CQ, cq->handle), 0, "CQ by handle");
	CHECK_EQ(mrdemu_destroy_by_handle(ctx, 3, 0), EINVAL, "unknown type");
	CHECK_EQ(ibv_destroy_qp(qp), EINVAL, "the struct of a QP destroyed by handle");
	check_live(ctx, 1, 0, 0, 0);
	ibv_close_device(ctx);
	CHECK_EQ(mrdemu_live_objects(NULL, live), 0, "no context left open");
}

static void registration_checks_what_the_kernel_checks(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	char *a = shared_memory(8192);
	char *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	munmap(hole, 4096);
	CHECK(!ibv_reg_mr(pd, hole, 4096, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT, "unmapped: %s", strerror(errno));
	CHECK(!ibv_reg_mr(pd, a, 4096, IBV_ACCESS_REMOTE_WRITE) && errno == EINVAL, "REMOTE_WRITE without LOCAL_WRITE");
	CHECK(!ibv_reg_mr(pd, a, 0, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "zero length");
	CHECK(!ibv_reg_mr(pd, a, 1ull << 41, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "past max_mr_size");
	/* The optional flags go through ibv_reg_mr_iova2, as the macro sends them. */
	{
		unsigned int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING;
		struct ibv_mr *mr = ibv_reg_mr(pd, a, 8192, access);

		CHECK(mr, "relaxed ordering: %s", strerror(errno));
		CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	}
	check_live(ctx, 1, 0, 0, 0);
	ibv_close_device(ctx);
}

static void modify_qp_takes_only_the_transitions_and_attributes_of_rc(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 16);
	struct ibv_qp *qp = create_qp(pd, cq);
	struct ibv_qp_attr a;

	CHECK_EQ(qp_state(qp), IBV_QPS_RESET, "created in RESET");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "RESET to RTR");
	a.qp_state = IBV_QPS_INIT;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT), EINVAL, "INIT without pkey and access");
	a.port_num = 2;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), EINVAL,
		 "port 2");
	a.port_num = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0,
		 "to INIT");
	CHECK_EQ(qp_state(qp), IBV_QPS_INIT, "INIT");
	CHECK_EQ(qp->state, IBV_QPS_INIT, "struct ibv_qp state");
	a.qp_state = IBV_QPS_RTR;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_DEST_QPN), EINVAL, "RTR without path and PSN");
	{
		struct ibv_sge none = { 0 };

		CHECK_EQ(post_send_op(qp, 1, IBV_WR_SEND, &none, 0, 0, 0, 0), EINVAL, "send before RTS");
	}
	connect_qp(create_qp(pd, cq), qp->qp_num);
	a.qp_state = IBV_QPS_RESET;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "back to RESET");
	CHECK_EQ(qp_state(qp), IBV_QPS_RESET, "RESET");
	ibv_close_device(ctx);
}

static void import_pd_validates_its_handle(void)
{
	struct ibv_context *ctx = open_device(), *imported;
	struct ibv_pd *pd = alloc_pd(ctx), *ipd;
	char *a = shared_memory(4096);
	struct ibv_mr *mr;

	imported = ibv_import_device(dup(ctx->cmd_fd));
	CHECK(imported, "import: %s", strerror(errno));
	CHECK(!ibv_import_pd(imported, pd->handle + 1) && errno == EINVAL, "no such PD");
	CHECK(!ibv_import_pd(imported, 100000) && errno == EINVAL, "out of range");
	ipd = ibv_import_pd(imported, pd->handle);
	CHECK(ipd, "import_pd: %s", strerror(errno));
	CHECK_EQ(ipd->handle, pd->handle, "handle");
	mr = reg(ipd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
	check_live(ctx, 1, 1, 0, 0);
	CHECK_EQ(ibv_dealloc_pd(pd), EBUSY, "the MR registered through the import is on the same PD");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	ibv_unimport_pd(ipd);
	check_live(imported, 1, 0, 0, 0);
	CHECK(!ibv_import_device(open("/dev/null", O_RDWR)) && errno == EINVAL, "not a device fd");
	CHECK_EQ(ibv_close_device(imported), 0, "close the import");
	check_live(ctx, 1, 0, 0, 0);
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "dealloc");
	ibv_close_device(ctx);
}

/* ---- processes -------------------------------------------------------------------------------- */

static void wait_child(pid_t pid, const char *what)
{
	int status;

	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s failed (status 0x%x)", what, status);
}

/*
 * A child imports the parent's device by a dup of its fd, creates its own CQ
 * and QP in the imported PD, registers its own MR, and exchanges SEND and
 * RDMA WRITE with the parent's QP; the parent's engine moves every byte. The
 * child then dies without destroying its queues: they stay until destroyed
 * by handle.
 */
static void another_process_imports_the_device_and_posts(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 64);
	struct ibv_qp *qp = create_qp(pd, cq);
	char *pmem = shared_memory(4096), *cmem = shared_memory(4096);
	struct ibv_mr *pmr = reg(pd, pmem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	int to_child[2], to_parent[2];
	uint32_t child_qpn, child_cq, child_qp, child_rkey;
	struct ibv_sge s;
	pid_t pid;

	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipes");
	memset(pmem, 0, 4096);
	memset(cmem, 0, 4096);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		struct ibv_context *ictx = ibv_import_device(dup(ctx->cmd_fd));
		struct ibv_pd *ipd;
		struct ibv_cq *icq;
		struct ibv_qp *iqp;
		struct ibv_mr *cmr;
		struct ibv_sge r, w;
		struct ibv_wc wc;

		CHECK(ictx, "import_device: %s", strerror(errno));
		ipd = ibv_import_pd(ictx, read_u32(to_child[0]));
		CHECK(ipd, "import_pd: %s", strerror(errno));
		icq = create_cq(ictx, 64);
		iqp = create_qp(ipd, icq);
		cmr = reg(ipd, cmem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		connect_qp(iqp, read_u32(to_child[0]));
		write_u32(to_parent[1], iqp->qp_num);
		write_u32(to_parent[1], icq->handle);
		write_u32(to_parent[1], iqp->handle);
		write_u32(to_parent[1], cmr->rkey);
		/* Receive the parent's SEND, then RDMA WRITE into the parent's memory. */
		r = sge_of(cmem, 64, cmr);
		post_recv_ok(iqp, 1, &r, 1);
		write_u32(to_parent[1], 1);
		wc = poll_one(icq);
		CHECK_STATUS(wc, IBV_WC_SUCCESS);
		CHECK(memcmp(cmem, "from the parent", 15) == 0, "child received %.15s", cmem);
		memcpy(cmem + 1024, "from the child", 14);
		w = sge_of(cmem + 1024, 14, cmr);
		post_send_ok(iqp, 2, IBV_WR_RDMA_WRITE, &w, 1, (uintptr_t)pmem, read_u32(to_child[0]));
		CHECK_STATUS(poll_one(icq), IBV_WC_SUCCESS);
		/* The MR this process registered is deregistered here, where it was registered. */
		CHECK_EQ(read_u32(to_child[0]), 2, "go");
		CHECK_EQ(ibv_dereg_mr(cmr), 0, "child dereg");
		write_u32(to_parent[1], 3);
		/* Die holding the CQ and QP. */
		_exit(0);
	}
	write_u32(to_child[1], pd->handle);
	write_u32(to_child[1], qp->qp_num);
	child_qpn = read_u32(to_parent[0]);
	child_cq = read_u32(to_parent[0]);
	child_qp = read_u32(to_parent[0]);
	child_rkey = read_u32(to_parent[0]);
	connect_qp(qp, child_qpn);
	CHECK_EQ(read_u32(to_parent[0]), 1, "child posted its receive");
	memcpy(pmem + 2048, "from the parent", 15);
	s = sge_of(pmem + 2048, 15, pmr);
	post_send_ok(qp, 10, IBV_WR_SEND, &s, 1, 0, 0);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	write_u32(to_child[1], pmr->rkey);
	/* The parent can also write into the child's MR, by the rkey the child passed. */
	post_send_ok(qp, 11, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(cmem + 3000), child_rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	CHECK(memcmp(cmem + 3000, "from the parent", 15) == 0, "written into the child's MR");
	write_u32(to_child[1], 2);
	CHECK_EQ(read_u32(to_parent[0]), 3, "child deregistered");
	wait_child(pid, "child");
	{
		uint64_t deadline = now_ms() + 10000;

		/* The child's write lands before its completion, and the parent sees the same memory. */
		while (memcmp(pmem, "from the child", 14) != 0)
			CHECK(now_ms() < deadline, "child's write never seen: %.14s", pmem);
	}
	/* The dead child's CQ and QP live on; the MR it deregistered does not. */
	check_live(ctx, 1, 1, 2, 2);
	/* Who created each: what a daemon checks before it keeps or destroys a handle a client reported. */
	CHECK_EQ(mrdemu_handle_creator(ctx, MRDEMU_HANDLE_QP, child_qp), pid, "the child created its QP");
	CHECK_EQ(mrdemu_handle_creator(ctx, MRDEMU_HANDLE_CQ, child_cq), pid, "the child created its CQ");
	CHECK_EQ(mrdemu_handle_creator(ctx, MRDEMU_HANDLE_QP, qp->handle), getpid(), "the parent created its QP");
	CHECK_EQ(mrdemu_handle_creator(ctx, MRDEMU_HANDLE_QP, 1000000), -EINVAL, "no QP of a handle past the table");
	CHECK_EQ(mrdemu_destroy_by_handle(ctx, MRDEMU_HANDLE_QP, child_qp), 0, "child's QP by handle");
	CHECK_EQ(mrdemu_destroy_by_handle(ctx, MRDEMU_HANDLE_CQ, child_cq), 0, "child's CQ by handle");
	CHECK_EQ(mrdemu_handle_creator(ctx, MRDEMU_HANDLE_QP, child_qp), -EINVAL, "a destroyed QP has no creator");
	check_live(ctx, 1, 1, 1, 1);
	ibv_close_device(ctx);
}

struct poster {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *src, *dst;
	uint64_t *src_mem, *dst_mem;
	int count;
	int failed;
};

static void *post_many(void *arg)
{
	struct poster *p = arg;

	for (int i = 0; i < p->count; i++) {
		struct ibv_sge s = sge_of(&p->src_mem[i % 64], 8, p->src);
		struct ibv_wc wc;
		uint64_t deadline = now_ms() + 10000;
		int n;

		p->src_mem[i % 64] = (uint64_t)i;
		if (post_send_op(p->qp, (uint64_t)i, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)&p->dst_mem[i % 64],
				 p->dst->rkey, IBV_SEND_SIGNALED) != 0)
			return p->failed = 1, NULL;
		while ((n = ibv_poll_cq(p->cq, 1, &wc)) == 0 && now_ms() < deadline)
			sched_yield();
		if (n != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != (uint64_t)i ||
		    p->dst_mem[i % 64] != (uint64_t)i)
			return p->failed = 1, NULL;
	}
	return NULL;
}

/* Several processes, each with threads, post to their own QPs at once; the engine serves them all. */
static void several_processes_post_at_once(void)
{
	enum { PROCS = 3, THREADS = 2, COUNT = 2000 };
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *sink_cq = create_cq(ctx, 16);
	uint64_t *mem = shared_memory(PROCS * THREADS * 2 * 64 * 8);
	struct ibv_mr *mr = reg(pd, mem, PROCS * THREADS * 2 * 64 * 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	pid_t pids[PROCS];

	for (int p = 0; p < PROCS; p++) {
		pids[p] = fork();
		CHECK(pids[p] >= 0, "fork");
		if (pids[p] == 0) {
			struct ibv_context *ictx = ibv_import_device(dup(ctx->cmd_fd));
			struct ibv_pd *ipd = ictx ? ibv_import_pd(ictx, pd->handle) : NULL;
			struct poster posters[THREADS];
			pthread_t threads[THREADS];

			CHECK(ipd, "import: %s", strerror(errno));
			for (int t = 0; t < THREADS; t++) {
				struct poster *ps = &posters[t];
				uint64_t *base = mem + (size_t)(p * THREADS + t) * 128;
				struct ibv_qp *peer;

				ps->cq = create_cq(ictx, 64);
				ps->qp = create_qp(ipd, ps->cq);
				peer = create_qp(ipd, sink_cq);
				connect_qp(ps->qp, peer->qp_num);
				connect_qp(peer, ps->qp->qp_num);
				ps->src = ps->dst = mr;
				ps->src_mem = base;
				ps->dst_mem = base + 64;
				ps->count = COUNT;
				ps->failed = 0;
				CHECK(pthread_create(&threads[t], NULL, post_many, ps) == 0, "thread");
			}
			for (int t = 0; t < THREADS; t++) {
				pthread_join(threads[t], NULL);
				CHECK(!posters[t].failed, "process %d thread %d: a write did not complete as posted", p, t);
			}
			_exit(0);
		}
	}
	for (int p = 0; p < PROCS; p++)
		wait_child(pids[p], "poster process");
	ibv_close_device(ctx);
}

/* ---- the engine --------------------------------------------------------------------------------- */

/* utime + stime of the thread named name, in clock ticks; -1 if there is none. */
static long thread_cpu_ticks(const char *name, int *count)
{
	DIR *dir = opendir("/proc/self/task");
	struct dirent *d;
	long ticks = -1;

	*count = 0;
	CHECK(dir, "/proc/self/task");
	while ((d = readdir(dir))) {
		char path[320], comm[64] = "", stat[1024];
		FILE *f;
		char *p;
		unsigned long ut, st;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", d->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = 0;
		fclose(f);
		comm[strcspn(comm, "\n")] = 0;
		if (strcmp(comm, name) != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", d->d_name);
		CHECK((f = fopen(path, "r")), "%s", path);
		CHECK(fgets(stat, sizeof(stat), f), "read %s", path);
		fclose(f);
		/* Fields after the ")" of comm: state is 3rd, utime the 14th, stime the 15th. */
		p = strrchr(stat, ')');
		CHECK(p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) == 2,
		      "parse %s", stat);
		ticks = (long)(ut + st);
		(*count)++;
	}
	closedir(dir);
	return ticks;
}

static void an_idle_device_costs_no_cpu(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	char *a = shared_memory(4096);
	struct ibv_mr *ma = reg(pd, a, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	struct ibv_sge s = sge_of(a, 8, ma);
	long before, after, hz = sysconf(_SC_CLK_TCK);
	int engines;

	/* Some work first, so the engine has been through its loop, then a send waiting for a receive forever. */
	for (int i = 0; i < 100; i++) {
		post_send_ok(p.a, (uint64_t)i, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(a + 1024), ma->rkey);
		CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	}
	post_send_ok(p.a, 1000, IBV_WR_SEND, &s, 1, 0, 0);
	before = thread_cpu_ticks("mrdemu-dma", &engines);
	CHECK_EQ(engines, 1, "one DMA engine thread");
	sleep(1);
	after = thread_cpu_ticks("mrdemu-dma", &engines);
	/* One second is hz ticks of CPU for a polling thread; a sleeping one takes none. 5% is generous. */
	CHECK(after - before <= hz / 20, "the idle DMA engine used %ld of %ld ticks in 1 s", after - before, hz);
	ibv_close_device(ctx);
	thread_cpu_ticks("mrdemu-dma", &engines);
	CHECK_EQ(engines, 0, "ibv_close_device joined the engine");
}

/* The opener's close is one holder's: the context, its objects and its traffic go on for the importer. */
static void closing_the_opener_leaves_the_context_to_importers(void)
{
	struct ibv_context *ctx = open_device(), *imported;
	struct ibv_pd *pd = alloc_pd(ctx), *ipd;
	char *mem = shared_memory(4096);
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_sge s;

	imported = ibv_import_device(dup(ctx->cmd_fd));
	CHECK(imported, "import");
	ipd = ibv_import_pd(imported, pd->handle);
	cq = create_cq(imported, 16);
	qp = create_qp(ipd, cq);
	connect_qp(qp, qp->qp_num);
	mr = reg(ipd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	check_live(imported, 1, 1, 1, 1);
	ibv_close_device(ctx);
	check_live(imported, 1, 1, 1, 1);
	memcpy(mem, "loopback", 8);
	s = sge_of(mem, 8, mr);
	post_send_ok(qp, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)(mem + 64), mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	CHECK(memcmp(mem + 64, "loopback", 8) == 0, "moved after the opener closed");
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	CHECK_EQ(ibv_destroy_qp(qp), 0, "destroy qp");
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy cq");
	ibv_unimport_pd(ipd);
	check_live(imported, 1, 0, 0, 0);
	CHECK_EQ(ibv_close_device(imported), 0, "close the import");
}

static void max_mr_size_follows_mrdemu_max_mr_size_and_bounds_registration(void)
{
	struct ibv_context *ctx, *imported;
	struct ibv_device_attr attr;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *a = shared_memory(3 * 4096);

	setenv("MRDEMU_MAX_MR_SIZE", "8192", 1);
	ctx = open_device();
	unsetenv("MRDEMU_MAX_MR_SIZE");
	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	CHECK_EQ(attr.max_mr_size, 8192, "max_mr_size from the opener's environment");
	imported = ibv_import_device(dup(ctx->cmd_fd));
	CHECK(imported, "import: %s", strerror(errno));
	CHECK_EQ(ibv_query_device(imported, &attr), 0, "ibv_query_device on the import");
	CHECK_EQ(attr.max_mr_size, 8192, "an importer sees the opener's limit");
	ibv_close_device(imported);
	pd = alloc_pd(ctx);
	mr = ibv_reg_mr(pd, a, 8192, IBV_ACCESS_LOCAL_WRITE);
	CHECK(mr, "exactly max_mr_size: %s", strerror(errno));
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	CHECK(!ibv_reg_mr(pd, a, 8193, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "one byte past max_mr_size");
	check_live(ctx, 1, 0, 0, 0);
	ibv_close_device(ctx);

	setenv("MRDEMU_MAX_MR_SIZE", "lots", 1);
	ctx = open_device();
	unsetenv("MRDEMU_MAX_MR_SIZE");
	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	CHECK_EQ(attr.max_mr_size, 1ull << 40, "not a number: the default");
	ibv_close_device(ctx);
}

/* ---- issue 19: one device per host, MRs bound to pages, connection semantics ------------------- */

/* RESET -> INIT -> RTR -> RTS with every connection attribute given. */
struct conn {
	uint32_t dest;
	uint32_t rq_psn, sq_psn;
	uint16_t dlid;
	uint8_t timeout, retry_cnt, max_rd_atomic, max_dest_rd_atomic;
};

static void connect_with(struct ibv_qp *qp, const struct conn *c)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = ALL_REMOTE;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0, "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = c->dest;
	a.rq_psn = c->rq_psn;
	a.max_dest_rd_atomic = c->max_dest_rd_atomic;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = c->dlid;
	a.ah_attr.port_num = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
		 0, "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = c->timeout;
	a.retry_cnt = c->retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = c->sq_psn;
	a.max_rd_atomic = c->max_rd_atomic;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC),
		 0, "RTS");
}

static struct conn conn_to(uint32_t dest)
{
	struct conn c = { .dest = dest, .dlid = 1, .timeout = 10, .retry_cnt = 2, .max_rd_atomic = 1,
			  .max_dest_rd_atomic = 1 };
	return c;
}

struct peer_info {
	uint32_t qpn, rkey;
	uint64_t addr;
};

/*
 * Two processes that each open mrdemu0 on their own (no fd passed, no import)
 * see one device: different QP numbers and keys, and a QP of one reaches the
 * QP of the other. Their buffers are private heap memory, as
 * ibv_rc_pingpong's memalign'd buffers are: SEND, WRITE and READ move the
 * bytes between the two address spaces. (Old code: each open was a device of
 * its own, QP numbers and keys repeated and a QP aimed at the other looped
 * back to itself.)
 */
static void two_processes_open_the_device_on_their_own_and_connect(void)
{
	int to_child[2], to_parent[2];
	struct peer_info me, other;
	pid_t pid;

	CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0, "pipes");
	pid = fork();
	CHECK(pid >= 0, "fork");
	{
		int child = pid == 0;
		int in = child ? to_child[0] : to_parent[0], out = child ? to_parent[1] : to_child[1];
		struct ibv_context *ctx = open_device();
		struct ibv_pd *pd = alloc_pd(ctx);
		struct ibv_cq *cq = create_cq(ctx, 16);
		struct ibv_qp *qp = create_qp(pd, cq);
		char *buf = memalign(4096, 8192);
		struct ibv_mr *mr = reg(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
		struct ibv_sge s;
		struct ibv_wc wc;

		memset(buf, child ? 'c' : 'p', 8192);
		me = (struct peer_info){ .qpn = qp->qp_num, .rkey = mr->rkey, .addr = (uintptr_t)buf };
		CHECK(write(out, &me, sizeof(me)) == sizeof(me), "write");
		CHECK(read(in, &other, sizeof(other)) == sizeof(other), "read");
		CHECK(other.qpn != me.qpn, "one device: two QP numbers (0x%x)", me.qpn);
		CHECK(other.rkey != me.rkey, "one device: two keys (0x%x)", me.rkey);
		connect_qp(qp, other.qpn);
		if (child) {
			s = sge_of(buf + 4096, 64, mr);
			post_recv_ok(qp, 1, &s, 1);
			write_u32(out, 1);
			wc = poll_one(cq);
			CHECK_STATUS(wc, IBV_WC_SUCCESS);
			CHECK_EQ(wc.byte_len, 5, "received");
			CHECK(memcmp(buf + 4096, "hello", 5) == 0, "child received %.5s", buf + 4096);
			CHECK_EQ(read_u32(in), 2, "parent done");
			CHECK(all_bytes(buf + 100, 10, 'P'), "the parent's WRITE into the child's heap");
			_exit(0);
		}
		CHECK_EQ(read_u32(in), 1, "child's receive posted");
		memcpy(buf, "hello", 5);
		s = sge_of(buf, 5, mr);
		post_send_ok(qp, 1, IBV_WR_SEND, &s, 1, 0, 0);
		CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
		memset(buf + 200, 'P', 10);
		s = sge_of(buf + 200, 10, mr);
		post_send_ok(qp, 2, IBV_WR_RDMA_WRITE, &s, 1, other.addr + 100, other.rkey);
		CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
		s = sge_of(buf + 300, 10, mr);
		post_send_ok(qp, 3, IBV_WR_RDMA_READ, &s, 1, other.addr + 2000, other.rkey);
		CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
		CHECK(all_bytes(buf + 300, 10, 'c'), "READ from the child's heap: %.10s", buf + 300);
		write_u32(out, 2);
		wait_child(pid, "child");
		ibv_close_device(ctx);
	}
}

/* A page-sized private anonymous mapping at exactly addr, or anywhere with addr NULL. */
static char *anon_page(void *addr)
{
	char *p = mmap(addr, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | (addr ? MAP_FIXED_NOREPLACE : 0), -1, 0);

	CHECK(p != MAP_FAILED && (!addr || p == addr), "mmap at %p: %s", addr, strerror(errno));
	return p;
}

/* A file of pages in MRDEMU_DIR (tmpfs in the tests), open, sized. */
static int shared_file(const char *name, size_t len, char *path, size_t size)
{
	const char *dir = getenv("MRDEMU_DIR") ? getenv("MRDEMU_DIR") : "/dev/shm";
	int fd;

	snprintf(path, size, "%s/%s-%d", dir, name, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0, "%s: %s", path, strerror(errno));
	return fd;
}

/*
 * The probe of issue 19, on private memory: register a page, unmap it, map a
 * new page at the same address, and RDMA WRITE with the still-valid rkey.
 * The write lands in the page the MR bound (READ with the key shows it), the
 * new mapping is untouched, and nothing is counted: the device holds private
 * memory's pages for real. (Old code: the write overwrote the new page.)
 */
static void a_private_page_unmapped_and_replaced_keeps_the_mr_pages(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	char *src = shared_memory(4096), *page = anon_page(NULL);
	struct ibv_mr *ms = reg(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mp = reg(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	uint64_t unbound = mrdemu_unbound_transfers(ctx);
	struct ibv_sge s;

	memset(page, 'o', 4096);
	CHECK_EQ(munmap(page, 4096), 0, "munmap");
	CHECK(anon_page(page) == page, "a new page at the same address");
	memset(page, 'n', 4096);
	memset(src, 'w', 64);
	s = sge_of(src, 64, ms);
	post_send_ok(p.a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)page, mp->rkey);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	CHECK(all_bytes(page, 4096, 'n'), "the write reached the new mapping");
	s = sge_of(src + 1024, 128, ms);
	post_send_ok(p.a, 2, IBV_WR_RDMA_READ, &s, 1, (uintptr_t)page, mp->rkey);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	CHECK(all_bytes(src + 1024, 64, 'w') && all_bytes(src + 1088, 64, 'o'), "the MR's own page: %.8s",
	      src + 1024);
	CHECK_EQ(mrdemu_unbound_transfers(ctx) - unbound, 0, "kept pages are no unbound transfer");
	CHECK_EQ(ibv_dereg_mr(mp), 0, "dereg after the range was replaced");
	CHECK(all_bytes(page, 4096, 'n'), "dereg left the new mapping alone");
	ibv_close_device(ctx);
}

/*
 * The same probe on shared file memory: the registered page of one file is
 * unmapped and a page of another file mapped at its address. The write goes
 * to the first file's page (what the MR bound), not into the new mapping.
 */
static void a_shared_file_page_unmapped_and_replaced_is_written_in_its_file(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	char path_a[512], path_b[512], *src = shared_memory(4096), *page, back[64];
	int fa = shared_file("mrdemu-test-a", 4096, path_a, sizeof(path_a));
	int fb = shared_file("mrdemu-test-b", 4096, path_b, sizeof(path_b));
	struct ibv_mr *ms = reg(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE), *mp;
	uint64_t unbound = mrdemu_unbound_transfers(ctx);
	struct ibv_sge s;

	page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fa, 0);
	CHECK(page != MAP_FAILED, "mmap a");
	memset(page, 'o', 4096);
	mp = reg(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	CHECK_EQ(munmap(page, 4096), 0, "munmap");
	CHECK(mmap(page, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fb, 0) == page, "map b there");
	memset(page, 'n', 4096);
	memset(src, 'w', 64);
	s = sge_of(src, 64, ms);
	post_send_ok(p.a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)page, mp->rkey);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	CHECK(all_bytes(page, 4096, 'n'), "the write reached the new mapping");
	CHECK(pread(fa, back, 64, 0) == 64 && all_bytes(back, 64, 'w'), "the write is in the registered file");
	CHECK_EQ(mrdemu_unbound_transfers(ctx) - unbound, 0, "the file kept its page");
	ibv_close_device(ctx);
	unlink(path_a);
	unlink(path_b);
}

/*
 * mrd frees a segment with munmap and FALLOC_FL_PUNCH_HOLE while an MR over it
 * stays registered, then may map it again: the page at that offset is a new
 * one. A transfer with the MR's key must not reach it: the device cannot keep
 * the punched page (an HCA's pin would), so it refuses the write and counts
 * it, in the MR's context and the device. (Old code: the write overwrote the
 * refilled page.)
 */
static void a_punched_and_refilled_file_page_is_refused_and_counted(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct pair p = pair_on(ctx, pd, ALL_REMOTE);
	char path[512], *src = shared_memory(4096), *seg;
	int fd = shared_file("mrdemu-test-seg", 2 * 4096, path, sizeof(path));
	struct ibv_mr *ms = reg(pd, src, 4096, IBV_ACCESS_LOCAL_WRITE), *mseg;
	uint64_t unbound = mrdemu_unbound_transfers(ctx), device = mrdemu_unbound_transfers(NULL);
	struct ibv_sge s;

	seg = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	CHECK(seg != MAP_FAILED, "mmap");
	memset(seg, 'o', 2 * 4096);
	mseg = reg(pd, seg, 2 * 4096, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	memset(src, 'w', 64);
	s = sge_of(src, 64, ms);
	/* Before the free: the key works. */
	post_send_ok(p.a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)seg + 4096, mseg->rkey);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_SUCCESS);
	CHECK(all_bytes(seg + 4096, 64, 'w'), "written before the free");
	/* Free the first page as mrd does, and use it again. */
	CHECK_EQ(munmap(seg, 4096), 0, "munmap");
	CHECK_EQ(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0, "punch");
	CHECK(mmap(seg, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0) == seg, "map again");
	memset(seg, 'n', 4096);
	post_send_ok(p.a, 2, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)seg, mseg->rkey);
	CHECK_STATUS(poll_one(p.cqa), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_bytes(seg, 4096, 'n'), "the write reached the refilled page");
	CHECK_EQ(mrdemu_unbound_transfers(ctx) - unbound, 1, "counted in the MR's context");
	CHECK_EQ(mrdemu_unbound_transfers(NULL) - device, 1, "counted in the device");
	ibv_close_device(ctx);
	unlink(path);
}

/* pin_user_pages refuses memory the process may not write, for write access, and memory it may not read. */
static void registering_memory_the_process_cannot_write_for_writing_is_efault(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *none = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;

	CHECK(!ibv_reg_mr(pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE) && errno == EFAULT, "PROT_READ, LOCAL_WRITE: %s",
	      strerror(errno));
	CHECK(!ibv_reg_mr(pd, ro, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) && errno == EFAULT,
	      "PROT_READ, REMOTE_WRITE: %s", strerror(errno));
	CHECK(!ibv_reg_mr(pd, none, 4096, 0) && errno == EFAULT, "PROT_NONE: %s", strerror(errno));
	mr = ibv_reg_mr(pd, ro, 4096, IBV_ACCESS_REMOTE_READ);
	CHECK(mr, "PROT_READ for reading: %s", strerror(errno));
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	check_live(ctx, 1, 0, 0, 0);
	ibv_close_device(ctx);
}

/*
 * PSNs: each side advances by the packets of what it carried out (a 3000-byte
 * WRITE at MTU 1024 is 3), and a requester whose sq_psn is ahead of the
 * responder's expected PSN is NAKed and retried to RETRY_EXC_ERR; nothing
 * moves. (Old code: PSNs were ignored.)
 */
static void a_psn_mismatch_fails_and_psns_advance_per_packet(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 16);
	struct ibv_qp *a = create_qp(pd, cq), *b = create_qp(pd, cq);
	char *mem = shared_memory(16384);
	struct ibv_mr *mr = reg(pd, mem, 16384, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct conn ca = conn_to(b->qp_num), cb = conn_to(a->qp_num);
	struct ibv_qp_attr qa, qb;
	struct ibv_qp_init_attr init;
	struct ibv_sge s = sge_of(mem, 3000, mr);

	ca.sq_psn = 500;
	cb.rq_psn = 500;
	connect_with(a, &ca);
	connect_with(b, &cb);
	post_send_ok(a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 8192, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	CHECK_EQ(ibv_query_qp(a, &qa, IBV_QP_SQ_PSN, &init), 0, "query a");
	CHECK_EQ(ibv_query_qp(b, &qb, IBV_QP_RQ_PSN, &init), 0, "query b");
	CHECK_EQ(qa.sq_psn, 503, "requester: 3 packets");
	CHECK_EQ(qb.rq_psn, 503, "responder: 3 packets");

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	a = create_qp(pd, cq);
	b = create_qp(pd, cq);
	ca = conn_to(b->qp_num);
	cb = conn_to(a->qp_num);
	ca.sq_psn = 100;
	connect_with(a, &ca);
	connect_with(b, &cb);
	memset(mem, 'a', 100);
	memset(mem + 8192, 'b', 100);
	s = sge_of(mem, 100, mr);
	post_send_ok(a, 2, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 8192, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_RETRY_EXC_ERR);
	CHECK(all_bytes(mem + 8192, 100, 'b'), "a NAKed request moved bytes");
	ibv_close_device(ctx);
}

/*
 * The responder takes a request only from the QP its dest_qp_num names, and
 * only at the DLID of its port: otherwise nobody answers, and the requester
 * fails with RETRY_EXC_ERR once retry_cnt + 1 ACK timeouts (4.096 us << 10,
 * 3 tries: 12.6 ms) have passed. (Old code: success, at once.)
 */
static void a_responder_that_does_not_point_back_or_another_dlid_reaches_nobody(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 16);
	struct ibv_qp *a = create_qp(pd, cq), *b = create_qp(pd, cq), *c = create_qp(pd, cq);
	char *mem = shared_memory(8192);
	struct ibv_mr *mr = reg(pd, mem, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct conn ca = conn_to(b->qp_num), cb = conn_to(c->qp_num), cc = conn_to(b->qp_num);
	struct ibv_sge s = sge_of(mem, 64, mr);
	uint64_t start;

	connect_with(a, &ca);
	connect_with(b, &cb);
	connect_with(c, &cc);
	memset(mem + 4096, 'b', 64);
	start = now_ms();
	post_send_ok(a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 4096, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_RETRY_EXC_ERR);
	CHECK(now_ms() - start >= 12, "retries exhausted after %" PRIu64 " ms", now_ms() - start);
	CHECK(all_bytes(mem + 4096, 64, 'b'), "bytes moved to a responder connected elsewhere");

	/* b and c point at each other, but c aims at a DLID no port has. */
	ibv_destroy_qp(b);
	ibv_destroy_qp(c);
	b = create_qp(pd, cq);
	c = create_qp(pd, cq);
	cb = conn_to(c->qp_num);
	cc = conn_to(b->qp_num);
	cc.dlid = 7;
	connect_with(b, &cb);
	connect_with(c, &cc);
	post_send_ok(c, 2, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 4096, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_RETRY_EXC_ERR);
	CHECK(all_bytes(mem + 4096, 64, 'b'), "bytes moved to another DLID");
	/* c is in the error state after its failure: a QP in ERR answers nobody either. */
	post_send_ok(b, 3, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 4096, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_RETRY_EXC_ERR);
	ibv_close_device(ctx);
}

/* A responder with max_dest_rd_atomic 0 takes no READ or atomic: an invalid request. (Old code: success.) */
static void a_read_to_a_responder_with_rd_atomic_0_is_an_invalid_request(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 16);
	struct ibv_qp *a = create_qp(pd, cq), *b = create_qp(pd, cq);
	char *mem = shared_memory(8192);
	struct ibv_mr *mr = reg(pd, mem, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct conn ca = conn_to(b->qp_num), cb = conn_to(a->qp_num);
	struct ibv_sge s = sge_of(mem, 64, mr);

	cb.max_dest_rd_atomic = 0;
	connect_with(a, &ca);
	connect_with(b, &cb);
	memset(mem, 'a', 64);
	memset(mem + 4096, 'b', 64);
	post_send_ok(a, 1, IBV_WR_RDMA_READ, &s, 1, (uintptr_t)mem + 4096, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_REM_INV_REQ_ERR);
	CHECK(all_bytes(mem, 64, 'a'), "a refused READ moved bytes");
	CHECK_EQ(qp_state(b), IBV_QPS_ERR, "the responder NAKed");
	ibv_close_device(ctx);
}

/*
 * timeout 0 is an infinite ACK timeout (IB spec): a request to a responder
 * that is not ready yet waits, and goes through once it is. (Old code:
 * RETRY_EXC_ERR at once.)
 */
static void timeout_0_waits_for_the_responder(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 16);
	struct ibv_qp *a = create_qp(pd, cq), *b = create_qp(pd, cq);
	char *mem = shared_memory(8192);
	struct ibv_mr *mr = reg(pd, mem, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct conn ca = conn_to(b->qp_num), cb = conn_to(a->qp_num);
	struct ibv_sge s = sge_of(mem, 64, mr);
	struct ibv_wc wc;
	uint64_t deadline;

	ca.timeout = 0;
	ca.retry_cnt = 0;
	connect_with(a, &ca);
	memset(mem, 'a', 64);
	post_send_ok(a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 4096, mr->rkey);
	/* Far past what any finite timeout of retry_cnt 0 and timeout 1..7 would wait (0.5 ms at most). */
	deadline = now_ms() + 300;
	while (now_ms() < deadline)
		CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0, "a completion while the responder is not there");
	connect_with(b, &cb);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	CHECK(all_bytes(mem + 4096, 64, 'a'), "written once the responder was ready");
	ibv_close_device(ctx);
}

struct reset_race {
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *mem;
	_Atomic int stop;
	_Atomic uint64_t posted;	/* wr_id of the next receive */
};

static void *post_receives(void *arg)
{
	struct reset_race *r = arg;

	while (!atomic_load(&r->stop)) {
		struct ibv_sge s = sge_of(r->mem, 8, r->mr);
		uint64_t id = atomic_load(&r->posted);

		if (post_recv_sges(r->qp, id, &s, 1) == 0)
			atomic_store(&r->posted, id + 1);
	}
	return NULL;
}

/*
 * RESET empties the queues under their post lock: a post racing it lands
 * before (discarded) or after (on the empty queue). Afterwards the queue
 * holds exactly the receives posted since the last RESET, in order: flushed
 * to ERR, their wr_ids are consecutive and end at the last one posted. (Old
 * code: RESET zeroed the lock word and producer index without the lock, and
 * a post racing it published its stale index: old WQEs came back, or the
 * ring stayed full.)
 */
static void reset_racing_a_post_never_publishes_a_stale_index(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 4096);
	struct ibv_qp *qp = create_qp_caps(pd, cq, cq, 4, 1024, 1, 0);
	struct reset_race r = { .qp = qp, .mem = shared_memory(4096) };
	struct ibv_qp_attr a;
	pthread_t poster;
	uint64_t prev = 0, n = 0;
	int first = 1;

	r.mr = reg(pd, r.mem, 4096, IBV_ACCESS_LOCAL_WRITE);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0, "INIT");
	CHECK(pthread_create(&poster, NULL, post_receives, &r) == 0, "thread");
	for (int i = 0; i < 3000; i++) {
		a.qp_state = IBV_QPS_RESET;
		CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "RESET");
		a.qp_state = IBV_QPS_INIT;
		CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0,
			 "INIT");
	}
	atomic_store(&r.stop, 1);
	pthread_join(poster, NULL);
	a.qp_state = IBV_QPS_ERR;
	CHECK_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE), 0, "ERR");
	for (;;) {
		struct ibv_wc wc;
		uint64_t deadline = now_ms() + 200;
		int got;

		while ((got = ibv_poll_cq(cq, 1, &wc)) == 0 && now_ms() < deadline)
			sched_yield();
		if (got == 0)
			break;
		CHECK_EQ(got, 1, "poll");
		CHECK_STATUS(wc, IBV_WC_WR_FLUSH_ERR);
		CHECK(first || wc.wr_id == prev + 1, "flushed wr_id %" PRIu64 " after %" PRIu64 ": a stale WQE",
		      (uint64_t)wc.wr_id, prev);
		first = 0;
		prev = wc.wr_id;
		n++;
	}
	CHECK(n <= 1024, "%" PRIu64 " receives flushed from a queue of 1024", n);
	CHECK(n == 0 || prev + 1 == atomic_load(&r.posted), "the last flushed is %" PRIu64 ", posted up to %" PRIu64,
	      prev, atomic_load(&r.posted));
	ibv_close_device(ctx);
}

/*
 * A destroyed QP's completions leave its CQ, as mlx5 cleans them: the CQ
 * shared with another QP shows only that one's. (Old code: the destroyed
 * QP's completions were still polled.)
 */
static void completions_of_a_destroyed_qp_leave_its_cq(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 64), *other = create_cq(ctx, 64);
	struct ibv_qp *a = create_qp(pd, cq), *b = create_qp(pd, cq), *sink = create_qp(pd, other);
	char *mem = shared_memory(8192);
	struct ibv_mr *mr = reg(pd, mem, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	struct ibv_sge s = sge_of(mem, 8, mr);
	uint32_t gone = a->qp_num;
	uint64_t deadline = now_ms() + 10000;
	struct ibv_wc wc;

	connect_qp(a, sink->qp_num);
	connect_qp(sink, a->qp_num);
	connect_qp(b, b->qp_num);
	memset(mem, 'x', 8);
	for (int i = 0; i < 3; i++)
		post_send_ok(a, (uint64_t)i, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 4096 + 8 * (uint64_t)i,
			     mr->rkey);
	/* All three are done once the third write landed. */
	while (!all_bytes(mem + 4096, 24, 'x'))
		CHECK(now_ms() < deadline, "the writes never landed");
	CHECK_EQ(ibv_destroy_qp(a), 0, "destroy a");
	post_send_ok(b, 100, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 5000, mr->rkey);
	wc = poll_one(cq);
	CHECK(wc.qp_num != gone, "a completion of the destroyed QP 0x%x (wr_id %" PRIu64 ")", gone, (uint64_t)wc.wr_id);
	CHECK_EQ(wc.wr_id, 100, "the live QP's completion");
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0, "nothing else");
	ibv_close_device(ctx);
}

/*
 * An MR without remote access reports rkey 0, as rxe, and neither 0 nor its
 * lkey gets a responder to touch it. (Old code: rkey == lkey.)
 */
static void an_mr_without_remote_access_has_no_usable_rkey(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 16);
	char *mem = shared_memory(8192);
	struct ibv_mr *src = reg(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *local = reg(pd, mem + 4096, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge s = sge_of(mem, 64, src);
	uint32_t keys[2] = { 0, local->rkey };

	memset(mem, 'a', 64);
	memset(mem + 4096, 'b', 4096);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp *a = create_qp(pd, cq), *b = create_qp(pd, cq);

		connect_qp(a, b->qp_num);
		connect_qp(b, a->qp_num);
		post_send_ok(a, (uint64_t)i, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 4096, keys[i]);
		CHECK_STATUS(poll_one(cq), IBV_WC_REM_ACCESS_ERR);
		CHECK(all_bytes(mem + 4096, 4096, 'b'), "written with rkey 0x%x", keys[i]);
		ibv_destroy_qp(a);
		ibv_destroy_qp(b);
	}
	ibv_close_device(ctx);
}

/*
 * ibv_rereg_mr: a new translation, PD and access give new keys and the old
 * ones are refused; a change of access alone keeps the keys. (Old code: no
 * symbol.)
 */
static void rereg_mr_moves_the_mr_and_changes_its_keys(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx), *pd2 = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 16);
	char *src = shared_memory(4096), *one = memalign(4096, 4096), *two = memalign(4096, 4096);
	struct ibv_mr *ms = reg(pd2, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *mr = reg(pd, one, 4096, IBV_ACCESS_LOCAL_WRITE);
	uint32_t old_lkey = mr->lkey, handle = mr->handle;
	struct ibv_qp *a = create_qp(pd2, cq), *b = create_qp(pd2, cq);
	struct ibv_sge s = sge_of(src, 64, ms);

	CHECK_EQ(ibv_rereg_mr(mr, 0, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT, "no flags");
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS,
			      pd2, two, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
		 0, "rereg");
	CHECK_EQ(mr->handle, handle, "same handle");
	CHECK(mr->lkey != old_lkey, "a new lkey");
	CHECK(mr->rkey == mr->lkey && mr->rkey != 0, "the rkey is the new key");
	CHECK(mr->addr == two && mr->pd == pd2, "the new translation and PD");
	CHECK_EQ(ibv_dealloc_pd(pd), 0, "the old PD has no MR any more");
	connect_qp(a, b->qp_num);
	connect_qp(b, a->qp_num);
	memset(src, 'w', 64);
	memset(one, 'o', 4096);
	memset(two, 't', 4096);
	post_send_ok(a, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)two, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_SUCCESS);
	CHECK(all_bytes(two, 64, 'w') && all_bytes(one, 4096, 'o'), "written through the new translation");
	post_send_ok(a, 2, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)two, old_lkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_REM_ACCESS_ERR);
	/* Only the access changes: the keys stay (rdma-core's test_mr_rereg_access uses the rkey it read before). */
	old_lkey = mr->lkey;
	CHECK_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE), 0, "rereg access");
	CHECK(mr->lkey == old_lkey && mr->rkey == old_lkey, "an access-only rereg keeps the keys");
	/* The error above moved both QPs to ERR: a new pair. */
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	a = create_qp(pd2, cq);
	b = create_qp(pd2, cq);
	connect_qp(a, b->qp_num);
	connect_qp(b, a->qp_num);
	post_send_ok(a, 3, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)two, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_REM_ACCESS_ERR);
	CHECK(all_bytes(two + 64, 4096 - 64, 't'), "nothing written without remote access");
	check_live(ctx, 1, 2, 1, 2);
	CHECK_EQ(ibv_dereg_mr(mr), 0, "dereg");
	ibv_close_device(ctx);
}

/*
 * A process that dies holding its own context (no other holder) has its
 * objects reaped by the next open on the host: its QP number reaches nobody
 * any more. (Old code: the device died with its only process.)
 */
static void a_dead_processes_context_is_reaped_by_the_next_open(void)
{
	int to_parent[2];
	uint32_t qpn;
	pid_t pid;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	char *mem = shared_memory(4096);
	struct ibv_mr *mr;
	struct ibv_sge s;
	struct conn c;

	CHECK(pipe(to_parent) == 0, "pipe");
	ctx = open_device();
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* The child's own context: the parent's is inherited too, but never closed here. */
		struct ibv_context *own = open_device();
		struct ibv_pd *opd = alloc_pd(own);
		struct ibv_cq *ocq = create_cq(own, 16);
		struct ibv_qp *oqp = create_qp(opd, ocq);

		connect_qp(oqp, 0);
		write_u32(to_parent[1], oqp->qp_num);
		_exit(0);
	}
	qpn = read_u32(to_parent[0]);
	wait_child(pid, "child");
	ibv_close_device(open_device());
	pd = alloc_pd(ctx);
	cq = create_cq(ctx, 16);
	qp = create_qp(pd, cq);
	mr = reg(pd, mem, 4096, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	c = conn_to(qpn);
	connect_with(qp, &c);
	s = sge_of(mem, 8, mr);
	post_send_ok(qp, 1, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)mem + 100, mr->rkey);
	CHECK_STATUS(poll_one(cq), IBV_WC_RETRY_EXC_ERR);
	ibv_close_device(ctx);
}

/* ---- main ---------------------------------------------------------------------------------------- */

static const struct test_case cases[] = {
	CASE(send_write_read_move_the_bytes_and_complete),
	CASE(atomics_fetch_add_and_compare_swap),
	CASE(query_device_and_port_report_an_active_hca),
	CASE(keys_are_mlx5_mkeys_and_a_stale_key_never_matches),
	CASE(a_bad_lkey_range_or_access_is_a_local_protection_error),
	CASE(a_bad_rkey_range_or_access_at_the_target_is_refused),
	CASE(a_receive_too_small_fails_both_sides),
	CASE(a_send_without_receive_waits_its_rnr_budget),
	CASE(an_error_flushes_every_later_work_request),
	CASE(work_requests_of_one_qp_execute_in_order),
	CASE(a_full_ring_is_enomem_until_completions_are_polled),
	CASE(a_cq_overrun_is_reported_and_errors_the_qp),
	CASE(dereg_returns_only_after_the_dma_on_the_mr_is_over),
	CASE(live_objects_count_and_busy_objects_refuse_destruction),
	CASE(registration_checks_what_the_kernel_checks),
	CASE(modify_qp_takes_only_the_transitions_and_attributes_of_rc),
	CASE(import_pd_validates_its_handle),
	CASE(another_process_imports_the_device_and_posts),
	CASE(several_processes_post_at_once),
	CASE(an_idle_device_costs_no_cpu),
	CASE(closing_the_opener_leaves_the_context_to_importers),
	CASE(max_mr_size_follows_mrdemu_max_mr_size_and_bounds_registration),
	CASE(two_processes_open_the_device_on_their_own_and_connect),
	CASE(a_private_page_unmapped_and_replaced_keeps_the_mr_pages),
	CASE(a_shared_file_page_unmapped_and_replaced_is_written_in_its_file),
	CASE(a_punched_and_refilled_file_page_is_refused_and_counted),
	CASE(registering_memory_the_process_cannot_write_for_writing_is_efault),
	CASE(a_psn_mismatch_fails_and_psns_advance_per_packet),
	CASE(a_responder_that_does_not_point_back_or_another_dlid_reaches_nobody),
	CASE(a_read_to_a_responder_with_rd_atomic_0_is_an_invalid_request),
	CASE(timeout_0_waits_for_the_responder),
	CASE(reset_racing_a_post_never_publishes_a_stale_index),
	CASE(completions_of_a_destroyed_qp_leave_its_cq),
	CASE(an_mr_without_remote_access_has_no_usable_rkey),
	CASE(rereg_mr_moves_the_mr_and_changes_its_keys),
	CASE(a_dead_processes_context_is_reaped_by_the_next_open),
};

int main(int argc, char **argv)
{
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
