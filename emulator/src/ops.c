/*
 * ops.c - what every context carries beyond the core's datapath ops: the
 * verbs_context entries verbs.h's inline ibv_query_port, ibv_query_device_ex,
 * ibv_create_cq_ex and ibv_create_qp_ex call, ops.req_notify_cq, the ops
 * an inline function calls without looking (for objects this device never
 * makes: memory windows, SRQs), and the async event fd.
 *
 * The device raises no async events: async_fd is an eventfd nothing writes,
 * so a program that polls it or blocks in ibv_get_async_event waits, as on
 * a NIC where nothing goes wrong, instead of failing on a bad fd.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

static int no_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *mw_bind)
{
	(void)qp, (void)mw, (void)mw_bind;
	return EOPNOTSUPP;
}

static int no_dealloc_mw(struct ibv_mw *mw)
{
	(void)mw;
	return EOPNOTSUPP;
}

static int no_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr)
{
	(void)srq;
	*bad_wr = wr;
	return EOPNOTSUPP;
}

int emu_context_gone(struct ibv_context *context)
{
	return emu_gone(emu_ctx(context));
}

void emu_surface_open(struct emu_context *ctx)
{
	struct ibv_context *ic = &ctx->vctx.context;

	ctx->vctx.query_port = emu_query_port;
	ctx->vctx.query_device_ex = emu_query_device_ex;
	ctx->vctx.create_cq_ex = emu_create_cq_ex;
	ctx->vctx.create_qp_ex = emu_create_qp_ex;
	emu_dm_open(ctx);
	ic->ops._compat_query_device = ibv_query_device;
	ic->ops._compat_query_port = ibv_query_port;
	ic->ops.req_notify_cq = emu_req_notify;
	/* ops.alloc_mw stays NULL: the inline ibv_alloc_mw then fails with EOPNOTSUPP. */
	ic->ops.bind_mw = no_bind_mw;
	ic->ops.dealloc_mw = no_dealloc_mw;
	ic->ops.post_srq_recv = no_post_srq_recv;
	ic->async_fd = eventfd(0, EFD_CLOEXEC);
}

void emu_surface_close(struct emu_context *ctx)
{
	if (ctx->vctx.context.async_fd >= 0)
		close(ctx->vctx.context.async_fd);
}

/* Blocks (or EAGAIN on a non-blocking async_fd): there is never an event. */
int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	uint64_t v;

	(void)event;
	if (read(context->async_fd, &v, sizeof(v)) < 0)
		return -1;
	errno = EIO;
	return -1;
}

void ibv_ack_async_event(struct ibv_async_event *event)
{
	(void)event;
}
