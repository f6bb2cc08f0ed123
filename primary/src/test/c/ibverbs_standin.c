/*
 * ibverbs_standin.c - a stand-in for libibverbs.so.1 with the symbols mrd's
 * ibverbs provider binds, built against rdma-core's own <infiniband/verbs.h>
 * so that every struct the Java side reads has the real offsets.
 *
 * IbverbsRegistrarTest compiles it at test time:
 *     gcc -O2 -shared -fPIC -o libibverbs-standin.so ibverbs_standin.c
 * and points the provider at the result. No device, no kernel driver: the
 * "device" is a struct in this file, an MR is a calloc'd struct ibv_mr with
 * recognisable keys (lkey 0x1000 + n, rkey 0x2000 + n, handle n for the nth
 * registration since load).
 *
 * Test controls (standin_*) let the test choose how many devices exist, make
 * registrations fail with a chosen errno, and count what is still open.
 */
#include <infiniband/verbs.h>

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STANDIN_MAX_DEVICES 4
#define STANDIN_LKEY_BASE 0x1000u
#define STANDIN_RKEY_BASE 0x2000u
/* A registration of exactly this length fails with ENOMEM, whatever the controls say. */
#define STANDIN_FAILING_LENGTH 0xDEAD000u

enum standin_entry { ENTRY_NONE = 0, ENTRY_REG_MR = 1, ENTRY_REG_MR_IOVA2 = 2 };

static struct ibv_device devices[STANDIN_MAX_DEVICES];
static int device_count = 1;
static int reg_errno;
static int last_entry;
static unsigned int last_access;
static uint64_t last_iova;
static uint32_t registrations;
static int live_mrs, live_pds, live_contexts, live_device_lists;

__attribute__((constructor)) static void fill_devices(void)
{
	for (int i = 0; i < STANDIN_MAX_DEVICES; i++) {
		memset(&devices[i], 0, sizeof(devices[i]));
		devices[i].node_type = IBV_NODE_CA;
		devices[i].transport_type = IBV_TRANSPORT_IB;
		snprintf(devices[i].name, sizeof(devices[i].name), "mrd_standin%d", i);
		snprintf(devices[i].dev_name, sizeof(devices[i].dev_name), "uverbs%d", i);
	}
}

/* ---- the libibverbs symbols ------------------------------------------------ */

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	int count = __atomic_load_n(&device_count, __ATOMIC_SEQ_CST);
	struct ibv_device **list = calloc((size_t)count + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < count; i++)
		list[i] = &devices[i];
	if (num_devices)
		*num_devices = count;
	__atomic_add_fetch(&live_device_lists, 1, __ATOMIC_SEQ_CST);
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	__atomic_sub_fetch(&live_device_lists, 1, __ATOMIC_SEQ_CST);
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	struct ibv_context *context = calloc(1, sizeof(*context));

	if (!context) {
		errno = ENOMEM;
		return NULL;
	}
	context->device = device;
	context->cmd_fd = -1;
	context->async_fd = -1;
	__atomic_add_fetch(&live_contexts, 1, __ATOMIC_SEQ_CST);
	return context;
}

