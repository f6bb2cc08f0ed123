/*
 * pingpong.c - the floor for mrd's create round trip: two processes, a named
 * AF_UNIX stream socket, one request and one reply at a time, sized like
 * mrd's frames (a 32-byte CREATE_MR request: 16-byte header + addr + len; a
 * 48-byte reply: header + status + start + end + lkey + empty message).
 *
 * The parent forks a server that binds, listens, accepts one connection and
 * answers every request with a blocking read/write loop; the parent connects
 * and times each round trip with CLOCK_MONOTONIC. This is the least any
 * socket request can cost on this machine: no event loop, no protocol
 * decoding, no lookup, no thread hand-off.
 *
 * Warm: WARMUP untimed round trips, then COUNT timed, back to back, both sides
 * blocking in read as mrd's threads do. The benchmark runs one such round
 * right before or after the Java create round trip it is the floor of, so
 * both see the machine in the same state. Idle: then IDLE round trips, each
 * after a pause of PAUSE µs (the cores may go idle and must wake for it),
 * shown beside the warm figure as information. Epoll: then COUNT round trips
 * to a second server that waits in epoll_wait before each read, as an event
 * loop such as the daemon's (Netty's epoll transport) does: one more system
 * call and a wake-up from epoll instead of from read, also information (how
 * much of the daemon's round trip the event-loop model costs by itself).
 *
 * Usage: pingpong [--dir DIR] [--round N] [--count COUNT] [--warmup WARMUP]
 *                 [--idle-count IDLE] [--idle-pause-us PAUSE]
 *   socket in DIR (default /tmp); defaults: round 0, 100,000 timed after
 *   20,000, 100 idle after 1,000 µs each.
 * Output on stdout: c<TAB>pingpong.pNN<TAB>ROUND<TAB>MICROSECONDS<TAB>us for
 * p50, p99 and p99.9, c<TAB>pingpong.count<TAB>ROUND<TAB>N<TAB>round trips,
 * the same for pingpong.idle.* and pingpong.epoll.*, and pingpong.idle.pause
 * (round 0: a setting).
 * Build: gcc -O2 -o pingpong pingpong.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQUEST_LENGTH 32
#define REPLY_LENGTH 48

static int read_fully(int fd, unsigned char *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = read(fd, buf + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

static int write_fully(int fd, const unsigned char *buf, size_t len)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = send(fd, buf + done, len - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        done += (size_t)n;
    }
    return 0;
}

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

/* One timed round trip with correlation id `i`; returns ns, or -1 when the server is gone. */
static double round_trip(int fd, unsigned char *request, unsigned char *reply, uint64_t i)
{
    memcpy(request + 8, &i, 8);
    double start = now_ns();
    if (write_fully(fd, request, REQUEST_LENGTH) != 0 || read_fully(fd, reply, REPLY_LENGTH) != 0) {
        fprintf(stderr, "pingpong: the server went away after %llu round trips\n", (unsigned long long)i);
        return -1;
    }
    double rtt = now_ns() - start;
    if (memcmp(reply + 8, request + 8, 8) != 0) {
        fprintf(stderr, "pingpong: reply %llu carries another correlation id\n", (unsigned long long)i);
        return -1;
    }
    return rtt;
}

static void report(const char *name, int round, double *samples, int count)
{
    qsort(samples, (size_t)count, sizeof(double), compare_double);
    printf("c\t%s.p50\t%d\t%.3f\tus\n", name, round, samples[(size_t)(count * 0.50)] / 1e3);
    printf("c\t%s.p99\t%d\t%.3f\tus\n", name, round, samples[(size_t)(count * 0.99)] / 1e3);
    printf("c\t%s.p999\t%d\t%.3f\tus\n", name, round, samples[(size_t)(count * 0.999)] / 1e3);
    printf("c\t%s.count\t%d\t%d\tround trips\n", name, round, count);
    fprintf(stderr, "pingpong: round %d %s p50 %.3f µs p99 %.3f µs of %d\n", round, name,
            samples[(size_t)(count * 0.50)] / 1e3, samples[(size_t)(count * 0.99)] / 1e3, count);
}

