/* The runtime's hot paths, each repeated N times, for counting (scripts/count-core.sh):
 *   pingpong N P  P pairs of threads, each pair a ping-pong of 32 bytes over a unix
 *                 socketpair (the reader finds nothing and waits: a park and a wake per
 *                 message) with a mutex taken on the pong side; N round trips a pair
 *   pollpong N P  as pingpong, but the pinging side reads as libmariadb's client does:
 *                 a non-blocking recv, and on EAGAIN a poll and the recv again (the
 *                 TPC-C client's statement; no read timeout, as the client sets none)
 *   pollaway N P  as pollpong, but every answer comes from another process, 1 ms after
 *                 the question: a native echo process started with exec (so neither
 *                 valgrind nor the preload follows it), which leaves the one worker with
 *                 nothing to run, so each wait ends in its epoll_wait sleep (the TPC-C
 *                 client's statement with the server on another CPU)
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
#include <sys/wait.h>
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

/* The far side of pollaway, natively: echoes every question on each descriptor from
   argv[2] on, 1 ms after it came, until each peer closes. */
static int echo_away(int argc, char **argv) {
    int n = argc - 2;
    struct pollfd *p = calloc((size_t)n, sizeof *p);
    for (int i = 0; i < n; i++) p[i] = (struct pollfd){.fd = atoi(argv[i + 2]), .events = POLLIN};
    for (int open = n; open > 0;) {
        if (poll(p, (nfds_t)n, -1) < 0) return 1;
        nanosleep(&(struct timespec){0, 1000000}, 0);
        for (int i = 0; i < n; i++) {
            char b[32];
            if (p[i].fd < 0 || !p[i].revents) continue;
            ssize_t r = read(p[i].fd, b, sizeof b);
            if (r <= 0 || write(p[i].fd, b, (size_t)r) != r) {
                close(p[i].fd);
                p[i].fd = -1;
                open--;
            }
        }
    }
    return 0;
}

/* Starts echo_away in a new process on the far ends in `far`, without the preload (the
   near ends closed there, so that it sees each peer close). */
static void start_echo_away(const char *self, const int *near, const int *far, int k) {
    char **args = calloc((size_t)k + 3, sizeof *args);
    args[0] = "count_core";
    args[1] = "echo-away";
    for (int i = 0; i < k; i++) {
        args[i + 2] = malloc(16);
        snprintf(args[i + 2], 16, "%d", far[i]);
    }
    if (fork() == 0) {
        for (int i = 0; i < k; i++) close(near[i]);
        unsetenv("LD_PRELOAD");
        execv(self, args); /* not /proc/self/exe: under valgrind that is valgrind's */
        _exit(127);
    }
    for (int i = 0; i < k; i++) close(far[i]);
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "echo-away")) return echo_away(argc, argv);
    if (argc != 4) {
        fprintf(stderr, "usage: count_core pingpong|pollpong|pollaway|yield|sleep N THREADS_OR_PAIRS\n");
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
    } else if (!strcmp(argv[1], "pollaway")) {
        int *far = calloc((size_t)k, sizeof *far);
        int *near = calloc((size_t)k, sizeof *near);
        for (int i = 0; i < k; i++) {
            int sv[2];
            if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
            near[i] = sv[0];
            far[i] = sv[1];
        }
        start_echo_away(argv[0], near, far, k);
        for (int i = 0; i < k; i++) pthread_create(&t[threads++], 0, poll_ping, (void *)(long)near[i]);
        for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
        for (int i = 0; i < k; i++) close(near[i]);
        wait(0);
        printf("done=%s\n", argv[1]);
        return 0;
    } else {
        void *(*fn)(void *) = !strcmp(argv[1], "yield") ? yielder : !strcmp(argv[1], "sleep") ? sleeper : 0;
        if (!fn) return 2;
        for (int i = 0; i < k; i++) pthread_create(&t[threads++], 0, fn, 0);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], 0);
    printf("done=%s pongs=%ld\n", argv[1], pongs);
    return 0;
}
