/*
 * devices_test.c - several emulated devices (MRDEMU_DEVICES): their names,
 * and keys that belong to the device that issued them, as a host with
 * several NICs needs for its daemon's keys per device (issue 23): a key of
 * another device is refused, even one equal in index and variant to a live
 * MR of this device.
 *
 *   devices_test --list      the case names
 *   devices_test NAME        runs one case; exit 0 when it passes
 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

/* A key's device is its bits above the variant (8) and the index (EMU_MR_INDEX_BITS, 18): state.h. */
#define KEY_DEVICE_SHIFT 26u
#define KEY_DEVICE_MASK ((1u << KEY_DEVICE_SHIFT) - 1)

static struct ibv_context *open_nth(int nth)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	struct ibv_context *ctx;

	CHECK(list && n > nth, "mrdemu%d not listed (n=%d)", nth, n);
	ctx = ibv_open_device(list[nth]);
	CHECK(ctx, "ibv_open_device(mrdemu%d): %s", nth, strerror(errno));
	ibv_free_device_list(list);
	return ctx;
}

static void device_list_follows_mrdemu_devices(void)
{
	struct ibv_device **list;
	int n = -1;

	setenv("MRDEMU_DEVICES", "3", 1);
	list = ibv_get_device_list(&n);
	CHECK_EQ(n, 3, "devices");
	CHECK(strcmp(ibv_get_device_name(list[2]), "mrdemu2") == 0, "third name");
	CHECK(list[3] == NULL, "NULL-terminated");
	{
		struct ibv_context *ctx = ibv_open_device(list[2]);
		struct ibv_port_attr port;

		CHECK(ctx, "open mrdemu2");
		CHECK(strcmp(ctx->device->name, "mrdemu2") == 0, "context's device");
		CHECK_EQ(ibv_query_port(ctx, 1, &port), 0, "port");
		ibv_close_device(ctx);
	}
	ibv_free_device_list(list);
	setenv("MRDEMU_DEVICES", "0", 1);
	list = ibv_get_device_list(&n);
	CHECK(list && n == 0 && list[0] == NULL, "no devices");
	ibv_free_device_list(list);
}

/*
 * One RDMA WRITE of s to remote on a fresh loopback pair of pd (an error moves a pair to the error state), the
 * pair destroyed after: the completion's status.
 */
static enum ibv_wc_status write_on_fresh_pair(struct ibv_pd *pd, struct ibv_cq *cqa, struct ibv_cq *cqb,
					      uint64_t wr_id, struct ibv_sge *s, void *remote, uint32_t rkey)
{
	struct ibv_qp *a = create_qp(pd, cqa), *b = create_qp(pd, cqb);
	struct ibv_wc wc;

	connect_qp(a, b->qp_num);
	connect_qp(b, a->qp_num);
	post_send_ok(a, wr_id, IBV_WR_RDMA_WRITE, s, 1, (uintptr_t)remote, rkey);
	wc = poll_one(cqa);
	CHECK_EQ(ibv_destroy_qp(a), 0, "destroy qp a");
	CHECK_EQ(ibv_destroy_qp(b), 0, "destroy qp b");
	return wc.status;
}

static void a_key_of_another_device_is_refused(void)
{
	struct ibv_context *c0, *c1;
	struct ibv_pd *pd0, *pd1;
	struct ibv_mr *src0, *dst0, *src1, *dst1;
	struct ibv_cq *cqa, *cqb;
	char *src = shared_memory(4096), *dst = shared_memory(4096);
	struct ibv_sge s;
	uint32_t forged;

	setenv("MRDEMU_DEVICES", "2", 1);
	c0 = open_nth(0);
	c1 = open_nth(1);
	pd0 = alloc_pd(c0);
	pd1 = alloc_pd(c1);
	/* The same memory registered on both devices, as the daemon registers one range on each. */
	src0 = reg(pd0, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	dst0 = reg(pd0, dst, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	src1 = reg(pd1, src, 4096, IBV_ACCESS_LOCAL_WRITE);
	dst1 = reg(pd1, dst, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	CHECK(src0->lkey >> KEY_DEVICE_SHIFT == 0, "mrdemu0's key 0x%x names mrdemu0", src0->lkey);
	CHECK(src1->lkey >> KEY_DEVICE_SHIFT == 1, "mrdemu1's key 0x%x names mrdemu1", src1->lkey);
	CHECK(dst1->rkey >> KEY_DEVICE_SHIFT == 1, "mrdemu1's rkey 0x%x names mrdemu1", dst1->rkey);

	cqa = create_cq(c1, 16);
	cqb = create_cq(c1, 16);
	memset(src, 'x', 4096);
	memset(dst, 0, 4096);

	/* mrdemu0's lkey on a queue pair of mrdemu1: a local protection error, no byte moved. */
	s = sge_of(src, 64, src0);
	CHECK_EQ(write_on_fresh_pair(pd1, cqa, cqb, 1, &s, dst, dst1->rkey), IBV_WC_LOC_PROT_ERR, "mrdemu0's lkey");
	CHECK(all_bytes(dst, 4096, 0), "a write from another device's lkey moved bytes");

	/* mrdemu0's rkey at a target on mrdemu1: refused by the responder. */
	s = sge_of(src, 64, src1);
	CHECK_EQ(write_on_fresh_pair(pd1, cqa, cqb, 2, &s, dst, dst0->rkey), IBV_WC_REM_ACCESS_ERR, "mrdemu0's rkey");
	CHECK(all_bytes(dst, 4096, 0), "a write to another device's rkey moved bytes");

	/*
	 * The key mrdemu0 would give for mrdemu1's live MR (same index, same variant): what a device without its
	 * number in its keys could have issued. Refused all the same.
	 */
	forged = src1->lkey & KEY_DEVICE_MASK;
	s = sge_of(src, 64, src1);
	s.lkey = forged;
	CHECK_EQ(write_on_fresh_pair(pd1, cqa, cqb, 3, &s, dst, dst1->rkey), IBV_WC_LOC_PROT_ERR,
		 "mrdemu0's twin of a live key");
	CHECK(all_bytes(dst, 4096, 0), "a write from mrdemu0's twin of a live key moved bytes");

	/* mrdemu1's own keys work. */
	s = sge_of(src, 64, src1);
	CHECK_EQ(write_on_fresh_pair(pd1, cqa, cqb, 4, &s, dst, dst1->rkey), IBV_WC_SUCCESS, "mrdemu1's keys");
	CHECK(all_bytes(dst, 64, 'x'), "the write with mrdemu1's keys");

	CHECK_EQ(ibv_destroy_cq(cqa), 0, "destroy cq a");
	CHECK_EQ(ibv_destroy_cq(cqb), 0, "destroy cq b");
	CHECK_EQ(ibv_dereg_mr(src0), 0, "dereg");
	CHECK_EQ(ibv_dereg_mr(dst0), 0, "dereg");
	CHECK_EQ(ibv_dereg_mr(src1), 0, "dereg");
	CHECK_EQ(ibv_dereg_mr(dst1), 0, "dereg");
	ibv_dealloc_pd(pd0);
	ibv_dealloc_pd(pd1);
	ibv_close_device(c0);
	ibv_close_device(c1);
}

static const struct test_case cases[] = {
	CASE(device_list_follows_mrdemu_devices),
	CASE(a_key_of_another_device_is_refused),
};

int main(int argc, char **argv)
{
	return run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
