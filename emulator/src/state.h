/*
 * state.h - the emulated device's state as every process on the host maps it.
 *
 * One device per host, as an HCA is: the state of mrdemuN is one file,
 * <dir>/mrdemuN (dir: MRDEMU_DIR, default /dev/shm/mrdemu, mode 1777 like
 * /tmp; the file 0666 as Debian's udev makes /dev/infiniband/uverbs*), made
 * by the first ibv_open_device on the host and mapped MAP_SHARED by every
 * open and import in every process. It holds everything a kernel driver and
 * an HCA would keep: the contexts (ucontexts) and the object tables (PDs,
 * MRs, CQs, QPs), the files MRs are bound to, the rings of every queue, and
 * the doorbell the DMA engine sleeps on. QP numbers, keys and handles are
 * table indexes of this one file, so they are unique on the host, and a QP
 * of one process reaches a QP of any other process by its number.
 *
 * A context is an entry in the context table plus a holder file,
 * <dir>/mrdemuN.ctx-<id>, which its opener holds open with a shared flock:
 * that descriptor is ibv_context.cmd_fd. A dup (SCM_RIGHTS, fork) shares the
 * open file description and so the lock, so the context and its objects live
 * while any process holds one, exactly as the kernel keeps a ucontext while
 * a uverbs fd refers to it. Once every holder is gone the lock is free; the
 * next open or close on the host that finds it free (LOCK_EX|LOCK_NB on a
 * fresh open of the file) reaps the context's objects (context.c).
 *
 * Pointers never live here: every reference is a table index or a byte
 * offset from the start of the mapping, which each process maps at its own
 * address.
 *
 *   +--------------------+  0
 *   | struct emu_shared  |  header, doorbell, engine lease, lock, counters
 *   +--------------------+  EMU_CTX_TABLE
 *   | ctx[EMU_MAX_CTX]   |
 *   +--------------------+  EMU_PD_TABLE
 *   | pd[EMU_MAX_PD]     |
 *   +--------------------+  EMU_CQ_TABLE
 *   | cq[EMU_MAX_CQ]     |
 *   +--------------------+  EMU_QP_TABLE
 *   | qp[EMU_MAX_QP]     |
 *   +--------------------+  EMU_MR_TABLE
 *   | mr[EMU_MAX_MR]     |  each with the extents of the pages it is bound to
 *   +--------------------+  EMU_FILE_TABLE
 *   | file[EMU_MAX_FILE] |  the files those extents name
 *   +--------------------+  EMU_FREE_LISTS
 *   | freed-index FIFOs  |  one per object kind
 *   +--------------------+  EMU_HEAP_BITMAP
 *   | heap page bitmap   |
 *   +--------------------+  EMU_HEAP (page aligned)
 *   | rings, PFN lists   |  allocated in pages, holes punched on free
 *   +--------------------+  EMU_MAP_SIZE
 *
 * The file is sized once (ftruncate) and sparse: a page costs memory only
 * once touched, so the large tables are free until used.
 *
 * MRs are bound to pages at registration (mr.c, binding.c), never to
 * addresses: private memory is moved into a file the device owns
 * (<dir>/mrdemuN.mr-<index>-<variant>, mapped back MAP_SHARED|MAP_FIXED at
 * the same address), shared file memory is bound to its file and offset,
 * with the page frames it had when PFNs are readable. The DMA engine reaches
 * an MR through its own mapping of those files (pages.c), so it works in any
 * process and a range unmapped and mapped again at the same address is
 * never written through the new mapping.
 *
 * Concurrency: object creation and destruction hold the robust,
 * process-shared mutex in the header. The datapath holds nothing shared for
 * long: posting takes the queue's producer spinlock for a few stores,
 * publishes the producer index with release semantics and rings the
 * doorbell. The DMA engine is one thread on the host: every process with a
 * context runs a candidate, and the one holding the robust engine_lease runs
 * the device (engine.c); if its process dies the kernel hands the lease to a
 * waiting candidate with EOWNERDEAD. It is the only consumer of send and
 * receive queues and the only producer of completions; poll_cq takes the
 * CQ's consumer spinlock. Objects the engine is using are pinned by a "busy"
 * (QP) or "inflight" (MR) count that destroy and dereg wait on, so a
 * destroyed QP or deregistered MR is never touched again.
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
#define EMU_LAYOUT_VERSION 4u

/* Table capacities, reported by ibv_query_device; host-wide, for every process's contexts. */
#define EMU_MAX_CTX 1024u
#define EMU_MAX_PD 1024u
#define EMU_MAX_CQ 4096u
#define EMU_MAX_QP 4096u
/*
 * An MR's key is (device << 18 | index) << 8 | variant (emu_mr_key): its
 * index in the device's table, and the device that issued it, so that a key
 * of another emulated device is refused as a key this one never issued. Two
 * HCAs may well issue equal keys; a daemon that gives a queue pair another
 * device's key is wrong all the same, and here that shows.
 */
