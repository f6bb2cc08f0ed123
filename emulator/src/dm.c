/*
 * dm.c - device memory: ibv_alloc_dm, ibv_free_dm (verbs_context.alloc_dm,
 * free_dm), ibv_memcpy_to_dm / ibv_memcpy_from_dm (struct ibv_dm's ops),
 * ibv_reg_dm_mr (verbs_context.reg_dm_mr), ibv_import_dm, ibv_unimport_dm.
 *
 * A NIC's device memory (mlx5's MEMIC) is memory on the adapter that
 * programs reach by copy and the NIC by MRs. Here it is pages of the
 * device's shared state (the ring heap, state.h), so every process of the
 * device sees the same bytes: one header page, then the data. The handle
 * is the header's page number in the heap; ibv_import_dm checks that it
 * names a live DM before mapping it. Access is in 4-byte words, offset and
 * length, as on mlx5 (the one hardware rule pyverbs tests hold DM to).
 *
 * An MR on a DM (zero-based: its first byte is iova 0) is an MR of the core
 * over the data's address in this process. The DMA engine reaches an MR by
 * the registrant's addresses, and the state is mapped at another address
 * in each process, so only a process the engine runs in may register one:
 * elsewhere ibv_reg_dm_mr is EOPNOTSUPP.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EMU_DM_MAGIC 0x6d64756d65726d64ULL	/* "dmremudm" */

/* The first page of a DM's pages. */
struct emu_dm_header {
	uint64_t magic;
	_Atomic uint32_t live;
	uint32_t pages;		/* data pages, after this one */
	uint64_t length;
	uint32_t creator_pid;
	uint32_t pad;
};

struct emu_dm {
	struct ibv_dm dm;
	struct emu_dm_header *h;
	char *data;
};

static struct emu_dm *edm(struct ibv_dm *dm)
{
	return (struct emu_dm *)dm;
}

/* 0, or an errno for a copy the DM refuses: past its end, or not in 4-byte words. */
static int range_ok(struct ibv_dm *dm, uint64_t offset, size_t length)
{
	uint64_t size = edm(dm)->h->length;

	if ((offset | length) & 3)
		return EINVAL;
	if (offset > size || length > size - offset)
		return EINVAL;
	return 0;
}

static int to_dm(struct ibv_dm *dm, uint64_t dm_offset, const void *host_addr, size_t length)
{
	int rc = range_ok(dm, dm_offset, length);

	if (!rc)
		memcpy(edm(dm)->data + dm_offset, host_addr, length);
	return rc;
}

static int from_dm(void *host_addr, struct ibv_dm *dm, uint64_t dm_offset, size_t length)
{
	int rc = range_ok(dm, dm_offset, length);

	if (!rc)
		memcpy(host_addr, edm(dm)->data + dm_offset, length);
	return rc;
}

static struct ibv_dm *wrap(struct ibv_context *context, uint64_t offset)
{
	struct emu_dm *d = calloc(1, sizeof(*d));

	if (!d) {
		errno = ENOMEM;
		return NULL;
	}
	d->h = emu_at(emu_sh(context), offset);
	d->data = (char *)d->h + EMU_PAGE;
	d->dm.context = context;
	d->dm.memcpy_to_dm = to_dm;
	d->dm.memcpy_from_dm = from_dm;
	d->dm.comp_mask = 0;
	d->dm.handle = (uint32_t)((offset - EMU_HEAP) / EMU_PAGE);
	return &d->dm;
}

static struct ibv_dm *alloc_dm(struct ibv_context *context, struct ibv_alloc_dm_attr *attr)
{
	struct emu_shared *sh = emu_sh(context);
	struct emu_dm_header *h = NULL;
	struct ibv_dm *dm;
	uint32_t pages;
	uint64_t offset;

