/* ppoll, pselect and epoll_pwait with a signal mask, signalled with pthread_kill.
 * The thread's own mask blocks SIGUSR1 and SIGUSR2; each call installs its mask for
 * the wait only, atomically:
 *   - "unblocked": the call's mask lets SIGUSR1 through; pthread_kill(SIGUSR1) while
 *     it waits runs the handler (with the call's mask in effect: SIGUSR2 not blocked)
 *     and the call returns -1/EINTR well before its timeout; the thread's own mask is
 *     back afterwards;
 *   - "blocked": the call's mask blocks SIGUSR2 too; pthread_kill(SIGUSR2) does not
 *     interrupt it (it times out, 0), the signal stays pending (sigpending) and its
 *     handler runs only when the thread unblocks it;
 *   - "pending": SIGUSR1 sent before the call (blocked by the thread's mask) is
 *     delivered by the call at once: EINTR, handler run;
 *   - "ready": data on the descriptor still ends the wait (1).
 * ppoll over one descriptor and over two (different paths under the preload), pselect,
 * epoll_pwait. Deterministic stdout. (Before the fix, under the preload a wait with a
 * mask ran on the thread's donor in one piece and pthread_kill only held the signal:
 * the "unblocked" waits ran into their 5 s timeout and returned 0.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static volatile int handled1, handled2, usr2_blocked_in_handler = -1;
static pthread_t waiter;
static volatile int in_call; /* the waiter is about to make its call */
static volatile int is_fiber = -1;

static void on_sig(int sig) {
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, 0, &cur);
    if (sig == SIGUSR1) {
        handled1++;
        usr2_blocked_in_handler = sigismember(&cur, SIGUSR2);
    } else {
        handled2++;
    }
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int pipe_a[2], pipe_b[2], ep;

enum kind { PPOLL1, PPOLL2, PSELECT, EPOLL };
static const char *kind_name[] = { "ppoll1", "ppoll2", "pselect", "epoll_pwait" };

/* One wait of `kind` with mask `m` and a timeout of `ms`. */
static int wait_once(enum kind k, const sigset_t *m, int ms) {
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    switch (k) {
    case PPOLL1: {
        struct pollfd p = { pipe_a[0], POLLIN, 0 };
        return ppoll(&p, 1, &ts, m);
    }
    case PPOLL2: {
        struct pollfd p[2] = { { pipe_a[0], POLLIN, 0 }, { pipe_b[0], POLLIN, 0 } };
        return ppoll(p, 2, &ts, m);
    }
    case PSELECT: {
        fd_set r;
        FD_ZERO(&r);
        FD_SET(pipe_a[0], &r);
        FD_SET(pipe_b[0], &r);
        int n = (pipe_a[0] > pipe_b[0] ? pipe_a[0] : pipe_b[0]) + 1;
        return pselect(n, &r, 0, 0, &ts, m);
    }
    case EPOLL: {
        struct epoll_event ev;
        return epoll_pwait(ep, &ev, 1, ms, m);
    }
    }
    return -2;
}

static enum kind cur_kind;

static void report(const char *what, int r, int e, double took, int h1, int h2) {
    sigset_t cur, pend;
    pthread_sigmask(SIG_BLOCK, 0, &cur);
    sigpending(&pend);
    printf("%s %s: r=%d errno=%s quick=%d handled1=%d handled2=%d usr2_in_handler=%d after: usr1_blocked=%d usr2_blocked=%d usr2_pending=%d\n",
           kind_name[cur_kind], what, r, r < 0 ? (e == EINTR ? "EINTR" : strerror(e)) : "-", took < 2.0, h1, h2,
           usr2_blocked_in_handler, sigismember(&cur, SIGUSR1), sigismember(&cur, SIGUSR2), sigismember(&pend, SIGUSR2));
}

