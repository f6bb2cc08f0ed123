/*
 * binding.c - what pages an MR is bound to, decided once, at registration,
 * as ib_umem_get pins them; and letting go of them at deregistration.
 *
 * The range is walked in /proc/self/maps. Every page must be mapped and
 * readable, and writable when the access writes (LOCAL_WRITE, REMOTE_WRITE,
 * REMOTE_ATOMIC, MW_BIND, as ib_access_writable says), else EFAULT, as
 * pin_user_pages without FOLL_FORCE fails. Then each piece is bound:
 *
 *  - private memory (anonymous, heap, stack, a MAP_PRIVATE file) is copied
 *    into a file the device owns, <dir>/mrdemuN.mr-<index>-<variant>, which
 *    is mapped back over it MAP_SHARED|MAP_FIXED at the same address and
 *    protections. The process sees its own bytes, the MR holds those pages
 *    for real, and every process's engine can map them. What it costs: the
 *    range is shared memory from then on (a fork child shares it instead of
 *    copying it; an HCA's pin makes the child copy), a write by another
 *    thread during the copy is lost, and mlock and madvise settings of the
 *    range are not carried over. The last deregistration of the file maps
 *    the bytes back as private anonymous memory, if the range still is the
 *    file's, and removes the file.
 *  - shared file memory is bound to its file and offset: by its path when
 *    the path names the same inode, else (memfd, shared anonymous memory, an
 *    unlinked file) by /proc/<pid>/fd/<n> of a descriptor the registrant
 *    opens through /proc/self/map_files and keeps until deregistration (that
 *    needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE: without it, EOPNOTSUPP).
 *    The pages are faulted in, and their page frame numbers recorded when
 *    /proc/self/pagemap shows them (it shows 0 to an unprivileged process:
 *    then only the file and offset are checked). Such pages can be taken
 *    away by whoever holds the file (mrd frees a segment with munmap and
 *    FALLOC_FL_PUNCH_HOLE while an MR over it stays registered); the engine
 *    sees it and refuses the transfer (pages.c).
 *
 * Private hugetlb memory cannot be moved into a file at 4 KiB granularity:
 * EOPNOTSUPP.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif
#define HUGETLBFS_MAGIC_ 0x958458f6

#define WRITES (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

struct vma {
	uint64_t lo, hi, offset, ino;
	unsigned int major, minor;
	int prot;
	int shared;
	char path[EMU_PATH_MAX];
};

/* Calls fn for every mapping overlapping [lo, hi), in address order; stops at fn's non-zero return. */
static int each_vma(uint64_t lo, uint64_t hi, int (*fn)(const struct vma *, void *), void *arg)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[EMU_PATH_MAX + 128];
	int rc = 0;

	if (!f)
		return errno;
	while (!rc && fgets(line, sizeof(line), f)) {
		struct vma v;
		char perms[8];
		int path_at = 0;

		memset(&v, 0, sizeof(v));
		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &v.lo, &v.hi, perms,
			   &v.offset, &v.major, &v.minor, &v.ino, &path_at) < 7)
			continue;
		if (v.hi <= lo)
			continue;
		if (v.lo >= hi)
			break;
		v.prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
			 (perms[2] == 'x' ? PROT_EXEC : 0);
		v.shared = perms[3] == 's';
		if (path_at > 0) {
			snprintf(v.path, sizeof(v.path), "%s", line + path_at);
			v.path[strcspn(v.path, "\n")] = 0;
		}
		rc = fn(&v, arg);
	}
	fclose(f);
	return rc;
}

struct walk {
	struct emu_device *d;
	uint64_t lo, hi;	/* the page-rounded range */
	uint64_t next;		/* first byte not yet seen: a gap is unmapped memory */
	unsigned int access;
	uint32_t index, variant;
	struct emu_binding *b;
	int owned_fd;		/* the device's file for private pieces, made on first need */
	uint32_t owned_file;
	int err;
};

