/*
 * mr.c - memory regions: registration (bound to pages, binding.c),
 * re-registration and deregistration, and the keys.
 *
 * A key is emu_mr_key(device, index, variant), the variant new at every
 * registration of the index and never 0, as mlx5 mkeys; the device's number
 * in it makes another emulated device refuse it (state.h says why). The lkey and the rkey are the key, as
 * mlx5 reports them (rxe reports rkey 0 without remote access): an MR without
 * remote access has no usable rkey all the same, since a responder refuses
 * it for want of the access. mlx5's semantics because rdma-core's own
 * test_mr_rereg_access needs them: an rkey read before ibv_rereg_mr adds
 * remote access must work after it, and a re-registration that keeps the
 * translation keeps the keys (mlx5 changes the mkey in place, rxe keeps it).
 *
 * Lock order: the device lock is taken for the table updates only; binding
 * (which reads /proc and copies memory) runs before it, the wait for DMA in
 * flight after it, so neither holds up another process's create or destroy.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EMU_KNOWN_ACCESS                                                                         \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |             \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_OPTIONAL_RANGE)
#define EMU_REMOTE (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* The rkey reported for an MR of key and access (the file comment says why it does not depend on access). */
uint32_t emu_mr_rkey(uint32_t key, uint32_t access)
{
	(void)access;
	return key;
}

static void *fail_null(int err)
{
	errno = err;
	return NULL;
}

static int live_pd_of(struct ibv_pd *pd, struct emu_context *c)
{
	struct emu_pd_entry *e;

	if (pd->handle >= EMU_MAX_PD)
		return 0;
	e = emu_pd(c->sh, pd->handle);
	return atomic_load(&e->live) && e->gen == ((struct emu_pd *)pd)->gen && e->ctx == c->ctx;
}

/* What the kernel checks before it pins anything. */
static int args_ok(struct emu_context *c, uint64_t addr, size_t length, uint64_t iova, unsigned int access)
{
	if (length == 0 || (access & ~(unsigned int)EMU_KNOWN_ACCESS))
		return EINVAL;
	/* The verbs specification: remote write or atomic access needs local write. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	/* A driver refuses an MR longer than the max_mr_size it reports with EINVAL (as erdma does). */
	if (length > emu_ctxe(c->sh, c->ctx)->max_mr_size)
		return EINVAL;
	if (addr + length < addr || iova + length < iova)
		return EINVAL;
	return 0;
}

/* A variant for the next registration of index: keys of its earlier MRs never match again. Under the lock. */
static uint32_t next_variant(struct emu_mr_entry *e)
{
	e->variant = (e->variant + 1) & 0xffu;
	if (e->variant == 0)
		e->variant = 1;
	return e->variant;
}

/* Writes a bound registration into entry e and publishes its key last. Under the lock. */
static void publish(struct emu_device *d, struct emu_mr_entry *e, uint32_t index, uint32_t ctx, uint32_t pd,
		    uint64_t addr, uint64_t length, uint64_t iova, unsigned int access, struct emu_binding *b)
{
	struct emu_shared *sh = d->sh;

	e->pd = pd;
	e->ctx = ctx;
	e->access = access;
	e->addr = addr;
	e->length = length;
	e->iova = iova;
	e->base = b->base;
	e->creator_pid = (uint32_t)getpid();
	e->nextents = b->n;
	memcpy(e->ext, b->ext, sizeof(e->ext));
	e->pfns = 0;
	e->pfn_pages = 0;
	if (b->pfns) {
		uint32_t pages = (uint32_t)EMU_ALIGN(b->pages * 8, EMU_PAGE) / EMU_PAGE;
		uint64_t at = emu_heap_alloc(sh, pages);

		/* No room for the record: only the file and presence are checked for this MR. */
		if (at) {
			memcpy(emu_at(sh, at), b->pfns, b->pages * 8);
			e->pfns = at;
			e->pfn_pages = (uint32_t)b->pages;
		}
	}
	/* Published last: the engine trusts the fields once it sees the key. */
	atomic_store(&e->key, emu_mr_key(d->index, index, e->variant));
}

static void fill_mr(struct emu_mr *emr, struct ibv_pd *pd, void *addr, size_t length, uint32_t key,
		    unsigned int access)
{
	emr->mr.context = pd->context;
	emr->mr.pd = pd;
	emr->mr.addr = addr;
	emr->mr.length = length;
	emr->mr.handle = emr->index;
	emr->mr.lkey = key;
	emr->mr.rkey = emu_mr_rkey(key, access);
}