#define EMU_MR_INDEX_BITS 18u
#define EMU_MAX_MR (1u << EMU_MR_INDEX_BITS)
#define EMU_MAX_FILE 16384u

/* Queue limits, reported by ibv_query_device. */
#define EMU_MAX_QP_WR 16384u
#define EMU_MAX_SGE 30u
#define EMU_MAX_CQE (1u << 20)
/*
 * The default max_mr_size; MRDEMU_MAX_MR_SIZE (bytes) in the environment of ibv_open_device sets another for
 * that context (a test knob: the limit is the context's, which every import of it sees).
 */
#define EMU_MAX_MR_SIZE (1ULL << 40)
#define EMU_MAX_MSG_SZ (1u << 31)
#define EMU_MAX_RD_ATOM 16u

#define EMU_PAGE 4096u
#define EMU_HEAP_SIZE (1ULL << 30)
#define EMU_HEAP_PAGES ((uint32_t)(EMU_HEAP_SIZE / EMU_PAGE))

/* Distinct file extents one MR may be bound to (adjacent pieces of one file merge into one). */
#define EMU_MR_EXTENTS 8u
#define EMU_PATH_MAX 256u

/*
 * A freed index is reused only after this many others have been freed, so
 * that a stale handle or QP number is unlikely to name a new object; MR keys
 * are protected further by their variant.
 */
#define EMU_REUSE_DISTANCE 64u

enum emu_kind { EMU_PD = 0, EMU_MR = 1, EMU_CQ = 2, EMU_QP = 3, EMU_CTX = 4, EMU_FILE = 5, EMU_KINDS = 6 };
/* The kinds a context counts (mrdemu_live_objects). */
#define EMU_OBJECT_KINDS 4

/* Context lifecycle, in emu_ctx_entry.state. */
enum { EMU_CTX_FREE = 0, EMU_CTX_LIVE = 1, EMU_CTX_REAPING = 2 };

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

/* One ucontext: what an ibv_open_device made, shared by every import of its cmd_fd. */
struct emu_ctx_entry {
	_Atomic uint32_t state;
	uint32_t gen;
	uint64_t id;		/* host-unique, never reused: names the holder file mrdemuN.ctx-<id> */
	uint32_t creator_pid;
	uint32_t pad;
	/* MRDEMU_MAX_MR_SIZE of its opener, what its ibv_query_device reports and its registrations obey */
	uint64_t max_mr_size;
	_Atomic uint32_t live[EMU_OBJECT_KINDS];	/* its PDs, MRs, CQs, QPs */
	/* Transfers refused because an MR of this context had lost the pages it was bound to. */
	_Atomic uint64_t unbound;
	/* Registrations made in this context: each bound pages (reg_mr, rereg_mr); imports bind none. */
	_Atomic uint64_t registrations;
};

struct emu_pd_entry {
	_Atomic uint32_t live;
	uint32_t gen;
	_Atomic uint32_t users;	/* MRs and QPs on it: dealloc is EBUSY while non-zero */
	uint32_t creator_pid;
	uint32_t ctx;		/* the context that owns it */
	uint32_t pad;
};

/*
 * A file MR pages are bound to, named by path so that any process can map
 * it: a file the registrant mapped MAP_SHARED (its path, or for a file
 * without one /proc/<pid>/fd/<n> of a descriptor the registrant keeps), or a
 * file the device made from private memory (owned). Shared by the extents of
 * every live MR on the same file (refs), found again by dev, ino and path.
 */
struct emu_file_entry {
	_Atomic uint32_t refs;	/* extents of live MRs naming it; 0: the slot is free */
	uint32_t gen;
	uint32_t owned;		/* the device made it: removed with its last reference */
	uint32_t hugetlb;	/* on hugetlbfs: mapped in units of page_size */
	uint64_t page_size;
	uint64_t dev;
	uint64_t ino;
	/* owned: the registrant's range the device's file was mapped over, given back with the last reference */
	uint64_t app_lo;
	uint64_t app_hi;
	uint32_t owner_pid;
	uint32_t pad;
	char path[EMU_PATH_MAX];
};

