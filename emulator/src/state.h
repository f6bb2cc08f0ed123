/*
 * state.h - the emulated device's state as every process maps it.
 *
 * One memfd per opened device holds everything a kernel driver and an HCA
 * would keep: the object tables (PDs, MRs, CQs, QPs), the rings of every
 * queue, and the doorbell the DMA engine sleeps on. ibv_context.cmd_fd is
 * that memfd, so a process that receives a dup of it (SCM_RIGHTS) and calls
 * ibv_import_device maps the same device, as a dup of a uverbs fd shares one
 * ucontext. Pointers never live here: every reference is a table index or
 * a byte offset from the start of the mapping, which each process maps at
 * its own address.
 *
 *   +--------------------+  0
 *   | struct emu_shared  |  header, doorbell, counters, lock
 *   +--------------------+  EMU_PD_TABLE
 *   | pd[EMU_MAX_PD]     |
 *   +--------------------+  EMU_CQ_TABLE
 *   | cq[EMU_MAX_CQ]     |
 *   +--------------------+  EMU_QP_TABLE
 *   | qp[EMU_MAX_QP]     |
 *   +--------------------+  EMU_MR_TABLE
 *   | mr[EMU_MAX_MR]     |
 *   +--------------------+  EMU_FREE_LISTS
 *   | freed-index FIFOs  |  one per object kind
 *   +--------------------+  EMU_HEAP_BITMAP
 *   | heap page bitmap   |
 *   +--------------------+  EMU_HEAP (page aligned)
 *   | rings              |  allocated in pages, holes punched on free
 *   +--------------------+  EMU_MAP_SIZE
 *
 * The file is sized once (ftruncate) and sparse: a page costs memory only
 * once touched, so the large tables are free until used.
 *
 * Concurrency: object creation and destruction hold the robust,
 * process-shared mutex in the header. The datapath holds nothing shared for
 * long: posting takes the queue's producer spinlock for a few stores,
 * publishes the producer index with release semantics and rings the
 * doorbell; the DMA engine (one thread, in the opening process) is the only
 * consumer of send and receive queues and the only producer of completions;
 * poll_cq takes the CQ's consumer spinlock. Objects the engine is using are
 * pinned by a "busy" (QP) or "inflight" (MR) count that destroy and dereg
 * wait on, so a destroyed QP or deregistered MR is never touched again.
 */
#ifndef MRDEMU_STATE_H
#define MRDEMU_STATE_H

#include <infiniband/verbs.h>

#include "channel.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define EMU_MAGIC 0x756d65647272646dULL /* "mdrrdemu" */
#define EMU_LAYOUT_VERSION 3u

/* Table capacities, reported by ibv_query_device. */
#define EMU_MAX_PD 256u
#define EMU_MAX_CQ 1024u
#define EMU_MAX_QP 1024u
/* An MR index is the upper 24 bits of its key. */
#define EMU_MAX_MR (1u << 18)

/* Queue limits, reported by ibv_query_device. */
#define EMU_MAX_QP_WR 16384u
#define EMU_MAX_SGE 30u
#define EMU_MAX_CQE (1u << 20)
/* The default max_mr_size; MRDEMU_MAX_MR_SIZE (bytes) in the opener's environment sets another. */
#define EMU_MAX_MR_SIZE (1ULL << 40)
#define EMU_MAX_MSG_SZ (1u << 31)
#define EMU_MAX_RD_ATOM 16u

#define EMU_PAGE 4096u
#define EMU_HEAP_SIZE (1ULL << 30)
#define EMU_HEAP_PAGES ((uint32_t)(EMU_HEAP_SIZE / EMU_PAGE))

/*
 * A freed index is reused only after this many others have been freed, so
 * that a stale handle or QP number is unlikely to name a new object; MR keys
 * are protected further by their variant.
 */
#define EMU_REUSE_DISTANCE 64u

enum emu_kind { EMU_PD = 0, EMU_MR = 1, EMU_CQ = 2, EMU_QP = 3, EMU_KINDS = 4 };

/* Device lifecycle, in emu_shared.device_state: GONE once the opener closed it or died. */
enum { EMU_DEVICE_LIVE = 1, EMU_DEVICE_GONE = 2 };

/*
 * A spinlock word in shared memory: taken with an acquire CAS, released with
 * a release store. Held for a handful of stores only.
 */
typedef _Atomic uint32_t emu_spin;

/* Indexes handed out and taken back, in a FIFO so that reuse is delayed. */
struct emu_slots {
	uint32_t max;
	uint32_t high_water;	/* indexes below it have been used at least once */
	uint32_t head;		/* next freed index to reuse (free-running) */
	uint32_t tail;		/* next place to put a freed index (free-running) */
	uint64_t fifo;		/* offset of uint32_t[max] */
};

struct emu_pd_entry {
	_Atomic uint32_t live;
	uint32_t gen;
	_Atomic uint32_t users;	/* MRs and QPs on it: dealloc is EBUSY while non-zero */
	uint32_t creator_pid;
};

