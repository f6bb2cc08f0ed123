/*
 * surface_test.c - the emulated device's verbs beyond the core's objects
 * (src/surface.h): what it reports (GUID, vendor, port, GIDs, P_Keys),
 * completion channels, the extended CQ and QP, device memory, address
 * handles, and the stubs' errors. Built and run as mrdemu_test.c is (EmulatedDevice,
 * EmulatorTest): --list prints the cases, a case name runs it.
 */
#include "harness.h"

#include <endian.h>
#include <poll.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

/* A context, a PD and 8 KiB of memory registered for every access: what most cases start from. */
struct rig {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char *buf;
	struct ibv_mr *mr;
};

static struct rig rig_open(void)
{
	struct rig r;

	r.ctx = open_device();
	r.pd = alloc_pd(r.ctx);
	r.buf = shared_memory(8192);
	r.mr = reg(r.pd, r.buf, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	return r;
}

static void rig_close(struct rig *r)
{
	CHECK_EQ(ibv_dereg_mr(r->mr), 0, "dereg");
	CHECK_EQ(ibv_dealloc_pd(r->pd), 0, "dealloc");
	ibv_close_device(r->ctx);
	munmap(r->buf, 8192);
}

/* Two connected RC QPs on one context, with their CQs: cqa may be on a channel. */
struct pair {
	struct ibv_pd *pd;
	struct ibv_cq *cqa, *cqb;
	struct ibv_qp *a, *b;
};

static struct pair pair_with(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cqa)
{
	struct pair p = { .pd = pd, .cqa = cqa };

	p.cqb = create_cq(ctx, 64);
	p.a = create_qp(pd, p.cqa);
	p.b = create_qp(pd, p.cqb);
	connect_qp(p.a, p.b->qp_num);
	connect_qp(p.b, p.a->qp_num);
	return p;
}

static void pair_destroy(struct pair *p)
{
	CHECK_EQ(ibv_destroy_qp(p->a), 0, "destroy qp a");
	CHECK_EQ(ibv_destroy_qp(p->b), 0, "destroy qp b");
	CHECK_EQ(ibv_destroy_cq(p->cqb), 0, "destroy cq b");
}

/* Whether fd becomes readable within ms. */
static int readable_within(int fd, int ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int n = poll(&pfd, 1, ms);

	CHECK(n >= 0, "poll: %s", strerror(errno));
	return n == 1 && (pfd.revents & POLLIN);
}

/* ---- what the device reports --------------------------------------------------------------- */

static void the_device_reports_one_guid_and_a_vendor_everywhere(void)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;
	struct ibv_device_attr attr;
	struct ibv_device_attr_ex ex;
	__be64 guid;

	CHECK(list && n >= 1, "no device");
	guid = ibv_get_device_guid(list[0]);
	CHECK(guid != 0, "ibv_get_device_guid before open");
	CHECK_EQ(ibv_get_device_index(list[0]), 0, "ibv_get_device_index of mrdemu0");
	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open: %s", strerror(errno));
	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	CHECK_EQ(ibv_query_device_ex(ctx, NULL, &ex), 0, "ibv_query_device_ex");
	CHECK(attr.node_guid == guid && attr.sys_image_guid == guid, "query_device's GUIDs are the device's");
	CHECK(ex.orig_attr.node_guid == guid && ex.orig_attr.sys_image_guid == guid, "query_device_ex's GUIDs");
	CHECK(attr.vendor_id != 0 && attr.vendor_part_id != 0 && attr.hw_ver != 0, "vendor 0x%x part %u hw %u",
	      attr.vendor_id, attr.vendor_part_id, attr.hw_ver);
	CHECK(attr.fw_ver[0] != '\0', "fw_ver");
	CHECK_EQ(ex.phys_port_cnt_ex, attr.phys_port_cnt, "phys_port_cnt_ex");
	CHECK_EQ(ex.odp_caps.general_caps, 0, "no ODP");
	CHECK_EQ(attr.max_pkeys, 1, "max_pkeys");
	ibv_close_device(ctx);
	/* A second open (a second instance today, the same host-wide device later) names the same GUID. */
	ctx = ibv_open_device(list[0]);
	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device again");
	CHECK(attr.node_guid == guid, "the GUID is the device's, not the instance's");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
}

