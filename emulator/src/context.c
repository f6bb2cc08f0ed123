/*
 * context.c - ucontexts: made by ibv_open_device, joined by
 * ibv_import_device, alive while any process holds one, and reaped once
 * nobody does.
 *
 * A context is a table entry plus its holder file <dir>/mrdemuN.ctx-<id>
 * (mode 0644: anyone may open it to test the lock, only its creator
 * writes). The opener holds the file with a shared flock and that
 * descriptor is the context's cmd_fd. A dup of it (what mrd sends a
 * secondary by SCM_RIGHTS, what fork leaves a child) shares the open file
 * description and so the lock: the kernel releases it when the last
 * descriptor of the description is closed, however its holders end. A
 * context whose lock an exclusive non-blocking flock can take has no
 * holder; emu_reap then destroys its QPs, CQs, MRs and PDs, as the kernel
 * destroys a ucontext's objects when its last file reference goes.
 *
 * Reaping runs at every open and close on the host. The entry is published
 * LIVE only after its creator holds the lock, and a reaper marks it REAPING
 * under the device lock before it destroys anything, so a context is never
 * reaped twice nor before it was held. Nothing can join a reaped context:
 * no descriptor of its open file description is left.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define EMU_HOLDER_MAGIC 0x7478636d65647266ULL /* "frdemcxt" */

/* What a holder file says, so that an importer finds the device and the entry from the descriptor alone. */
struct emu_holder {
	uint64_t magic;
	uint32_t version;
	uint32_t device_index;
	uint32_t ctx;
	uint32_t ctx_gen;
	uint64_t id;
	char dir[EMU_PATH_MAX];
};

void emu_holder_path(const struct emu_device *d, uint64_t id, char *out, size_t size)
{
	snprintf(out, size, "%s/mrdemu%d.ctx-%llu", d->dir, d->index, (unsigned long long)id);
}

void emu_count(struct emu_shared *sh, uint32_t ctx, enum emu_kind kind, int delta)
{
	if (ctx < EMU_MAX_CTX && kind < EMU_OBJECT_KINDS)
		atomic_fetch_add(&emu_ctxe(sh, ctx)->live[kind], (uint32_t)delta);
}

static struct emu_context *new_context(struct emu_device *d, uint32_t ctx, uint32_t gen, int opener)
{
	struct emu_context *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->dev = d;
	c->sh = d->sh;
	c->ctx = ctx;
	c->ctx_gen = gen;
	c->opener = opener;
	return c;
}

struct emu_context *emu_context_open(struct emu_device *d, uint64_t max_mr_size)
{
	struct emu_shared *sh = d->sh;
	struct emu_holder h;
	struct emu_ctx_entry *e;
	struct emu_context *c;
	char path[EMU_PATH_MAX + 32];
	uint32_t index;
	int fd, err;

	emu_reap(d);
	emu_lock(sh);
	index = emu_slot_take(sh, EMU_CTX);
	if (index == UINT32_MAX) {
		emu_unlock(sh);
		errno = ENOMEM;
		return NULL;
	}
	e = emu_ctxe(sh, index);
	e->gen++;
	e->id = sh->next_ctx_id++;
	e->creator_pid = (uint32_t)getpid();
	e->max_mr_size = max_mr_size;
	for (int k = 0; k < EMU_OBJECT_KINDS; k++)
		atomic_store(&e->live[k], 0);
	atomic_store(&e->unbound, 0);
	atomic_store(&e->registrations, 0);
	emu_unlock(sh);

	memset(&h, 0, sizeof(h));
	h.magic = EMU_HOLDER_MAGIC;
	h.version = EMU_LAYOUT_VERSION;
	h.device_index = (uint32_t)d->index;
	h.ctx = index;
	h.ctx_gen = e->gen;
	h.id = e->id;
	snprintf(h.dir, sizeof(h.dir), "%s", d->dir);
	emu_holder_path(d, e->id, path, sizeof(path));
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0 || pwrite(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || flock(fd, LOCK_SH) != 0)
		goto fail;
	fchmod(fd, 0644);
	c = new_context(d, index, e->gen, 1);
	if (!c) {
		errno = ENOMEM;
		goto fail;
	}
	c->vctx.context.cmd_fd = fd;
	/* Held from here on: a reaper may look at it. */
	atomic_store_explicit(&e->state, EMU_CTX_LIVE, memory_order_release);
	return c;

fail:
	err = errno;
	if (fd >= 0) {
		unlink(path);
		close(fd);
	}
	emu_lock(sh);
	emu_slot_give(sh, EMU_CTX, index);
	emu_unlock(sh);
	errno = err;
	return NULL;
}

/* cmd_fd is a descriptor of a holder file (ours now: closed by ibv_close_device). */
struct emu_context *emu_context_import(int cmd_fd)
{
	struct emu_holder h;
	struct emu_device *d;
	struct emu_ctx_entry *e;
	struct emu_context *c;
	struct stat st;

