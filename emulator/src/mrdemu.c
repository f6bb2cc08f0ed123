/*
 * mrdemu.c - an emulated RDMA device with libibverbs' ABI: the devices and
 * the contexts (opened and imported).
 *
 * Built against rdma-core's <infiniband/verbs.h> and loaded in place of
 * libibverbs.so.1 (MRD_IBVERBS_LIBRARY, or LD_PRELOAD for any program), it
 * exports every symbol the system's libibverbs.so.1 exports, with its
 * version (libibverbs.map), so that nothing a program calls falls through to
 * the real library. This file has ibv_get_device_list, ibv_free_device_list,
 * ibv_get_device_name, ibv_open_device, ibv_close_device, ibv_import_device;
 * objects.c the PDs, MRs, CQs and QPs; datapath.c the ops verbs.h's inline
 * ibv_post_send, ibv_post_recv and ibv_poll_cq call; surface.h lists the
 * rest (what the device reports, completion channels, the extended CQ and QP,
 * address handles, and the stubs of what is not emulated). mrdemu.h declares
 * the extension symbols.
 *
 * Devices are mrdemu0 .. mrdemu<N-1>, N from MRDEMU_DEVICES (default 1, at
 * most 8), read by every ibv_get_device_list. A device's max_mr_size is
 * MRDEMU_MAX_MR_SIZE (bytes, default 1 TiB), read by ibv_open_device: a test
 * sets a small one to see ranges split at it. Each ibv_open_device creates a
 * new device instance: its state in a memfd (state.h), which is the
 * context's cmd_fd, and its DMA engine thread (engine.c). Another process
 * joins that instance with ibv_import_device on a dup of the fd. The
 * instance lives as long as its opener: when the opener closes it, or dies,
 * every other process's calls on it fail with EIO (a kernel would keep the
 * device for the other fd holders; here the engine is gone with the opener,
 * and EIO beats waiting for completions that never come).
 */
#define _GNU_SOURCE
#include "internal.h"
#include "mrdemu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMU_MAX_DEVICES 8

static struct ibv_device devices[EMU_MAX_DEVICES];
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_context *contexts;

__attribute__((constructor)) static void name_devices(void)
{
	for (int i = 0; i < EMU_MAX_DEVICES; i++) {
		devices[i].node_type = IBV_NODE_CA;
		devices[i].transport_type = IBV_TRANSPORT_IB;
		snprintf(devices[i].name, sizeof(devices[i].name), "mrdemu%d", i);
		snprintf(devices[i].dev_name, sizeof(devices[i].dev_name), "uverbs%d", i);
		snprintf(devices[i].dev_path, sizeof(devices[i].dev_path),
			 "/sys/class/infiniband_verbs/uverbs%d", i);
		snprintf(devices[i].ibdev_path, sizeof(devices[i].ibdev_path),
			 "/sys/class/infiniband/mrdemu%d", i);
	}
}

static int device_count(void)
{
	const char *env = getenv("MRDEMU_DEVICES");
	char *end;
	long n;

	if (!env || !*env)
		return 1;
	n = strtol(env, &end, 10);
	if (*end || n < 0)
		return 1;
	return n > EMU_MAX_DEVICES ? EMU_MAX_DEVICES : (int)n;
}

struct ibv_device **ibv_get_device_list(int *num_devices)
{
	int count = device_count();
	struct ibv_device **list = calloc((size_t)count + 1, sizeof(*list));

	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < count; i++)
		list[i] = &devices[i];
	if (num_devices)
		*num_devices = count;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device ? device->name : NULL;
}

/* MRDEMU_MAX_MR_SIZE, or the default when it is unset or not a positive number of bytes. */
static uint64_t max_mr_size(void)
{
	const char *env = getenv("MRDEMU_MAX_MR_SIZE");
	char *end;
	unsigned long long n;

	if (!env || !*env || *env == '-')
		return EMU_MAX_MR_SIZE;
	errno = 0;
	n = strtoull(env, &end, 10);
	if (*end || errno || n == 0)
		return EMU_MAX_MR_SIZE;
	return (uint64_t)n;
}

static int device_index(struct ibv_device *device)
{
	for (int i = 0; i < EMU_MAX_DEVICES; i++)
		if (device == &devices[i])
			return i;
	return -1;
}

/* ---- contexts ----------------------------------------------------------------- */

static struct emu_context *new_context(struct emu_shared *sh, int fd, int opener)
{
	struct emu_context *ctx = calloc(1, sizeof(*ctx));
	struct ibv_context *ic;

	if (!ctx)
		return NULL;
	ctx->sh = sh;
	ctx->opener = opener;
	ctx->vctx.sz = sizeof(ctx->vctx);
	ic = &ctx->vctx.context;
	ic->device = &devices[sh->device_index < EMU_MAX_DEVICES ? sh->device_index : 0];
	ic->cmd_fd = fd;
	ic->async_fd = -1;
	ic->num_comp_vectors = 1;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ic->ops.poll_cq = emu_poll_cq;
	ic->ops.post_send = emu_post_send;
	ic->ops.post_recv = emu_post_recv;
	/* The rest of the ops and the verbs_context entries: surface.h. */
	emu_surface_open(ctx);
	pthread_mutex_lock(&contexts_lock);
	ctx->next = contexts;
	contexts = ctx;
	pthread_mutex_unlock(&contexts_lock);
	return ctx;
}

static void forget_context(struct emu_context *ctx)
{
	pthread_mutex_lock(&contexts_lock);
	for (struct emu_context **p = &contexts; *p; p = &(*p)->next) {
		if (*p == ctx) {
			*p = ctx->next;
			break;
		}
	}
	pthread_mutex_unlock(&contexts_lock);
}

struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	int index = device_index(device);
	char name[32];
	struct emu_shared *sh;
	struct emu_context *ctx;
	uint64_t nonce;
	int fd, rc;

	if (index < 0) {
		errno = ENODEV;
		return NULL;
	}
	snprintf(name, sizeof(name), "mrdemu%d", index);
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)EMU_MAP_SIZE) != 0)
		goto fail_fd;
	sh = mmap(NULL, EMU_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (sh == MAP_FAILED)
		goto fail_fd;
	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = (uint64_t)getpid() << 32 ^ emu_now_ns();
	emu_state_init(sh, (uint32_t)index, nonce, max_mr_size());
	ctx = new_context(sh, fd, 1);
	if (!ctx) {
		errno = ENOMEM;
		goto fail_map;
	}
	rc = pthread_create(&ctx->engine, NULL, emu_engine_main, ctx);
	if (rc) {
		forget_context(ctx);
		free(ctx);
		errno = rc;
		goto fail_map;
	}
	pthread_setname_np(ctx->engine, "mrdemu-dma");
	return &ctx->vctx.context;

fail_map:
	rc = errno;
	munmap(sh, EMU_MAP_SIZE);
	errno = rc;
fail_fd:
	rc = errno;
	close(fd);
	errno = rc;
	return NULL;
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct emu_shared *sh;
	struct emu_context *ctx;
	struct stat st;

	if (fstat(cmd_fd, &st) != 0)
		return NULL;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != EMU_MAP_SIZE) {
		errno = EINVAL;
		return NULL;
	}
	sh = mmap(NULL, EMU_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, cmd_fd, 0);
	if (sh == MAP_FAILED)
		return NULL;
	if (sh->magic != EMU_MAGIC || sh->version != EMU_LAYOUT_VERSION || sh->map_size != EMU_MAP_SIZE) {
		munmap(sh, EMU_MAP_SIZE);
		errno = EINVAL;
		return NULL;
	}
	if (emu_gone(sh)) {
		munmap(sh, EMU_MAP_SIZE);
		errno = EIO;
		return NULL;
	}
	ctx = new_context(sh, cmd_fd, 0);
	if (!ctx) {
		munmap(sh, EMU_MAP_SIZE);
		errno = ENOMEM;
		return NULL;
	}
	return &ctx->vctx.context;
}

/*
 * The opener's close is the device going away: the engine finishes the pass
 * it is in and stops, and every object goes with the device (importers'
 * calls fail with EIO from then on). An importer's close leaves the device
 * and its objects alone, as closing one dup of a uverbs fd does.
 */
int ibv_close_device(struct ibv_context *context)
{
	struct emu_context *ctx = emu_ctx(context);
	struct emu_shared *sh = ctx->sh;

	if (ctx->opener) {
		emu_engine_stop(ctx);
		atomic_store(&sh->device_state, EMU_DEVICE_GONE);
	}
	forget_context(ctx);
	emu_surface_close(ctx);
	munmap(sh, EMU_MAP_SIZE);
	close(context->cmd_fd);
	pthread_mutex_destroy(&context->mutex);
	free(ctx);
	return 0;
}

/* ---- the extension symbols ------------------------------------------------------ */

static void count_live(struct emu_shared *sh, uint32_t out[4])
{
	static const enum emu_kind order[4] = { EMU_PD, EMU_MR, EMU_CQ, EMU_QP };

	for (int i = 0; i < 4; i++)
		out[i] = emu_gone(sh) ? 0 : atomic_load(&sh->live[order[i]]);
}

int mrdemu_live_objects(struct ibv_context *ctx, uint32_t out[4])
{
	int open = 0;

	if (!out)
		return EINVAL;
	if (ctx) {
		count_live(emu_sh(ctx), out);
		return 0;
	}
	memset(out, 0, 4 * sizeof(out[0]));
	pthread_mutex_lock(&contexts_lock);
	for (struct emu_context *c = contexts; c; c = c->next) {
		int seen = 0;

		open++;
		for (struct emu_context *d = contexts; d != c; d = d->next)
			seen |= d->sh->nonce == c->sh->nonce;
		if (!seen) {
			uint32_t one[4];

			count_live(c->sh, one);
			for (int i = 0; i < 4; i++)
				out[i] += one[i];
		}
	}
	pthread_mutex_unlock(&contexts_lock);
	return open;
}

int mrdemu_handle_creator(struct ibv_context *ctx, int type, uint32_t handle)
{
	struct emu_context *c = emu_ctx(ctx);
	uint32_t pid;

	if (emu_gone(c->sh))
		return -EIO;
	emu_lock(c->sh);
	if (type == MRDEMU_HANDLE_CQ && handle < EMU_MAX_CQ && atomic_load(&emu_cq(c->sh, handle)->live))
		pid = emu_cq(c->sh, handle)->creator_pid;
	else if (type == MRDEMU_HANDLE_QP && handle < EMU_MAX_QP && atomic_load(&emu_qp(c->sh, handle)->live))
		pid = emu_qp(c->sh, handle)->creator_pid;
	else
		pid = 0;
	emu_unlock(c->sh);
	return pid > 0 && pid <= INT32_MAX ? (int)pid : -EINVAL;
}

int mrdemu_destroy_by_handle(struct ibv_context *ctx, int type, uint32_t handle)
{
	struct emu_context *c = emu_ctx(ctx);

	if (emu_gone(c->sh))
		return EIO;
	switch (type) {
	case MRDEMU_HANDLE_CQ:
		return handle < EMU_MAX_CQ ? emu_destroy_cq_entry(c, handle) : EINVAL;
	case MRDEMU_HANDLE_QP:
		return handle < EMU_MAX_QP ? emu_destroy_qp_entry(c, handle) : EINVAL;
	default:
		return EINVAL;
	}
}
