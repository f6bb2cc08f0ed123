/*
 * objects.c - the control path of protection domains and completion queues,
 * created and destroyed in the shared tables under the device lock (MRs:
 * mr.c; QPs: qp.c).
 *
 * Every check a kernel driver makes here is made here with its errno: a
 * dealloc of a PD still used is EBUSY, an import of a PD of another context
 * is EINVAL. The struct ibv_* returned is process-local; its handle indexes
 * the shared table. Each object belongs to the context it was made on and
 * is counted there (mrdemu_live_objects); the context's reaper destroys it.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void *fail_null(int err)
{
	errno = err;
	return NULL;
}

/* ---- protection domains ------------------------------------------------------------ */

static struct emu_pd_entry *live_pd(struct ibv_pd *pd)
{
	struct emu_pd *epd = (struct emu_pd *)pd;
	struct emu_pd_entry *e;

	if (pd->handle >= EMU_MAX_PD)
		return NULL;
	e = emu_pd(emu_sh(pd->context), pd->handle);
	return atomic_load(&e->live) && e->gen == epd->gen && e->ctx == emu_ctx(pd->context)->ctx ? e : NULL;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct emu_context *c = emu_ctx(context);
	struct emu_shared *sh = c->sh;
	struct emu_pd *epd;
	struct emu_pd_entry *e;
	uint32_t index;

	if (emu_gone(c))
		return fail_null(EIO);
	epd = calloc(1, sizeof(*epd));
	if (!epd)
		return fail_null(ENOMEM);
	emu_lock(sh);
	index = emu_slot_take(sh, EMU_PD);
	if (index == UINT32_MAX) {
		emu_unlock(sh);
		free(epd);
		return fail_null(ENOMEM);
	}
	e = emu_pd(sh, index);
	e->gen++;
	atomic_store(&e->users, 0);
	e->creator_pid = (uint32_t)getpid();
	e->ctx = c->ctx;
	atomic_store(&e->live, 1);
	emu_count(sh, c->ctx, EMU_PD, 1);
	emu_unlock(sh);
	epd->pd.context = context;
	epd->pd.handle = index;
	epd->gen = e->gen;
	return &epd->pd;
}

int emu_dealloc_pd_entry(struct emu_shared *sh, uint32_t index)
{
	struct emu_pd_entry *e = emu_pd(sh, index);

	emu_lock(sh);
	if (!atomic_load(&e->live)) {
		emu_unlock(sh);
		return EINVAL;
	}
	if (atomic_load(&e->users) > 0) {
		emu_unlock(sh);
		return EBUSY;
	}
	atomic_store(&e->live, 0);
	emu_slot_give(sh, EMU_PD, index);
	emu_count(sh, e->ctx, EMU_PD, -1);
	emu_unlock(sh);
	return 0;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct emu_context *c = emu_ctx(pd->context);
	int rc;

	if (emu_gone(c)) {
		free(pd);
		return 0;
	}
	if (!live_pd(pd))
		return EINVAL;
	rc = emu_dealloc_pd_entry(c->sh, pd->handle);
	if (rc)
		return rc;
	free(pd);
	return 0;
}

struct ibv_pd *ibv_import_pd(struct ibv_context *context, uint32_t pd_handle)
{
	struct emu_context *c = emu_ctx(context);
	struct emu_shared *sh = c->sh;
	struct emu_pd *epd;
	struct emu_pd_entry *e;

	if (emu_gone(c))
		return fail_null(EIO);
	if (pd_handle >= EMU_MAX_PD)
		return fail_null(EINVAL);
	epd = calloc(1, sizeof(*epd));
	if (!epd)
		return fail_null(ENOMEM);
	emu_lock(sh);
	e = emu_pd(sh, pd_handle);
	/* A handle names a PD of this context only, as a uverbs handle does. */
	if (!atomic_load(&e->live) || e->ctx != c->ctx) {
		emu_unlock(sh);
		free(epd);
		return fail_null(EINVAL);
	}
	epd->gen = e->gen;
	emu_unlock(sh);
	epd->pd.context = context;
	epd->pd.handle = pd_handle;
	epd->imported = 1;
	return &epd->pd;
}