/*
 * Counts a registration that bound pages, in its context and in the device
 * (mrdemu_registrations): what a program that adopts MRs by handle instead
 * of registering them again shows it did not do.
 */
static void count_registration(struct emu_shared *sh, uint32_t ctx)
{
	atomic_fetch_add(&emu_ctxe(sh, ctx)->registrations, 1);
	atomic_fetch_add(&sh->registrations, 1);
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	struct emu_context *c = emu_ctx(pd->context);
	struct emu_shared *sh = c->sh;
	struct emu_binding b;
	struct emu_mr_entry *e;
	struct emu_mr *emr;
	uint32_t index, variant;
	int rc;

	if (emu_gone(c))
		return fail_null(EIO);
	rc = args_ok(c, (uintptr_t)addr, length, iova, access);
	if (rc)
		return fail_null(rc);
	emr = calloc(1, sizeof(*emr));
	if (!emr)
		return fail_null(ENOMEM);
	emu_lock(sh);
	index = live_pd_of(pd, c) ? emu_slot_take(sh, EMU_MR) : UINT32_MAX - 1;
	if (index >= UINT32_MAX - 1) {
		emu_unlock(sh);
		free(emr);
		return fail_null(index == UINT32_MAX ? ENOMEM : EINVAL);
	}
	e = emu_mr(sh, index);
	variant = next_variant(e);
	emu_unlock(sh);
	/* The slot is ours but not published (key 0): nobody looks at it while we bind. */
	rc = emu_bind(c->dev, (uintptr_t)addr, length, access, index, variant, &b);
	emu_lock(sh);
	if (rc || !live_pd_of(pd, c)) {
		emu_slot_give(sh, EMU_MR, index);
		emu_unlock(sh);
		if (!rc)
			emu_unbind(c->dev, b.ext, b.n, b.kept_fd, b.nkept);
		free(b.pfns);
		free(emr);
		return fail_null(rc ? rc : EINVAL);
	}
	atomic_fetch_add(&emu_pd(sh, pd->handle)->users, 1);
	emu_count(sh, c->ctx, EMU_MR, 1);
	count_registration(sh, c->ctx);
	publish(c->dev, e, index, c->ctx, pd->handle, (uintptr_t)addr, length, iova, access, &b);
	emu_unlock(sh);
	free(b.pfns);
	emr->index = index;
	memcpy(emr->kept_fd, b.kept_fd, sizeof(emr->kept_fd));
	emr->nkept = b.nkept;
	fill_mr(emr, pd, addr, length, emu_mr_key(c->dev->index, index, variant), access);
	return &emr->mr;
}

#undef ibv_reg_mr
struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

#undef ibv_reg_mr_iova
struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access)
{
	return reg(pd, addr, length, iova, (unsigned int)access);
}

struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access)
{
	return reg(pd, addr, length, iova, access);
}

/*
 * Invalidates key (if it is still the entry's), so the engine starts no new
 * DMA on the MR, then waits for the DMA already holding it: when this
 * returns no copy touches the MR's pages any more. Then lets go of the pages
 * (binding.c) and of the slot unless keep_slot (rereg reuses it). local is
 * the registrant's struct, with the descriptors it keeps, or NULL (a reaper).
 */
static int invalidate(struct emu_device *d, uint32_t index, uint32_t key, struct emu_mr *local, int keep_slot)
{
	struct emu_shared *sh = d->sh;
	struct emu_mr_entry *e = emu_mr(sh, index);
	struct emu_extent ext[EMU_MR_EXTENTS];
	uint32_t v, n;

	if (!atomic_compare_exchange_strong(&e->key, &key, 0))
		return EINVAL;
	atomic_fetch_add(&e->waiters, 1);
	/* A new engine resets the holds of a dead one: look again now and then. */
	while ((v = atomic_load(&e->inflight)) != 0)
		emu_futex_wait(&e->inflight, v, &emu_recheck);
	atomic_fetch_sub(&e->waiters, 1);
	n = e->nextents <= EMU_MR_EXTENTS ? e->nextents : 0;
	memcpy(ext, e->ext, sizeof(ext));
	emu_lock(sh);
	/* Indexes in the shared state are bounded before use: every process can write them. */
	if (e->pd < EMU_MAX_PD)
		atomic_fetch_sub(&emu_pd(sh, e->pd)->users, 1);
	if (e->pfns)
		emu_heap_free(sh, d->fd, e->pfns, (uint32_t)(EMU_ALIGN((uint64_t)e->pfn_pages * 8, EMU_PAGE) / EMU_PAGE));
	e->pfns = 0;
	e->nextents = 0;
	emu_count(sh, e->ctx, EMU_MR, -1);
	if (!keep_slot)
		emu_slot_give(sh, EMU_MR, index);
	atomic_fetch_add(&sh->mr_frees, 1);
	emu_unlock(sh);
	emu_unbind(d, ext, n, local ? local->kept_fd : NULL, local ? local->nkept : 0);
	if (local)
		local->nkept = 0;
	return 0;
}

