/*
 * lookup_ref.c - C references for mrd's lookup benchmarks.
 *
 * Written for mrd from the algorithms of DPDK's mlx5 MR cache (no code copied):
 *   - the halving search over a sorted table whose entry 0 is the sentinel
 *     {0, 0, UINT32_MAX}, so the loop needs no lower bound check
 *     (mr_btree_lookup);
 *   - the per-queue 8-entry top half: most-recently-used slot first, then a
 *     linear scan; a miss goes to the sorted bottom half and replaces the
 *     oldest slot (mlx5_mr_lookup_lkey, mlx5_mr_addr2mr_bh), behind the
 *     dev_gen check of mlx5_mr_mb2mr;
 *   - the global cache read as mrd reads it: a seqlock (acquire load of seq,
 *     skip if odd, search, load-load fence, re-read seq) around the same
 *     search over a MAP_SHARED file mapping.
 * Entries have mrd's 24-byte layout {u64 start; u64 end; u32 lkey; i32 mr}.
 *
 * The addresses are the Java benchmarks' (io.mrd.bench.fixture.AddressPattern):
 * same splitmix64, seed, chunk geometry and order, so both languages search
 * the same addresses. Each row walks its 65,536-address array round-robin, and
 * every lkey goes through a compiler blackhole (the value is computed, never
 * stored), like JMH's Blackhole.consume.
 *
 * Usage: lookup_ref [--dir DIR] [--rows FAMILIES] [--round N] [--runs N]
 *                   [--seconds S]
 *   DIR holds the temporary global-cache files (default /dev/shm; a hugetlbfs
 *   mount maps them with huge pages).
 *   FAMILIES: the rows to run, separated by commas, of tophalf, bottomhalf,
 *   global, lkey, globalwriter (default all). The benchmark runs one family
 *   at a time between the JMH rounds of the same rows, so that Java and C of
 *   a round run seconds apart.
 *   N (--round): the round written into every line (default 0).
 *   --runs, --seconds: each row is one warm-up run, then the best of N timed
 *   runs of S seconds (default 3 of 0.25 s).
 * Output, one line per row on stdout: c<TAB>ROW<TAB>ROUND<TAB>VALUE<TAB>UNIT,
 * with the row names of the Java results (tophalf.mru, bottomhalf.4096,
 * global.65536, lkey.64, globalwriter.100000, ...). Progress goes to stderr.
 * Build: gcc -O2 -pthread -o lookup_ref lookup_ref.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#define NO_LKEY UINT32_MAX
#define TOP_N 8
#define BOTTOM_INITIAL 256

#define BASE 0x100000000000ULL
#define CHUNK (2ULL << 20)
#define BUFFER_LENGTH 64ULL
#define ADDRESS_COUNT (1 << 16)
#define ADDRESS_MASK (ADDRESS_COUNT - 1)
#define SEED 0x6D726442656E6368ULL
#define BATCH 1024

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* CacheEntryDescriptor's layout: the same bytes per entry as mrd's tables, so both sides miss alike. */
struct entry {
    uint64_t start;
    uint64_t end;
    uint32_t lkey;
    uint32_t rkey;
    int32_t mr;
    uint32_t access;
};
_Static_assert(sizeof(struct entry) == 32, "entry must be 32 bytes like CacheEntryDescriptor.ENTRY_LENGTH");

static inline void blackhole(uint32_t v)
{
    __asm__ volatile("" : : "r"(v));
}

static inline void cpu_relax(void)
{
    __asm__ volatile("pause");
}

