/*
 * mrdemu.c - an emulated RDMA device with libibverbs' ABI: the devices and
 * the contexts (opened and imported).
 *
 * Built against rdma-core's <infiniband/verbs.h> and loaded in place of
 * libibverbs.so.1 (MRD_IBVERBS_LIBRARY, or LD_PRELOAD for any program), it
 * exports every symbol the system's libibverbs.so.1 exports, with its
 * version (libibverbs.map), so that nothing a program calls falls through to
 * the real library. This file has ibv_get_device_list, ibv_free_device_list,
 * ibv_get_device_name, ibv_open_device, ibv_close_device, ibv_import_device
 * (device.c and context.c the host-wide device and its contexts); objects.c
 * the PDs and CQs, mr.c the MRs (ibv_rereg_mr too), qp.c the QPs; datapath.c the ops verbs.h's inline
 * ibv_post_send, ibv_post_recv and ibv_poll_cq call; surface.h lists the
 * rest (what the device reports, completion channels, the extended CQ and QP,
 * address handles, and the stubs of what is not emulated). mrdemu.h declares
 * the extension symbols.
 *
 * Devices are mrdemu0 .. mrdemu<N-1>, N from MRDEMU_DEVICES (default 1, at
 * most 8), read by every ibv_get_device_list. Each is one device for the
 * whole host (state.h, device.c): every ibv_open_device of mrdemuN, in any
 * process, opens a new context (ucontext, context.c) on the same device,
 * whose cmd_fd another process joins with ibv_import_device. A context lives
 * while any process holds a descriptor of its cmd_fd, as the kernel keeps a
 * ucontext; its objects are reaped once nobody does. A context's
 * max_mr_size is MRDEMU_MAX_MR_SIZE (bytes, default 1 TiB) in the
 * environment of its ibv_open_device, and every import of it sees that
 * limit: a test sets a small one to see ranges split at it.
 */
#define _GNU_SOURCE
#include "internal.h"
#include "mrdemu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* The process-local side of a context made or joined by context.c: its verbs ops and the list. */
static struct ibv_context *publish_context(struct emu_context *ctx)
{
	struct ibv_context *ic = &ctx->vctx.context;
	struct emu_shared *sh = ctx->sh;

	ctx->vctx.sz = sizeof(ctx->vctx);
	ic->device = &devices[sh->device_index < EMU_MAX_DEVICES ? sh->device_index : 0];
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
	return ic;
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
	struct emu_device *d;
	struct emu_context *ctx;

	if (index < 0) {
		errno = ENODEV;
		return NULL;
	}
	d = emu_device_get(emu_dir(), index);
	if (!d)
		return NULL;
	ctx = emu_context_open(d, max_mr_size());
	if (!ctx) {
		int err = errno;

		emu_device_put(d);
		errno = err;
		return NULL;
	}
	return publish_context(ctx);
}

struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct emu_context *ctx = emu_context_import(cmd_fd);

	return ctx ? publish_context(ctx) : NULL;
}

/*
 * Closes this process's descriptor of the context: the context and its
 * objects live on while another holder keeps one (the opener's close is no
 * different from an importer's), as closing one dup of a uverbs fd does.
 */
int ibv_close_device(struct ibv_context *context)
{
	struct emu_context *ctx = emu_ctx(context);

	forget_context(ctx);
	emu_surface_close(ctx);
	pthread_mutex_destroy(&context->mutex);
	emu_context_close(ctx);
	return 0;
}

/* ---- the extension symbols ------------------------------------------------------ */

static void count_live(struct emu_context *c, uint32_t out[4])
{
	static const enum emu_kind order[4] = { EMU_PD, EMU_MR, EMU_CQ, EMU_QP };

	for (int i = 0; i < 4; i++)
		out[i] = emu_gone(c) ? 0 : atomic_load(&emu_ctxe(c->sh, c->ctx)->live[order[i]]);
}

int mrdemu_live_objects(struct ibv_context *ctx, uint32_t out[4])
{
	int open = 0;

	if (!out)
		return EINVAL;
	if (ctx) {
		count_live(emu_ctx(ctx), out);
		return 0;
	}
	memset(out, 0, 4 * sizeof(out[0]));
	pthread_mutex_lock(&contexts_lock);
	for (struct emu_context *c = contexts; c; c = c->next) {
		int seen = 0;

		open++;
		for (struct emu_context *d = contexts; d != c; d = d->next)
			seen |= d->sh == c->sh && d->ctx == c->ctx;
		if (!seen) {
			uint32_t one[4];

			count_live(c, one);
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

	if (emu_gone(c))
		return -EIO;
	emu_lock(c->sh);
	/* A handle names an object of this context only, as a uverbs handle does. */
	if (type == MRDEMU_HANDLE_CQ && handle < EMU_MAX_CQ && atomic_load(&emu_cq(c->sh, handle)->live) &&
	    emu_cq(c->sh, handle)->ctx == c->ctx)
		pid = emu_cq(c->sh, handle)->creator_pid;
	else if (type == MRDEMU_HANDLE_QP && handle < EMU_MAX_QP && atomic_load(&emu_qp(c->sh, handle)->live) &&
		 emu_qp(c->sh, handle)->ctx == c->ctx)
		pid = emu_qp(c->sh, handle)->creator_pid;
	else
		pid = 0;
	emu_unlock(c->sh);
	return pid > 0 && pid <= INT32_MAX ? (int)pid : -EINVAL;
}

int mrdemu_destroy_by_handle(struct ibv_context *ctx, int type, uint32_t handle)
{
	struct emu_context *c = emu_ctx(ctx);

	if (emu_gone(c))
		return EIO;
	switch (type) {
	case MRDEMU_HANDLE_CQ:
		return handle < EMU_MAX_CQ && emu_cq(c->sh, handle)->ctx == c->ctx ? emu_destroy_cq_entry(c, handle) :
										      EINVAL;
	case MRDEMU_HANDLE_QP:
		return handle < EMU_MAX_QP && emu_qp(c->sh, handle)->ctx == c->ctx ? emu_destroy_qp_entry(c, handle) :
										      EINVAL;
	default:
		return EINVAL;
	}
}

/*
 * The device of ctx's context, or with ctx NULL of any context of this
 * process (every context of a process is on the one device of the host);
 * NULL without one. The device-wide counters live in its shared header.
 */
static struct emu_shared *device_of(struct ibv_context *ctx)
{
	struct emu_context *c;

	if (ctx)
		return emu_ctx(ctx)->sh;
	pthread_mutex_lock(&contexts_lock);
	c = contexts;
	pthread_mutex_unlock(&contexts_lock);
	return c ? c->sh : NULL;
}

uint64_t mrdemu_unbound_transfers(struct ibv_context *ctx)
{
	struct emu_shared *sh = device_of(ctx);

	if (ctx)
		return atomic_load(&emu_ctxe(sh, emu_ctx(ctx)->ctx)->unbound);
	return sh ? atomic_load(&sh->unbound) : 0;
}

uint64_t mrdemu_registrations(struct ibv_context *ctx)
{
	struct emu_shared *sh = device_of(ctx);

	if (ctx)
		return atomic_load(&emu_ctxe(sh, emu_ctx(ctx)->ctx)->registrations);
	return sh ? atomic_load(&sh->registrations) : 0;
}