	if (fstat(cmd_fd, &st) != 0)
		return NULL;
	if (!S_ISREG(st.st_mode) || pread(cmd_fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    h.magic != EMU_HOLDER_MAGIC || h.device_index >= EMU_MAX_DEVICES || h.ctx >= EMU_MAX_CTX) {
		errno = EINVAL;
		return NULL;
	}
	if (h.version != EMU_LAYOUT_VERSION) {
		errno = EPROTO;
		return NULL;
	}
	h.dir[sizeof(h.dir) - 1] = 0;
	d = emu_device_get(h.dir, (int)h.device_index);
	if (!d)
		return NULL;
	e = emu_ctxe(d->sh, h.ctx);
	if (atomic_load(&e->state) != EMU_CTX_LIVE || e->gen != h.ctx_gen || e->id != h.id) {
		emu_device_put(d);
		errno = EIO;
		return NULL;
	}
	c = new_context(d, h.ctx, h.ctx_gen, 0);
	if (!c) {
		emu_device_put(d);
		errno = ENOMEM;
		return NULL;
	}
	c->vctx.context.cmd_fd = cmd_fd;
	return c;
}

/* Closing one descriptor: the context lives on while another holder keeps one. */
void emu_context_close(struct emu_context *c)
{
	struct emu_device *d = c->dev;

	close(c->vctx.context.cmd_fd);
	free(c);
	/* If that was the last descriptor, this process is the one that knows at once. */
	emu_reap(d);
	emu_device_put(d);
}

/* Whether the context with this holder id has no holder; on 1, *fd is the reaper's locked descriptor or -1. */
static int unheld(struct emu_device *d, uint64_t id, int *fd)
{
	char path[EMU_PATH_MAX + 32];

	emu_holder_path(d, id, path, sizeof(path));
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return errno == ENOENT;
	if (flock(*fd, LOCK_EX | LOCK_NB) == 0)
		return 1;
	close(*fd);
	*fd = -1;
	return 0;
}

/* Destroys what the context owned, children first: QPs, CQs, MRs, PDs. */
static void destroy_objects(struct emu_device *d, uint32_t ctx)
{
	struct emu_shared *sh = d->sh;
	struct emu_context tmp = { .dev = d, .sh = sh, .ctx = ctx };
	uint32_t high;

	high = __atomic_load_n(&sh->slots[EMU_QP].high_water, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < high && i < EMU_MAX_QP; i++)
		if (atomic_load(&emu_qp(sh, i)->live) && emu_qp(sh, i)->ctx == ctx)
			emu_destroy_qp_entry(&tmp, i);
	high = __atomic_load_n(&sh->slots[EMU_CQ].high_water, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < high && i < EMU_MAX_CQ; i++)
		if (atomic_load(&emu_cq(sh, i)->live) && emu_cq(sh, i)->ctx == ctx)
			emu_destroy_cq_entry(&tmp, i);
	high = __atomic_load_n(&sh->slots[EMU_MR].high_water, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < high && i < EMU_MAX_MR; i++) {
		struct emu_mr_entry *m = emu_mr(sh, i);
		uint32_t key = atomic_load(&m->key);

		if (key && m->ctx == ctx)
			emu_release_mr_entry(d, i, key, NULL);
	}
	high = __atomic_load_n(&sh->slots[EMU_PD].high_water, __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < high && i < EMU_MAX_PD; i++)
		if (atomic_load(&emu_pd(sh, i)->live) && emu_pd(sh, i)->ctx == ctx)
			emu_dealloc_pd_entry(sh, i);
}

void emu_reap(struct emu_device *d)
{
	struct emu_shared *sh = d->sh;
	uint32_t high = __atomic_load_n(&sh->slots[EMU_CTX].high_water, __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < high && i < EMU_MAX_CTX; i++) {
		struct emu_ctx_entry *e = emu_ctxe(sh, i);
		uint32_t live = EMU_CTX_LIVE;
		uint64_t id = e->id;
		char path[EMU_PATH_MAX + 32];
		int fd;

		if (atomic_load(&e->state) != EMU_CTX_LIVE || !unheld(d, id, &fd))
			continue;
		emu_lock(sh);
		/* Another reaper may have been first, and the slot reused since. */
		if (e->id != id || !atomic_compare_exchange_strong(&e->state, &live, EMU_CTX_REAPING)) {
			emu_unlock(sh);
			if (fd >= 0)
				close(fd);
			continue;
		}
		emu_unlock(sh);
		destroy_objects(d, i);
		emu_holder_path(d, id, path, sizeof(path));
		unlink(path);
		if (fd >= 0)
			close(fd);
		emu_lock(sh);
		atomic_store(&e->state, EMU_CTX_FREE);
		emu_slot_give(sh, EMU_CTX, i);
		emu_unlock(sh);
	}
}
