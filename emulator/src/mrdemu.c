/*
 * mrdemu.c - an emulated RDMA device with libibverbs' ABI: the devices, the
 * contexts (opened and imported), and what they report.
 *
 * Built against rdma-core's <infiniband/verbs.h> and loaded in place of
 * libibverbs.so.1 (MRD_IBVERBS_LIBRARY), it exports the names a program
 * compiled against that header resolves to, which are also the names an FFM
 * binding looks up:
 *   ibv_get_device_list, ibv_free_device_list, ibv_get_device_name,
 *   ibv_open_device, ibv_close_device, ibv_import_device,
 *   ibv_query_device (ibv_query_device_ex is inline over the verbs_context),
 *   ibv_query_port (the macro goes through the inline ___ibv_query_port,
 *   which calls verbs_context.query_port; the exported symbol takes the
 *   older, shorter struct _compat_ibv_port_attr),
 *   ibv_alloc_pd, ibv_dealloc_pd, ibv_import_pd, ibv_unimport_pd,
 *   ibv_reg_mr (a macro over the exported ibv_reg_mr / ibv_reg_mr_iova2),
 *   ibv_reg_mr_iova, ibv_reg_mr_iova2, ibv_dereg_mr,
 *   ibv_create_cq, ibv_destroy_cq, ibv_create_qp, ibv_destroy_qp,
 *   ibv_modify_qp, ibv_query_qp, ibv_rereg_mr,
 * and fills ops.post_send, ops.post_recv, ops.poll_cq, ops.req_notify_cq in
 * every context, which verbs.h's inline ibv_post_send, ibv_post_recv and
 * ibv_poll_cq call. mrdemu.h declares the extension symbols.
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

/* ---- what the device reports --------------------------------------------- */

static void fill_device_attr(struct emu_context *c, struct ibv_device_attr *attr)
{
	struct emu_shared *sh = c->sh;

	memset(attr, 0, sizeof(*attr));
	snprintf(attr->fw_ver, sizeof(attr->fw_ver), "mrdemu %u", EMU_LAYOUT_VERSION);
	attr->node_guid = sh->nonce;
	attr->sys_image_guid = sh->nonce;
	attr->max_mr_size = emu_ctxe(sh, c->ctx)->max_mr_size;
	attr->page_size_cap = EMU_PAGE;
	attr->vendor_id = 0;
	attr->vendor_part_id = 0;
	attr->hw_ver = EMU_LAYOUT_VERSION;
	attr->max_qp = EMU_MAX_QP;
	attr->max_qp_wr = EMU_MAX_QP_WR;
	attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
	attr->max_sge = EMU_MAX_SGE;
	attr->max_sge_rd = EMU_MAX_SGE;
	attr->max_cq = EMU_MAX_CQ;
	attr->max_cqe = EMU_MAX_CQE;
	attr->max_mr = EMU_MAX_MR;
	attr->max_pd = EMU_MAX_PD;
	attr->max_qp_rd_atom = EMU_MAX_RD_ATOM;
	attr->max_res_rd_atom = EMU_MAX_RD_ATOM * EMU_MAX_QP;
	attr->max_qp_init_rd_atom = EMU_MAX_RD_ATOM;
	attr->atomic_cap = IBV_ATOMIC_HCA;
	attr->max_pkeys = 1;
	attr->phys_port_cnt = 1;
}

int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *device_attr)
{
	if (emu_gone(emu_ctx(context)))
		return EIO;
	fill_device_attr(emu_ctx(context), device_attr);
	return 0;
}

static int query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			   struct ibv_device_attr_ex *attr, size_t attr_size)
{
	(void)input;
	if (emu_gone(emu_ctx(context)))
		return EIO;
	if (attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	memset(attr, 0, attr_size);
	fill_device_attr(emu_ctx(context), &attr->orig_attr);
	return 0;
}

static int fill_port_attr(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *attr)
{
	struct emu_shared *sh = emu_sh(context);

	if (emu_gone(emu_ctx(context)))
		return EIO;
	if (port_num != 1)
		return EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->state = IBV_PORT_ACTIVE;
	attr->max_mtu = IBV_MTU_4096;
	attr->active_mtu = IBV_MTU_4096;
	attr->gid_tbl_len = 1;
	attr->max_msg_sz = EMU_MAX_MSG_SZ;
	attr->pkey_tbl_len = 1;
	/* A LID per device: a request to another device's LID reaches nobody. */
	attr->lid = emu_port_lid(sh);
	attr->sm_lid = 1;
	attr->max_vl_num = 1;
	attr->active_width = 2;		/* 4x */
	attr->active_speed = 32;	/* EDR */
	attr->phys_state = 5;		/* LinkUp */
	attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
	return 0;
}

/* What the inline ___ibv_query_port calls for a context with a verbs_context. */
static int query_port_ex(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr,
			 size_t port_attr_len)
{
	struct ibv_port_attr full;
	int rc = fill_port_attr(context, port_num, &full);

	if (rc)
		return rc;
	memcpy(port_attr, &full, port_attr_len < sizeof(full) ? port_attr_len : sizeof(full));
	return 0;
}

/*
 * The exported symbol takes struct _compat_ibv_port_attr, struct ibv_port_attr
 * without its last field (port_cap_flags2): write no further.
 */
#undef ibv_query_port
int ibv_query_port(struct ibv_context *context, uint8_t port_num, struct _compat_ibv_port_attr *port_attr)
{
	return query_port_ex(context, port_num, (struct ibv_port_attr *)port_attr,
			     offsetof(struct ibv_port_attr, port_cap_flags2));
}

/* ---- contexts ----------------------------------------------------------------- */

/* The process-local side of a context made or joined by context.c: its verbs ops and the list. */
static struct ibv_context *publish_context(struct emu_context *ctx)
{
	struct ibv_context *ic = &ctx->vctx.context;
	struct emu_shared *sh = ctx->sh;

	ctx->vctx.sz = sizeof(ctx->vctx);
	ctx->vctx.query_port = query_port_ex;
	ctx->vctx.query_device_ex = query_device_ex;
	ic->device = &devices[sh->device_index < EMU_MAX_DEVICES ? sh->device_index : 0];
	ic->async_fd = -1;
	ic->num_comp_vectors = 1;
	pthread_mutex_init(&ic->mutex, NULL);
	ic->abi_compat = __VERBS_ABI_IS_EXTENDED;
	ic->ops._compat_query_device = ibv_query_device;
	ic->ops._compat_query_port = ibv_query_port;
	ic->ops.poll_cq = emu_poll_cq;
	ic->ops.req_notify_cq = emu_req_notify_cq;
	ic->ops.post_send = emu_post_send;
	ic->ops.post_recv = emu_post_recv;
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

uint64_t mrdemu_unbound_transfers(struct ibv_context *ctx)
{
	struct emu_context *c;

	if (ctx) {
		c = emu_ctx(ctx);
		return atomic_load(&emu_ctxe(c->sh, c->ctx)->unbound);
	}
	pthread_mutex_lock(&contexts_lock);
	c = contexts;
	pthread_mutex_unlock(&contexts_lock);
	return c ? atomic_load(&c->sh->unbound) : 0;
}
