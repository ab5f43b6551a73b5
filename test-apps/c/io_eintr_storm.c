/* Blocking calls interrupted by a thread-directed signal, many times over (issue 25:
 * apache's listener, woken by pthread_kill(SIGHUP) in accept, was not interrupted
 * under the preload). For each call a thread blocks in it while the main thread sends
 * it SIGUSR1 every 2 ms until the call returns, as signal(7) says:
 *   - handler without SA_RESTART: every call returns -1/EINTR;
 *   - handler with SA_RESTART: reads, writes, accept and connect restart (they return
 *     only when the main thread gives them what they wait for), while poll, ppoll,
 *     select, pselect (without a signal mask), epoll_wait, nanosleep and a read on a
 *     socket with SO_RCVTIMEO return EINTR.
 * Each case runs ROUNDS times (argv[1], default 10), so that a signal landing at any
 * point of the call (before it blocks, between its attempt and its wait, in the wait)
 * is tried; a round that is not interrupted after MAX_SIGNALS signals is released and
 * counted as not interrupted, so a missed signal fails the comparison, never hangs.
 * An idle thread waits on a condition variable all along (under the preload the
 * blocked fiber then sometimes shares its worker and parks through the reactor
 * instead of waiting directly in the kernel). Deterministic stdout. argv[2], if given, names the one kind
 * to run (for debugging). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
#define MAX_SIGNALS 1000 /* 2 s of signals at most per round */

enum kind { READ_PIPE, READ_SOCKET, RECV_SOCKET, RECV_TIMEO, ACCEPT, CONNECT, WRITE_PIPE, SEND_SOCKET,
            POLL_ONE, POLL_TWO, PPOLL, SELECT, PSELECT, EPOLL, NANOSLEEP, NKINDS };
static const char *kind_name[] = { "read_pipe", "read_socket", "recv_socket", "recv_timeo", "accept", "connect",
                                   "write_full_pipe", "send_full_socket", "poll_one", "poll_two", "ppoll", "select",
                                   "pselect", "epoll_wait", "nanosleep" };

static int never_restarted(enum kind k) {
    return k == RECV_TIMEO || k == POLL_ONE || k == POLL_TWO || k == PPOLL || k == SELECT || k == PSELECT || k == EPOLL ||
           k == NANOSLEEP;
}

struct fixture {
    enum kind kind;
    int fd, other, listener, filler; /* what the thread blocks on, the far end, helpers */
    int port;
    volatile int started, done;
    long result;
    int err, handled;
};

static __thread int handled;
static void on_usr1(int sig) { (void)sig; handled++; }

static void *blocked(void *a) {
    struct fixture *x = a;
    char c = 'x';
    long r = 0;
    x->started = 1;
    switch (x->kind) {
    case READ_PIPE: case READ_SOCKET: r = read(x->fd, &c, 1); break;
    case RECV_SOCKET: case RECV_TIMEO: r = recv(x->fd, &c, 1, 0); break;
    case ACCEPT: r = accept(x->fd, 0, 0); if (r >= 0) { close((int)r); r = 1; } break;
    case CONNECT: {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(x->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        r = connect(x->fd, (struct sockaddr *)&sa, sizeof sa);
        break;
    }
    case WRITE_PIPE: r = write(x->fd, &c, 1); break;
    case SEND_SOCKET: r = send(x->fd, &c, 1, 0); break;
    case POLL_ONE: { struct pollfd p = { x->fd, POLLIN, 0 }; r = poll(&p, 1, 20000); break; }
    case POLL_TWO: { struct pollfd p[2] = { { x->fd, POLLIN, 0 }, { x->other, POLLIN, 0 } }; r = poll(p, 2, 20000); break; }
    case PPOLL: { struct pollfd p = { x->fd, POLLIN, 0 }; struct timespec ts = { 20, 0 }; r = ppoll(&p, 1, &ts, 0); break; }
    case SELECT: {
        fd_set s; FD_ZERO(&s); FD_SET(x->fd, &s);
        struct timeval tv = { 20, 0 };
        r = select(x->fd + 1, &s, 0, 0, &tv);
        break;
    }
    case PSELECT: {
        fd_set s; FD_ZERO(&s); FD_SET(x->fd, &s);
        struct timespec ts = { 20, 0 };
        r = pselect(x->fd + 1, &s, 0, 0, &ts, 0);
        break;
    }
    case EPOLL: { struct epoll_event e; r = epoll_wait(x->fd, &e, 1, 20000); break; }
    case NANOSLEEP: { struct timespec ts = { 20, 0 }; r = nanosleep(&ts, 0); break; }
    default: break;
    }
    x->err = r < 0 ? errno : 0;
    x->result = r;
    x->handled = handled;
    __atomic_store_n(&x->done, 1, __ATOMIC_RELEASE);
    return 0;
}

static int loopback_listener(int backlog, int *port) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    CHECK(l >= 0 && bind(l, (struct sockaddr *)&a, sizeof a) == 0 && listen(l, backlog) == 0);
    CHECK(getsockname(l, (struct sockaddr *)&a, &len) == 0);
    *port = ntohs(a.sin_port);
    return l;
}