int ibv_close_device(struct ibv_context *context)
{
	__atomic_sub_fetch(&live_contexts, 1, __ATOMIC_SEQ_CST);
	free(context);
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct ibv_pd *pd = calloc(1, sizeof(*pd));

	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->context = context;
	pd->handle = 7;
	__atomic_add_fetch(&live_pds, 1, __ATOMIC_SEQ_CST);
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	/* As the kernel does: a PD with MRs still on it is busy. */
	if (__atomic_load_n(&live_mrs, __ATOMIC_SEQ_CST) > 0)
		return EBUSY;
	__atomic_sub_fetch(&live_pds, 1, __ATOMIC_SEQ_CST);
	free(pd);
	return 0;
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			  unsigned int access, int entry)
{
	struct ibv_mr *mr;
	uint32_t n;
	int fail = __atomic_load_n(&reg_errno, __ATOMIC_SEQ_CST);

	__atomic_store_n(&last_entry, entry, __ATOMIC_SEQ_CST);
	__atomic_store_n(&last_access, access, __ATOMIC_SEQ_CST);
	__atomic_store_n(&last_iova, iova, __ATOMIC_SEQ_CST);
	if (length == STANDIN_FAILING_LENGTH)
		fail = ENOMEM;
	if (fail) {
		errno = fail;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	n = __atomic_add_fetch(&registrations, 1, __ATOMIC_SEQ_CST);
	mr->context = pd->context;
	mr->pd = pd;
	mr->addr = addr;
	mr->length = length;
	mr->handle = n;
	mr->lkey = STANDIN_LKEY_BASE + n;
	mr->rkey = STANDIN_RKEY_BASE + n;
	__atomic_add_fetch(&live_mrs, 1, __ATOMIC_SEQ_CST);
	return mr;
}

/* verbs.h makes ibv_reg_mr a macro choosing between the two exported entry points; define the symbol. */
#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg(pd, addr, length, (uintptr_t)addr, (unsigned int)access, ENTRY_REG_MR);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
				unsigned int access)
{
	return reg(pd, addr, length, iova, access, ENTRY_REG_MR_IOVA2);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	__atomic_sub_fetch(&live_mrs, 1, __ATOMIC_SEQ_CST);
	free(mr);
	return 0;
}

/* ---- test controls ----------------------------------------------------------- */

/* How many devices ibv_get_device_list reports (0..4), named mrd_standin0, 1, ... */
void standin_set_device_count(int n)
{
	__atomic_store_n(&device_count, n < 0 ? 0 : n > STANDIN_MAX_DEVICES ? STANDIN_MAX_DEVICES : n,
			 __ATOMIC_SEQ_CST);
}

/* Registrations fail with this errno until it is set back to 0. */
void standin_set_reg_errno(int e)
{
	__atomic_store_n(&reg_errno, e, __ATOMIC_SEQ_CST);
}

int standin_live_mrs(void) { return __atomic_load_n(&live_mrs, __ATOMIC_SEQ_CST); }
int standin_live_pds(void) { return __atomic_load_n(&live_pds, __ATOMIC_SEQ_CST); }
int standin_live_contexts(void) { return __atomic_load_n(&live_contexts, __ATOMIC_SEQ_CST); }
int standin_live_device_lists(void) { return __atomic_load_n(&live_device_lists, __ATOMIC_SEQ_CST); }
unsigned int standin_registrations(void) { return __atomic_load_n(&registrations, __ATOMIC_SEQ_CST); }
/* 1 when the last registration came through ibv_reg_mr, 2 through ibv_reg_mr_iova2. */
int standin_last_entry(void) { return __atomic_load_n(&last_entry, __ATOMIC_SEQ_CST); }
unsigned int standin_last_access(void) { return __atomic_load_n(&last_access, __ATOMIC_SEQ_CST); }
uint64_t standin_last_iova(void) { return __atomic_load_n(&last_iova, __ATOMIC_SEQ_CST); }

/*
 * offsetof/sizeof of struct ibv_mr as this compiler sees rdma-core's header, so the test can
 * compare the Java layout field by field: {context, pd, addr, length, handle, lkey, rkey, sizeof}.
 */
long standin_mr_layout(int field)
{
	switch (field) {
	case 0: return offsetof(struct ibv_mr, context);
	case 1: return offsetof(struct ibv_mr, pd);
	case 2: return offsetof(struct ibv_mr, addr);
	case 3: return offsetof(struct ibv_mr, length);
	case 4: return offsetof(struct ibv_mr, handle);
	case 5: return offsetof(struct ibv_mr, lkey);
	case 6: return offsetof(struct ibv_mr, rkey);
	case 7: return sizeof(struct ibv_mr);
	default: return -1;
	}
}