/* Finds or makes the file entry of (dev, ino, path) and takes a reference. Under the lock. */
static uint32_t file_ref(struct emu_shared *sh, const struct stat *st, const char *path, int owned, uint64_t page_size,
			 int hugetlb)
{
	uint32_t high = sh->slots[EMU_FILE].high_water, index;
	struct emu_file_entry *f;

	for (uint32_t i = 0; i < high; i++) {
		f = emu_file(sh, i);
		if (atomic_load(&f->refs) && f->dev == st->st_dev && f->ino == st->st_ino &&
		    strcmp(f->path, path) == 0) {
			atomic_fetch_add(&f->refs, 1);
			return i;
		}
	}
	index = emu_slot_take(sh, EMU_FILE);
	if (index == UINT32_MAX)
		return UINT32_MAX;
	f = emu_file(sh, index);
	f->gen++;
	f->owned = (uint32_t)owned;
	f->hugetlb = (uint32_t)hugetlb;
	f->page_size = page_size;
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	snprintf(f->path, sizeof(f->path), "%s", path);
	atomic_store(&f->refs, 1);
	return index;
}

static void file_unref(struct emu_shared *sh, uint32_t index)
{
	struct emu_file_entry *f;

	if (index >= EMU_MAX_FILE)
		return;
	f = emu_file(sh, index);
	if (atomic_fetch_sub(&f->refs, 1) != 1)
		return;
	if (f->owned)
		unlink(f->path);
	emu_slot_give(sh, EMU_FILE, index);
}

/* Adds [start, start + len) of the MR, at file_off of file, merging with the previous extent if it continues. */
static int add_extent(struct walk *w, uint64_t start, uint64_t len, uint32_t file, uint64_t file_off, int owned)
{
	struct emu_binding *b = w->b;
	struct emu_extent *last = b->n ? &b->ext[b->n - 1] : NULL;

	if (last && last->file == file && last->start + last->len == start && last->file_off + last->len == file_off) {
		last->len += len;
		emu_lock(w->d->sh);
		file_unref(w->d->sh, file);
		emu_unlock(w->d->sh);
		return 0;
	}
	if (b->n == EMU_MR_EXTENTS) {
		emu_lock(w->d->sh);
		file_unref(w->d->sh, file);
		emu_unlock(w->d->sh);
		return ENOMEM;
	}
	b->ext[b->n++] = (struct emu_extent){ .start = start, .len = len, .file_off = file_off, .file = file,
					      .owned = (uint32_t)owned };
	return 0;
}

/* Moves a private piece into the device's file for this MR, mapped back at the same address. */
static int bind_private(struct walk *w, const struct vma *v, uint64_t lo, uint64_t hi)
{
	struct emu_shared *sh = w->d->sh;
	uint64_t off = lo - w->lo;
	char path[EMU_PATH_MAX + 48];
	uint32_t file;
	struct stat st;

	if (strstr(v->path, "anon_hugepage") || strstr(v->path, "/hugepages"))
		return EOPNOTSUPP;
	snprintf(path, sizeof(path), "%s/mrdemu%d.mr-%u-%u", w->d->dir, w->d->index, w->index, w->variant);
	if (w->owned_fd < 0) {
		w->owned_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (w->owned_fd < 0 || fstat(w->owned_fd, &st) != 0)
			return errno;
		/* Any process's engine maps it, whoever it runs as. */
		fchmod(w->owned_fd, 0666);
		if (ftruncate(w->owned_fd, (off_t)(w->hi - w->lo)) != 0)
			return errno;
		emu_lock(sh);
		file = file_ref(sh, &st, path, 1, EMU_PAGE, 0);
		emu_unlock(sh);
		if (file == UINT32_MAX)
			return ENOMEM;
		emu_file(sh, file)->app_lo = w->lo;
		emu_file(sh, file)->app_hi = w->hi;
		emu_file(sh, file)->owner_pid = (uint32_t)getpid();
		w->owned_file = file;
	} else {
		emu_lock(sh);
		atomic_fetch_add(&emu_file(sh, w->owned_file)->refs, 1);
		emu_unlock(sh);
		file = w->owned_file;
	}
	/* Reads the process's own bytes (readable: checked), however it may write them. */
	for (uint64_t done = 0; done < hi - lo;) {
		ssize_t n = pwrite(w->owned_fd, (const char *)(uintptr_t)(lo + done), hi - lo - done, (off_t)(off + done));

		if (n <= 0)
			return n < 0 ? errno : EIO;
		done += (uint64_t)n;
	}
	if (mmap((void *)(uintptr_t)lo, hi - lo, v->prot, MAP_SHARED | MAP_FIXED, w->owned_fd, (off_t)off) ==
	    MAP_FAILED)
		return errno;
	return add_extent(w, off, hi - lo, file, off, 1);
}