static void set_nonblock(int fd, int on) {
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0 && fcntl(fd, F_SETFL, on ? fl | O_NONBLOCK : fl & ~O_NONBLOCK) == 0);
}

static void setup(struct fixture *x) {
    int p[2];
    x->fd = x->other = x->listener = x->filler = -1;
    switch (x->kind) {
    case READ_PIPE: case POLL_ONE: case PPOLL: case SELECT: case PSELECT:
        CHECK(pipe(p) == 0); x->fd = p[0]; x->other = p[1]; break;
    case POLL_TWO: {
        int q[2];
        CHECK(pipe(p) == 0 && pipe(q) == 0);
        x->fd = p[0]; x->other = q[0]; x->listener = p[1]; x->filler = q[1]; /* write ends */
        break;
    }
    case READ_SOCKET: case RECV_SOCKET: case RECV_TIMEO:
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0); x->fd = p[0]; x->other = p[1];
        if (x->kind == RECV_TIMEO) {
            struct timeval tv = { 20, 0 };
            CHECK(setsockopt(x->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
        }
        break;
    case ACCEPT: x->fd = loopback_listener(4, &x->port); break;
    case CONNECT: {
        /* Backlog 0 with one connection queued: the kernel drops the next SYN, so a
         * blocking connect waits (for the SYN's retransmission, a second later). */
        x->listener = loopback_listener(0, &x->port);
        x->filler = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(x->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(connect(x->filler, (struct sockaddr *)&sa, sizeof sa) == 0);
        /* The filler's connect returns once the client side is established; the
         * listener queues it when it has seen the last ACK, which on loopback may be a
         * moment later. A SYN sent before that finds the queue empty and connects at
         * once (a round failed that way, preloaded, where the thread starts sooner). */
        struct pollfd queued = { x->listener, POLLIN, 0 };
        CHECK(poll(&queued, 1, 5000) == 1);
        x->fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(x->fd >= 0);
        break;
    }
    case WRITE_PIPE: case SEND_SOCKET: {
        static char chunk[65536];
        if (x->kind == WRITE_PIPE) {
            CHECK(pipe(p) == 0);
            x->fd = p[1]; x->other = p[0];
        } else {
            CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0);
            x->fd = p[0]; x->other = p[1];
        }
        set_nonblock(x->fd, 1);
        while (write(x->fd, chunk, sizeof chunk) > 0) {}
        while (write(x->fd, chunk, 1) > 0) {}
        CHECK(errno == EAGAIN);
        set_nonblock(x->fd, 0);
        break;
    }
    case EPOLL: {
        CHECK(pipe(p) == 0);
        x->listener = p[0]; x->other = p[1];
        x->fd = epoll_create1(0);
        struct epoll_event e = { .events = EPOLLIN, .data.fd = p[0] };
        CHECK(epoll_ctl(x->fd, EPOLL_CTL_ADD, p[0], &e) == 0);
        break;
    }
    default: break;
    }
}

/* Gives the blocked call what it waits for. */
static void release(struct fixture *x) {
    static char sink[1 << 20];
    switch (x->kind) {
    case READ_PIPE: case READ_SOCKET: case RECV_SOCKET: case RECV_TIMEO: case POLL_ONE: case PPOLL: case SELECT:
    case PSELECT: case EPOLL:
        CHECK(write(x->other, "y", 1) == 1); break;
    case POLL_TWO: CHECK(write(x->filler, "y", 1) == 1); break;
    case ACCEPT: {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(x->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0);
        x->filler = c;
        break;
    }
    case CONNECT: /* Free the queue: the retransmitted SYN then gets in. */
        while (!__atomic_load_n(&x->done, __ATOMIC_ACQUIRE)) {
            struct pollfd p = { x->listener, POLLIN, 0 };
            if (poll(&p, 1, 50) == 1) close(accept(x->listener, 0, 0));
        }
        break;
    case WRITE_PIPE: CHECK(read(x->other, sink, sizeof sink) > 0); break;
    case SEND_SOCKET: while (recv(x->other, sink, sizeof sink, MSG_DONTWAIT) > 0) {} break;
    default: break;
    }
}

static void teardown(struct fixture *x) {
    int fds[] = { x->fd, x->other, x->listener, x->filler };
    for (int i = 0; i < 4; i++) if (fds[i] >= 0) close(fds[i]);
}

/* One round: returns 1 when the call ended as signal(7) says. */
static int round_of(enum kind k, int sa_restart, int *handled_out) {
    struct fixture x;
    memset(&x, 0, sizeof x);
    x.kind = k;
    setup(&x);
    pthread_t t;
    CHECK(pthread_create(&t, 0, blocked, &x) == 0);
    while (!x.started) usleep(100);
    int expect_eintr = !sa_restart || never_restarted(k);
    int signals = 0;
    /* Expecting EINTR: signal until the call returns. Expecting a restart: a few
     * signals, after which the call must still be blocked, then its data. */
    int limit = expect_eintr ? MAX_SIGNALS : 5;
    while (signals < limit && !__atomic_load_n(&x.done, __ATOMIC_ACQUIRE)) {
        CHECK(pthread_kill(t, SIGUSR1) == 0);
        signals++;
        usleep(2000);
    }
    int blocked_after_signals = !__atomic_load_n(&x.done, __ATOMIC_ACQUIRE);
    if (blocked_after_signals && k != NANOSLEEP) release(&x);
    CHECK(pthread_join(t, 0) == 0);
    teardown(&x);
    *handled_out = x.handled;
    /* Interrupted means: returned EINTR while still signalled, not once released. */
    if (expect_eintr) {
        int ok = x.result == -1 && x.err == EINTR && !blocked_after_signals;
        if (!ok)
            fprintf(stderr, "%s sa_restart=%d: result %ld errno %d after %d signals, blocked after signals %d, handled %d\n",
                    kind_name[k], sa_restart, x.result, x.err, signals, blocked_after_signals, x.handled);
        return ok;
    }
    long want = k == CONNECT ? 0 : 1;
    if (x.result != want || !blocked_after_signals)
        fprintf(stderr, "%s sa_restart=1: result %ld errno %d, blocked after signals %d\n", kind_name[k], x.result, x.err, blocked_after_signals);
    return x.result == want && blocked_after_signals;
}

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_done;
static void *idle_thread(void *a) {
    (void)a;
    pthread_mutex_lock(&idle_lock);
    while (!idle_done) pthread_cond_wait(&idle_cond, &idle_lock);
    pthread_mutex_unlock(&idle_lock);
    return 0;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    setvbuf(stdout, 0, _IOLBF, 0);
    alarm(120); /* a wait that never ends fails the test instead of hanging it */
    signal(SIGPIPE, SIG_IGN);
    pthread_t idle;
    CHECK(pthread_create(&idle, 0, idle_thread, 0) == 0);
    for (int restart = 0; restart <= 1; restart++) {
        struct sigaction sa; memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1; sigemptyset(&sa.sa_mask); sa.sa_flags = restart ? SA_RESTART : 0;
        CHECK(sigaction(SIGUSR1, &sa, 0) == 0);
        for (enum kind k = 0; k < NKINDS; k++) {
            if (argc > 2 && strcmp(argv[2], kind_name[k]) != 0) continue; /* one kind only (debugging) */
            /* A restarted connect waits a second for the SYN's retransmission: once. */
            int n = restart && k == CONNECT ? 1 : rounds;
            int ok = 0, handled_every_round = 1;
            for (int i = 0; i < n; i++) {
                int h = 0;
                ok += round_of(k, restart, &h);
                handled_every_round &= h > 0;
            }
            printf("%-17s sa_restart=%d %s %d/%d handled=%d\n", kind_name[k], restart,
                   !restart || never_restarted(k) ? "eintr" : "restarted", ok, n, handled_every_round);
        }
    }
    pthread_mutex_lock(&idle_lock);
    idle_done = 1;
    pthread_cond_signal(&idle_cond);
    pthread_mutex_unlock(&idle_lock);
    CHECK(pthread_join(idle, 0) == 0);

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