static void the_port_is_an_active_ib_port_with_a_link_local_gid(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_gid_entry entry, table[8];
	union ibv_gid gid;
	__be16 pkey;

	CHECK_EQ(ibv_query_device(ctx, &attr), 0, "ibv_query_device");
	CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "ibv_query_port");
	CHECK_EQ(port.state, IBV_PORT_ACTIVE, "state");
	CHECK_EQ(port.phys_state, 5, "phys_state LinkUp");
	CHECK_EQ(port.max_mtu, IBV_MTU_4096, "max_mtu");
	CHECK_EQ(port.active_mtu, IBV_MTU_4096, "active_mtu");
	CHECK_EQ(port.link_layer, IBV_LINK_LAYER_INFINIBAND, "link_layer");
	CHECK(port.lid != 0 && port.sm_lid != 0, "lid %u sm_lid %u", port.lid, port.sm_lid);
	CHECK(port.gid_tbl_len > 1 && port.pkey_tbl_len == 1, "gid_tbl_len %d pkey_tbl_len %u", port.gid_tbl_len,
	      port.pkey_tbl_len);
	CHECK(port.port_cap_flags & IBV_PORT_SYS_IMAGE_GUID_SUP, "port_cap_flags 0x%x", port.port_cap_flags);
	CHECK(ibv_rate_to_mbps(IBV_RATE_100_GBPS) == 103125 && port.active_width == 2 && port.active_speed == 32,
	      "4x EDR");

	/* GID 0: fe80::/64 and the GUID. */
	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &gid), 0, "ibv_query_gid 0");
	CHECK(gid.global.subnet_prefix == htobe64(0xfe80000000000000ULL), "link-local prefix");
	CHECK(gid.global.interface_id == attr.node_guid, "interface id is the GUID");
	/* An empty entry reads as zeros, as libibverbs; past the table it is an error. */
	CHECK_EQ(ibv_query_gid(ctx, 1, 1, &gid), 0, "ibv_query_gid 1");
	CHECK(gid.global.subnet_prefix == 0 && gid.global.interface_id == 0, "empty GID is zero");
	CHECK(ibv_query_gid(ctx, 1, port.gid_tbl_len, &gid) == -1 && errno == EINVAL, "past the table");
	CHECK(ibv_query_gid(ctx, 2, 0, &gid) == -1 && errno == EINVAL, "no port 2");
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 0, &entry, 0), 0, "ibv_query_gid_ex 0");
	CHECK_EQ(entry.gid_type, IBV_GID_TYPE_IB, "GID type IB on an IB port");
	CHECK(entry.gid.global.interface_id == attr.node_guid && entry.port_num == 1, "entry");
	CHECK_EQ(ibv_query_gid_ex(ctx, 1, 1, &entry, 0), ENODATA, "empty entry: ENODATA");
	CHECK_EQ(ibv_query_gid_table(ctx, table, 8, 0), 1, "one valid entry");
	CHECK_EQ(ibv_query_gid_table(ctx, table, 0, 0), -EINVAL, "no room: -EINVAL");

	CHECK_EQ(ibv_query_pkey(ctx, 1, 0, &pkey), 0, "ibv_query_pkey 0");
	CHECK_EQ(be16toh(pkey), 0xffff, "default P_Key");
	CHECK(ibv_query_pkey(ctx, 1, 1, &pkey) == -1 && errno == EINVAL, "one P_Key");
	CHECK_EQ(ibv_get_pkey_index(ctx, 1, htobe16(0xffff)), 0, "ibv_get_pkey_index");
	CHECK_EQ(ibv_get_pkey_index(ctx, 1, htobe16(0x8001)), -1, "an unknown P_Key");
	ibv_close_device(ctx);
}

/* ---- completion channels ------------------------------------------------------------------- */

/* An RDMA WRITE on a's QP, signaled, 64 bytes from src to dst. */
static void write_once(struct pair *p, struct ibv_mr *mr, char *buf, uint64_t wr_id, unsigned int flags)
{
	struct ibv_sge s = sge_of(buf, 64, mr);
	int rc = post_send_op(p->a, wr_id, IBV_WR_RDMA_WRITE, &s, 1, (uintptr_t)buf + 4096, mr->rkey,
			      IBV_SEND_SIGNALED | flags);

	CHECK(rc == 0, "post: %s", strerror(rc));
}

