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
 * Usage: pingpong [--quick] [--dir DIR]      (socket in DIR, default /tmp)
 * Output on stdout: c<TAB>pingpong.pNN<TAB>MICROSECONDS<TAB>us for p50, p99
 * and p99.9, and c<TAB>pingpong.count<TAB>N<TAB>round trips.
 * Build: gcc -O2 -o pingpong pingpong.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void serve(int listener)
{
    unsigned char request[REQUEST_LENGTH], reply[REPLY_LENGTH];
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) {
        perror("pingpong: accept");
        _exit(1);
    }
    memset(reply, 0, sizeof(reply));
    while (read_fully(fd, request, REQUEST_LENGTH) == 0) {
        /* Echo the correlation id, as the primary does. */
        memcpy(reply + 8, request + 8, 8);
        if (write_fully(fd, reply, REPLY_LENGTH) != 0)
            break;
    }
    _exit(0);
}

int main(int argc, char **argv)
{
    const char *dir = "/tmp";
    int quick = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
        } else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
            dir = argv[++i];
        } else {
            fprintf(stderr, "usage: pingpong [--quick] [--dir DIR]\n");
            return 2;
        }
    }
    int warmup = quick ? 20000 : 50000;
    int count = quick ? 100000 : 300000;

    struct sockaddr_un address = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(address.sun_path, sizeof(address.sun_path), "%s/pingpong-%d.sock", dir, (int)getpid()) >=
        sizeof(address.sun_path)) {
        fprintf(stderr, "pingpong: socket path in %s is too long\n", dir);
        return 1;
    }
    unlink(address.sun_path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof(address)) != 0 ||
        listen(listener, 1) != 0) {
        fprintf(stderr, "pingpong: cannot listen on %s: %s\n", address.sun_path, strerror(errno));
        return 1;
    }
    pid_t server = fork();
    if (server < 0) {
        perror("pingpong: fork");
        return 1;
    }
    if (server == 0)
        serve(listener);
    close(listener);

    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
        fprintf(stderr, "pingpong: connect(%s): %s\n", address.sun_path, strerror(errno));
        kill(server, SIGKILL);
        return 1;
    }
    unlink(address.sun_path);

    unsigned char request[REQUEST_LENGTH], reply[REPLY_LENGTH];
    memset(request, 0, sizeof(request));
    request[0] = REQUEST_LENGTH;
    request[4] = 2; /* CREATE_MR */
    double *samples = malloc(sizeof(double) * (size_t)count);
    if (!samples) {
        perror("pingpong: malloc");
        return 1;
    }
    for (int i = 0; i < warmup + count; i++) {
        uint64_t correlation = (uint64_t)i;
        memcpy(request + 8, &correlation, 8);
        double start = now_ns();
        if (write_fully(fd, request, REQUEST_LENGTH) != 0 || read_fully(fd, reply, REPLY_LENGTH) != 0) {
            fprintf(stderr, "pingpong: the server went away after %d round trips\n", i);
            return 1;
        }
        double rtt = now_ns() - start;
        if (memcmp(reply + 8, request + 8, 8) != 0) {
            fprintf(stderr, "pingpong: reply %d carries another correlation id\n", i);
            return 1;
        }
        if (i >= warmup)
            samples[i - warmup] = rtt;
    }
    close(fd);
    waitpid(server, NULL, 0);

    qsort(samples, (size_t)count, sizeof(double), compare_double);
    printf("c\tpingpong.p50\t%.3f\tus\n", samples[(size_t)(count * 0.50)] / 1e3);
    printf("c\tpingpong.p99\t%.3f\tus\n", samples[(size_t)(count * 0.99)] / 1e3);
    printf("c\tpingpong.p999\t%.3f\tus\n", samples[(size_t)(count * 0.999)] / 1e3);
    printf("c\tpingpong.count\t%d\tround trips\n", count);
    free(samples);
    return 0;
}
