/* A TCP request/reply server over loopback pinned to one CPU, and a client in another
 * process (this file run again, with LD_PRELOAD removed: a native thread) pinned to a
 * CPU of the caller's choice. Under the library the server's connection thread is a
 * fiber alone on the only worker, so it waits for each request directly in the kernel,
 * and the I/O layer asks where the client runs (io::peer_cpu): on the server's CPU the
 * wait blocks at once (stat direct_waits_unspun), on another it is declined
 * (direct_waits_declined_peer_elsewhere). Stdout is the same natively and preloaded.
 *
 *   io_peer_cpu SERVER_CPU CLIENT_CPU ROUNDS
 *   io_peer_cpu client PORT CLIENT_CPU ROUNDS      (run by the server)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static int rounds;

static void pin(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0);
}

static void full(int fd, char *buf, size_t n, int writing) {
    size_t done = 0;
    while (done < n) {
        ssize_t k = writing ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
        CHECK(k > 0);
        done += (size_t)k;
    }
}

static void nodelay(int fd) {
    int on = 1;
    CHECK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on) == 0);
}

/* The connection thread: replies to each 16-byte request with its number plus one. */
static void *serve(void *a) {
    int ls = (int)(long)a;
    int fd = accept(ls, 0, 0);
    CHECK(fd >= 0);
    nodelay(fd);
    long served = 0;
    char buf[16];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0) break;
        CHECK(n > 0);
        if (n < (ssize_t)sizeof buf) full(fd, buf + n, sizeof buf - (size_t)n, 0);
        int i;
        memcpy(&i, buf, sizeof i);
        i++;
        memcpy(buf, &i, sizeof i);
        full(fd, buf, sizeof buf, 1);
        served++;
    }
    close(fd);
    return (void *)served;
}

static int client(int port, int cpu) {
    pin(cpu);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    nodelay(fd);
    char buf[16] = { 0 };
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
        return client(atoi(argv[2]), atoi(argv[3]));
    }
    CHECK(argc == 4);
    int server_cpu = atoi(argv[1]), client_cpu = atoi(argv[2]);
    rounds = atoi(argv[3]);
    pin(server_cpu); /* before the first thread: the pool then has one worker */
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(ls >= 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    CHECK(bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(listen(ls, 1) == 0);
    socklen_t len = sizeof sa;
    CHECK(getsockname(ls, (struct sockaddr *)&sa, &len) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, 0, serve, (void *)(long)ls) == 0);
    fflush(stdout);
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        unsetenv("LD_PRELOAD");
        char port[16], cpu[16], r[16];
        snprintf(port, sizeof port, "%d", ntohs(sa.sin_port));
        snprintf(cpu, sizeof cpu, "%d", client_cpu);
        snprintf(r, sizeof r, "%d", rounds);
        execl("/proc/self/exe", argv[0], "client", port, cpu, r, (char *)0);
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