/* Pages of an MR: [start, start + len) of the MR's page-rounded range are file[file] at file_off. */
struct emu_extent {
	uint64_t start;
	uint64_t len;
	uint64_t file_off;
	uint32_t file;
	uint32_t owned;		/* the device's own file: nobody else can take its pages away */
};

/*
 * One MR. key is 0 while the slot is free, else emu_mr_key(device, index, variant) with
 * a variant that changes on every registration of this index and is never
 * 0, as mlx5 mkeys. The lkey is key; the rkey is key too when the access has
 * a remote flag, else 0 (as rxe reports it), which no MR ever has.
 */
struct emu_mr_entry {
	_Atomic uint32_t key;
	uint32_t variant;
	uint32_t pd;
	uint32_t ctx;
	uint32_t access;
	uint32_t creator_pid;
	uint64_t addr;		/* the registrant's virtual address of the first byte */
	uint64_t length;
	uint64_t iova;		/* the address SGEs and remote_addr use for addr */
	uint64_t base;		/* addr rounded down to a page: extents count from it */
	_Atomic uint32_t inflight;	/* DMA holds: dereg waits for 0 */
	_Atomic uint32_t waiters;
	uint32_t nextents;
	uint32_t pfn_pages;	/* PFNs recorded at registration (0: none, PFNs were unreadable) */
	uint64_t pfns;		/* heap offset of uint64_t[pfn_pages], one per page from base; 0 for owned pages */
	struct emu_extent ext[EMU_MR_EXTENTS];
};

/* The key of the registration variant of index on device (see EMU_MR_INDEX_BITS). */
static inline uint32_t emu_mr_key(int device, uint32_t index, uint32_t variant)
{
	return ((uint32_t)device << EMU_MR_INDEX_BITS | index) << 8 | variant;
}

/* The index key names in its device's table. */
static inline uint32_t emu_key_index(uint32_t key)
{
	return key >> 8 & (EMU_MAX_MR - 1);
}

/* The device that issued key. */
static inline int emu_key_device(uint32_t key)
{
	return (int)(key >> (8 + EMU_MR_INDEX_BITS));
}

/*
 * A completion as the ring stores it: the ibv_wc poll_cq copies out, plus what
 * poll_cq needs to retire the work request's slot, as a NIC's completion
 * carries its WQE counter: a send or receive queue slot is free again only
 * once its completion (or a later one of the same queue) has been polled.
 * qp_index, wc.qp_num and qp_epoch also tell poll_cq that the QP was
 * destroyed or reset since: such a completion is dropped, as mlx5 cleans a
 * QP's completions out of its CQs.
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
	uint32_t ctx;
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
	/* Posters hold it around their stores; RESET holds it while it empties the queue. */
	_Alignas(64) emu_spin post_lock;
	_Atomic uint32_t prod;	/* posted; written under post_lock, release */
	_Alignas(64) _Atomic uint32_t cons;	/* executed or flushed, by the engine */
	_Alignas(64) _Atomic uint32_t retired;	/* completions polled */
};

/* Why the send queue's head WR is waiting, in emu_qp_entry.wait. */
enum { EMU_WAIT_NONE = 0, EMU_WAIT_RNR = 1, EMU_WAIT_ACK = 2 };

struct emu_qp_entry {
	_Atomic uint32_t live;
	uint32_t gen;
	_Atomic uint32_t state;		/* enum ibv_qp_state */
	_Atomic uint32_t busy;		/* engine holds: destroy and RESET wait for 0 */
	_Atomic uint32_t busy_waiters;
	uint32_t epoch;			/* bumped by every move to RESET */
	uint32_t qp_num;		/* (gen & 0xff) << 16 | index */
	uint32_t pd;
	uint32_t ctx;
	uint32_t send_cq;
	uint32_t recv_cq;
	uint32_t sq_sig_all;
	uint32_t creator_pid;
	uint32_t ring_pages;
	uint64_t ring_base;
	/* attributes, written by ibv_modify_qp before the state they belong to */
	uint32_t dest_qp_num;
	uint32_t qp_access_flags;
	uint32_t rq_psn;		/* the responder's expected PSN; the engine advances it */
	uint32_t sq_psn;		/* the requester's next PSN; the engine advances it */
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
	/* the engine's own: what the send queue's head WR waits for (RNR NAK, or an ACK that does not come) */
	uint32_t wait;
	uint32_t wait_head;
	uint32_t retries_left;
	uint32_t pad2;
	uint64_t wait_deadline_ns;	/* 0: waits as long as it takes (rnr_retry 7, timeout 0) */
	struct emu_queue sq;
	struct emu_queue rq;
};