static void a_comp_channel_is_woken_by_a_completion(void)
{
	struct rig r = rig_open();
	struct ibv_context *ctx = r.ctx;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cq, *ev_cq = NULL;
	void *ev_ctx = NULL;
	struct pair p;
	struct ibv_wc wc;

	CHECK(ch && ch->fd >= 0, "ibv_create_comp_channel: %s", strerror(errno));
	cq = ibv_create_cq(ctx, 16, (void *)0x5eed, ch, 0);
	CHECK(cq && cq->channel == ch, "CQ on a channel: %s", strerror(errno));
	CHECK_EQ(ibv_destroy_comp_channel(ch), EBUSY, "a channel with a CQ is busy");
	p = pair_with(ctx, r.pd, cq);
	/* Not armed: a completion raises nothing. */
	write_once(&p, r.mr, r.buf, 1, 0);
	CHECK_EQ(poll_one(cq).wr_id, 1, "first completion");
	CHECK(!readable_within(ch->fd, 100), "no event without an arm");
	/* Armed: the next completion makes the fd readable, once. */
	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0, "ibv_req_notify_cq");
	CHECK(!readable_within(ch->fd, 0), "nothing yet");
	write_once(&p, r.mr, r.buf, 2, 0);
	CHECK(readable_within(ch->fd, 10000), "the completion woke the channel's fd");
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0, "ibv_get_cq_event");
	CHECK(ev_cq == cq && ev_ctx == (void *)0x5eed, "the event names the CQ and its context");
	ibv_ack_cq_events(cq, 1);
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 1, "the completion is there");
	CHECK_EQ(wc.wr_id, 2, "wr_id");
	write_once(&p, r.mr, r.buf, 3, 0);
	CHECK_EQ(poll_one(cq).wr_id, 3, "third completion");
	CHECK(!readable_within(ch->fd, 100), "an arm raises one event");
	pair_destroy(&p);
	CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy the CQ (its event acknowledged)");
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "destroy the channel");
	rig_close(&r);
}

static void a_solicited_only_arm_waits_for_a_solicited_send(void)
{
	struct rig rig = rig_open();
	struct ibv_context *ctx = rig.ctx;
	struct ibv_pd *pd = rig.pd;
	struct ibv_comp_channel *ch = ibv_create_comp_channel(ctx);
	struct ibv_cq *cqa = create_cq(ctx, 16);
	struct ibv_cq *rcq = ibv_create_cq(ctx, 16, NULL, ch, 0), *ev_cq;
	struct ibv_qp *a, *b;
	struct ibv_sge s = sge_of(rig.buf, 32, rig.mr), r = sge_of(rig.buf + 4096, 64, rig.mr);
	void *ev_ctx;

	CHECK(rcq, "CQ on a channel");
	a = create_qp(pd, cqa);
	b = create_qp_caps(pd, cqa, rcq, 16, 16, 1, 0);
	connect_qp(a, b->qp_num);
	connect_qp(b, a->qp_num);
	post_recv_ok(b, 10, &r, 1);
	post_recv_ok(b, 11, &r, 1);
	CHECK_EQ(ibv_req_notify_cq(rcq, 1), 0, "arm for solicited completions only");
	CHECK_EQ(post_send_op(a, 1, IBV_WR_SEND, &s, 1, 0, 0, IBV_SEND_SIGNALED), 0, "plain SEND");
	CHECK_EQ(poll_one(cqa).status, IBV_WC_SUCCESS, "sent");
	CHECK_EQ(poll_one(rcq).wr_id, 10, "received");
	CHECK(!readable_within(ch->fd, 100), "an unsolicited receive raises no event");
	CHECK_EQ(post_send_op(a, 2, IBV_WR_SEND, &s, 1, 0, 0, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED), 0,
		 "solicited SEND");
	CHECK(readable_within(ch->fd, 10000), "a solicited receive raises the event");
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0, "ibv_get_cq_event");
	CHECK(ev_cq == rcq, "the receive CQ");
	ibv_ack_cq_events(rcq, 1);
	CHECK_EQ(poll_one(rcq).wr_id, 11, "the solicited receive");
	CHECK_EQ(poll_one(cqa).status, IBV_WC_SUCCESS, "sent");
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	CHECK_EQ(ibv_destroy_cq(rcq), 0, "destroy rcq");
	ibv_destroy_cq(cqa);
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "destroy the channel");
	rig_close(&rig);
}