/*
 * One MR. key is 0 while the slot is free, else (index << 8) | variant with
 * a variant that changes on every registration of this index and is never
 * 0, as mlx5 mkeys. lkey == rkey; remote use is checked against access.
 */
struct emu_mr_entry {
	_Atomic uint32_t key;
	uint32_t variant;
	uint32_t pd;
	uint32_t access;
	uint64_t addr;		/* process virtual address of the first byte */
	uint64_t length;
	uint64_t iova;		/* the address SGEs and remote_addr use for addr */
	_Atomic uint32_t inflight;	/* DMA holds: dereg waits for 0 */
	_Atomic uint32_t waiters;
	uint32_t creator_pid;
	uint32_t pad;
};

/*
 * A completion as the ring stores it: the ibv_wc poll_cq copies out, plus what
 * poll_cq needs to retire the work request's slot, as a NIC's completion
 * carries its WQE counter: a send or receive queue slot is free again only
 * once its completion (or a later one of the same queue) has been polled.
 */
struct emu_cqe {
	struct ibv_wc wc;
	uint32_t qp_index;
	uint32_t qp_epoch;	/* emu_qp_entry.epoch when the WR was posted */
	uint32_t queue;		/* 0 send, 1 receive */
	uint32_t retire_to;	/* the queue's consumer count after this WR */
	uint32_t solicited;	/* a receive of a SEND with IBV_SEND_SOLICITED: wakes a solicited-only arm */
	uint32_t pad;
};

struct emu_cq_entry {
	_Atomic uint32_t live;
	uint32_t gen;
	_Atomic uint32_t users;	/* QPs on it: destroy is EBUSY while non-zero */
	uint32_t capacity;	/* power of two */
	uint64_t ring;		/* offset of struct emu_cqe[capacity] */
	uint32_t ring_pages;
	_Atomic uint32_t overrun;	/* sticky: a completion did not fit */
	uint64_t dropped;
	uint32_t creator_pid;
	uint32_t pad;
	struct emu_cq_notify notify;	/* channel.h: the completion channel's arm and its owner */
	_Alignas(64) _Atomic uint32_t prod;	/* written by the engine only */
	_Alignas(64) _Atomic uint32_t cons;	/* written by pollers, under poll_lock */
	emu_spin poll_lock;
};

/* A send work request as the ring stores it; followed by max_send_sge SGEs. */
struct emu_swqe {
	uint64_t wr_id;
	uint32_t opcode;
	uint32_t flags;
	uint32_t imm;
	uint32_t num_sge;
	uint64_t remote_addr;
	uint64_t compare_add;
	uint64_t swap;
	uint32_t rkey;
	uint32_t signaled;
	struct ibv_sge sge[];
};

/* A receive work request as the ring stores it; followed by max_recv_sge SGEs. */
struct emu_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	uint32_t pad;
	struct ibv_sge sge[];
};

struct emu_queue {
	uint32_t capacity;	/* power of two; slots in use = prod - retired */
	uint32_t max_sge;
	uint32_t stride;	/* bytes per WQE */
	uint32_t pad;
	uint64_t ring;		/* offset of the WQEs */
	_Alignas(64) emu_spin post_lock;
	_Atomic uint32_t prod;	/* posted; written under post_lock, release */
	_Alignas(64) _Atomic uint32_t cons;	/* executed or flushed, by the engine */
	_Alignas(64) _Atomic uint32_t retired;	/* completions polled */
};

struct emu_qp_entry {
	_Atomic uint32_t live;
	uint32_t gen;
	_Atomic uint32_t state;		/* enum ibv_qp_state */
	_Atomic uint32_t busy;		/* engine holds: destroy and RESET wait for 0 */
	_Atomic uint32_t busy_waiters;
	uint32_t epoch;			/* bumped by every move to RESET */
	uint32_t qp_num;		/* (gen & 0xff) << 16 | index */
	uint32_t pd;
	uint32_t send_cq;
	uint32_t recv_cq;
	uint32_t sq_sig_all;
	uint32_t creator_pid;
	uint32_t ring_pages;
	uint64_t ring_base;
	/* attributes, written by ibv_modify_qp before the state they belong to */
	uint32_t dest_qp_num;
	uint32_t qp_access_flags;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t path_mtu;
	uint16_t pkey_index;
	uint8_t port_num;
	uint8_t min_rnr_timer;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t pad8[3];
	struct ibv_ah_attr ah_attr;
	/* the engine's own: the RNR wait of the send queue's head WR */
	uint32_t rnr_waiting;
	uint32_t rnr_head;
	uint64_t rnr_deadline_ns;	/* 0: waits as long as it takes (rnr_retry 7) */
	struct emu_queue sq;
	struct emu_queue rq;
};

