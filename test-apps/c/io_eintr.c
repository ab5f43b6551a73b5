/* Blocking I/O interrupted by a thread-directed signal (pthread_kill), as signal(7)
 * describes it: a read, recv or accept returns -1/EINTR when the handler was installed
 * without SA_RESTART, and waits on (then returns the data) with SA_RESTART; poll,
 * epoll_wait and a socket read with SO_RCVTIMEO are never restarted. Also a thread
 * blocked in read is cancelled. Under the preload the blocked thread is a fiber that
 * is alone on its worker (a direct wait in the kernel) or parked through the reactor;
 * the output must not change. Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

enum kind { READ_PIPE, RECV_SOCKET, RECV_WITH_TIMEOUT, POLL_PIPE, EPOLL_PIPE, ACCEPT };
static const char *kind_name[] = { "read_pipe", "recv_socket", "recv_with_timeout", "poll_pipe", "epoll_pipe", "accept" };

struct job {
    enum kind kind;
    int fd;                 /* what the thread blocks on */
    volatile int ready;
    long result;
    int err, handled;
};

static __thread int handled;
static void on_usr1(int sig) { (void)sig; handled++; }

static void *blocked(void *a) {
    struct job *j = a;
    char c;
    long r = 0;
    j->ready = 1;
    switch (j->kind) {
    case READ_PIPE: r = read(j->fd, &c, 1); break;
    case RECV_SOCKET: case RECV_WITH_TIMEOUT: r = recv(j->fd, &c, 1, 0); break;
    case POLL_PIPE: { struct pollfd p = { j->fd, POLLIN, 0 }; r = poll(&p, 1, 20000); break; }
    case EPOLL_PIPE: { struct epoll_event e; r = epoll_wait(j->fd, &e, 1, 20000); break; }
    case ACCEPT: r = accept(j->fd, 0, 0); if (r >= 0) { close((int)r); r = 1; } break;
    }
    j->err = r < 0 ? errno : 0;
    j->result = r;
    j->handled = handled;
    return 0;
}

/* One thread blocks in `kind`; it gets SIGUSR1 while blocked, then (100 ms later) the
 * data it waits for arrives. */
static void scenario(enum kind kind, int sa_restart) {
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; sigemptyset(&sa.sa_mask); sa.sa_flags = sa_restart ? SA_RESTART : 0;
    CHECK(sigaction(SIGUSR1, &sa, 0) == 0);
    int expect_eintr = !sa_restart || kind == POLL_PIPE || kind == EPOLL_PIPE || kind == RECV_WITH_TIMEOUT;
    struct job j;
    /* A signal that lands before the thread blocks does not interrupt anything: on a
     * loaded machine retry that rare case (a call that is never interrupted fails
     * every attempt). */
    for (int attempt = 0; attempt < 3; attempt++) {
        int fds[2], ep = -1, listener = -1, port = 0;
        memset(&j, 0, sizeof j);
        j.kind = kind;
        if (kind == RECV_SOCKET || kind == RECV_WITH_TIMEOUT) {
            CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
            if (kind == RECV_WITH_TIMEOUT) {
                struct timeval tv = { 20, 0 };
                CHECK(setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
            }
            j.fd = fds[0];
        } else if (kind == ACCEPT) {
            listener = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
            socklen_t len = sizeof a;
            CHECK(bind(listener, (struct sockaddr *)&a, sizeof a) == 0 && listen(listener, 4) == 0);
            CHECK(getsockname(listener, (struct sockaddr *)&a, &len) == 0);
            port = ntohs(a.sin_port);
            j.fd = listener;
            fds[0] = fds[1] = -1;
        } else {
            CHECK(pipe(fds) == 0);
            j.fd = fds[0];
            if (kind == EPOLL_PIPE) {
                ep = epoll_create1(0);
                struct epoll_event e = { .events = EPOLLIN, .data.fd = fds[0] };
                CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &e) == 0);
                j.fd = ep;
            }
        }
        pthread_t t;
        CHECK(pthread_create(&t, 0, blocked, &j) == 0);
        while (!j.ready) usleep(1000);
        usleep(100000);
        CHECK(pthread_kill(t, SIGUSR1) == 0);
        usleep(100000);
        if (kind == ACCEPT) {
            int c = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
            CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0);
            pthread_join(t, 0);
            close(c);
        } else {
            CHECK(write(fds[1], "x", 1) == 1);
            pthread_join(t, 0);
        }
        if (ep >= 0) close(ep);
        if (listener >= 0) close(listener);
        if (fds[0] >= 0) { close(fds[0]); close(fds[1]); }
        if (!(expect_eintr && j.result >= 0)) break;
    }
    printf("%-18s sa_restart=%d result=%ld errno=%s handled=%d\n", kind_name[kind], sa_restart, j.result,
           j.err == 0 ? "0" : j.err == EINTR ? "EINTR" : strerror(j.err), j.handled);
}

static int cancel_pipe[2];
static volatile int cancel_ready;
static void *reader_to_cancel(void *a) {
    (void)a; char c;
    cancel_ready = 1;
    read(cancel_pipe[0], &c, 1);
    return (void *)1L;   /* not reached: cancelled in read */
}

int main(void) {
    alarm(60); /* a wait that never ends fails the test instead of hanging it */
    for (int restart = 0; restart <= 1; restart++)
        for (enum kind k = READ_PIPE; k <= ACCEPT; k++)
            scenario(k, restart);

    CHECK(pipe(cancel_pipe) == 0);
    pthread_t t; void *r;
    CHECK(pthread_create(&t, 0, reader_to_cancel, 0) == 0);
    while (!cancel_ready) usleep(1000);
    usleep(50000);
    CHECK(pthread_cancel(t) == 0);
    CHECK(pthread_join(t, &r) == 0);
    printf("cancelled_in_read=%d\n", r == PTHREAD_CANCELED);

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
