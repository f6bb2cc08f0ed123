/*
 * mrdemu.h - the emulated RDMA device's symbols beyond libibverbs' ABI.
 *
 * libmrdemu.so exports libibverbs' functions (the ones mrd binds, see
 * mrdemu.c) and these. mrd looks them up when present; with a real
 * libibverbs they are absent.
 */
#ifndef MRDEMU_H
#define MRDEMU_H

#include <infiniband/verbs.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum mrdemu_handle_type {
	MRDEMU_HANDLE_CQ = 1,
	MRDEMU_HANDLE_QP = 2,
};

/* The order of mrdemu_live_objects' counts. */
enum mrdemu_live_index {
	MRDEMU_LIVE_PD = 0,
	MRDEMU_LIVE_MR = 1,
	MRDEMU_LIVE_CQ = 2,
	MRDEMU_LIVE_QP = 3,
};

/*
 * Destroys the CQ or QP whose ibv_cq.handle / ibv_qp.handle is handle on
 * ctx's device, from any context of that device (opened or imported): what
 * the kernel's uverbs destroy method does on a shared command fd. It is for a
 * process cleaning up after another that died; the dead process's struct
 * ibv_qp is never touched. A QP is destroyed as ibv_destroy_qp does (after
 * the DMA engine has let go of it; no completion is generated); a CQ still
 * used by a QP is EBUSY, so destroy the QPs first.
 *
 * Returns 0, EINVAL when type is neither 1 nor 2 or no such object is live,
 * EBUSY (CQ in use), EIO when the device is gone.
 */
/*
 * The process that created the live CQ or QP of that handle, so that a daemon
 * destroys by handle only what the client that reported it created (a handle
 * is a table index anyone can name). Returns the creator's pid, -EINVAL when
 * no live object has that handle, -EIO when the device is gone.
 */
int mrdemu_handle_creator(struct ibv_context *ctx, int type, uint32_t handle);

int mrdemu_destroy_by_handle(struct ibv_context *ctx, int type, uint32_t handle);

/*
 * Writes the live PDs, MRs, CQs and QPs (enum mrdemu_live_index) of ctx's
 * context to out: every object of the ucontext that ibv_open_device made
 * and every ibv_import_device of its cmd_fd shares, whichever process
 * created it. Other contexts on the host-wide device are not counted, nor
 * are imports (ibv_import_pd).
 *
 * With ctx NULL: the sums over every context this process has open (each
 * counted once, however many times imported), and the return value is the
 * number of contexts (opened and imported) this process has open, for leak
 * checks.
 *
 * Returns 0 (or the count above), EINVAL when out is NULL.
 */
int mrdemu_live_objects(struct ibv_context *ctx, uint32_t out[4]);

/*
 * Transfers the device refused because a page an MR had been bound to at
 * registration was gone: a hole punched in the MR's shared file (mrd frees a
 * segment with munmap and FALLOC_FL_PUNCH_HOLE), the file removed, or its
 * page frame not the one registered. An HCA would have moved the bytes to or
 * from the page it pinned; the emulator completes the work request with an
 * error (LOC_PROT_ERR for a local buffer, REM_ACCESS_ERR for the remote one)
 * and counts it here. A program that never hands out a key of memory it
 * freed sees 0.
 *
 * With ctx: those of MRs of ctx's context (whichever QP tried). With ctx
 * NULL: every context's on the device of this process's contexts, reaped
 * ones included; 0 without a context.
 */
uint64_t mrdemu_unbound_transfers(struct ibv_context *ctx);

/*
 * Registrations that bound pages: every successful ibv_reg_mr,
 * ibv_reg_mr_iova, ibv_reg_mr_iova2, ibv_reg_dm_mr and ibv_rereg_mr
 * (ibv_reg_dmabuf_mr is EOPNOTSUPP). ibv_import_mr binds nothing and counts
 * nothing, nor does a deregistration take one back, so a program that names
 * existing MRs by handle (a successor daemon adopting its predecessor's)
 * shows here that it registered nothing again.
 *
 * With ctx: those made in ctx's context. With ctx NULL: every context's on
 * the device of this process's contexts, reaped ones included; 0 without a
 * context.
 */
uint64_t mrdemu_registrations(struct ibv_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
