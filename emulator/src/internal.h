/*
 * internal.h - the emulator's process-local objects: what a struct ibv_* the
 * application holds wraps. Each names its shared entry by index and by the
 * generation it was created with, so a handle destroyed elsewhere (another
 * process, or mrdemu_destroy_by_handle) is refused instead of used.
 */
#ifndef MRDEMU_INTERNAL_H
#define MRDEMU_INTERNAL_H

#include "state.h"
#include "surface.h"

#include <pthread.h>

struct emu_context {
	struct emu_shared *sh;
	int opener;			/* opened (runs the DMA engine), else imported */
	pthread_t engine;
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

/* The kernel's robust-futex bit: the owner of the lock word died holding it. */
#define EMU_FUTEX_OWNER_DIED 0x40000000

/*
 * Whether the device is gone: closed by its opener, or its opener died (its
 * engine's engine_alive lock word has the owner-died bit, which the kernel
 * sets with a robust mutex's owner; glibc keeps that word first in
 * pthread_mutex_t). A load or two, no system call: poll_cq stays a read.
 */
static inline int emu_gone(struct emu_shared *sh)
{
	if (atomic_load_explicit(&sh->device_state, memory_order_acquire) != EMU_DEVICE_LIVE)
		return 1;
	if (__atomic_load_n(&sh->engine_alive.__data.__lock, __ATOMIC_ACQUIRE) & EMU_FUTEX_OWNER_DIED) {
		atomic_store(&sh->device_state, EMU_DEVICE_GONE);
		return 1;
	}
	return 0;
}

/* Internal: not part of the library's ABI. */
#pragma GCC visibility push(hidden)

/* How often a wait for the engine looks whether the engine's process died. */
static const struct timespec emu_recheck = { .tv_sec = 0, .tv_nsec = 100 * 1000 * 1000 };

/* objects.c */
int emu_destroy_qp_entry(struct emu_context *ctx, uint32_t index);
int emu_destroy_cq_entry(struct emu_context *ctx, uint32_t index);

/* datapath.c: the ops every context carries */
int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
int emu_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
void emu_ring_doorbell(struct emu_shared *sh);

/* engine.c */
void *emu_engine_main(void *arg);
void emu_engine_stop(struct emu_context *ctx);
/* Pins a QP against destroy and RESET; 0 when it is not live (then nothing is held). */
int emu_qp_hold(struct emu_shared *sh, uint32_t index);
void emu_qp_release(struct emu_shared *sh, uint32_t index);
/* Waits until the engine holds the QP no more. */
void emu_qp_wait_idle(struct emu_shared *sh, uint32_t index);

#pragma GCC visibility pop

#endif