int emu_release_mr_entry(struct emu_device *d, uint32_t index, uint32_t key, struct emu_mr *local)
{
	return invalidate(d, index, key, local, 0);
}

int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct emu_mr *emr = (struct emu_mr *)mr;
	struct emu_context *c = emu_ctx(mr->context);
	int rc;

	if (emu_gone(c)) {
		free(emr);
		return 0;
	}
	if (emr->index >= EMU_MAX_MR)
		return EINVAL;
	rc = invalidate(c->dev, emr->index, mr->lkey, emr, 0);
	if (rc)
		return rc;
	free(emr);
	return 0;
}

/*
 * Re-registration, as the kernel's rereg_user_mr: the MR keeps its handle; it
 * gets new keys when the translation changes, and keeps them when only the PD
 * or the access does (as mlx5 and rxe). The new translation, PD and access are checked and the new
 * pages bound before the old registration is let go; on a failure after
 * that (IBV_REREG_MR_ERR_CMD) the MR is left registered as before.
 */
int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access)
{
	struct emu_mr *emr = (struct emu_mr *)mr;
	struct emu_context *c = emu_ctx(mr->context);
	struct emu_shared *sh = c->sh;
	struct emu_mr_entry *e;
	struct emu_binding b;
	struct emu_pd *new_pd;
	uint64_t new_addr, new_len;
	unsigned int new_access;
	uint32_t variant, key;
	int rc;

	if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED || flags == 0 || emr->index >= EMU_MAX_MR)
		return IBV_REREG_MR_ERR_INPUT;
	if ((flags & IBV_REREG_MR_CHANGE_PD) && !pd)
		return IBV_REREG_MR_ERR_INPUT;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && (!addr || length == 0))
		return IBV_REREG_MR_ERR_INPUT;
	e = emu_mr(sh, emr->index);
	if (emu_gone(c) || atomic_load(&e->key) != mr->lkey) {
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	new_pd = (struct emu_pd *)((flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd);
	new_addr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? (uintptr_t)addr : e->addr;
	new_len = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : e->length;
	new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? (unsigned int)access : e->access;
	rc = args_ok(c, new_addr, new_len, new_addr, new_access);
	if (!rc && !live_pd_of(&new_pd->pd, c))
		rc = EINVAL;
	if (rc) {
		errno = rc;
		return IBV_REREG_MR_ERR_CMD;
	}
	emu_lock(sh);
	variant = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? next_variant(e) : e->variant;
	emu_unlock(sh);
	/* Bound before the old pages are let go: the same private range stays the device's file throughout. */
	rc = emu_bind(c->dev, new_addr, new_len, new_access, emr->index, variant, &b);
	if (rc) {
		errno = rc;
		return IBV_REREG_MR_ERR_CMD;
	}
	key = mr->lkey;
	if (invalidate(c->dev, emr->index, key, emr, 1) != 0) {
		emu_unbind(c->dev, b.ext, b.n, b.kept_fd, b.nkept);
		free(b.pfns);
		errno = EINVAL;
		return IBV_REREG_MR_ERR_CMD;
	}
	emu_lock(sh);
	atomic_fetch_add(&emu_pd(sh, new_pd->pd.handle)->users, 1);
	emu_count(sh, c->ctx, EMU_MR, 1);
	count_registration(sh, c->ctx);
	e->variant = variant;
	publish(c->dev, e, emr->index, c->ctx, new_pd->pd.handle, new_addr, new_len, new_addr, new_access, &b);
	emu_unlock(sh);
	free(b.pfns);
	memcpy(emr->kept_fd, b.kept_fd, sizeof(emr->kept_fd));
	emr->nkept = b.nkept;
	fill_mr(emr, &new_pd->pd, (void *)(uintptr_t)new_addr, new_len, emu_mr_key(c->dev->index, emr->index, variant), new_access);
	return 0;
}