/* Blocks in epoll_wait until fd is readable; returns 0, or -1 on an error. */
static int await_readable(int epoll_fd)
{
    struct epoll_event event;
    for (;;) {
        int n = epoll_wait(epoll_fd, &event, 1, -1);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

/* Answers every request on one accepted connection; with use_epoll, waits in epoll_wait before each read. */
static void serve(int listener, int use_epoll)
{
    unsigned char request[REQUEST_LENGTH], reply[REPLY_LENGTH];
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) {
        perror("pingpong: accept");
        _exit(1);
    }
    int epoll_fd = -1;
    if (use_epoll) {
        struct epoll_event event = {.events = EPOLLIN, .data.fd = fd};
        epoll_fd = epoll_create1(EPOLL_CLOEXEC);
        if (epoll_fd < 0 || epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
            perror("pingpong: epoll");
            _exit(1);
        }
    }
    memset(reply, 0, sizeof(reply));
    while ((epoll_fd < 0 || await_readable(epoll_fd) == 0) && read_fully(fd, request, REQUEST_LENGTH) == 0) {
        /* Echo the correlation id, as the primary does. */
        memcpy(reply + 8, request + 8, 8);
        if (write_fully(fd, reply, REPLY_LENGTH) != 0)
            break;
    }
    _exit(0);
}

/* Forks a server (epoll or blocking) on a fresh socket in dir and connects to it; returns the fd, or -1. */
static int start_server(const char *dir, int use_epoll, pid_t *server)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(address.sun_path, sizeof(address.sun_path), "%s/pingpong-%d-%d.sock", dir, (int)getpid(),
                         use_epoll) >= sizeof(address.sun_path)) {
        fprintf(stderr, "pingpong: socket path in %s is too long\n", dir);
        return -1;
    }
    unlink(address.sun_path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof(address)) != 0 ||
        listen(listener, 1) != 0) {
        fprintf(stderr, "pingpong: cannot listen on %s: %s\n", address.sun_path, strerror(errno));
        return -1;
    }
    *server = fork();
    if (*server < 0) {
        perror("pingpong: fork");
        return -1;
    }
    if (*server == 0)
        serve(listener, use_epoll);
    close(listener);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
        fprintf(stderr, "pingpong: connect(%s): %s\n", address.sun_path, strerror(errno));
        kill(*server, SIGKILL);
        return -1;
    }
    unlink(address.sun_path);
    return fd;
}

/* WARMUP untimed then COUNT timed back-to-back round trips on fd, reported as `name`; returns 0 or 1. */
static int back_to_back(int fd, const char *name, int round, int warmup, int count, double *samples,
                        unsigned char *request, unsigned char *reply, uint64_t *sent)
{
    for (int i = -warmup; i < count; i++) {
        double rtt = round_trip(fd, request, reply, (*sent)++);
        if (rtt < 0)
            return 1;
        if (i >= 0)
            samples[i] = rtt;
    }
    report(name, round, samples, count);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    int round = 0, count = 100000, warmup = 20000, idle = 100, pause_us = 1000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--round") && i + 1 < argc) {
            round = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
            count = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) {
            warmup = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--idle-count") && i + 1 < argc) {
            idle = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--idle-pause-us") && i + 1 < argc) {
            pause_us = atoi(argv[++i]);
        } else {
            count = 0;
            break;
        }
    }
    if (count < 1 || warmup < 0 || idle < 0 || pause_us < 0 || round < 0) {
        fprintf(stderr, "usage: pingpong [--dir DIR] [--round N] [--count COUNT] [--warmup WARMUP] "
                        "[--idle-count IDLE] [--idle-pause-us PAUSE]\n");
        return 2;
    }

    pid_t server;
    int fd = start_server(dir, 0, &server);
    if (fd < 0)
        return 1;

    unsigned char request[REQUEST_LENGTH], reply[REPLY_LENGTH];
    memset(request, 0, sizeof(request));
    request[0] = REQUEST_LENGTH;
    request[4] = 2; /* CREATE_MR */
    double *samples = malloc(sizeof(double) * (size_t)(count > idle ? count : idle + 1));
    if (!samples) {
        perror("pingpong: malloc");
        return 1;
    }
    uint64_t sent = 0;
    int status = back_to_back(fd, "pingpong", round, warmup, count, samples, request, reply, &sent);
    struct timespec pause = {.tv_sec = pause_us / 1000000, .tv_nsec = (long)(pause_us % 1000000) * 1000};
    for (int i = 0; i < idle && status == 0; i++) {
        nanosleep(&pause, NULL);
        double rtt = round_trip(fd, request, reply, sent++);
        if (rtt < 0)
            status = 1;
        else
            samples[i] = rtt;
    }
    if (status == 0 && idle > 0) {
        report("pingpong.idle", round, samples, idle);
        printf("c\tpingpong.idle.pause\t0\t%d\tus\n", pause_us);
    }
    close(fd);
    waitpid(server, NULL, 0);
    if (status == 0) {
        pid_t epoll_server;
        int epoll_fd = start_server(dir, 1, &epoll_server);
        if (epoll_fd < 0)
            status = 1;
        else {
            status = back_to_back(epoll_fd, "pingpong.epoll", round, warmup, count, samples, request, reply, &sent);
            close(epoll_fd);
            waitpid(epoll_server, NULL, 0);
        }
    }
    free(samples);
    return status;
}
