/*
 * state.c - what every process does to the shared device state under its
 * lock: hand out table indexes, carve rings out of the heap; and the two
 * waiting primitives everything else builds on (futex, spinlock).
 * Nothing here makes a system call but emu_heap_free's hole punch and the
 * futexes: it all runs under the device lock or on the datapath.
 */
#define _GNU_SOURCE
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

void emu_state_init(struct emu_shared *sh, uint32_t device_index, uint64_t nonce)
{
	static const uint32_t max[EMU_KINDS] = { EMU_MAX_PD, EMU_MAX_MR, EMU_MAX_CQ, EMU_MAX_QP, EMU_MAX_CTX,
						 EMU_MAX_FILE };
	pthread_mutexattr_t attr;
	uint64_t fifo = EMU_FREE_LISTS;

	sh->magic = EMU_MAGIC;
	sh->version = EMU_LAYOUT_VERSION;
	sh->device_index = device_index;
	sh->map_size = EMU_MAP_SIZE;
	sh->nonce = nonce;
	sh->creator_pid = (uint32_t)getpid();
	{
		struct timespec now;

		/* Holder ids stay new across re-initialisations of the device: a stale holder file never names a context. */
		clock_gettime(CLOCK_REALTIME, &now);
		sh->next_ctx_id = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
	}
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	/* A process that dies inside a create or destroy, or running the engine, must not wedge the device. */
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&sh->lock, &attr);
	pthread_mutex_init(&sh->engine_lease, &attr);
	pthread_mutexattr_destroy(&attr);
	for (int k = 0; k < EMU_KINDS; k++) {
		sh->slots[k].max = max[k];
		sh->slots[k].fifo = fifo;
		fifo += 4ULL * max[k];
	}
	atomic_store_explicit(&sh->ready, 1, memory_order_release);
}

int emu_lock(struct emu_shared *sh)
{
	int rc = pthread_mutex_lock(&sh->lock);

	if (rc == EOWNERDEAD) {
		/*
		 * Every update under the lock is a few stores that leave the tables usable
		 * if cut short (at worst an index or a few heap pages leak), so carry on.
		 */
		pthread_mutex_consistent(&sh->lock);
		rc = 0;
	}
	return rc;
}

void emu_unlock(struct emu_shared *sh)
{
	pthread_mutex_unlock(&sh->lock);
}

uint32_t emu_slot_take(struct emu_shared *sh, enum emu_kind kind)
{
	struct emu_slots *s = &sh->slots[kind];
	uint32_t *fifo = emu_at(sh, s->fifo);
	uint32_t freed = s->tail - s->head;

	if (freed > EMU_REUSE_DISTANCE || (s->high_water == s->max && freed > 0)) {
		uint32_t index = fifo[s->head++ % s->max];

		/* Written by any importer: a slot number beyond the table is no slot. */
		return index < s->max ? index : UINT32_MAX;
	}
	if (s->high_water < s->max) {
		uint32_t index = s->high_water;

		/* The engine scans QPs up to high_water without the lock. */
		__atomic_store_n(&s->high_water, index + 1, __ATOMIC_RELEASE);
		return index;
	}
	return UINT32_MAX;
}

void emu_slot_give(struct emu_shared *sh, enum emu_kind kind, uint32_t index)
{
	struct emu_slots *s = &sh->slots[kind];
	uint32_t *fifo = emu_at(sh, s->fifo);

	fifo[s->tail++ % s->max] = index;
}

static uint8_t *heap_bitmap(struct emu_shared *sh)
{
	return emu_at(sh, EMU_HEAP_BITMAP);
}

static int page_used(const uint8_t *map, uint32_t page)
{
	return map[page >> 3] & (1u << (page & 7));
}

static void mark_pages(uint8_t *map, uint32_t first, uint32_t pages, int used)
{
	for (uint32_t p = first; p < first + pages; p++) {
		if (used)
			map[p >> 3] |= (uint8_t)(1u << (p & 7));
		else
			map[p >> 3] &= (uint8_t)~(1u << (p & 7));
	}
}

/* First fit from a roving hint: creation-time only, so a linear scan is fine. */
uint64_t emu_heap_alloc(struct emu_shared *sh, uint32_t pages)
{
	uint8_t *map = heap_bitmap(sh);

	if (pages == 0 || pages > EMU_HEAP_PAGES)
		return 0;
	for (int round = 0; round < 2; round++) {
		uint32_t start = round == 0 ? sh->heap_hint : 0;
		uint32_t run = 0;

		for (uint32_t p = start; p < EMU_HEAP_PAGES; p++) {
			run = page_used(map, p) ? 0 : run + 1;
			if (run == pages) {
				uint32_t first = p + 1 - pages;

				mark_pages(map, first, pages, 1);
				sh->heap_hint = p + 1;
				sh->heap_used_pages += pages;
				return EMU_HEAP + (uint64_t)first * EMU_PAGE;
			}
		}
	}
	return 0;
}

void emu_heap_free(struct emu_shared *sh, int fd, uint64_t offset, uint32_t pages)
{
	uint32_t first = (uint32_t)((offset - EMU_HEAP) / EMU_PAGE);

	/* Give the pages back to the kernel: a ring's memory must not outlive its queue. */
	fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset, (off_t)pages * EMU_PAGE);
	mark_pages(heap_bitmap(sh), first, pages, 0);
	sh->heap_used_pages -= pages;
}

/* Not FUTEX_PRIVATE: the word is in MAP_SHARED memory and the waker may be another process. */
void emu_futex_wait(_Atomic uint32_t *word, uint32_t expected, const struct timespec *timeout)
{
	syscall(SYS_futex, word, FUTEX_WAIT, expected, timeout, NULL, 0);
}

void emu_futex_wake(_Atomic uint32_t *word, int count)
{
	syscall(SYS_futex, word, FUTEX_WAKE, count, NULL, NULL, 0);
}

void emu_spin_lock(emu_spin *lock)
{
	for (unsigned spins = 0;; spins++) {
		uint32_t expected = 0;

		if (atomic_compare_exchange_weak_explicit(lock, &expected, 1, memory_order_acquire,
							  memory_order_relaxed))
			return;
		/* On 2 cores the holder may be descheduled: yield rather than burn its slice. */
		if (spins > 64)
			sched_yield();
	}
}

void emu_spin_unlock(emu_spin *lock)
{
	atomic_store_explicit(lock, 0, memory_order_release);
}

uint64_t emu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