/* ---- addresses (same as AddressPattern.java) ---- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static uint64_t chunk_start(uint32_t chunk)
{
    return BASE + chunk * CHUNK;
}

static uint32_t chunk_lkey(uint32_t chunk)
{
    return 0x100 + chunk;
}

static uint64_t *addresses(uint32_t chunks, int never_repeat)
{
    uint64_t *a = malloc(sizeof(uint64_t) * ADDRESS_COUNT);
    uint64_t state = SEED;
    uint64_t slots = CHUNK / BUFFER_LENGTH - 1;
    int64_t previous = -1;
    if (!a) {
        perror("malloc");
        exit(1);
    }
    for (int i = 0; i < ADDRESS_COUNT; i++) {
        uint32_t chunk = (uint32_t)(splitmix64(&state) % chunks);
        if (never_repeat && (int64_t)chunk == previous)
            chunk = (chunk + 1) % chunks;
        previous = chunk;
        a[i] = chunk_start(chunk) + (splitmix64(&state) % slots) * BUFFER_LENGTH;
    }
    return a;
}

static void fill(struct entry *t, uint32_t entries)
{
    t[0] = (struct entry){.lkey = NO_LKEY, .rkey = NO_LKEY, .mr = -1};
    for (uint32_t c = 0; c < entries; c++)
        t[c + 1] = (struct entry){.start = chunk_start(c), .end = chunk_start(c) + CHUNK, .lkey = chunk_lkey(c),
                                  .rkey = chunk_lkey(c), .mr = (int32_t)c};
}

/* ---- the halving search with a sentinel ---- */

static inline uint32_t table_lookup(const struct entry *t, uint32_t len, uint64_t addr, uint32_t *idx)
{
    uint32_t base = 0;
    uint32_t n = len;

    while (n > 1) {
        uint32_t delta = n >> 1;

        if (addr < t[base + delta].start) {
            n = delta;
        } else {
            base += delta;
            n -= delta;
        }
    }
    *idx = base;
    /* The sentinel's end is 0: an address below every entry fails here too. */
    return addr < t[base].end ? t[base].lkey : NO_LKEY;
}

static uint32_t table_insert(struct entry *t, uint32_t len, uint32_t cap, const struct entry *e)
{
    uint32_t idx;

    if (table_lookup(t, len, e->start, &idx) != NO_LKEY)
        return len;
    if (len >= cap)
        return 0;
    idx++;
    memmove(&t[idx + 1], &t[idx], (len - idx) * sizeof(*t));
    t[idx] = *e;
    return len + 1;
}

/* ---- the global cache: a seqlock around the search, in a shared file mapping ---- */

struct global {
    volatile uint64_t *seq;
    volatile uint32_t *len;
    struct entry *table;
    uint32_t capacity;
    void *map;
    size_t map_len;
    char path[4096];
};

#define G_SEQ 64
#define G_DEV_GEN 72
#define G_LEN 80
#define G_TABLE 4096
#define HUGETLBFS_MAGIC 0x958458f6

static void global_open(struct global *g, const char *dir, uint32_t entries)
{
    snprintf(g->path, sizeof(g->path), "%s/mrd-bench-c-%d-%u.ctl", dir, (int)getpid(), entries);
    int fd = open(g->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "lookup_ref: open(%s): %s\n", g->path, strerror(errno));
        exit(1);
    }
    g->capacity = entries + 1;
    g->map_len = G_TABLE + (size_t)g->capacity * sizeof(struct entry);
    struct statfs fs;
    if (statfs(dir, &fs) == 0 && fs.f_type == HUGETLBFS_MAGIC) /* hugetlbfs maps whole huge pages only */
        g->map_len = (g->map_len + fs.f_bsize - 1) / fs.f_bsize * fs.f_bsize;
    if (ftruncate(fd, (off_t)g->map_len) != 0) {
        fprintf(stderr, "lookup_ref: ftruncate(%s): %s\n", g->path, strerror(errno));
        exit(1);
    }
    g->map = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (g->map == MAP_FAILED) {
        fprintf(stderr, "lookup_ref: mmap(%s): %s\n", g->path, strerror(errno));
        exit(1);
    }
    close(fd);
    g->seq = (volatile uint64_t *)((char *)g->map + G_SEQ);
    g->len = (volatile uint32_t *)((char *)g->map + G_LEN);
    g->table = (struct entry *)((char *)g->map + G_TABLE);
    fill(g->table, entries);
    *g->len = entries + 1;
}

static void global_close(struct global *g)
{
    munmap(g->map, g->map_len);
    unlink(g->path);
}