struct emu_shared {
	uint64_t magic;
	uint32_t version;
	uint32_t device_index;		/* the N of mrdemuN */
	uint64_t map_size;
	uint64_t nonce;			/* tells devices apart across mappings */
	uint64_t max_mr_size;		/* longest MR, fixed by the opener: every importer sees one limit */
	uint32_t opener_pid;
	_Atomic uint32_t device_state;
	pthread_mutex_t lock;		/* robust, process-shared */
	/*
	 * Held by the DMA engine thread for as long as it runs (robust,
	 * process-shared): when the opening process dies the kernel marks
	 * it owner-died, which every other process can see with a load.
	 */
	pthread_mutex_t engine_alive;
	_Atomic uint32_t live[EMU_KINDS];
	struct emu_slots slots[EMU_KINDS];
	uint32_t heap_hint;		/* first page to look at when allocating */
	uint32_t heap_used_pages;
	_Alignas(64) _Atomic uint32_t doorbell;	/* bumped by every post; the engine's futex */
	_Atomic uint32_t engine_sleeping;
	_Atomic uint32_t engine_stop;
	uint64_t engine_passes;
};

#define EMU_ALIGN(x, a) (((x) + (a) - 1) & ~((uint64_t)(a) - 1))

#define EMU_PD_TABLE EMU_ALIGN(sizeof(struct emu_shared), 64)
#define EMU_CQ_TABLE EMU_ALIGN(EMU_PD_TABLE + (uint64_t)EMU_MAX_PD * sizeof(struct emu_pd_entry), 64)
#define EMU_QP_TABLE EMU_ALIGN(EMU_CQ_TABLE + (uint64_t)EMU_MAX_CQ * sizeof(struct emu_cq_entry), 64)
#define EMU_MR_TABLE EMU_ALIGN(EMU_QP_TABLE + (uint64_t)EMU_MAX_QP * sizeof(struct emu_qp_entry), 64)
#define EMU_FREE_LISTS EMU_ALIGN(EMU_MR_TABLE + (uint64_t)EMU_MAX_MR * sizeof(struct emu_mr_entry), 64)
#define EMU_FREE_LISTS_SIZE (4ULL * (EMU_MAX_PD + EMU_MAX_MR + EMU_MAX_CQ + EMU_MAX_QP))
#define EMU_HEAP_BITMAP EMU_ALIGN(EMU_FREE_LISTS + EMU_FREE_LISTS_SIZE, 64)
#define EMU_HEAP EMU_ALIGN(EMU_HEAP_BITMAP + EMU_HEAP_PAGES / 8, EMU_PAGE)
#define EMU_MAP_SIZE (EMU_HEAP + EMU_HEAP_SIZE)

static inline void *emu_at(struct emu_shared *sh, uint64_t offset)
{
	return (char *)sh + offset;
}

static inline struct emu_pd_entry *emu_pd(struct emu_shared *sh, uint32_t i)
{
	return (struct emu_pd_entry *)emu_at(sh, EMU_PD_TABLE) + i;
}

static inline struct emu_cq_entry *emu_cq(struct emu_shared *sh, uint32_t i)
{
	return (struct emu_cq_entry *)emu_at(sh, EMU_CQ_TABLE) + i;
}

static inline struct emu_qp_entry *emu_qp(struct emu_shared *sh, uint32_t i)
{
	return (struct emu_qp_entry *)emu_at(sh, EMU_QP_TABLE) + i;
}

static inline struct emu_mr_entry *emu_mr(struct emu_shared *sh, uint32_t i)
{
	return (struct emu_mr_entry *)emu_at(sh, EMU_MR_TABLE) + i;
}

static inline void *emu_wqe(struct emu_shared *sh, struct emu_queue *q, uint32_t n)
{
	return emu_at(sh, q->ring + (uint64_t)(n & (q->capacity - 1)) * q->stride);
}

static inline struct emu_cqe *emu_cqe_at(struct emu_shared *sh, struct emu_cq_entry *cq, uint32_t n)
{
	return (struct emu_cqe *)emu_at(sh, cq->ring) + (n & (cq->capacity - 1));
}

static inline uint32_t emu_qpn_index(uint32_t qp_num)
{
	return qp_num & 0xffffu;
}

/* Internal: not part of the library's ABI. */
#pragma GCC visibility push(hidden)

/* state.c: the lock, the index FIFOs, the ring heap, futexes, spinlocks */
void emu_state_init(struct emu_shared *sh, uint32_t device_index, uint64_t nonce, uint64_t max_mr_size);
int emu_lock(struct emu_shared *sh);
void emu_unlock(struct emu_shared *sh);
/* Returns an index, or UINT32_MAX when the table is full. Under the lock. */
uint32_t emu_slot_take(struct emu_shared *sh, enum emu_kind kind);
void emu_slot_give(struct emu_shared *sh, enum emu_kind kind, uint32_t index);
/* Returns a page-aligned offset into the mapping, or 0 when the heap is full. Under the lock. */
uint64_t emu_heap_alloc(struct emu_shared *sh, uint32_t pages);
void emu_heap_free(struct emu_shared *sh, int fd, uint64_t offset, uint32_t pages);
void emu_futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout);
void emu_futex_wake(_Atomic uint32_t *word, int count);
void emu_spin_lock(emu_spin *lock);
void emu_spin_unlock(emu_spin *lock);
uint64_t emu_now_ns(void);

#pragma GCC visibility pop

#endif
