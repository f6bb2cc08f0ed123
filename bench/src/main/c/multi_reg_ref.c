/*
 * multi_reg_ref.c - the C reference of issue 23's allocate-and-register rows:
 * one range of shared memory registered with ibv_reg_mr on each of N devices
 * (the emulated mrdemu0..N-1 under MRDEMU_DEVICES, or a host's real ones),
 * as a program without mrd would do it (docs/multi-device.md).
 *
 *   - once: the range, a file of SIZE bytes in DIR mapped MAP_SHARED (as the
 *     daemon maps its memory lists), is populated and locked once
 *     (MADV_POPULATE_WRITE, mlock: what the daemon's PagePopulator does), then
 *     registered on every device, one thread per device at once;
 *   - pretouch: Mooncake's way: registered on device 0 and deregistered (its
 *     pin walk touches every page), then registered on every device, one
 *     thread per device at once; nothing is locked first.
 *
 * Timed: from before the populate (or the pre-touch) to the last registration
 * returning; also the minor page faults of this process over the same span
 * (getrusage), so that a row shows how many passes over the pages it took.
 * Then every MR is deregistered, the range unlocked and unmapped and its file
 * removed (not timed), so every round starts from fresh pages.
 *
 * Usage: multi_reg_ref --dir DIR --devices N --gib G (--once | --pretouch) [--round R]
 * Output on stdout: c<TAB>ROW<TAB>ROUND<TAB>VALUE<TAB>UNIT<TAB>NOTE lines: ROW
 * devices.once.N or devices.pretouch.N, VALUE in ms, NOTE "faults=F pages=P
 * populateMs=.. registerMs=.."; then ROW devices.MODE.N.faults, VALUE the
 * minor faults per page. scripts/bench runs --once beside mrd's rows.
 * Build: gcc -O2 -pthread -o multi_reg_ref multi_reg_ref.c -libverbs (or the
 * emulated device's libmrdemu.so, with its fetched <infiniband/verbs.h>).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define MAX_DEVICES 8
#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

struct device {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	void *addr;
	size_t length;
	int err;
};

static void die(const char *what)
{
	fprintf(stderr, "multi_reg_ref: %s: %s\n", what, strerror(errno));
	exit(1);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static long minor_faults(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_minflt;
}

static void *register_one(void *arg)
{
	struct device *d = arg;

	d->mr = ibv_reg_mr(d->pd, d->addr, d->length, ACCESS);
	d->err = d->mr ? 0 : errno;
	return NULL;
}

/* Registers the range on every device, one thread per device; exits naming the first device that failed. */
static void register_all(struct device *devs, int n)
{
	pthread_t threads[MAX_DEVICES];

	for (int i = 0; i < n; i++)
		if (pthread_create(&threads[i], NULL, register_one, &devs[i]) != 0)
			die("pthread_create");
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	for (int i = 0; i < n; i++)
		if (devs[i].err) {
			errno = devs[i].err;
			die(ibv_get_device_name(devs[i].ctx->device));
		}
}

static void open_devices(struct device *devs, int n)
{
	int count = 0;
	struct ibv_device **list = ibv_get_device_list(&count);

	if (!list)
		die("ibv_get_device_list");
	if (count < n) {
		fprintf(stderr, "multi_reg_ref: %d devices asked for, %d listed (MRDEMU_DEVICES for the emulated one)\n",
			n, count);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		devs[i].ctx = ibv_open_device(list[i]);
		if (!devs[i].ctx)
			die("ibv_open_device");
		devs[i].pd = ibv_alloc_pd(devs[i].ctx);
		if (!devs[i].pd)
			die("ibv_alloc_pd");
	}
	ibv_free_device_list(list);
}

int main(int argc, char **argv)
{
	const char *dir = NULL;
	int n = 0, round = 0, pretouch = -1;
	long gib = 0;
	struct device devs[MAX_DEVICES];
	char path[4096];
	double start, populated, end;
	long faults;
	size_t length, pages;
	void *addr;
	int fd;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--devices") && i + 1 < argc)
			n = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--gib") && i + 1 < argc)
			gib = atol(argv[++i]);
		else if (!strcmp(argv[i], "--round") && i + 1 < argc)
			round = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--once"))
			pretouch = 0;
		else if (!strcmp(argv[i], "--pretouch"))
			pretouch = 1;
		else {
			fprintf(stderr, "multi_reg_ref: unknown argument '%s'\n", argv[i]);
			return 2;
		}
	}
	if (!dir || n < 1 || n > MAX_DEVICES || gib < 1 || pretouch < 0) {
		fprintf(stderr, "usage: multi_reg_ref --dir DIR --devices 1..%d --gib G (--once | --pretouch) "
				"[--round R]\n", MAX_DEVICES);
		return 2;
	}
	length = (size_t)gib << 30;
	memset(devs, 0, sizeof(devs));
	open_devices(devs, n);

	snprintf(path, sizeof(path), "%s/multi_reg_ref.%d", dir, (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		die(path);
	if (ftruncate(fd, (off_t)length) != 0) {
		unlink(path);
		die("ftruncate");
	}
	addr = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (addr == MAP_FAILED) {
		unlink(path);
		die("mmap");
	}
	/* The mapping keeps the pages: no 1 GiB file is left behind when a later step dies. */
	unlink(path);
	for (int i = 0; i < n; i++) {
		devs[i].addr = addr;
		devs[i].length = length;
	}

	faults = minor_faults();
	start = now_ms();
	if (pretouch) {
		struct ibv_mr *touch = ibv_reg_mr(devs[0].pd, addr, length, ACCESS);

		if (!touch)
			die("ibv_reg_mr (pre-touch on device 0)");
		ibv_dereg_mr(touch);
	} else {
		if (madvise(addr, length, MADV_POPULATE_WRITE) != 0)
			die("madvise(MADV_POPULATE_WRITE)");
		if (mlock(addr, length) != 0)
			die("mlock");
	}
	populated = now_ms();
	register_all(devs, n);
	end = now_ms();
	faults = minor_faults() - faults;

	pages = length / (size_t)sysconf(_SC_PAGESIZE);
	printf("c\tdevices.%s.%d\t%d\t%.1f\tms\tfaults=%ld pages=%zu populateMs=%.1f registerMs=%.1f\n",
	       pretouch ? "pretouch" : "once", n, round, end - start, faults, pages, populated - start,
	       end - populated);
	printf("c\tdevices.%s.%d.faults\t%d\t%.4f\tfaults/page\tfaults=%ld pages=%zu\n",
	       pretouch ? "pretouch" : "once", n, round, (double)faults / (double)pages, faults, pages);

	for (int i = 0; i < n; i++) {
		ibv_dereg_mr(devs[i].mr);
		ibv_dealloc_pd(devs[i].pd);
		ibv_close_device(devs[i].ctx);
	}
	munlock(addr, length);
	munmap(addr, length);
	close(fd);
	return 0;
}
