/* Bursts of requests onto a server pinned to one CPU: under the library its one
 * worker, asleep in epoll_wait, harvests many readiness events at once. A client in
 * another process (this file run again, with LD_PRELOAD removed: one native thread)
 * writes a 16-byte request on every connection, then reads every reply, ROUNDS times;
 * the server's connection threads reply with the request's number plus one. Stdout is
 * the same natively and preloaded.
 *
 * What the test checks under the library: the worker wakes the fibers of a harvest
 * without waking itself (no eventfd write for a worker that is already awake and
 * dispatching; stat eventfd_writes).
 *
 *   io_harvest CONNECTIONS ROUNDS    (the server on the first CPU of its mask)
 *   io_harvest client PORT CONNECTIONS ROUNDS   (run by the server)
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "loopback.h"
#include "request_reply.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

/* A connection thread. */
static void *serve(void *a) {
    return (void *)reply_until_closed((int)(long)a);
}

static int client(int port, int conns, int rounds) {
    int *fd = calloc((size_t)conns, sizeof *fd);
    CHECK(fd);
    for (int c = 0; c < conns; c++) fd[c] = connect_loopback(port);
    long good = 0;
    char buf[REQUEST_BYTES] = { 0 };
    for (int r = 0; r < rounds; r++) {
        /* The burst: every connection's request before any reply is read. */
        for (int c = 0; c < conns; c++) {
            int v = r * conns + c;
            memcpy(buf, &v, sizeof v);
            full(fd[c], buf, sizeof buf, 1);
        }
        for (int c = 0; c < conns; c++) {
            full(fd[c], buf, sizeof buf, 0);
            int v;
            memcpy(&v, buf, sizeof v);
            good += v == r * conns + c + 1;
        }
    }
    for (int c = 0; c < conns; c++) close(fd[c]);
    printf("client: %ld of %ld replies right\n", good, (long)rounds * conns);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "client") == 0) return client(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    CHECK(argc == 3);
    int conns = atoi(argv[1]), rounds = atoi(argv[2]);
    CHECK(conns > 0 && conns <= 1000 && rounds > 0);
    /* Before the first thread: the pool then has one worker. */
    cpu_set_t mask, one;
    CHECK(sched_getaffinity(0, sizeof mask, &mask) == 0);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &mask)) cpu++;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
    int port;
    int ls = listen_loopback(&port);
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        unsetenv("LD_PRELOAD");
        char p[16];
        snprintf(p, sizeof p, "%d", port);
        execl("/proc/self/exe", argv[0], "client", p, argv[1], argv[2], (char *)0);
        _exit(127);
    }
    pthread_t *t = calloc((size_t)conns, sizeof *t);
    CHECK(t);
    for (int c = 0; c < conns; c++) {
        int fd = accept(ls, 0, 0);
        CHECK(fd >= 0);
        CHECK(pthread_create(&t[c], 0, serve, (void *)(long)fd) == 0);
    }
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    long served = 0;
    for (int c = 0; c < conns; c++) {
        void *n;
        CHECK(pthread_join(t[c], &n) == 0);
        served += (long)n;
    }
    printf("server: %ld requests served\n", served);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