static inline int global_lookup(const struct global *g, uint64_t addr, struct entry *out)
{
    for (;;) {
        uint64_t seq = __atomic_load_n(g->seq, __ATOMIC_ACQUIRE);
        if (unlikely(seq & 1)) {
            cpu_relax();
            continue;
        }
        uint32_t len = *g->len;
        if (len < 1)
            len = 1;
        if (len > g->capacity)
            len = g->capacity;
        uint32_t idx;
        uint32_t lkey = table_lookup(g->table, len, addr, &idx);
        struct entry e = g->table[idx];
        __atomic_thread_fence(__ATOMIC_ACQUIRE); /* load-load: the data loads stay above the re-read */
        if (likely(__atomic_load_n(g->seq, __ATOMIC_RELAXED) == seq)) {
            if (lkey == NO_LKEY)
                return 0;
            *out = e;
            return 1;
        }
    }
}

static void global_rewrite(struct global *g, uint32_t chunk)
{
    uint64_t seq = *g->seq;
    __atomic_store_n(g->seq, seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE); /* store-store: odd seq before any data */
    g->table[chunk + 1] = (struct entry){.start = chunk_start(chunk), .end = chunk_start(chunk) + CHUNK,
                                         .lkey = chunk_lkey(chunk), .rkey = chunk_lkey(chunk),
                                         .mr = (int32_t)chunk};
    __atomic_store_n(g->seq, seq + 2, __ATOMIC_RELEASE);
}

/* ---- the per-queue cache: dev_gen check, 8-entry top half, sorted bottom half ---- */

struct mr_ctrl {
    const volatile uint64_t *dev_gen_ptr;
    uint64_t cur_gen;
    uint16_t mru;
    uint16_t head;
    struct entry cache[TOP_N];
    struct entry *bottom;
    uint32_t bottom_len;
    uint32_t bottom_cap;
    const struct global *global;
};

static void ctrl_flush(struct mr_ctrl *c)
{
    memset(c->cache, 0, sizeof(c->cache));
    c->mru = 0;
    c->head = 0;
    c->bottom[0] = (struct entry){.lkey = NO_LKEY, .rkey = NO_LKEY, .mr = -1};
    c->bottom_len = 1;
    c->cur_gen = __atomic_load_n(c->dev_gen_ptr, __ATOMIC_ACQUIRE);
}

static void ctrl_init(struct mr_ctrl *c, const struct global *g)
{
    memset(c, 0, sizeof(*c));
    c->global = g;
    c->dev_gen_ptr = (const volatile uint64_t *)((char *)g->map + G_DEV_GEN);
    c->bottom_cap = BOTTOM_INITIAL;
    c->bottom = aligned_alloc(64, BOTTOM_INITIAL * sizeof(struct entry));
    ctrl_flush(c);
}

static inline uint32_t top_lookup(struct entry *cache, uint16_t *mru, uint64_t addr)
{
    if (likely(addr >= cache[*mru].start && addr < cache[*mru].end))
        return cache[*mru].lkey;
    for (uint16_t i = 0; i < TOP_N; i++) {
        if (addr >= cache[i].start && addr < cache[i].end) {
            *mru = i;
            return cache[i].lkey;
        }
    }
    return NO_LKEY;
}

static __attribute__((noinline)) uint32_t ctrl_bottom(struct mr_ctrl *c, uint64_t addr)
{
    uint32_t idx;
    uint32_t lkey = table_lookup(c->bottom, c->bottom_len, addr, &idx);
    struct entry e;

    if (lkey != NO_LKEY) {
        e = c->bottom[idx];
    } else {
        if (!global_lookup(c->global, addr, &e))
            return NO_LKEY;
        if (c->bottom_len == c->bottom_cap) {
            c->bottom_cap *= 2;
            c->bottom = realloc(c->bottom, c->bottom_cap * sizeof(struct entry));
        }
        uint32_t len = table_insert(c->bottom, c->bottom_len, c->bottom_cap, &e);
        if (len)
            c->bottom_len = len;
    }
    c->cache[c->head] = e;
    c->mru = c->head;
    c->head = (c->head + 1) % TOP_N;
    return e.lkey;
}

