/* Benchmark (not a test): a thread-per-connection TCP echo server on loopback.
 *
 *   bench_echo serve
 *       The server alone: one thread per accepted connection, each echoing what it
 *       reads. Prints "port=N" once listening; runs until killed.
 *   bench_echo load PORT CONNECTIONS SECONDS
 *       The load generator, meant to run natively in its own process: one thread and
 *       epoll drive CONNECTIONS connections, each with one 32-byte message in flight
 *       (send, wait for the echo, send again). Warms 0.5 s, then counts round trips
 *       for SECONDS. Prints msgs_per_sec=X.
 *   bench_echo inproc CONNECTIONS MESSAGES
 *       Server and one client thread per connection in the same process (so under
 *       the preload both sides are fibers); each client does MESSAGES round trips.
 *       The time includes creating the threads and connecting. Prints msgs_per_sec=X.
 *
 * scripts/bench-io.sh runs `serve` natively and preloaded against the same native
 * `load` (how a server is measured: the load generator is not the program under
 * test, as sysbench is not for MariaDB), and `inproc` both ways. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include "loopback.h"

#define MSG 32
static const char message[MSG] = "hello world 0123456789abcdefghi";

static void *echo_connection(void *arg) {
    int fd = (int)(long)arg;
    char buf[256];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0 || write(fd, buf, n) != n) break;
    }
    close(fd);
    return NULL;
}

/* Accepts `count` connections (forever if < 0), one detached echo thread each. */
static void accept_connections(int ls, long count) {
    for (long i = 0; count < 0 || i < count; i++) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) { perror("accept"); exit(1); }
        pthread_t t;
        if (pthread_create(&t, NULL, echo_connection, (void *)(long)fd)) { perror("pthread_create"); exit(1); }
        pthread_detach(t);
    }
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

static int serve(void) {
    int port, ls = listen_loopback(&port);
    printf("port=%d\n", port);
    fflush(stdout);
    accept_connections(ls, -1);
    return 0;
}

static int load(int port, int conns, double seconds) {
    int ep = epoll_create1(0), *fds = calloc(conns, sizeof *fds);
    for (int i = 0; i < conns; i++) {
        fds[i] = connect_loopback(port);
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
    }
    for (int i = 0; i < conns; i++)
        if (write(fds[i], message, MSG) != MSG) { perror("write"); return 1; }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int counting = 0;
    long done = 0;
    struct epoll_event ev[256];
    char buf[MSG];
    for (;;) {
        int n = epoll_wait(ep, ev, 256, 5000);
        if (n <= 0) { fprintf(stderr, "load: no echo for 5 s\n"); return 1; }
        for (int k = 0; k < n; k++) {
            int fd = fds[ev[k].data.u32], got = 0;
            while (got < MSG) { /* an echo may arrive in pieces */
                ssize_t r = read(fd, buf + got, MSG - got);
                if (r <= 0) { perror("read"); return 1; }
                got += (int)r;
            }
            if (memcmp(buf, message, MSG)) { fprintf(stderr, "load: wrong echo\n"); return 1; }
            done += counting;
            if (write(fd, message, MSG) != MSG) { perror("write"); return 1; }
        }
        double el = seconds_since(&t0);
        if (!counting && el >= 0.5) {
            counting = 1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
        } else if (counting && el >= seconds) {
            printf("msgs_per_sec=%.0f\n", done / el);
            return 0;
        }
    }
}

static int inproc_port, inproc_messages;
static long inproc_total;

static void *inproc_client(void *arg) {
    (void)arg;
    int fd = connect_loopback(inproc_port);
    char buf[MSG];
    long ok = 0;
    for (int i = 0; i < inproc_messages; i++) {
        if (write(fd, message, MSG) != MSG) exit(2);
        for (int got = 0; got < MSG;) {
            ssize_t n = read(fd, buf + got, MSG - got);
            if (n <= 0) exit(3);
            got += (int)n;
        }
        ok += !memcmp(buf, message, MSG);
    }
    close(fd);
    __atomic_add_fetch(&inproc_total, ok, __ATOMIC_SEQ_CST);
    return NULL;
}

static int inproc_listener, inproc_connections;

static void *inproc_acceptor(void *arg) {
    (void)arg;
    accept_connections(inproc_listener, inproc_connections);
    return NULL;
}

static int inproc(int conns, int messages) {
    inproc_listener = listen_loopback(&inproc_port);
    inproc_connections = conns;
    inproc_messages = messages;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t acceptor, *clients = malloc(sizeof(pthread_t) * conns);
    pthread_create(&acceptor, NULL, inproc_acceptor, NULL);
    for (int i = 0; i < conns; i++) pthread_create(&clients[i], NULL, inproc_client, NULL);
    for (int i = 0; i < conns; i++) pthread_join(clients[i], NULL);
    pthread_join(acceptor, NULL);
    double s = seconds_since(&t0);
    if (inproc_total != (long)conns * messages) { fprintf(stderr, "lost messages\n"); return 1; }
    printf("msgs_per_sec=%.0f\n", inproc_total / s);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "serve")) return serve();
    if (argc == 5 && !strcmp(argv[1], "load")) return load(atoi(argv[2]), atoi(argv[3]), atof(argv[4]));
    if (argc == 4 && !strcmp(argv[1], "inproc")) return inproc(atoi(argv[2]), atoi(argv[3]));
    fprintf(stderr, "usage: bench_echo serve | load PORT CONNECTIONS SECONDS | inproc CONNECTIONS MESSAGES\n");
    return 2;
}