/*
 * The event crosses processes: a child imports the device and arms a CQ on
 * its own channel; the completion is produced by the DMA engine in the
 * parent (the opener), which writes the event into the child's pipe.
 */
static void an_event_reaches_a_channel_in_another_process(void)
{
	struct ibv_context *ctx = open_device();
	char *buf = shared_memory(8192);
	pid_t child;
	int status;

	child = fork();
	CHECK(child >= 0, "fork: %s", strerror(errno));
	if (child == 0) {
		struct ibv_context *imp = ibv_import_device(dup(ctx->cmd_fd));
		struct ibv_pd *pd;
		struct ibv_comp_channel *ch;
		struct ibv_mr *mr;
		struct ibv_cq *cq, *ev_cq;
		struct pair p;
		void *ev_ctx;

		CHECK(imp, "ibv_import_device: %s", strerror(errno));
		pd = alloc_pd(imp);
		ch = ibv_create_comp_channel(imp);
		mr = reg(pd, buf, 8192, IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
		cq = ibv_create_cq(imp, 16, NULL, ch, 0);
		CHECK(ch && cq, "channel and CQ in the importer");
		p = pair_with(imp, pd, cq);
		CHECK_EQ(ibv_req_notify_cq(cq, 0), 0, "arm");
		write_once(&p, mr, buf, 7, 0);
		CHECK(readable_within(ch->fd, 10000), "the opener's engine raised the event in this process");
		CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0, "ibv_get_cq_event");
		CHECK(ev_cq == cq, "our CQ");
		ibv_ack_cq_events(cq, 1);
		CHECK_EQ(poll_one(cq).wr_id, 7, "the completion");
		pair_destroy(&p);
		CHECK_EQ(ibv_destroy_cq(cq), 0, "destroy the CQ");
		CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "destroy the channel");
		ibv_dereg_mr(mr);
		ibv_dealloc_pd(pd);
		ibv_close_device(imp);
		exit(0);
	}
	CHECK(waitpid(child, &status, 0) == child, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the importer failed (status 0x%x)", status);
	ibv_close_device(ctx);
}

struct destroyer {
	struct ibv_cq *cq;
	int rc;
	volatile int done;
};

static void *destroy_cq_thread(void *arg)
{
	struct destroyer *d = arg;

	d->rc = ibv_destroy_cq(d->cq);
	d->done = 1;
	return NULL;
}

static void destroy_cq_waits_for_the_ack_of_its_events(void)
{
	struct rig r = rig_open();
	struct ibv_comp_channel *ch = ibv_create_comp_channel(r.ctx);
	struct ibv_cq *cq = ibv_create_cq(r.ctx, 16, NULL, ch, 0), *ev_cq;
	struct destroyer d = { .cq = cq };
	struct pair p = pair_with(r.ctx, r.pd, cq);
	pthread_t t;
	void *ev_ctx;

	CHECK_EQ(ibv_req_notify_cq(cq, 0), 0, "arm");
	write_once(&p, r.mr, r.buf, 1, 0);
	CHECK_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0, "ibv_get_cq_event");
	CHECK_EQ(poll_one(cq).wr_id, 1, "the completion");
	pair_destroy(&p);
	CHECK_EQ(pthread_create(&t, NULL, destroy_cq_thread, &d), 0, "thread");
	/* A bounded look for a destroy that wrongly returns before the ack: it must still be waiting. */
	usleep(100 * 1000);
	CHECK(!d.done, "ibv_destroy_cq returned with an event unacknowledged");
	ibv_ack_cq_events(cq, 1);
	pthread_join(t, NULL);
	CHECK(d.done && d.rc == 0, "destroy after the ack: %d", d.rc);
	CHECK_EQ(ibv_destroy_comp_channel(ch), 0, "destroy the channel");
	rig_close(&r);
}

/* ---- the extended CQ and QP ---------------------------------------------------------------- */