	if (emu_context_gone(context)) {
		errno = EIO;
		return NULL;
	}
	/* Pages are the alignment: up to 2^12. */
	if (attr->comp_mask || attr->length == 0 || attr->log_align_req > 12) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->length > EMU_MAX_DM_SIZE) {
		errno = ENOMEM;
		return NULL;
	}
	pages = (uint32_t)((attr->length + EMU_PAGE - 1) / EMU_PAGE);
	emu_lock(sh);
	offset = emu_heap_alloc(sh, pages + 1);
	if (offset) {
		h = emu_at(sh, offset);
		h->magic = EMU_DM_MAGIC;
		h->pages = pages;
		h->length = attr->length;
		h->creator_pid = (uint32_t)getpid();
		atomic_store(&h->live, 1);
	}
	emu_unlock(sh);
	if (!offset) {
		errno = ENOMEM;
		return NULL;
	}
	dm = wrap(context, offset);
	if (!dm) {
		emu_lock(sh);
		atomic_store(&h->live, 0);
		emu_heap_free(sh, emu_ctx(context)->dev->fd, offset, pages + 1);
		emu_unlock(sh);
	}
	return dm;
}

/* Whether a live MR of this process's mapping lies in [va, va + len): the DM is busy. */
static int has_mr(struct emu_shared *sh, const char *va, uint64_t len)
{
	uint32_t high = __atomic_load_n(&sh->slots[EMU_MR].high_water, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < high && i < EMU_MAX_MR; i++) {
		struct emu_mr_entry *e = emu_mr(sh, i);

		if (atomic_load(&e->key) && e->addr >= (uintptr_t)va && e->addr < (uintptr_t)va + len)
			return 1;
	}
	return 0;
}

/* EBUSY while an MR is registered on it, as the kernel's. */
static int free_dm(struct ibv_dm *dm)
{
	struct emu_dm *d = edm(dm);
	struct emu_shared *sh = emu_sh(dm->context);
	uint64_t offset = (uint64_t)((char *)d->h - (char *)sh);
	uint32_t one = 1;

	if (emu_context_gone(dm->context)) {
		free(d);
		return 0;
	}
	emu_lock(sh);
	if (has_mr(sh, d->data, d->h->length)) {
		emu_unlock(sh);
		return EBUSY;
	}
	if (!atomic_compare_exchange_strong(&d->h->live, &one, 0)) {
		emu_unlock(sh);
		return EINVAL;
	}
	emu_heap_free(sh, emu_ctx(dm->context)->dev->fd, offset, d->h->pages + 1);
	emu_unlock(sh);
	free(d);
	return 0;
}

static struct ibv_mr *reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t dm_offset, size_t length,
				unsigned int access)
{
	struct emu_dm *d = edm(dm);
	struct ibv_mr *mr;

	if (!(access & IBV_ACCESS_ZERO_BASED) || dm_offset > d->h->length || length > d->h->length - dm_offset) {
		errno = EINVAL;
		return NULL;
	}
	/*
	 * A zero-length DM MR (mlx5 makes them) is an MR of the core's, which
	 * has none: it covers the word at dm_offset, and reports length 0.
	 */
	mr = ibv_reg_mr_iova2(pd, d->data + dm_offset, length ? length : 4, 0, access & ~IBV_ACCESS_ZERO_BASED);
	if (mr) {
		mr->addr = (void *)(uintptr_t)dm_offset;
		mr->length = length;
	}
	return mr;
}

struct ibv_dm *ibv_import_dm(struct ibv_context *context, uint32_t dm_handle)
{
	uint64_t offset = EMU_HEAP + (uint64_t)dm_handle * EMU_PAGE;
	struct emu_dm_header *h;

	if (emu_context_gone(context)) {
		errno = EIO;
		return NULL;
	}
	/* Every importer can write the state: a handle is bounded and checked before use. */
	if (dm_handle >= EMU_HEAP_PAGES) {
		errno = EINVAL;
		return NULL;
	}
	h = emu_at(emu_sh(context), offset);
	if (h->magic != EMU_DM_MAGIC || !atomic_load(&h->live) || h->pages >= EMU_HEAP_PAGES - dm_handle) {
		errno = EINVAL;
		return NULL;
	}
	return wrap(context, offset);
}

/* This process's struct only: the DM stays for its allocator. */
void ibv_unimport_dm(struct ibv_dm *dm)
{
	free(dm);
}

void emu_dm_open(struct emu_context *ctx)
{
	ctx->vctx.alloc_dm = alloc_dm;
	ctx->vctx.free_dm = free_dm;
	ctx->vctx.reg_dm_mr = reg_dm_mr;
}