static inline uint32_t ctrl_lkey(struct mr_ctrl *c, uint64_t addr)
{
    if (unlikely(__atomic_load_n(c->dev_gen_ptr, __ATOMIC_ACQUIRE) != c->cur_gen))
        ctrl_flush(c);
    uint32_t lkey = top_lookup(c->cache, &c->mru, addr);
    if (likely(lkey != NO_LKEY))
        return lkey;
    return ctrl_bottom(c, addr);
}

/* ---- timing ---- */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

enum kind { TOP, BOTTOM, GLOBAL };

struct row {
    enum kind kind;
    struct mr_ctrl *ctrl;
    const struct entry *table;
    uint32_t len;
    const struct global *global;
    const uint64_t *addr;
    uint32_t cursor;
};

static __attribute__((noinline)) void run_batch(struct row *r)
{
    const uint64_t *a = r->addr;
    uint32_t i = r->cursor;
    switch (r->kind) {
    case TOP:
        for (int n = 0; n < BATCH; n++) {
            blackhole(ctrl_lkey(r->ctrl, a[i]));
            i = (i + 1) & ADDRESS_MASK;
        }
        break;
    case BOTTOM:
        for (int n = 0; n < BATCH; n++) {
            uint32_t idx;
            blackhole(table_lookup(r->table, r->len, a[i], &idx));
            i = (i + 1) & ADDRESS_MASK;
        }
        break;
    case GLOBAL:
        for (int n = 0; n < BATCH; n++) {
            struct entry e;
            blackhole(global_lookup(r->global, a[i], &e) ? e.lkey : NO_LKEY);
            i = (i + 1) & ADDRESS_MASK;
        }
        break;
    }
    r->cursor = i;
}

static int runs = 3;
static double run_seconds = 0.25;
static int round_number;

static double measure_once(struct row *r, double seconds)
{
    double start = now_ns(), end, deadline = start + seconds * 1e9;
    uint64_t batches = 0;
    do {
        run_batch(r);
        batches++;
        end = now_ns();
    } while (end < deadline);
    return (end - start) / ((double)batches * BATCH);
}

/*
 * A warm-up run, then the best of several timed runs, as the Java side reports
 * its best JMH iteration of the round: on a small shared machine a run that
 * lost the CPU says nothing about the code.
 */
static double measure(struct row *r)
{
    double best = 0;
    measure_once(r, run_seconds);
    for (int i = 0; i < runs; i++) {
        double ns = measure_once(r, run_seconds);
        if (i == 0 || ns < best)
            best = ns;
    }
    return best;
}

static void report(const char *row, double value, const char *unit)
{
    printf("c\t%s\t%d\t%.3f\t%s\n", row, round_number, value, unit);
    fflush(stdout);
    fprintf(stderr, "lookup_ref: %-22s %10.3f %s\n", row, value, unit);
}

/* ---- a writer playing the primary: rewrite one entry under the seqlock at a fixed rate ---- */

struct writer {
    struct global *g;
    uint32_t entries;
    long per_second;
    volatile int stop;
    uint64_t writes;
    double seconds;
};

static void *write_loop(void *arg)
{
    struct writer *w = arg;
    uint64_t state = SEED ^ 1;
    double period = 1e9 / w->per_second, start = now_ns(), next = start;
    while (!w->stop) {
        next += period;
        while (now_ns() < next)
            cpu_relax();
        global_rewrite(w->g, (uint32_t)(splitmix64(&state) % w->entries));
        w->writes++;
    }
    w->seconds = (now_ns() - start) / 1e9;
    return NULL;
}

static const char *families = "tophalf,bottomhalf,global,lkey,globalwriter";

