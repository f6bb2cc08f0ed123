/*
 * pages.c - the DMA engine's reach into the pages MRs are bound to, from
 * whichever process runs the engine.
 *
 * The engine never uses an MR's virtual address: it maps the MR's files
 * itself (MAP_SHARED, at an address of its own choosing) on the MR's first
 * use in this process, and keeps the mapping until the MR is deregistered
 * (sh->mr_frees moves; emu_pages_sweep unmaps what is stale). So a
 * transfer reaches the pages bound at registration whatever the registrant
 * has mapped at that address since, in any process.
 *
 * Pages of the device's own files (private memory moved at registration)
 * can be taken away by nobody: they are reached without a check. Pages of a
 * file the registrant shared can be: a hole punched in the file removes
 * them from every mapping, this one too. The engine therefore
 *  - on first use maps only what is still in the page cache (mincore), so it
 *    never fills a punched hole with a new page, and compares the page frame
 *    numbers with those recorded at registration, when there are some
 *    (hugetlbfs pages are faulted in without the mincore look: mincore
 *    reports a hugetlb mapping's own page tables, not the file);
 *  - before every transfer reads /proc/self/pagemap for the pages it is
 *    about to touch: a page the hole punch took out of this mapping is not
 *    present, and since the engine never faults its mapping again, a page
 *    refilled at the same offset never becomes present here either.
 * Either way the transfer is refused and counted (the caller). Page
 * migration keeps a mapped page present (its PFN changes, which is why PFNs
 * are compared only at first use); a page reclaimed would read as absent,
 * which cannot happen to tmpfs without swap. A punch that lands between the
 * check and the copy is not seen: the window of one memcpy.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif
#define PM_PRESENT (1ULL << 63)
#define PM_PFN ((1ULL << 55) - 1)

struct emu_local_mr {
	uint32_t index;
	uint32_t key;
	uint32_t n;
	int broken;			/* a page was gone at first use: every transfer is refused */
	struct {
		char *map;		/* what mmap returned (hugetlb: rounded to its page) */
		uint64_t map_len;
		char *va;		/* the extent's first byte */
		int checked;		/* a shared file's pages: look at pagemap before each use */
	} ext[EMU_MR_EXTENTS];
	struct emu_local_mr *next;
};

static int pagemap_fd = -1;
static pthread_once_t pagemap_once = PTHREAD_ONCE_INIT;

static void open_pagemap(void)
{
	pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
}

/* Raw pagemap entries of [addr, addr + pages pages). */
static int read_pagemap(uint64_t addr, uint64_t pages, uint64_t *out)
{
	pthread_once(&pagemap_once, open_pagemap);
	if (pagemap_fd < 0)
		return -1;
	for (uint64_t done = 0; done < pages;) {
		ssize_t n = pread(pagemap_fd, out + done, (pages - done) * 8, (off_t)((addr / EMU_PAGE + done) * 8));

		if (n <= 0)
			return -1;
		done += (uint64_t)n / 8;
	}
	return 0;
}

int emu_read_pfns(uint64_t addr, uint64_t pages, uint64_t *out)
{
	if (read_pagemap(addr, pages, out) != 0)
		return -1;
	for (uint64_t i = 0; i < pages; i++)
		out[i] = (out[i] & PM_PRESENT) ? out[i] & PM_PFN : 0;
	return 0;
}

static void unmap_local(struct emu_local_mr *m)
{
	for (uint32_t i = 0; i < m->n; i++)
		if (m->ext[i].map)
			munmap(m->ext[i].map, m->ext[i].map_len);
	free(m);
}

/* Faults in what the page cache still has of [va, va + len): never a new page for a hole. */
static void populate_resident(char *va, uint64_t len, int writable)
{
	uint64_t pages = len / EMU_PAGE;
	unsigned char *vec = malloc(pages ? pages : 1);
	int advice = writable ? MADV_POPULATE_WRITE : MADV_POPULATE_READ;

	if (!vec || mincore(va, len, vec) != 0) {
		free(vec);
		return;
	}
	for (uint64_t p = 0; p < pages;) {
		uint64_t q = p;

		while (q < pages && (vec[q] & 1))
			q++;
		if (q > p)
			madvise(va + p * EMU_PAGE, (q - p) * EMU_PAGE, advice);
		p = q + 1;
	}
	free(vec);
}

/* Whether the pages of extent i are the pages recorded at registration (no record: whether they are there). */
static int same_pages(struct emu_shared *sh, const struct emu_mr_entry *e, uint32_t i, char *va)
{
	const struct emu_extent *x = &e->ext[i];
	uint64_t pages = x->len / EMU_PAGE, first = x->start / EMU_PAGE;
	const uint64_t *recorded = e->pfns && e->pfn_pages >= first + pages ? emu_at(sh, e->pfns) : NULL;
	uint64_t *now = malloc(pages * sizeof(*now));
	int same = 1;

	if (!now || read_pagemap((uintptr_t)va, pages, now) != 0) {
		free(now);
		return 0;
	}
	for (uint64_t p = 0; p < pages && same; p++) {
		if (!(now[p] & PM_PRESENT))
			same = 0;
		else if (recorded && (now[p] & PM_PFN) != recorded[first + p])
			same = 0;
	}
	free(now);
	return same;
}

