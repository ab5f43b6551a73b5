/* Program signal handlers under the preload.
 *
 * 1. sigaction/signal/sysv_signal report the program's own handler, flags and mask;
 *    SA_RESETHAND is one-shot; sigqueue's value and si_code reach an SA_SIGINFO
 *    handler; SIG_IGN and SIG_DFL round-trip.
 * 2. Stress (the shape of LTP pthread_cond_signal/4-2): handlers that call sem_post
 *    interrupt threads that hammer pthread_cond_signal, a mutex and sched_yield,
 *    i.e. the runtime's run queues and parking lot. Every signal must run its handler
 *    exactly once and nothing may be lost or hang. (One signaller never yields, as
 *    in the LTP test; two would occupy both workers of a 2-CPU pool for good, since
 *    fibers are not preempted.)
 *
 * usage: sig_handlers ROUNDS blocked|open
 *   blocked: main blocks SIGUSR1/2 before creating threads (workers inherit that);
 *   open:    nothing blocks them, so handlers also land on idle workers.
 * Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

/* ---- part 1: the program's view of its actions ---- */

static volatile sig_atomic_t plain_calls, info_calls, info_value, info_code_ok;
static void plain_handler(int sig) { (void)sig; plain_calls++; }
static void info_handler(int sig, siginfo_t *si, void *uc) {
    (void)sig; (void)uc;
    info_calls++;
    info_value = si->si_value.sival_int;
    info_code_ok = si->si_code == SI_QUEUE && si->si_pid == getpid();
}

static void check_views(void) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = info_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGRTMIN + 3, &sa, NULL) == 0);
    CHECK(sigaction(SIGRTMIN + 3, NULL, &old) == 0);
    CHECK(old.sa_sigaction == info_handler);
    CHECK((old.sa_flags & (SA_SIGINFO | SA_RESTART | SA_RESETHAND | SA_NODEFER)) == (SA_SIGINFO | SA_RESTART));
    CHECK(sigismember(&old.sa_mask, SIGUSR2) == 1 && sigismember(&old.sa_mask, SIGUSR1) == 0);
    union sigval v = {.sival_int = 4242};
    CHECK(sigqueue(getpid(), SIGRTMIN + 3, v) == 0);
    CHECK(info_calls == 1 && info_value == 4242 && info_code_ok);
    printf("sigaction view and sigqueue value: ok\n");

    /* The inherited disposition is not ours to assume (nohup starts us with SIGHUP
     * ignored): set SIG_DFL first, then check the round trips from there. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    CHECK(sigaction(SIGHUP, &dfl, NULL) == 0);
    CHECK(signal(SIGHUP, plain_handler) == SIG_DFL);
    CHECK(signal(SIGHUP, SIG_IGN) == plain_handler);
    CHECK(signal(SIGHUP, plain_handler) == SIG_IGN);
    CHECK(sigaction(SIGHUP, NULL, &old) == 0);
    CHECK(old.sa_handler == plain_handler && (old.sa_flags & SA_RESTART) && sigismember(&old.sa_mask, SIGHUP) == 1);
    CHECK(raise(SIGHUP) == 0 && plain_calls == 1);
    CHECK(signal(SIGHUP, SIG_DFL) == plain_handler);
    CHECK(signal(0, plain_handler) == SIG_ERR && errno == EINVAL);
    CHECK(sigaction(SIGKILL, &sa, NULL) == -1 && errno == EINVAL);
    printf("signal() round trips: ok\n");

    /* one-shot: the first delivery resets the action to SIG_DFL */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = plain_handler;
    sa.sa_flags = SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGWINCH, &sa, NULL) == 0);
    CHECK(raise(SIGWINCH) == 0 && plain_calls == 2);
    CHECK(sigaction(SIGWINCH, NULL, &old) == 0 && old.sa_handler == SIG_DFL);
    CHECK(raise(SIGWINCH) == 0 && plain_calls == 2); /* default action of SIGWINCH: ignore */
    CHECK(sysv_signal(SIGWINCH, plain_handler) == SIG_DFL);
    CHECK(raise(SIGWINCH) == 0 && plain_calls == 3);
    CHECK(signal(SIGWINCH, SIG_DFL) == SIG_DFL);
    printf("one-shot handlers: ok\n");
}

