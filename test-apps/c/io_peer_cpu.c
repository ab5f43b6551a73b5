/* A request/reply server over loopback TCP (or a unix socket), pinned to one CPU, and a
 * client in another process (this file run again, with LD_PRELOAD removed: a native
 * thread) pinned to a CPU of the caller's choice. Under the library the server's
 * connection thread is a fiber alone on its worker, so it waits for each request
 * directly in the kernel, and the I/O layer asks where the client runs (io::peer_cpu):
 * on the server's CPU the wait blocks at once (stat direct_waits_unspun), on another it
 * is declined (direct_waits_declined_peer_elsewhere). A worker that runs dry after a
 * declined wait sleeps without spinning (idle_spins_skipped) only where the kernel may
 * move it beside the client: not when the server is pinned apart from it; over a unix
 * socket (no CPU recorded), only when the server may run on every CPU. Stdout is the
 * same natively and preloaded.
 *
 *   io_peer_cpu SERVER_CPU CLIENT_CPU ROUNDS [unix]   (SERVER_CPU "-": not pinned)
 *   io_peer_cpu client PORT|@NAME CLIENT_CPU ROUNDS   (run by the server)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <stddef.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include "request_reply.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static int rounds;

static void pin(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
}

static int unix_mode;

static void nodelay(int fd) {
    if (unix_mode) return;
    int on = 1;
    CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0);
}

/* The connection thread: replies to each 16-byte request with its number plus one. */
static void *serve(void *a) {
    int ls = (int)(long)a;
    int fd = accept(ls, 0, 0);
    CHECK(fd >= 0);
    nodelay(fd);
    return (void *)reply_until_closed(fd);
}

/* An abstract unix address (a leading NUL) named after `name`, and its length. */
static socklen_t unix_address(struct sockaddr_un *su, const char *name) {
    memset(su, 0, sizeof *su);
    su->sun_family = AF_UNIX;
    size_t n = strlen(name);
    CHECK(n + 1 < sizeof su->sun_path);
    memcpy(su->sun_path + 1, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

static int client(const char *addr, int cpu) {
    pin(cpu);
    int fd;
    if (addr[0] == '@') {
        unix_mode = 1;
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        struct sockaddr_un su;
        socklen_t len = unix_address(&su, addr + 1);
        CHECK(connect(fd, (struct sockaddr *)&su, len) == 0);
    } else {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(atoi(addr)), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    }
    nodelay(fd);
    char buf[REQUEST_BYTES] = { 0 };
    long good = 0;
    for (int i = 0; i < rounds; i++) {
        memcpy(buf, &i, sizeof i);
        full(fd, buf, sizeof buf, 1);
        /* Now and then the client takes its time, so that the server's read finds
         * nothing and waits. */
        if (i % 16 == 0) usleep(200);
        full(fd, buf, sizeof buf, 0);
        int r;
        memcpy(&r, buf, sizeof r);
        good += r == i + 1;
    }
    close(fd);
    printf("client: %ld of %d replies right\n", good, rounds);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 5 && strcmp(argv[1], "client") == 0) {
        rounds = atoi(argv[4]);
        return client(argv[2], atoi(argv[3]));
    }
    CHECK(argc == 4 || (argc == 5 && strcmp(argv[4], "unix") == 0));
    unix_mode = argc == 5;
    int client_cpu = atoi(argv[2]);
    rounds = atoi(argv[3]);
    /* Before the first thread: the pool then has one worker. */
    if (strcmp(argv[1], "-") != 0) pin(atoi(argv[1]));
    char addr[64];
    int ls = socket(unix_mode ? AF_UNIX : AF_INET, SOCK_STREAM, 0);
    CHECK(ls >= 0);
    if (unix_mode) {
        snprintf(addr, sizeof addr, "@io_peer_cpu.%d", (int)getpid());
        struct sockaddr_un su;
        socklen_t len = unix_address(&su, addr + 1);
        CHECK(bind(ls, (struct sockaddr *)&su, len) == 0);
        CHECK(listen(ls, 1) == 0);
    } else {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0);
        CHECK(listen(ls, 1) == 0);
        socklen_t len = sizeof sa;
        CHECK(getsockname(ls, (struct sockaddr *)&sa, &len) == 0);
        snprintf(addr, sizeof addr, "%d", ntohs(sa.sin_port));
    }
    pthread_t t;
    CHECK(pthread_create(&t, 0, serve, (void *)(long)ls) == 0);
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        unsetenv("LD_PRELOAD");
        char cpu[16], r[16];
        snprintf(cpu, sizeof cpu, "%d", client_cpu);
        snprintf(r, sizeof r, "%d", rounds);
        execl("/proc/self/exe", argv[0], "client", addr, cpu, r, (char *)0);
        _exit(127);
    }
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    void *served;
    pthread_join(t, &served);
    printf("server: %ld requests served\n", (long)served);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