static void create_cq_ex_polls_with_start_next_end(void)
{
	struct rig r = rig_open();
	struct ibv_context *ctx = r.ctx;
	struct ibv_cq_init_attr_ex attr = { .cqe = 16, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_poll_cq_attr pattr = { .comp_mask = 0 };
	struct ibv_cq_ex *cq = ibv_create_cq_ex(ctx, &attr);
	struct pair p;
	uint64_t deadline = now_ms() + 10000;
	int rc;

	CHECK(cq, "ibv_create_cq_ex: %s", strerror(errno));
	CHECK_EQ(ibv_start_poll(cq, &pattr), ENOENT, "empty");
	p = pair_with(ctx, r.pd, ibv_cq_ex_to_cq(cq));
	for (uint64_t i = 1; i <= 3; i++)
		write_once(&p, r.mr, r.buf, i, 0);
	while ((rc = ibv_start_poll(cq, &pattr)) == ENOENT)
		CHECK(now_ms() < deadline, "no completion within 10 s");
	CHECK_EQ(rc, 0, "ibv_start_poll");
	for (uint64_t i = 1; i <= 3; i++) {
		if (i > 1) {
			while ((rc = ibv_next_poll(cq)) == ENOENT)
				CHECK(now_ms() < deadline, "no completion within 10 s");
			CHECK_EQ(rc, 0, "ibv_next_poll");
		}
		CHECK_EQ(cq->wr_id, i, "wr_id");
		CHECK_EQ(cq->status, IBV_WC_SUCCESS, "status");
		CHECK_EQ(ibv_wc_read_opcode(cq), IBV_WC_RDMA_WRITE, "opcode");
		CHECK_EQ(ibv_wc_read_byte_len(cq), 64, "byte_len");
		CHECK_EQ(ibv_wc_read_qp_num(cq), p.a->qp_num, "qp_num");
	}
	CHECK_EQ(ibv_next_poll(cq), ENOENT, "drained");
	ibv_end_poll(cq);
	pair_destroy(&p);
	CHECK_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0, "destroy");

	/* What the device lacks is EOPNOTSUPP; what no device takes is EINVAL. */
	attr.wc_flags = IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
	CHECK(!ibv_create_cq_ex(ctx, &attr) && errno == EOPNOTSUPP, "timestamps");
	attr.wc_flags = 0;
	attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	attr.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	CHECK(!ibv_create_cq_ex(ctx, &attr) && errno == EOPNOTSUPP, "ignore overrun");
	attr.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	cq = ibv_create_cq_ex(ctx, &attr);
	CHECK(cq, "single-threaded: %s", strerror(errno));
	ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	attr.comp_mask = 0;
	attr.cqe = 1u << 30;
	CHECK(!ibv_create_cq_ex(ctx, &attr) && errno == EINVAL, "past max_cqe");
	rig_close(&r);
}

static struct ibv_qp *create_qp_ex(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_cq *cq, uint64_t ops)
{
	struct ibv_qp_init_attr_ex init = {
		.send_cq = cq,
		.recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 2, .max_recv_sge = 2 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = ops,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &init);

	CHECK(qp, "ibv_create_qp_ex: %s", strerror(errno));
	return qp;
}

static void qp_ex_posts_rdma_write_and_atomics_with_ibv_wr(void)
{
	struct rig r = rig_open();
	struct ibv_context *ctx = r.ctx;
	struct ibv_pd *pd = r.pd;
	char *buf = r.buf;
	struct ibv_mr *mr = r.mr;
	uint64_t *counter = (uint64_t *)(buf + 4096 + 512), *old = (uint64_t *)(buf + 1024);
	struct ibv_cq *cq = create_cq(ctx, 64), *cqb = create_cq(ctx, 64);
	struct ibv_qp *qp = create_qp_ex(ctx, pd, cq, IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD);
	struct ibv_qp *peer = create_qp(pd, cqb), *plain = create_qp(pd, cqb);
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct ibv_wc wc;

	CHECK(qpx, "ibv_qp_to_qp_ex");
	CHECK(!ibv_qp_to_qp_ex(plain), "a QP without send_ops_flags has no builder");
	connect_qp(qp, peer->qp_num);
	connect_qp(peer, qp->qp_num);
	memset(buf, 'w', 100);
	*counter = 40;
	ibv_wr_start(qpx);
	qpx->wr_id = 21;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qpx, mr->rkey, (uintptr_t)buf + 4096);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 100);
	qpx->wr_id = 22;
	ibv_wr_atomic_fetch_add(qpx, mr->rkey, (uintptr_t)counter, 2);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)old, 8);
	CHECK_EQ(ibv_wr_complete(qpx), 0, "ibv_wr_complete");
	wc = poll_one(cq);
	CHECK(wc.wr_id == 21 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RDMA_WRITE, "write: %s",
	      status_name(wc.status));
	wc = poll_one(cq);
	CHECK(wc.wr_id == 22 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD, "fetch-add: %s",
	      status_name(wc.status));
	CHECK(all_bytes(buf + 4096, 100, 'w'), "the bytes moved");
	CHECK(*counter == 42 && *old == 40, "fetch-add: %" PRIu64 " %" PRIu64, *counter, *old);
	/* An opcode not asked for at creation posts nothing: EINVAL. */
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 8);
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL, "SEND not in send_ops_flags");
	/* Aborted: nothing posted. */
	ibv_wr_start(qpx);
	ibv_wr_rdma_write(qpx, mr->rkey, (uintptr_t)buf + 4096);
	ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)buf, 8);
	ibv_wr_abort(qpx);
	CHECK_EQ(ibv_poll_cq(cq, 1, &wc), 0, "nothing posted by the aborted or refused batches");
	ibv_destroy_qp(qp);
	ibv_destroy_qp(peer);
	ibv_destroy_qp(plain);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(cqb);
	rig_close(&r);
}