/* ---- part 2: handlers against the runtime's hot paths ---- */

static sem_t go[2];
static volatile int handled[2];
static volatile int stop;
static int rounds;
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cnd = PTHREAD_COND_INITIALIZER;
static sigset_t usersigs;

static void on_usr(int sig) {
    int i = sig == SIGUSR1 ? 0 : 1;
    handled[i]++;
    CHECK(sem_post(&go[i]) == 0);
}

static void *sender(void *arg) {
    int i = (int)(long)arg;
    CHECK(pthread_sigmask(SIG_BLOCK, &usersigs, NULL) == 0);
    for (int n = 0; n < rounds; n++) {
        while (sem_wait(&go[i]) != 0) CHECK(errno == EINTR);
        CHECK(kill(getpid(), i == 0 ? SIGUSR1 : SIGUSR2) == 0);
    }
    while (sem_wait(&go[i]) != 0) CHECK(errno == EINTR); /* the last handler ran */
    return NULL;
}

static void *waiter(void *arg) {
    (void)arg;
    CHECK(pthread_sigmask(SIG_BLOCK, &usersigs, NULL) == 0);
    CHECK(pthread_mutex_lock(&mtx) == 0);
    while (!stop) CHECK(pthread_cond_wait(&cnd, &mtx) == 0);
    CHECK(pthread_mutex_unlock(&mtx) == 0);
    return NULL;
}

static void *signaller(void *arg) {
    (void)arg;
    CHECK(pthread_sigmask(SIG_UNBLOCK, &usersigs, NULL) == 0);
    while (!stop) CHECK(pthread_cond_signal(&cnd) == 0);
    return NULL;
}

static void *locker(void *arg) {
    (void)arg;
    CHECK(pthread_sigmask(SIG_UNBLOCK, &usersigs, NULL) == 0);
    while (!stop) {
        CHECK(pthread_mutex_lock(&mtx) == 0);
        CHECK(pthread_cond_signal(&cnd) == 0);
        CHECK(pthread_mutex_unlock(&mtx) == 0);
        sched_yield();
    }
    return NULL;
}

int main(int argc, char **argv) {
    CHECK(argc == 3);
    rounds = atoi(argv[1]);
    int blocked = strcmp(argv[2], "blocked") == 0;
    check_views();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    CHECK(sigaction(SIGUSR2, &sa, NULL) == 0);
    sigemptyset(&usersigs);
    sigaddset(&usersigs, SIGUSR1);
    sigaddset(&usersigs, SIGUSR2);
    if (blocked) CHECK(pthread_sigmask(SIG_BLOCK, &usersigs, NULL) == 0);
    CHECK(sem_init(&go[0], 0, 1) == 0 && sem_init(&go[1], 0, 1) == 0);

    pthread_t w[2], s, l[2], snd[2];
    CHECK(pthread_create(&s, NULL, signaller, NULL) == 0);
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_create(&w[i], NULL, waiter, NULL) == 0);
        CHECK(pthread_create(&l[i], NULL, locker, NULL) == 0);
    }
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&snd[i], NULL, sender, (void *)(long)i) == 0);
    for (int i = 0; i < 2; i++) CHECK(pthread_join(snd[i], NULL) == 0);
    CHECK(pthread_mutex_lock(&mtx) == 0);
    stop = 1;
    CHECK(pthread_cond_broadcast(&cnd) == 0);
    CHECK(pthread_mutex_unlock(&mtx) == 0);
    for (int i = 0; i < 2; i++) {
        CHECK(pthread_join(w[i], NULL) == 0);
        CHECK(pthread_join(l[i], NULL) == 0);
    }
    CHECK(pthread_join(s, NULL) == 0);
    printf("handlers ran %d and %d times for %d signals each\n", handled[0], handled[1], rounds);
    CHECK(handled[0] == rounds && handled[1] == rounds);

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