/* Opens the file behind a shared piece: by its path if that is still the same inode, else through map_files. */
static int open_shared(const struct vma *v, struct walk *w, char *path, size_t size, struct stat *st)
{
	int fd = -1;

	if (v->path[0] == '/' && !strstr(v->path, " (deleted)")) {
		fd = open(v->path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			fd = open(v->path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && fstat(fd, st) == 0 && st->st_ino == v->ino && major(st->st_dev) == v->major &&
		    minor(st->st_dev) == v->minor) {
			snprintf(path, size, "%s", v->path);
			close(fd);
			return 0;
		}
		if (fd >= 0)
			close(fd);
	}
	{
		char link[96];

		snprintf(link, sizeof(link), "/proc/self/map_files/%" PRIx64 "-%" PRIx64, v->lo, v->hi);
		fd = open(link, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			fd = open(link, O_RDONLY | O_CLOEXEC);
	}
	if (fd < 0 || fstat(fd, st) != 0 || w->b->nkept == EMU_MR_EXTENTS) {
		if (fd >= 0)
			close(fd);
		return EOPNOTSUPP;
	}
	w->b->kept_fd[w->b->nkept++] = fd;
	snprintf(path, size, "/proc/%d/fd/%d", (int)getpid(), fd);
	return 0;
}

static int bind_shared(struct walk *w, const struct vma *v, uint64_t lo, uint64_t hi)
{
	struct emu_shared *sh = w->d->sh;
	char path[EMU_PATH_MAX];
	struct statfs fs;
	struct stat st;
	uint32_t file;
	int rc = open_shared(v, w, path, sizeof(path), &st), hugetlb = 0, fd;
	uint64_t page_size = EMU_PAGE;

	if (rc)
		return rc;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (fstatfs(fd, &fs) == 0 && (uint32_t)fs.f_type == HUGETLBFS_MAGIC_) {
			hugetlb = 1;
			page_size = (uint64_t)st.st_blksize;
		}
		close(fd);
	}
	emu_lock(sh);
	file = file_ref(sh, &st, path, 0, page_size, hugetlb);
	emu_unlock(sh);
	if (file == UINT32_MAX)
		return ENOMEM;
	return add_extent(w, lo - w->lo, hi - lo, file, v->offset + (lo - v->lo), 0);
}

static int bind_vma(const struct vma *v, void *arg)
{
	struct walk *w = arg;
	uint64_t lo = v->lo > w->lo ? v->lo : w->lo, hi = v->hi < w->hi ? v->hi : w->hi;

	/* A hole before this mapping, or memory pin_user_pages would refuse. */
	if (v->lo > w->next || !(v->prot & PROT_READ) || ((w->access & WRITES) && !(v->prot & PROT_WRITE)) ||
	    strcmp(v->path, "[vvar]") == 0 || strcmp(v->path, "[vsyscall]") == 0)
		return w->err = EFAULT;
	w->next = hi;
	w->err = v->shared ? bind_shared(w, v, lo, hi) : bind_private(w, v, lo, hi);
	return w->err;
}

/* PFNs of the non-owned pages of b (after they are faulted in); NULL when they read as 0 (unprivileged). */
static uint64_t *record_pfns(struct emu_binding *b)
{
	uint64_t *pfns = calloc(b->pages, sizeof(*pfns));
	int any = 0;

	if (!pfns || emu_read_pfns(b->base, b->pages, pfns) != 0) {
		free(pfns);
		return NULL;
	}
	for (uint32_t i = 0; i < b->n; i++) {
		const struct emu_extent *x = &b->ext[i];

		for (uint64_t p = x->start / EMU_PAGE; p < (x->start + x->len) / EMU_PAGE; p++) {
			if (x->owned)
				pfns[p] = 0;
			else if (pfns[p] == 0)
				goto unreadable;
			else
				any = 1;
		}
	}
	if (any)
		return pfns;
unreadable:
	free(pfns);
	return NULL;
}

int emu_bind(struct emu_device *d, uint64_t addr, uint64_t length, unsigned int access, uint32_t index,
	     uint32_t variant, struct emu_binding *b)
{
	struct walk w = { .d = d, .access = access, .index = index, .variant = variant, .b = b, .owned_fd = -1 };
	int rc, any_shared = 0;

	memset(b, 0, sizeof(*b));
	w.lo = addr & ~(uint64_t)(EMU_PAGE - 1);
	w.hi = EMU_ALIGN(addr + length, EMU_PAGE);
	w.next = w.lo;
	b->base = w.lo;
	b->pages = (w.hi - w.lo) / EMU_PAGE;
	rc = each_vma(w.lo, w.hi, bind_vma, &w);
	if (!rc && w.next < w.hi)
		rc = EFAULT;
	if (w.owned_fd >= 0)
		close(w.owned_fd);
	for (uint32_t i = 0; !rc && i < b->n; i++)
		any_shared |= !b->ext[i].owned;
	/* Fault the pages in, as pinning does: a hole past the end of a file is EFAULT here, not at DMA time. */
	if (!rc && any_shared &&
	    madvise((void *)(uintptr_t)w.lo, w.hi - w.lo, (access & WRITES) ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) !=
		    0 &&
	    errno != EINVAL)
		rc = EFAULT;
	if (!rc && any_shared)
		b->pfns = record_pfns(b);
	if (rc) {
		emu_unbind(d, b->ext, b->n, b->kept_fd, b->nkept);
		b->n = 0;
		b->nkept = 0;
	}
	return rc;
}

struct give_back {
	uint64_t dev, ino;
};

/* Maps a piece of the device's file back as private anonymous memory with the same bytes. */
static int unconvert(const struct vma *v, void *arg)
{
	struct give_back *g = arg;
	uint64_t len = v->hi - v->lo;
	void *tmp;

	if (!v->shared || v->ino != g->ino || makedev(v->major, v->minor) != g->dev || !(v->prot & PROT_READ))
		return 0;
	tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tmp == MAP_FAILED)
		return 0;
	memcpy(tmp, (void *)(uintptr_t)v->lo, len);
	mprotect(tmp, len, v->prot);
	/* Atomic for the address range: it is the file's until it is the copy's. */
	if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(uintptr_t)v->lo) == MAP_FAILED)
		munmap(tmp, len);
	return 0;
}

void emu_unbind(struct emu_device *d, const struct emu_extent *ext, uint32_t n, int *kept_fd, int nkept)
{
	struct emu_shared *sh = d->sh;

	for (uint32_t i = 0; i < n; i++) {
		struct emu_file_entry *f = ext[i].file < EMU_MAX_FILE ? emu_file(sh, ext[i].file) : NULL;

		if (!f)
			continue;
		emu_lock(sh);
		if (f->owned && atomic_load(&f->refs) == 1 && f->owner_pid == (uint32_t)getpid()) {
			/* The last MR on the device's file: the registrant's range becomes private memory again. */
			struct give_back g = { .dev = f->dev, .ino = f->ino };
			uint64_t lo = f->app_lo, hi = f->app_hi;

			emu_unlock(sh);
			each_vma(lo, hi, unconvert, &g);
			emu_lock(sh);
		}
		file_unref(sh, ext[i].file);
		emu_unlock(sh);
	}
	for (int i = 0; i < nkept; i++)
		close(kept_fd[i]);
}