/* This process's mapping of MR index with key, made now if there is none (or only one of an earlier key). */
static struct emu_local_mr *local_mr(struct emu_device *d, uint32_t index, uint32_t key)
{
	struct emu_shared *sh = d->sh;
	struct emu_mr_entry *e = emu_mr(sh, index);
	struct emu_local_mr *m = d->maps[index];
	int writable = (e->access & ~(unsigned int)IBV_ACCESS_REMOTE_READ) != 0;

	if (m && m->key == key)
		return m;
	if (m) {
		for (struct emu_local_mr **p = &d->mapped; *p; p = &(*p)->next)
			if (*p == m) {
				*p = m->next;
				break;
			}
		unmap_local(m);
		d->maps[index] = NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return NULL;
	m->index = index;
	m->key = key;
	m->n = e->nextents <= EMU_MR_EXTENTS ? e->nextents : 0;
	for (uint32_t i = 0; i < m->n; i++) {
		const struct emu_extent *x = &e->ext[i];
		struct emu_file_entry *f = x->file < EMU_MAX_FILE ? emu_file(sh, x->file) : NULL;
		uint64_t unit = f && f->hugetlb && f->page_size > EMU_PAGE ? f->page_size : EMU_PAGE;
		uint64_t lo = x->file_off & ~(unit - 1), hi = EMU_ALIGN(x->file_off + x->len, unit);
		int prot = PROT_READ | PROT_WRITE, fd = -1;
		struct stat st;
		char *map;

		if (f)
			fd = open(f->path, O_RDWR | O_CLOEXEC);
		if (f && fd < 0) {
			fd = open(f->path, O_RDONLY | O_CLOEXEC);
			prot = PROT_READ;
		}
		if (fd < 0 || fstat(fd, &st) != 0 || st.st_ino != f->ino || st.st_dev != f->dev) {
			/* The file is gone, or another with its name: the pages cannot be reached. */
			if (fd >= 0)
				close(fd);
			m->broken = 1;
			continue;
		}
		map = mmap(NULL, hi - lo, prot, MAP_SHARED, fd, (off_t)lo);
		close(fd);
		if (map == MAP_FAILED) {
			m->broken = 1;
			continue;
		}
		m->ext[i].map = map;
		m->ext[i].map_len = hi - lo;
		m->ext[i].va = map + (x->file_off - lo);
		if (x->owned)
			continue;
		m->ext[i].checked = 1;
		if (f->hugetlb)
			madvise(m->ext[i].va, x->len, writable && prot == (PROT_READ | PROT_WRITE) ? MADV_POPULATE_WRITE :
													     MADV_POPULATE_READ);
		else
			populate_resident(m->ext[i].va, x->len, writable && (prot & PROT_WRITE));
		if (!same_pages(sh, e, i, m->ext[i].va))
			m->broken = 1;
	}
	d->maps[index] = m;
	m->next = d->mapped;
	d->mapped = m;
	return m;
}

/* Whether every page of [va, va + len) is still mapped here. */
static int still_there(char *va, uint64_t len)
{
	uint64_t first = (uintptr_t)va / EMU_PAGE, last = ((uintptr_t)va + len - 1) / EMU_PAGE;
	uint64_t buf[64];

	for (uint64_t p = first; p <= last;) {
		uint64_t n = last - p + 1 < 64 ? last - p + 1 : 64;

		if (read_pagemap(p * EMU_PAGE, n, buf) != 0)
			return 0;
		for (uint64_t i = 0; i < n; i++)
			if (!(buf[i] & PM_PRESENT))
				return 0;
		p += n;
	}
	return 1;
}

int emu_pages_reach(struct emu_device *d, uint32_t index, uint64_t off, uint64_t len, int write,
		    struct emu_seg *out, int max)
{
	struct emu_mr_entry *e = emu_mr(d->sh, index);
	struct emu_local_mr *m = local_mr(d, index, atomic_load(&e->key));
	int n = 0;

	(void)write;
	if (!m || m->broken)
		return -1;
	for (uint32_t i = 0; i < m->n && len > 0; i++) {
		const struct emu_extent *x = &e->ext[i];
		uint64_t take;

		if (off >= x->start + x->len || off < x->start)
			continue;
		take = x->start + x->len - off;
		if (take > len)
			take = len;
		if (n == max)
			return -2;
		out[n].va = m->ext[i].va + (off - x->start);
		out[n].len = take;
		if (m->ext[i].checked && !still_there(out[n].va, take))
			return -1;
		n++;
		off += take;
		len -= take;
	}
	/* Extents cover the MR's range: bytes left over mean the shared entry was damaged. */
	return len == 0 ? n : -1;
}

void emu_pages_sweep(struct emu_device *d, int all)
{
	for (struct emu_local_mr **p = &d->mapped; *p;) {
		struct emu_local_mr *m = *p;

		if (all || atomic_load(&emu_mr(d->sh, m->index)->key) != m->key) {
			*p = m->next;
			d->maps[m->index] = NULL;
			unmap_local(m);
		} else {
			p = &m->next;
		}
	}
}
