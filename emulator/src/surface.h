/*
 * surface.h - the verbs surface beyond the core's objects, and the few
 * places where the core calls it:
 *   attributes.c   what the device reports: device, port, GIDs, P_Keys, GUID
 *   channel.c      completion channels and CQ events
 *   cq_ex.c        ibv_create_cq_ex and the extended polling ops
 *   qp_ex.c        ibv_create_qp_ex and the ibv_wr_* work request builder
 *   ah.c           address handles
 *   dm.c           device memory
 *   import.c       ibv_import_mr (objects another process registered)
 *   strings.c      the enum-to-string and rate helpers
 *   unsupported.c  every other libibverbs symbol, returning its documented error
 * The core (objects.c, engine.c, mrdemu.c) calls only the functions under
 * "hooks" below.
 */
#ifndef MRDEMU_SURFACE_H
#define MRDEMU_SURFACE_H

#include <infiniband/verbs.h>

#include <pthread.h>
#include <stdint.h>

struct emu_context;
struct emu_cq;
struct emu_qp;
struct emu_shared;
struct emu_cq_entry;
struct emu_cqe;
struct emu_wr_batch;

/*
 * What a process-local CQ carries for the surface (in struct emu_cq): its
 * place on its channel, and the completion an ibv_cq_ex poll is at.
 */
struct emu_cq_surface {
	struct emu_cq *next_on_channel;
	uint64_t serial;		/* channel.c: its events' tag */
	uint32_t delivered;		/* events ibv_get_cq_event returned: destroy waits for as many acks */
	uint32_t single_threaded;	/* cq_ex.c: IBV_CREATE_CQ_ATTR_SINGLE_THREADED, no poll lock */
	pthread_spinlock_t poll_lock;	/* held from start_poll to end_poll, as mlx5 does */
	struct ibv_wc polled;		/* the completion start_poll / next_poll is at */
};

/* Internal: not part of the library's ABI. */
#pragma GCC visibility push(hidden)

/* ---- hooks: the core calls these ---------------------------------------------------- */

/* mrdemu.c, new_context: fills the ops and verbs_context entries the surface implements. */
void emu_surface_open(struct emu_context *ctx);
/* mrdemu.c, ibv_close_device: releases what emu_surface_open made. */
void emu_surface_close(struct emu_context *ctx);
/* objects.c, ibv_create_cq: after the entry is live, before the CQ is returned. Cannot fail. */
void emu_cq_bind(struct emu_cq *ecq, struct ibv_comp_channel *channel);
/* objects.c, ibv_destroy_cq: after the entry is destroyed; waits for the acks of delivered events. */
void emu_cq_unbind(struct emu_cq *ecq);
/* objects.c, ibv_destroy_qp: frees what ibv_create_qp_ex added. */
void emu_qp_surface_free(struct emu_qp *eqp);
/* engine.c, push_cqe: a completion was published on cq: raises its channel's event if armed. */
void emu_cq_completed(struct emu_shared *sh, struct emu_cq_entry *cq, const struct emu_cqe *c);

/* ---- between surface files ---------------------------------------------------------- */

/* ops.c: whether context's device is gone (the core's emu_gone, in the one place that names it). */
int emu_context_gone(struct ibv_context *context);

/* attributes.c */
uint64_t emu_node_guid(uint32_t device_index);
int emu_query_port(struct ibv_context *context, uint8_t port_num, struct ibv_port_attr *port_attr,
		   size_t port_attr_len);
int emu_query_device_ex(struct ibv_context *context, const struct ibv_query_device_ex_input *input,
			struct ibv_device_attr_ex *attr, size_t attr_size);
/* Whether gid is a valid entry of port_num's GID table: its index, else -1. */
int emu_gid_index(struct ibv_context *context, uint8_t port_num, const union ibv_gid *gid);
#define EMU_GID_TBL_LEN 8

/* dm.c: the verbs_context entries of device memory; the largest DM (ibv_query_device_ex's max_dm_size). */
void emu_dm_open(struct emu_context *ctx);
#define EMU_MAX_DM_SIZE (128u * 1024u)

/* channel.c */
int emu_req_notify(struct ibv_cq *cq, int solicited_only);

/* cq_ex.c */
struct ibv_cq_ex *emu_create_cq_ex(struct ibv_context *context, struct ibv_cq_init_attr_ex *attr);

/* qp_ex.c */
struct ibv_qp *emu_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr);

#pragma GCC visibility pop

#endif