static void *waiter_main(void *a) {
    (void)a;
    int (*fib)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    is_fiber = fib ? fib() : 0;
    sigset_t both, none, only2;
    sigemptyset(&both); sigaddset(&both, SIGUSR1); sigaddset(&both, SIGUSR2);
    sigemptyset(&none);
    sigemptyset(&only2); sigaddset(&only2, SIGUSR2);
    CHECK(pthread_sigmask(SIG_SETMASK, &both, 0) == 0);
    for (int k = PPOLL1; k <= EPOLL; k++) {
        cur_kind = k;
        char c;

        /* unblocked: the call's mask lets SIGUSR1 through. */
        handled1 = handled2 = 0; usr2_blocked_in_handler = -1;
        __atomic_store_n(&in_call, 1, __ATOMIC_RELEASE);
        double t0 = now();
        int r = wait_once(k, &none, 5000);
        int e = errno, h1 = handled1, h2 = handled2;
        report("unblocked", r, e, now() - t0, h1, h2);
        while (__atomic_load_n(&in_call, __ATOMIC_ACQUIRE)) usleep(1000);

        /* blocked: the call's mask blocks SIGUSR2, which stays pending. */
        handled1 = handled2 = 0; usr2_blocked_in_handler = -1;
        __atomic_store_n(&in_call, 2, __ATOMIC_RELEASE);
        t0 = now();
        r = wait_once(k, &only2, 400);
        e = errno; h1 = handled1; h2 = handled2;
        report("blocked", r, e, now() - t0, h1, h2);
        while (__atomic_load_n(&in_call, __ATOMIC_ACQUIRE)) usleep(1000);
        CHECK(pthread_sigmask(SIG_UNBLOCK, &only2, 0) == 0);
        printf("%s blocked: handled2 after unblocking=%d\n", kind_name[k], handled2);
        CHECK(pthread_sigmask(SIG_SETMASK, &both, 0) == 0);

        /* pending: SIGUSR1 came before the call. */
        handled1 = handled2 = 0; usr2_blocked_in_handler = -1;
        CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0);
        t0 = now();
        r = wait_once(k, &none, 5000);
        e = errno; h1 = handled1; h2 = handled2;
        report("pending", r, e, now() - t0, h1, h2);

        /* ready: data ends the wait. */
        __atomic_store_n(&in_call, 3, __ATOMIC_RELEASE);
        t0 = now();
        r = wait_once(k, &none, 5000);
        e = errno;
        report("ready", r, e, now() - t0, handled1, handled2);
        CHECK(read(pipe_a[0], &c, 1) == 1);
        while (__atomic_load_n(&in_call, __ATOMIC_ACQUIRE)) usleep(1000);
    }
    return 0;
}

int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sig;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: these calls are never restarted anyway */
    CHECK(sigaction(SIGUSR1, &sa, 0) == 0);
    CHECK(sigaction(SIGUSR2, &sa, 0) == 0);
    CHECK(pipe(pipe_a) == 0 && pipe(pipe_b) == 0);
    ep = epoll_create1(0);
    CHECK(ep >= 0);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = pipe_a[0] };
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pipe_a[0], &ev) == 0);
    CHECK(pthread_create(&waiter, 0, waiter_main, 0) == 0);
    for (int i = 0; i < 4 * 3; i++) {
        int phase;
        while ((phase = __atomic_load_n(&in_call, __ATOMIC_ACQUIRE)) == 0) usleep(1000);
        usleep(100000); /* the waiter is in its call by now (if not, the signal waits for it) */
        if (phase == 1) CHECK(pthread_kill(waiter, SIGUSR1) == 0);
        else if (phase == 2) CHECK(pthread_kill(waiter, SIGUSR2) == 0);
        else CHECK(write(pipe_a[1], "x", 1) == 1);
        if (phase != 3) usleep(500000); /* past the "blocked" wait's timeout */
        __atomic_store_n(&in_call, 0, __ATOMIC_RELEASE);
    }
    CHECK(pthread_join(waiter, 0) == 0);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d fiber=%d\n", active ? active() : 0, is_fiber);
    return 0;
}
