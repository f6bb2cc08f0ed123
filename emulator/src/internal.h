/*
 * internal.h - the emulator's process-local objects: this process's mapping
 * of a host-wide device, its contexts on it, and what a struct ibv_* the
 * application holds wraps. Each object names its shared entry by index and
 * by the generation it was created with, so a handle destroyed elsewhere
 * (another process, a reaper, mrdemu_destroy_by_handle) is refused instead
 * of used.
 */
#ifndef MRDEMU_INTERNAL_H
#define MRDEMU_INTERNAL_H

#include "state.h"
#include "surface.h"

#include <pthread.h>

#define EMU_MAX_DEVICES 8
#define EMU_DIR_DEFAULT "/dev/shm/mrdemu"

struct emu_local_mr;

/*
 * This process's mapping of one device file, shared by every context of the
 * process on it (refcounted by users, under device.c's process lock), and
 * the process's DMA engine candidate for it.
 */
struct emu_device {
	struct emu_shared *sh;
	int fd;				/* the device file, holding a shared flock: "in use" */
	int index;
	int users;			/* this process's contexts on it */
	char dir[EMU_PATH_MAX];
	char path[EMU_PATH_MAX];
	pthread_t engine;
	_Atomic int engine_stop;
	/* pages.c: the engine's own mappings of MR pages, by MR index; touched by the engine thread only */
	struct emu_local_mr **maps;
	struct emu_local_mr *mapped;	/* the same, as a list */
	uint32_t seen_mr_frees;
	struct emu_device *next;
};

struct emu_context {
	struct emu_device *dev;
	struct emu_shared *sh;
	uint32_t ctx;			/* index in the context table */
	uint32_t ctx_gen;
	int opener;			/* made by ibv_open_device, else imported */
	struct emu_context *next;	/* this process's open contexts */
	/* Must be last: libibverbs' inline functions find it by container_of from the ibv_context. */
	struct verbs_context vctx;
};

struct emu_pd {
	struct ibv_pd pd;
	uint32_t gen;
	int imported;
};

struct emu_mr {
	struct ibv_mr mr;
	uint32_t index;
	/* descriptors this process keeps so that others can open files without a path (binding.c) */
	int kept_fd[EMU_MR_EXTENTS];
	int nkept;
};

struct emu_cq {
	/* An ibv_cq_ex (cq_ex.c) begins with the fields of an ibv_cq. */
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
	uint32_t index;
	uint32_t gen;
	struct emu_cq_surface surface;	/* surface.h: channel and extended polling */
};

struct emu_qp {
	/* An ibv_qp_ex (qp_ex.c) begins with an ibv_qp. */
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t index;
	uint32_t gen;
	struct emu_wr_batch *batch;	/* qp_ex.c: the ibv_wr_* requests being built; NULL otherwise */
};

static inline struct emu_context *emu_ctx(struct ibv_context *context)
{
	return (struct emu_context *)((char *)context - offsetof(struct emu_context, vctx.context));
}

static inline struct emu_shared *emu_sh(struct ibv_context *context)
{
	return emu_ctx(context)->sh;
}

/*
 * Whether the context was reaped under its holder: it lives while any process
 * holds its cmd_fd, so only a process that damaged the shared state (or
 * removed the holder file by hand) makes this true. A load or two.
 */
static inline int emu_gone(struct emu_context *c)
{
	struct emu_ctx_entry *e = emu_ctxe(c->sh, c->ctx);

	return atomic_load_explicit(&e->state, memory_order_acquire) != EMU_CTX_LIVE || e->gen != c->ctx_gen;
}

static inline uint32_t emu_pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static inline uint32_t emu_pages_for(uint64_t bytes)
{
	return (uint32_t)((bytes + EMU_PAGE - 1) / EMU_PAGE);
}

/* Internal: not part of the library's ABI. */
#pragma GCC visibility push(hidden)

/* How often a wait for the engine looks again (a new engine may have reset the counts it waits on). */
static const struct timespec emu_recheck = { .tv_sec = 0, .tv_nsec = 100 * 1000 * 1000 };

/* device.c: the host directory and this process's mappings of device files */
const char *emu_dir(void);
struct emu_device *emu_device_get(const char *dir, int index);
void emu_device_put(struct emu_device *d);

