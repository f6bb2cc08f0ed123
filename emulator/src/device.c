/*
 * device.c - the host directory and this process's mappings of the device
 * files in it.
 *
 * <dir>/mrdemuN is the whole state of device N on the host (state.h). Every
 * process that maps it holds a shared flock on its descriptor, which is how
 * the next process knows whether anyone still uses it: the first process to
 * open a device nobody uses (an exclusive non-blocking flock succeeds)
 * initialises it afresh and removes the holder and page files every earlier
 * use left, because nothing they named can be alive. flock's conversion
 * from exclusive to shared is not atomic, so every open runs under
 * <dir>/mrdemuN.lock (exclusive, for the few calls of an open only): no
 * other opener can slip in between and initialise the file a second time.
 *
 * Within a process, every context on one device shares one mapping (struct
 * emu_device, refcounted under devices_lock) and one engine candidate.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct emu_device *devices;

const char *emu_dir(void)
{
	const char *env = getenv("MRDEMU_DIR");

	return env && *env ? env : EMU_DIR_DEFAULT;
}

/* Like /tmp: anyone may make files in it, and only their owner may remove them. */
static int make_dir(const char *dir)
{
	if (mkdir(dir, 01777) != 0 && errno != EEXIST)
		return -1;
	/* mkdir's mode went through the umask; set it as meant when the directory is ours. */
	if (errno != EEXIST)
		chmod(dir, 01777);
	return 0;
}

/* Removes what an earlier use of device index left in dir: holder files, page files. Nobody uses them. */
static void remove_leftovers(const char *dir, int index)
{
	char prefix[32];
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n;

	if (!d)
		return;
	n = (size_t)snprintf(prefix, sizeof(prefix), "mrdemu%d.", index);
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, prefix, n) == 0 && strcmp(e->d_name + n, "lock") != 0)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

/*
 * Whether a context of device index is still held (its holder file's shared
 * flock taken) while no process maps the device: a process that keeps only a
 * command fd, as mrd's descriptor holder does for a successor. The kernel
 * keeps a ucontext and its objects for as long as its file is open, whoever
 * has the device open, so such a device's state must not be wiped.
 */
static int contexts_held(const char *dir, int index)
{
	char prefix[32];
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n;
	int held = 0;

	if (!d)
		return 0;
	n = (size_t)snprintf(prefix, sizeof(prefix), "mrdemu%d.ctx-", index);
	while (!held && (e = readdir(d))) {
		int fd;

		if (strncmp(e->d_name, prefix, n) != 0)
			continue;
		fd = openat(dirfd(d), e->d_name, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		held = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
		close(fd);
	}
	closedir(d);
	return held;
}

static uint64_t new_nonce(void)
{
	uint64_t nonce;

	if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
		nonce = (uint64_t)getpid() << 32 ^ emu_now_ns();
	return nonce;
}

/* Under the open lock, with fd locked exclusively: nobody maps the file. */
static int initialise(int fd, const char *dir, int index)
{
	struct emu_shared *sh;

	remove_leftovers(dir, index);
	if (ftruncate(fd, 0) != 0 || ftruncate(fd, (off_t)EMU_MAP_SIZE) != 0)
		return -1;
	sh = mmap(NULL, EMU_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (sh == MAP_FAILED)
		return -1;
	emu_state_init(sh, (uint32_t)index, new_nonce());
	munmap(sh, EMU_MAP_SIZE);
	return 0;
}

/* Opens, initialises if unused, locks shared and maps <dir>/mrdemu<index>. */
static struct emu_shared *map_device(const char *dir, const char *path, int index, int *fd_out)
{
	char lock_path[EMU_PATH_MAX + 16];
	struct emu_shared *sh = NULL;
	int lock_fd, fd = -1, err = 0;

	if (make_dir(dir) != 0)
		return NULL;
	snprintf(lock_path, sizeof(lock_path), "%s/mrdemu%d.lock", dir, index);
	lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (lock_fd < 0)
		return NULL;
	fchmod(lock_fd, 0666);
	if (flock(lock_fd, LOCK_EX) != 0)
		goto out;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		goto out;
	fchmod(fd, 0666);
	/* Unused by any mapping, and no context held: whatever the file holds is an earlier use's. */
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 && !contexts_held(dir, index) && initialise(fd, dir, index) != 0)
		goto out;
	/* From exclusive (we initialised it) or none (others use it) to shared: under lock_fd, nobody else moves. */
	if (flock(fd, LOCK_SH) != 0)
		goto out;
	sh = mmap(NULL, EMU_MAP_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	if (sh == MAP_FAILED) {
		sh = NULL;
		goto out;
	}
	if (sh->magic != EMU_MAGIC || sh->version != EMU_LAYOUT_VERSION || sh->map_size != EMU_MAP_SIZE ||
	    !atomic_load_explicit(&sh->ready, memory_order_acquire)) {
		/* In use by a build with another layout: it is theirs until they are all gone. */
		munmap(sh, EMU_MAP_SIZE);
		sh = NULL;
		err = EPROTO;
	}
out:
	if (!err)
		err = errno;
	if (!sh && fd >= 0)
		close(fd);
	close(lock_fd);
	if (sh)
		*fd_out = fd;
	else
		errno = err ? err : EIO;
	return sh;
}

/*
 * This process's mapping of device index in dir, made on first use and
 * shared by every context of the process on it; its engine candidate starts
 * with it.
 */
struct emu_device *emu_device_get(const char *dir, int index)
{
	char path[EMU_PATH_MAX];
	struct emu_device *d;
	int rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/mrdemu%d", dir, index) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	pthread_mutex_lock(&devices_lock);
	for (d = devices; d; d = d->next) {
		if (strcmp(d->path, path) == 0) {
			d->users++;
			pthread_mutex_unlock(&devices_lock);
			return d;
		}
	}
	d = calloc(1, sizeof(*d));
	if (d)
		d->maps = calloc(EMU_MAX_MR, sizeof(d->maps[0]));
	if (!d || !d->maps) {
		pthread_mutex_unlock(&devices_lock);
		if (d)
			free(d);
		errno = ENOMEM;
		return NULL;
	}
	d->sh = map_device(dir, path, index, &d->fd);
	if (!d->sh) {
		rc = errno;
		pthread_mutex_unlock(&devices_lock);
		free(d->maps);
		free(d);
		errno = rc;
		return NULL;
	}
	d->index = index;
	d->users = 1;
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->seen_mr_frees = atomic_load(&d->sh->mr_frees);
	rc = emu_engine_start(d);
	if (rc) {
		pthread_mutex_unlock(&devices_lock);
		munmap(d->sh, EMU_MAP_SIZE);
		close(d->fd);
		free(d->maps);
		free(d);
		errno = rc;
		return NULL;
	}
	d->next = devices;
	devices = d;
	pthread_mutex_unlock(&devices_lock);
	return d;
}

/* The last context of the process on the device is closed: the engine candidate stops, the mapping goes. */
void emu_device_put(struct emu_device *d)
{
	pthread_mutex_lock(&devices_lock);
	if (--d->users > 0) {
		pthread_mutex_unlock(&devices_lock);
		return;
	}
	for (struct emu_device **p = &devices; *p; p = &(*p)->next) {
		if (*p == d) {
			*p = d->next;
			break;
		}
	}
	pthread_mutex_unlock(&devices_lock);
	emu_engine_stop(d);
	munmap(d->sh, EMU_MAP_SIZE);
	/* Closing the last descriptor drops the shared flock: the next open may find the device unused. */
	close(d->fd);
	free(d->maps);
	free(d);
}
