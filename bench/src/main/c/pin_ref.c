/*
 * pin_ref.c - C references for mrd's registration benchmarks: what pinning
 * memory of the daemon's file system costs without mrd.
 *
 *   - populate: a file of SIZE bytes in DIR (sized sparse, as the daemon sizes
 *     its list files before anyone allocates), then, timed, mmap(MAP_SHARED |
 *     MAP_POPULATE) and mlock of all of it: the pages pre-faulted by the
 *     kernel, then pinned. Reported as GB/s (10^9 bytes per second); the file
 *     is removed after, so every run starts from fresh pages. Rows populate.1g
 *     and populate.8g for 1 GiB and 8 GiB (the sizes of the allocate + first
 *     key rows).
 *   - fresh 2 MiB: mmap(MAP_SHARED) 2 MiB of a file in DIR (not timed), then,
 *     timed, mlock: the page faults, the zeroing of fresh pages and the pin
 *     that a new 2 MiB registration costs the soft provider; then munlock,
 *     munmap and a hole punched over the range (not timed), so the next
 *     mlock faults fresh pages again. Percentiles p50, p99, p99.9 in µs.
 *
 * DIR must be the file system the daemon's memory comes from (tmpfs: its run
 * directory's mem/; hugetlbfs: its --huge-dir): the page size and the cost of
 * a fault are the file system's.
 *
 * One call is one round of one of them, run by the benchmark between the Java
 * measurements it is the reference of:
 * Usage: pin_ref --dir DIR [--round N] (--fresh COUNT | --populate GIB)
 *   --fresh COUNT   COUNT timed fresh 2 MiB mlocks after COUNT / 5 (at least
 *                   10) untimed ones
 *   --populate GIB  one MAP_POPULATE + mlock of GIB GiB
 * Output on stdout: c<TAB>ROW<TAB>ROUND<TAB>VALUE<TAB>UNIT<TAB>NOTE lines.
 * Build: gcc -O2 -o pin_ref pin_ref.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define GIB (1ULL << 30)
#define FRESH_LENGTH (2ULL << 20)

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int open_file(const char *dir, const char *what, uint64_t length, char *path, size_t path_length)
{
    if ((size_t)snprintf(path, path_length, "%s/pin-ref-%d-%s", dir, (int)getpid(), what) >= path_length) {
        fprintf(stderr, "pin_ref: path in %s is too long\n", dir);
        return -1;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "pin_ref: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (ftruncate(fd, (off_t)length) != 0) {
        fprintf(stderr, "pin_ref: cannot size %s to %llu bytes: %s\n", path, (unsigned long long)length,
                strerror(errno));
        close(fd);
        unlink(path);
        return -1;
    }
    return fd;
}

/* One timed MAP_POPULATE + mlock of a fresh file of `length` bytes; returns seconds, or -1. */
static double populate_once(const char *dir, uint64_t length)
{
    char path[4096];
    int fd = open_file(dir, "populate", length, path, sizeof(path));
    if (fd < 0)
        return -1;
    double seconds = -1;
    double start = now_ns();
    void *p = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        fprintf(stderr, "pin_ref: mmap(MAP_POPULATE) of %llu bytes of %s: %s\n", (unsigned long long)length, path,
                strerror(errno));
    } else {
        if (mlock(p, length) != 0) {
            fprintf(stderr, "pin_ref: mlock of %llu bytes of %s: %s (RLIMIT_MEMLOCK? run as root or raise it)\n",
                    (unsigned long long)length, path, strerror(errno));
        } else {
            seconds = (now_ns() - start) / 1e9;
            munlock(p, length);
        }
        munmap(p, length);
    }
    close(fd);
    unlink(path);
    return seconds;
}

static int round_number;

static int populate(const char *dir, int gib)
{
    uint64_t length = (uint64_t)gib * GIB;
    double seconds = populate_once(dir, length);
    if (seconds < 0)
        return -1;
    double rate = length / seconds / 1e9;
    fprintf(stderr, "pin_ref: round %d: populate + mlock %d GiB in %.3f s: %.2f GB/s\n", round_number, gib, seconds,
            rate);
    printf("c\tpopulate.%dg\t%d\t%.4f\tGB/s\tin %s\n", gib, round_number, rate, dir);
    fflush(stdout);
    return 0;
}

static int fresh(const char *dir, int count)
{
    char path[4096];
    int fd = open_file(dir, "fresh", FRESH_LENGTH, path, sizeof(path));
    if (fd < 0)
        return -1;
    double *samples = malloc(sizeof(double) * (size_t)count);
    if (!samples) {
        perror("pin_ref: malloc");
        close(fd);
        unlink(path);
        return -1;
    }
    int status = 0;
    int warmup = count / 5 > 10 ? count / 5 : 10;
    for (int i = -warmup; i < count && status == 0; i++) {
        void *p = mmap(NULL, FRESH_LENGTH, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            fprintf(stderr, "pin_ref: mmap of 2 MiB of %s: %s\n", path, strerror(errno));
            status = -1;
            break;
        }
        double start = now_ns();
        if (mlock(p, FRESH_LENGTH) != 0) {
            fprintf(stderr, "pin_ref: mlock of 2 MiB of %s: %s\n", path, strerror(errno));
            status = -1;
        }
        double elapsed = now_ns() - start;
        munlock(p, FRESH_LENGTH);
        munmap(p, FRESH_LENGTH);
        /* The daemon punches freed segments out of its file: the next mlock faults fresh pages, as here. */
        if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, FRESH_LENGTH) != 0) {
            fprintf(stderr, "pin_ref: cannot punch a hole in %s: %s\n", path, strerror(errno));
            status = -1;
        }
        if (i >= 0)
            samples[i] = elapsed;
    }
    close(fd);
    unlink(path);
    if (status == 0) {
        qsort(samples, (size_t)count, sizeof(double), compare_double);
        printf("c\tfresh2m.p50\t%d\t%.3f\tus\tmlock of 2 MiB fresh pages in %s\n", round_number,
               samples[(size_t)(count * 0.50)] / 1e3, dir);
        printf("c\tfresh2m.p99\t%d\t%.3f\tus\n", round_number, samples[(size_t)(count * 0.99)] / 1e3);
        printf("c\tfresh2m.p999\t%d\t%.3f\tus\n", round_number, samples[(size_t)(count * 0.999)] / 1e3);
        printf("c\tfresh2m.count\t%d\t%d\tmlocks\n", round_number, count);
        fprintf(stderr, "pin_ref: round %d: fresh 2 MiB mlock p50 %.1f µs of %d\n", round_number,
                samples[(size_t)(count * 0.50)] / 1e3, count);
    }
    free(samples);
    return status;
}

static void usage(void)
{
    fprintf(stderr, "usage: pin_ref --dir DIR [--round N] (--fresh COUNT | --populate GIB)\n");
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    int count = 0, gib = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--round") && i + 1 < argc) {
            round_number = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--fresh") && i + 1 < argc) {
            count = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--populate") && i + 1 < argc) {
            gib = atoi(argv[++i]);
        } else {
            usage();
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "pin_ref: --dir DIR (the file system of the daemon's memory) is required\n");
        return 2;
    }
    if ((count > 0) == (gib > 0) || round_number < 0) {
        usage();
        return 2;
    }
    return (count > 0 ? fresh(dir, count) : populate(dir, gib)) == 0 ? 0 : 1;
}