struct emu_shared {
	uint64_t magic;
	uint32_t version;
	uint32_t device_index;		/* the N of mrdemuN */
	uint64_t map_size;
	uint64_t nonce;			/* the node GUID */
	uint32_t creator_pid;
	_Atomic uint32_t ready;		/* set last by the creator: the rest is initialised */
	pthread_mutex_t lock;		/* robust, process-shared */
	/*
	 * Held by the process whose thread is the DMA engine (robust,
	 * process-shared): when it dies the kernel marks it owner-died and
	 * wakes a candidate of another process, which takes over.
	 */
	pthread_mutex_t engine_lease;
	uint32_t engine_pid;
	_Atomic uint32_t engine_takeovers;	/* leases taken from a dead engine */
	uint64_t next_ctx_id;
	struct emu_slots slots[EMU_KINDS];
	uint32_t heap_hint;		/* first page to look at when allocating */
	uint32_t heap_used_pages;
	_Atomic uint64_t unbound;	/* every context's unbound transfers, also those of reaped contexts */
	_Atomic uint64_t registrations;	/* every context's registrations, also those of reaped contexts */
	_Atomic uint32_t mr_frees;	/* bumped by every dereg: engines drop their mappings of dead MRs */
	_Alignas(64) _Atomic uint32_t doorbell;	/* bumped by every post; the engine's futex */
	_Atomic uint32_t engine_sleeping;
	uint64_t engine_passes;
};

#define EMU_ALIGN(x, a) (((x) + (a) - 1) & ~((uint64_t)(a) - 1))

#define EMU_CTX_TABLE EMU_ALIGN(sizeof(struct emu_shared), 64)
#define EMU_PD_TABLE EMU_ALIGN(EMU_CTX_TABLE + (uint64_t)EMU_MAX_CTX * sizeof(struct emu_ctx_entry), 64)
#define EMU_CQ_TABLE EMU_ALIGN(EMU_PD_TABLE + (uint64_t)EMU_MAX_PD * sizeof(struct emu_pd_entry), 64)
#define EMU_QP_TABLE EMU_ALIGN(EMU_CQ_TABLE + (uint64_t)EMU_MAX_CQ * sizeof(struct emu_cq_entry), 64)
#define EMU_MR_TABLE EMU_ALIGN(EMU_QP_TABLE + (uint64_t)EMU_MAX_QP * sizeof(struct emu_qp_entry), 64)
#define EMU_FILE_TABLE EMU_ALIGN(EMU_MR_TABLE + (uint64_t)EMU_MAX_MR * sizeof(struct emu_mr_entry), 64)
#define EMU_FREE_LISTS EMU_ALIGN(EMU_FILE_TABLE + (uint64_t)EMU_MAX_FILE * sizeof(struct emu_file_entry), 64)
#define EMU_FREE_LISTS_SIZE (4ULL * (EMU_MAX_PD + EMU_MAX_MR + EMU_MAX_CQ + EMU_MAX_QP + EMU_MAX_CTX + EMU_MAX_FILE))
#define EMU_HEAP_BITMAP EMU_ALIGN(EMU_FREE_LISTS + EMU_FREE_LISTS_SIZE, 64)
#define EMU_HEAP EMU_ALIGN(EMU_HEAP_BITMAP + EMU_HEAP_PAGES / 8, EMU_PAGE)
#define EMU_MAP_SIZE (EMU_HEAP + EMU_HEAP_SIZE)

static inline void *emu_at(struct emu_shared *sh, uint64_t offset)
{
	return (char *)sh + offset;
}

static inline struct emu_ctx_entry *emu_ctxe(struct emu_shared *sh, uint32_t i)
{
	return (struct emu_ctx_entry *)emu_at(sh, EMU_CTX_TABLE) + i;
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

static inline struct emu_file_entry *emu_file(struct emu_shared *sh, uint32_t i)
{
	return (struct emu_file_entry *)emu_at(sh, EMU_FILE_TABLE) + i;
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
void emu_state_init(struct emu_shared *sh, uint32_t device_index, uint64_t nonce);
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
