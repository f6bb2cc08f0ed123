/*
 * import.c - ibv_import_mr and ibv_unimport_mr: an MR another process (or
 * context) registered, named by its handle, as ibv_import_pd names a PD.
 *
 * An MR's handle is its index in the shared table (objects.c); importing
 * it reads the live entry and gives this process a struct ibv_mr with the
 * same keys, address and length. The MR must be on the PD given, which is
 * the importer's import of the MR's PD (the kernel checks the same: the
 * object belongs to the ucontext the fd shares). Unimporting frees only
 * this process's struct; deregistering an imported MR deregisters the MR
 * itself, for every process, as the kernel's destroy of a shared object does.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>

struct ibv_mr *ibv_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct emu_shared *sh = emu_sh(pd->context);
	struct emu_mr_entry *e;
	struct emu_mr *emr;
	uint32_t key;

	if (emu_context_gone(pd->context)) {
		errno = EIO;
		return NULL;
	}
	if (mr_handle >= EMU_MAX_MR) {
		errno = EINVAL;
		return NULL;
	}
	emr = calloc(1, sizeof(*emr));
	if (!emr) {
		errno = ENOMEM;
		return NULL;
	}
	emu_lock(sh);
	e = emu_mr(sh, mr_handle);
	key = atomic_load(&e->key);
	if (key == 0 || e->pd != pd->handle || e->ctx != emu_ctx(pd->context)->ctx) {
		emu_unlock(sh);
		free(emr);
		errno = EINVAL;
		return NULL;
	}
	emr->mr.context = pd->context;
	emr->mr.pd = pd;
	emr->mr.addr = (void *)(uintptr_t)e->addr;
	emr->mr.length = e->length;
	emr->mr.handle = mr_handle;
	emr->mr.lkey = key;
	emr->mr.rkey = emu_mr_rkey(key, e->access);
	emr->index = mr_handle;
	emu_unlock(sh);
	return &emr->mr;
}

void ibv_unimport_mr(struct ibv_mr *mr)
{
	free(mr);
}