/* Releases this process's struct only: the PD stays for whoever else uses it. */
void ibv_unimport_pd(struct ibv_pd *pd)
{
	free(pd);
}

/* ---- completion queues ---------------------------------------------------------------- */

struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
			     struct ibv_comp_channel *channel, int comp_vector)
{
	struct emu_context *c = emu_ctx(context);
	struct emu_shared *sh = c->sh;
	struct emu_cq_entry *e;
	struct emu_cq *ecq;
	uint32_t index, capacity, pages;
	uint64_t ring;

	if (emu_gone(c))
		return fail_null(EIO);
	if (cqe < 1 || (uint32_t)cqe > EMU_MAX_CQE || comp_vector != 0)
		return fail_null(EINVAL);
	capacity = emu_pow2_at_least((uint32_t)cqe);
	pages = emu_pages_for((uint64_t)capacity * sizeof(struct emu_cqe));
	ecq = calloc(1, sizeof(*ecq));
	if (!ecq)
		return fail_null(ENOMEM);
	emu_lock(sh);
	index = emu_slot_take(sh, EMU_CQ);
	ring = index == UINT32_MAX ? 0 : emu_heap_alloc(sh, pages);
	if (!ring) {
		if (index != UINT32_MAX)
			emu_slot_give(sh, EMU_CQ, index);
		emu_unlock(sh);
		free(ecq);
		return fail_null(ENOMEM);
	}
	e = emu_cq(sh, index);
	e->gen++;
	atomic_store(&e->users, 0);
	e->capacity = capacity;
	e->ring = ring;
	e->ring_pages = pages;
	atomic_store(&e->overrun, 0);
	e->dropped = 0;
	e->creator_pid = (uint32_t)getpid();
	e->ctx = c->ctx;
	atomic_store(&e->prod, 0);
	atomic_store(&e->cons, 0);
	atomic_store(&e->poll_lock, 0);
	atomic_store(&e->live, 1);
	emu_count(sh, c->ctx, EMU_CQ, 1);
	emu_unlock(sh);
	ecq->cq.context = context;
	ecq->cq.cq_context = cq_context;
	ecq->cq.handle = index;
	ecq->cq.cqe = (int)capacity;
	pthread_mutex_init(&ecq->cq.mutex, NULL);
	pthread_cond_init(&ecq->cq.cond, NULL);
	ecq->index = index;
	ecq->gen = e->gen;
	emu_cq_bind(ecq, channel);
	return &ecq->cq;
}

int emu_destroy_cq_entry(struct emu_context *ctx, uint32_t index)
{
	struct emu_shared *sh = ctx->sh;
	struct emu_cq_entry *e = emu_cq(sh, index);

	emu_lock(sh);
	if (!atomic_load(&e->live)) {
		emu_unlock(sh);
		return EINVAL;
	}
	if (atomic_load(&e->users) > 0) {
		emu_unlock(sh);
		return EBUSY;
	}
	atomic_store(&e->live, 0);
	emu_heap_free(sh, ctx->dev->fd, e->ring, e->ring_pages);
	emu_slot_give(sh, EMU_CQ, index);
	emu_count(sh, e->ctx, EMU_CQ, -1);
	emu_unlock(sh);
	return 0;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct emu_cq *ecq = (struct emu_cq *)cq;
	struct emu_context *ctx = emu_ctx(cq->context);
	int rc;

	if (emu_gone(ctx)) {
		emu_cq_unbind(ecq);
		free(ecq);
		return 0;
	}
	if (ecq->index >= EMU_MAX_CQ || emu_cq(ctx->sh, ecq->index)->gen != ecq->gen ||
	    emu_cq(ctx->sh, ecq->index)->ctx != ctx->ctx)
		return EINVAL;
	rc = emu_destroy_cq_entry(ctx, ecq->index);
	if (rc)
		return rc;
	emu_cq_unbind(ecq);
	pthread_mutex_destroy(&cq->mutex);
	pthread_cond_destroy(&cq->cond);
	free(ecq);
	return 0;
}

