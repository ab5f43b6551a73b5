/* The runtime's hot paths, each repeated N times, for counting (scripts/count-core.sh):
 *   pingpong N P  P pairs of threads, each pair a ping-pong of 32 bytes over a unix
 *                 socketpair (the reader finds nothing and waits: a park and a wake per
 *                 message) with a mutex taken on the pong side; N round trips a pair
 *   pollpong N P  as pingpong, but the pinging side reads as libmariadb's client does:
 *                 a non-blocking recv, and on EAGAIN a poll and the recv again (the
 *                 TPC-C client's statement; no read timeout, as the client sets none)
 *   yield N T     T threads, N sched_yield each
 *   sleep N T     T threads, N nanosleeps of 200 us each (a timer armed, fired, a wake)
 * Prints one line "done=..." for the caller to check. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long n_ops;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long pongs;

static void *pong(void *arg) {
    int fd = (int)(long)arg;
    char b[32];
    for (long i = 0; i < n_ops; i++) {
        if (read(fd, b, sizeof b) != (ssize_t)sizeof b) break;
        pthread_mutex_lock(&lock);
        pongs++;
        pthread_mutex_unlock(&lock);
        if (write(fd, b, sizeof b) != (ssize_t)sizeof b) break;
    }
    return 0;
}

static void *ping(void *arg) {
    int fd = (int)(long)arg;
    char b[32] = "ping";
    for (long i = 0; i < n_ops; i++) {
        if (write(fd, b, sizeof b) != (ssize_t)sizeof b || read(fd, b, sizeof b) != (ssize_t)sizeof b) break;
    }
    return 0;
}

static void *poll_ping(void *arg) {
    int fd = (int)(long)arg;
    char b[32] = "ping";
    for (long i = 0; i < n_ops; i++) {
        if (send(fd, b, sizeof b, 0) != (ssize_t)sizeof b) break;
        ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
        if (r < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, -1) != 1) break;
            r = recv(fd, b, sizeof b, MSG_DONTWAIT);
        }
        if (r != (ssize_t)sizeof b) break;
    }
    return 0;
}

static void *yielder(void *arg) {
    (void)arg;
    for (long i = 0; i < n_ops; i++) sched_yield();
    return 0;
}

static void *sleeper(void *arg) {
    (void)arg;
    struct timespec ts = {0, 200000};
    for (long i = 0; i < n_ops; i++) nanosleep(&ts, 0);
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: count_core pingpong|pollpong|yield|sleep N THREADS_OR_PAIRS\n");
        return 2;
    }
    n_ops = atol(argv[2]);
    int k = atoi(argv[3]);
    if (n_ops <= 0 || k <= 0 || k > 4096) return 2;
    pthread_t *t = calloc(2 * (size_t)k, sizeof *t);
    int threads = 0;
    if (!strcmp(argv[1], "pingpong") || !strcmp(argv[1], "pollpong")) {
        void *(*pinger)(void *) = !strcmp(argv[1], "pingpong") ? ping : poll_ping;
        for (int i = 0; i < k; i++) {
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
            pthread_create(&t[threads++], 0, pong, (void *)(long)sv[1]);
            pthread_create(&t[threads++], 0, pinger, (void *)(long)sv[0]);
        }
    } else {
        void *(*fn)(void *) = !strcmp(argv[1], "yield") ? yielder : !strcmp(argv[1], "sleep") ? sleeper : 0;
        if (!fn) return 2;
        for (int i = 0; i < k; i++) pthread_create(&t[threads++], 0, fn, 0);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    printf("done=%s pongs=%ld\n", argv[1], pongs);
    return 0;
}