/* Whether --rows names this family (a whole word of the comma-separated list). */
static int wanted(const char *family)
{
    size_t n = strlen(family);
    for (const char *p = families; (p = strstr(p, family)) != NULL; p += n) {
        if ((p == families || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return 1;
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: lookup_ref [--dir DIR] [--rows tophalf,bottomhalf,global,lkey,globalwriter] "
                    "[--round N] [--runs N] [--seconds S]\n");
}

int main(int argc, char **argv)
{
    const char *dir = "/dev/shm";
    char name[64];

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
            families = argv[++i];
        } else if (!strcmp(argv[i], "--round") && i + 1 < argc) {
            round_number = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--runs") && i + 1 < argc) {
            runs = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            run_seconds = atof(argv[++i]);
        } else {
            usage();
            return 2;
        }
    }
    if (runs < 1 || run_seconds <= 0 || round_number < 0) {
        usage();
        return 2;
    }

    /* Top half: the 8 chunks of an 8-entry global cache, loaded through the whole path first. */
    if (wanted("tophalf")) {
        struct global g;
        struct mr_ctrl ctrl;
        global_open(&g, dir, TOP_N);
        ctrl_init(&ctrl, &g);
        for (uint32_t c = 0; c < TOP_N; c++)
            ctrl_lkey(&ctrl, chunk_start(c));
        struct row mru = {.kind = TOP, .ctrl = &ctrl, .addr = addresses(1, 0)};
        report("tophalf.mru", measure(&mru), "ns");
        struct row other = {.kind = TOP, .ctrl = &ctrl, .addr = addresses(TOP_N, 1)};
        report("tophalf.other", measure(&other), "ns");
        global_close(&g);
    }

    /* Bottom half: a malloc'd table, as a secondary's. */
    if (wanted("bottomhalf")) {
        static const uint32_t sizes[] = {256, 4096, 65536};
        for (int s = 0; s < 3; s++) {
            struct entry *t = aligned_alloc(64, ((size_t)sizes[s] + 1) * sizeof(struct entry) + 64);
            fill(t, sizes[s]);
            struct row r = {.kind = BOTTOM, .table = t, .len = sizes[s] + 1, .addr = addresses(sizes[s], 0)};
            snprintf(name, sizeof(name), "bottomhalf.%u", sizes[s]);
            report(name, measure(&r), "ns");
            free((void *)r.addr);
            free(t);
        }
    }

    /* Global cache: seqlock search of a shared file mapping. */
    if (wanted("global")) {
        static const uint32_t sizes[] = {4096, 65536, 1048576};
        for (int s = 0; s < 3; s++) {
            struct global g;
            global_open(&g, dir, sizes[s]);
            struct row r = {.kind = GLOBAL, .global = &g, .addr = addresses(sizes[s], 0)};
            snprintf(name, sizeof(name), "global.%u", sizes[s]);
            report(name, measure(&r), "ns");
            free((void *)r.addr);
            global_close(&g);
        }
    }

    /* The whole path over 4 and 64 MRs, behind a 4,096-entry global cache. */
    if (wanted("lkey")) {
        static const uint32_t mrs[] = {4, 64};
        for (int s = 0; s < 2; s++) {
            struct global g;
            struct mr_ctrl ctrl;
            global_open(&g, dir, 4096);
            ctrl_init(&ctrl, &g);
            struct row r = {.kind = TOP, .ctrl = &ctrl, .addr = addresses(mrs[s], 0)};
            for (int i = 0; i < ADDRESS_COUNT; i++)
                ctrl_lkey(&ctrl, r.addr[i]);
            snprintf(name, sizeof(name), "lkey.%u", mrs[s]);
            report(name, measure(&r), "ns");
            free((void *)r.addr);
            global_close(&g);
        }
    }

    /* Global cache (65,536) without and with a writer at 100,000 writes/s. */
    if (wanted("globalwriter")) {
        static const long rates[] = {0, 100000};
        for (int s = 0; s < 2; s++) {
            struct global g;
            pthread_t thread;
            struct writer w = {.entries = 65536, .per_second = rates[s]};
            global_open(&g, dir, 65536);
            w.g = &g;
            if (rates[s] && pthread_create(&thread, NULL, write_loop, &w) != 0) {
                fprintf(stderr, "lookup_ref: pthread_create failed\n");
                return 1;
            }
            struct row r = {.kind = GLOBAL, .global = &g, .addr = addresses(65536, 0)};
            snprintf(name, sizeof(name), "globalwriter.%ld", rates[s]);
            double ns = measure(&r);
            if (rates[s]) {
                w.stop = 1;
                pthread_join(thread, NULL);
            }
            report(name, ns, "ns");
            if (rates[s])
                report("globalwriter.rate", w.writes / w.seconds, "writes/s");
            free((void *)r.addr);
            global_close(&g);
        }
    }
    return 0;
}