/* context.c: ucontexts, their holder files, and reaping the dead */
struct emu_context *emu_context_open(struct emu_device *d, uint64_t max_mr_size);
struct emu_context *emu_context_import(int cmd_fd);
void emu_context_close(struct emu_context *c);
void emu_reap(struct emu_device *d);
void emu_holder_path(const struct emu_device *d, uint64_t id, char *out, size_t size);
void emu_count(struct emu_shared *sh, uint32_t ctx, enum emu_kind kind, int delta);

/* objects.c */
int emu_destroy_qp_entry(struct emu_context *ctx, uint32_t index);
int emu_destroy_cq_entry(struct emu_context *ctx, uint32_t index);
int emu_dealloc_pd_entry(struct emu_shared *sh, uint32_t index);

/* mr.c */
uint32_t emu_mr_rkey(uint32_t key, uint32_t access);
int emu_release_mr_entry(struct emu_device *d, uint32_t index, uint32_t key, struct emu_mr *local);

/* binding.c: what pages an MR binds at registration, and letting go of them */
struct emu_binding {
	uint64_t base;
	uint64_t pages;
	uint32_t n;
	struct emu_extent ext[EMU_MR_EXTENTS];
	uint64_t *pfns;		/* malloc'd, pages entries, or NULL */
	int kept_fd[EMU_MR_EXTENTS];
	int nkept;
};
int emu_bind(struct emu_device *d, uint64_t addr, uint64_t length, unsigned int access, uint32_t index,
	     uint32_t variant, struct emu_binding *b);
/* Drops the file references of extents (under the device lock is not needed: it takes it). */
void emu_unbind(struct emu_device *d, const struct emu_extent *ext, uint32_t n, int *kept_fd, int nkept);

/* datapath.c: the ops every context carries */
int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int emu_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
void emu_ring_doorbell(struct emu_shared *sh);

/* The LID of the device's one port: a request whose DLID is another reaches nobody. */
static inline uint16_t emu_port_lid(const struct emu_shared *sh)
{
	return (uint16_t)(1 + sh->device_index);
}

/* execute.c: the head WR of a send queue */
enum emu_exec_result { EMU_EXEC_DONE, EMU_EXEC_WAIT };
/* Carries out, or fails, the head WR of qp (held, RTS), or leaves it waiting (RNR, ACK timer) with *deadline. */
enum emu_exec_result emu_execute(struct emu_device *d, struct emu_qp_entry *qp, uint64_t *deadline);

/* engine.c: completions, the loop and its lease */
void emu_to_error(struct emu_qp_entry *e);
void emu_complete_send(struct emu_shared *sh, struct emu_qp_entry *qp, const struct emu_swqe *w,
		       enum ibv_wc_status status, uint32_t byte_len);
void emu_complete_recv(struct emu_shared *sh, struct emu_qp_entry *qp, const struct emu_rwqe *r,
		       enum ibv_wc_status status, enum ibv_wc_opcode opcode, uint32_t byte_len,
		       const struct emu_swqe *w, uint32_t src_qp);
int emu_engine_start(struct emu_device *d);
void emu_engine_stop(struct emu_device *d);
/* Pins a QP against destroy and RESET; 0 when it is not live (then nothing is held). */
int emu_qp_hold(struct emu_shared *sh, uint32_t index);
void emu_qp_release(struct emu_shared *sh, uint32_t index);
/* Waits until the engine holds the QP no more. */
void emu_qp_wait_idle(struct emu_shared *sh, uint32_t index);

/* pages.c: the engine's reach into the pages MRs are bound to */
struct emu_seg {
	char *va;
	uint64_t len;
};
/*
 * Resolves [off, off + len) of the live MR index (the caller holds it) to
 * pointers of this process, at most max pieces, split where the MR's
 * extents are. Returns the pieces, or -1 when a page the MR was bound to is
 * gone (punched, or replaced: the caller counts an unbound transfer), or -2
 * when a piece does not fit in max.
 */
int emu_pages_reach(struct emu_device *d, uint32_t index, uint64_t off, uint64_t len, int write,
		    struct emu_seg *out, int max);
/* Unmaps what this process mapped of MRs no longer registered; all of it with all set. */
void emu_pages_sweep(struct emu_device *d, int all);
/* The PFNs of [addr, addr + pages pages) of this process, 0 where not present or unreadable. */
int emu_read_pfns(uint64_t addr, uint64_t pages, uint64_t *out);

#pragma GCC visibility pop

#endif