/* ---- device memory ---------------------------------------------------------------------------- */

static void device_memory_copies_in_words_and_registers_zero_based(void)
{
	struct rig r = rig_open();
	struct ibv_device_attr_ex ex;
	struct ibv_alloc_dm_attr attr = { .length = 256 };
	struct ibv_context *imp;
	struct ibv_dm *dm, *seen;
	struct ibv_mr *dmr;
	struct pair p;
	struct ibv_sge s;
	char out[64];

	CHECK_EQ(ibv_query_device_ex(r.ctx, NULL, &ex), 0, "query_device_ex");
	CHECK(ex.max_dm_size >= 4096, "max_dm_size %" PRIu64, (uint64_t)ex.max_dm_size);
	dm = ibv_alloc_dm(r.ctx, &attr);
	CHECK(dm, "ibv_alloc_dm: %s", strerror(errno));
	memset(r.buf, 'd', 64);
	CHECK_EQ(ibv_memcpy_to_dm(dm, 64, r.buf, 64), 0, "to the DM");
	CHECK_EQ(ibv_memcpy_to_dm(dm, 2, r.buf, 4), EINVAL, "an offset not in words");
	CHECK_EQ(ibv_memcpy_to_dm(dm, 252, r.buf, 8), EINVAL, "past the end");
	/* Another context of the device sees the same bytes through the handle. */
	imp = ibv_import_device(dup(r.ctx->cmd_fd));
	CHECK(imp, "ibv_import_device");
	seen = ibv_import_dm(imp, dm->handle);
	CHECK(seen, "ibv_import_dm: %s", strerror(errno));
	CHECK_EQ(ibv_memcpy_from_dm(out, seen, 64, 64), 0, "from the imported DM");
	CHECK(all_bytes(out, 64, 'd'), "the bytes copied in");
	ibv_unimport_dm(seen);
	CHECK(!ibv_import_dm(imp, dm->handle + 1) && errno == EINVAL, "a handle that names no DM");
	ibv_close_device(imp);
	/* An RDMA WRITE into a zero-based MR on the DM: iova 0 is the MR's first byte. */
	CHECK(!ibv_reg_dm_mr(r.pd, dm, 0, 256, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL, "not zero-based");
	dmr = ibv_reg_dm_mr(r.pd, dm, 128, 128, IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE | ALL_REMOTE);
	CHECK(dmr, "ibv_reg_dm_mr: %s", strerror(errno));
	CHECK_EQ(ibv_free_dm(dm), EBUSY, "a DM with an MR is busy");
	p = pair_with(r.ctx, r.pd, create_cq(r.ctx, 16));
	memset(r.buf, 'w', 32);
	s = sge_of(r.buf, 32, r.mr);
	post_send_ok(p.a, 1, IBV_WR_RDMA_WRITE, &s, 1, 16, dmr->rkey);
	CHECK_EQ(poll_one(p.cqa).status, IBV_WC_SUCCESS, "write into the DM");
	CHECK_EQ(ibv_memcpy_from_dm(out, dm, 128 + 16, 32), 0, "read back");
	CHECK(all_bytes(out, 32, 'w'), "the write landed at the MR's offset 16");
	pair_destroy(&p);
	CHECK_EQ(ibv_destroy_cq(p.cqa), 0, "destroy cq");
	CHECK_EQ(ibv_dereg_mr(dmr), 0, "dereg the DM MR");
	CHECK_EQ(ibv_free_dm(dm), 0, "ibv_free_dm");
	attr.length = ex.max_dm_size + 1;
	CHECK(!ibv_alloc_dm(r.ctx, &attr) && errno == ENOMEM, "past max_dm_size");
	rig_close(&r);
}

/* ---- address handles, fork, the rest --------------------------------------------------------- */

static void address_handles_check_port_and_source_gid(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_ah_attr a = { .dlid = 1, .port_num = 1, .is_global = 1 };
	struct ibv_ah *ah;

	CHECK_EQ(ibv_query_gid(ctx, 1, 0, &a.grh.dgid), 0, "GID 0");
	ah = ibv_create_ah(pd, &a);
	CHECK(ah, "ibv_create_ah with a GRH: %s", strerror(errno));
	CHECK_EQ(ibv_destroy_ah(ah), 0, "ibv_destroy_ah");
	a.grh.sgid_index = 1;
	CHECK(!ibv_create_ah(pd, &a) && errno == EINVAL, "an empty source GID");
	a.grh.sgid_index = 0;
	a.port_num = 2;
	CHECK(!ibv_create_ah(pd, &a) && errno == EINVAL, "no port 2");
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

static void unsupported_verbs_return_their_documented_error(void)
{
	struct ibv_context *ctx = open_device();
	struct ibv_pd *pd = alloc_pd(ctx);
	struct ibv_cq *cq = create_cq(ctx, 4);
	struct ibv_qp *qp = create_qp(pd, cq);
	struct ibv_srq_init_attr srq = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_xrcd_init_attr xrcd = { 0 };
	union ibv_gid gid = { .raw = { 0xff } };

	errno = 0;
	CHECK(!ibv_create_srq(pd, &srq) && errno == EOPNOTSUPP, "ibv_create_srq: %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_alloc_mw(pd, IBV_MW_TYPE_1) && errno == EOPNOTSUPP, "ibv_alloc_mw: %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_open_xrcd(ctx, &xrcd) && errno == EOPNOTSUPP, "ibv_open_xrcd: %s", strerror(errno));
	errno = 0;
	CHECK(!ibv_reg_dmabuf_mr(pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE) && errno == EOPNOTSUPP,
	      "ibv_reg_dmabuf_mr: %s", strerror(errno));
	CHECK_EQ(ibv_resize_cq(cq, 16), EOPNOTSUPP, "ibv_resize_cq");
	CHECK_EQ(ibv_attach_mcast(qp, &gid, 0xc000), EOPNOTSUPP, "ibv_attach_mcast");
	CHECK_EQ(ibv_fork_init(), 0, "ibv_fork_init");
	CHECK_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED, "nothing is pinned: fork is always safe");
	CHECK(strcmp(ibv_wc_status_str(IBV_WC_RETRY_EXC_ERR), "transport retry counter exceeded") == 0,
	      "ibv_wc_status_str");
	CHECK(strcmp(ibv_port_state_str(IBV_PORT_ACTIVE), "PORT_ACTIVE") == 0, "ibv_port_state_str");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

static const struct test_case cases[] = {
	CASE(the_device_reports_one_guid_and_a_vendor_everywhere),
	CASE(the_port_is_an_active_ib_port_with_a_link_local_gid),
	CASE(a_comp_channel_is_woken_by_a_completion),
	CASE(a_solicited_only_arm_waits_for_a_solicited_send),
	CASE(an_event_reaches_a_channel_in_another_process),
	CASE(destroy_cq_waits_for_the_ack_of_its_events),
	CASE(create_cq_ex_polls_with_start_next_end),
	CASE(qp_ex_posts_rdma_write_and_atomics_with_ibv_wr),
	CASE(device_memory_copies_in_words_and_registers_zero_based),
	CASE(address_handles_check_port_and_source_gid),
	CASE(unsupported_verbs_return_their_documented_error),
};

int main(int argc, char **argv)
{
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
