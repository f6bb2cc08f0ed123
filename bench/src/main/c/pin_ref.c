/*
 * pin_ref.c - C references for mrd's registration benchmarks: what pinning
 * memory of the daemon's file system costs without mrd.
 *
 *   - populate: a file of SIZE bytes in DIR (sized sparse, as the daemon sizes
 *     its list files before anyone allocates), then, timed, mmap(MAP_SHARED |
 *     MAP_POPULATE) and mlock of all of it: the pages pre-faulted by the
 *     kernel, then pinned. Reported as GB/s (10^9 bytes per second), the best
 *     of the repetitions; the file is removed after each one, so every
 *     repetition starts from fresh pages. Rows populate.1g and populate.8g for
 *     1 GiB and 8 GiB (the sizes of the allocate + first key rows).
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
 * Usage: pin_ref [--quick] --dir DIR [--populate-dir DIR2] [--sizes GIB,GIB]
 *   --populate-dir  where the populate rows map (default DIR)
 *   --sizes         populate sizes in GiB (default 1,8)
 * Quick: populate 3 repetitions of 1 GiB, 1 of larger sizes, 300 fresh 2 MiB
 * mlocks; full: 5, 2 and 2,000 (50 more warm up in both).
 * Output on stdout: c<TAB>ROW<TAB>VALUE<TAB>UNIT<TAB>NOTE lines.
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
#define FRESH_WARMUP 50

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

static int populate(const char *dir, int gib, int repetitions)
{
    uint64_t length = (uint64_t)gib * GIB;
    double best = 0;
    char runs[512] = "";
    size_t used = 0;
    for (int i = 0; i < repetitions; i++) {
        double seconds = populate_once(dir, length);
        if (seconds < 0)
            return -1;
        double rate = length / seconds / 1e9;
        if (rate > best)
            best = rate;
        if (used < sizeof(runs))
            used += (size_t)snprintf(runs + used, sizeof(runs) - used, "%s%.2f", i ? " " : "", rate);
        fprintf(stderr, "pin_ref: populate + mlock %d GiB in %.3f s: %.2f GB/s\n", gib, seconds, rate);
    }
    printf("c\tpopulate.%dg\t%.4f\tGB/s\tbest of %d in %s; each: %s\n", gib, best, repetitions, dir, runs);
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
    for (int i = -FRESH_WARMUP; i < count && status == 0; i++) {
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
        printf("c\tfresh2m.p50\t%.3f\tus\tmlock of 2 MiB fresh pages in %s\n", samples[(size_t)(count * 0.50)] / 1e3,
               dir);
        printf("c\tfresh2m.p99\t%.3f\tus\n", samples[(size_t)(count * 0.99)] / 1e3);
        printf("c\tfresh2m.p999\t%.3f\tus\n", samples[(size_t)(count * 0.999)] / 1e3);
        printf("c\tfresh2m.count\t%d\tmlocks\n", count);
    }
    free(samples);
    return status;
}

int main(int argc, char **argv)
{
    const char *dir = NULL;
    const char *populate_dir = NULL;
    const char *sizes = "1,8";
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--populate-dir") && i + 1 < argc) {
            populate_dir = argv[++i];
        } else if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
            sizes = argv[++i];
        } else {
            fprintf(stderr, "usage: pin_ref [--quick] --dir DIR [--populate-dir DIR] [--sizes GIB,GIB]\n");
            return 2;
        }
    }
    if (!dir) {
        fprintf(stderr, "pin_ref: --dir DIR (the file system of the daemon's memory) is required\n");
        return 2;
    }
    if (!populate_dir)
        populate_dir = dir;
    int status = fresh(dir, quick ? 300 : 2000);
    char *list = strdup(sizes);
    for (char *save = NULL, *word = strtok_r(list, ",", &save); word; word = strtok_r(NULL, ",", &save)) {
        int gib = atoi(word);
        if (gib <= 0) {
            fprintf(stderr, "pin_ref: --sizes wants whole GiB separated by commas, not '%s'\n", word);
            status = -1;
            break;
        }
        if (populate(populate_dir, gib, gib == 1 ? (quick ? 3 : 5) : (quick ? 1 : 2)) != 0)
            status = -1;
    }
    free(list);
    return status == 0 ? 0 : 1;
}
