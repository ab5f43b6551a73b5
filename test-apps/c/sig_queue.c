/* Queued signals to one thread keep their siginfo: pthread_sigqueue and
 * rt_tgsigqueueinfo (through syscall()) to a thread, taken by sigtimedwait with the
 * signal blocked and by an SA_SIGINFO handler that runs in that thread (si_code
 * SI_QUEUE, si_value, si_pid; two queued instances of a real-time signal arrive twice,
 * in order; one queued to itself runs its handler before the call returns), and a POSIX timer aimed at the thread's own gettid() (SIGEV_THREAD_ID)
 * firing every 10 ms into the thread (si_code SI_TIMER, si_value, si_timerid), taken
 * by a handler and by sigtimedwait. Under the preload a thread is a fiber, and its
 * gettid() names its sleeping donor, which blocks every signal. With the argument
 * `demoted`: a pthread_sigqueue and a thread timer (made while a fiber) to a thread that
 * the preload demoted to a plain thread (a raw sleep blocks its worker; natively the
 * thread skips it). Every wait is bounded; alarm() ends a hung run. Deterministic
 * stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static int (*is_fiber)(void);
static volatile int fiber_seen; /* a thread ran as a fiber (preloaded) */

static void note_fiber(void) {
    if (is_fiber && is_fiber()) fiber_seen = 1;
}

static pid_t tid_of(void) { return (pid_t)syscall(SYS_gettid); }

static void unblock(int sig) {
    sigset_t s; sigemptyset(&s); sigaddset(&s, sig);
    CHECK(pthread_sigmask(SIG_UNBLOCK, &s, 0) == 0);
}

/* ---- sigtimedwait with the signal blocked ---------------------------------------- */

static volatile pid_t waiter_tid;
static volatile int waiter_ready;

static const char *code_name(int code) {
    switch (code) {
    case SI_QUEUE: return "SI_QUEUE";
    case SI_TIMER: return "SI_TIMER";
    case SI_TKILL: return "SI_TKILL";
    case SI_USER: return "SI_USER";
    default: return "other";
    }
}

/* Waits (at most 3 s) for one instance of `sig` and prints what it carried. */
static void wait_one(const char *what, int sig) {
    sigset_t s; sigemptyset(&s); sigaddset(&s, sig);
    struct timespec limit = {3, 0};
    siginfo_t info; memset(&info, 0, sizeof info);
    int r = sigtimedwait(&s, &info, &limit);
    if (r < 0) {
        printf("%s: no signal (errno %s)\n", what, errno == EAGAIN ? "EAGAIN" : "other");
        return;
    }
    printf("%s: sig_ok=%d code=%s value=%d pid_ok=%d\n", what, r == sig, code_name(info.si_code),
           info.si_value.sival_int, info.si_pid == getpid());
}

static void *waiter(void *a) {
    (void)a;
    note_fiber();
    sigset_t s; sigemptyset(&s); sigaddset(&s, SIGRTMIN);
    CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
    waiter_tid = tid_of();
    waiter_ready = 1;
    while (waiter_ready != 2) usleep(1000);
    wait_one("sigwait pthread_sigqueue", SIGRTMIN);
    wait_one("sigwait rt_tgsigqueueinfo", SIGRTMIN);
    waiter_ready = 3;
    while (waiter_ready != 4) usleep(1000);
    wait_one("sigwait queued first", SIGRTMIN);
    wait_one("sigwait queued second", SIGRTMIN);
    return 0;
}

static int tgsigqueue(pid_t tid, int sig, int value) {
    siginfo_t info; memset(&info, 0, sizeof info);
    info.si_signo = sig;
    info.si_code = SI_QUEUE;
    info.si_pid = getpid();
    info.si_uid = getuid();
    info.si_value.sival_int = value;
    return (int)syscall(SYS_rt_tgsigqueueinfo, getpid(), tid, sig, &info);
}

/* ---- an SA_SIGINFO handler in the thread ----------------------------------------- */

static __thread int in_target; /* set by the target thread only */
static volatile int handled, handled_in_target, last_code, last_value, last_pid_ok;

static void on_queued(int sig, siginfo_t *info, void *uc) {
    (void)sig; (void)uc;
    last_code = info->si_code;
    last_value = info->si_value.sival_int;
    last_pid_ok = info->si_pid == getpid();
    handled_in_target += in_target;
    handled++;
}

static volatile int catcher_ready;
static volatile pid_t catcher_tid;

static void *catcher(void *a) {
    (void)a;
    note_fiber();
    in_target = 1;
    unblock(SIGRTMIN + 1); /* main blocks it */
    catcher_tid = tid_of();
    catcher_ready = 1;
    for (int i = 0; i < 3000 && catcher_ready != 2; i++) usleep(1000);
    /* To itself, not blocked: the handler runs before pthread_sigqueue returns. */
    int before = handled;
    union sigval v = {.sival_int = 53};
    CHECK(pthread_sigqueue(pthread_self(), SIGRTMIN + 1, v) == 0);
    printf("handler to itself: ran_before_return=%d code=%s value=%d\n", handled == before + 1, code_name(last_code),
           last_value);
    return 0;
}

/* Waits (at most 2 s) for the handler count to reach `n`. */
static int wait_handled(int n) {
    for (int i = 0; i < 2000 && handled < n; i++) usleep(1000);
    return handled >= n;
}

/* ---- a timer aimed at the thread itself ------------------------------------------ */

static __thread int timer_thread;
static volatile int ticks, ticks_in_thread, tick_code_ok, tick_value_ok, tick_id_ok;
static volatile int my_timer_id;

static void on_tick(int sig, siginfo_t *info, void *uc) {
    (void)sig; (void)uc;
    ticks++;
    ticks_in_thread += timer_thread;
    tick_code_ok += info->si_code == SI_TIMER;
    tick_value_ok += info->si_value.sival_int == 61;
    tick_id_ok += info->si_timerid == my_timer_id;
}

static timer_t timer_at_self(int sig, int value, int ms) {
    struct sigevent sev; memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev.sigev_value.sival_int = value;
    sev._sigev_un._tid = tid_of();
    timer_t t;
    CHECK(timer_create(CLOCK_MONOTONIC, &sev, &t) == 0);
    struct itimerspec its = {{0, ms * 1000000L}, {0, ms * 1000000L}};
    CHECK(timer_settime(t, 0, &its, 0) == 0);
    return t;
}

static void *ticker(void *a) {
    (void)a;
    note_fiber();
    timer_thread = 1;
    unblock(SIGRTMIN + 2); /* main blocks it */
    timer_t t = timer_at_self(SIGRTMIN + 2, 61, 10);
    my_timer_id = (int)(intptr_t)t;
    /* A few ticks, at most 3 s. */
    for (int i = 0; i < 3000 && ticks < 5; i++) usleep(1000);
    CHECK(timer_delete(t) == 0);
    printf("timer handler: ticks>=5 %d in_thread=%d si_code_ok=%d si_value_ok=%d si_timerid_ok=%d\n", ticks >= 5,
           ticks_in_thread == ticks, tick_code_ok == ticks, tick_value_ok == ticks, tick_id_ok == ticks);

    /* The same with the signal blocked, taken by sigtimedwait. */
    sigset_t s; sigemptyset(&s); sigaddset(&s, SIGRTMIN + 3);
    CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
    t = timer_at_self(SIGRTMIN + 3, 62, 10);
    int got = 0, code_ok = 0, value_ok = 0, id_ok = 0;
    for (int i = 0; i < 3; i++) {
        struct timespec limit = {3, 0};
        siginfo_t info; memset(&info, 0, sizeof info);
        if (sigtimedwait(&s, &info, &limit) != SIGRTMIN + 3) break;
        got++;
        code_ok += info.si_code == SI_TIMER;
        value_ok += info.si_value.sival_int == 62;
        id_ok += info.si_timerid == (int)(intptr_t)t;
    }
    CHECK(timer_delete(t) == 0);
    printf("timer sigwait: got=%d si_code_ok=%d si_value_ok=%d si_timerid_ok=%d\n", got, code_ok == got, value_ok == got,
           id_ok == got);
    return 0;
}

/* ---- a thread that the preload demoted to a plain thread ---------------------------- */

static int ready_fds[2];
static volatile int demoted = -1, plain_ready;

/* Under the preload: block the worker in a raw sleep (not intercepted) until the
 * monitor hands the fiber to its donor for good (at most 5 sleeps of 1.5 s). */
static void get_demoted(void) {
    if (!is_fiber || !is_fiber()) return;
    char c;
    for (int i = 0; i < 5 && is_fiber(); i++) {
        struct timespec ts = {1, 500000000};
        while (syscall(SYS_nanosleep, &ts, &ts) != 0 && errno == EINTR) {}
        CHECK(write(ready_fds[1], "r", 1) == 1);
        CHECK(read(ready_fds[0], &c, 1) == 1); /* an intercepted call: the demotion happens here */
    }
    demoted = !is_fiber();
}

static void *plain(void *a) {
    (void)a;
    note_fiber();
    timer_thread = 1;
    in_target = 1;
    unblock(SIGRTMIN + 1);
    unblock(SIGRTMIN + 2);
    /* A timer made while a fiber, firing on after the demotion. */
    timer_t t = timer_at_self(SIGRTMIN + 2, 61, 10);
    my_timer_id = (int)(intptr_t)t;
    get_demoted();
    int from = ticks;
    for (int i = 0; i < 3000 && ticks < from + 5; i++) usleep(1000);
    CHECK(timer_delete(t) == 0);
    printf("demoted timer: ticks>=5 %d in_thread=%d si_code_ok=%d si_value_ok=%d\n", ticks >= from + 5,
           ticks_in_thread == ticks, tick_code_ok == ticks, tick_value_ok == ticks);
    plain_ready = 1;
    for (int i = 0; i < 3000 && plain_ready != 2; i++) usleep(1000);
    return 0;
}

/* `sig_queue demoted`: the same signals to a thread that runs as a plain thread. */
static void demoted_case(void) {
    CHECK(pipe(ready_fds) == 0);
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_flags = SA_SIGINFO; sigemptyset(&sa.sa_mask);
    sa.sa_sigaction = on_queued;
    CHECK(sigaction(SIGRTMIN + 1, &sa, 0) == 0);
    sa.sa_sigaction = on_tick;
    CHECK(sigaction(SIGRTMIN + 2, &sa, 0) == 0);
    sigset_t s; sigemptyset(&s); sigaddset(&s, SIGRTMIN + 1); sigaddset(&s, SIGRTMIN + 2);
    CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
    pthread_t t;
    CHECK(pthread_create(&t, 0, plain, 0) == 0);
    for (int i = 0; i < 12000 && !plain_ready; i++) usleep(1000);
    union sigval v = {.sival_int = 71};
    CHECK(pthread_sigqueue(t, SIGRTMIN + 1, v) == 0);
    int ok = wait_handled(1);
    printf("demoted pthread_sigqueue: ran=%d in_thread=%d code=%s value=%d pid_ok=%d\n", ok, handled_in_target == handled,
           code_name(last_code), last_value, last_pid_ok);
    plain_ready = 2;
    pthread_join(t, 0);
    fprintf(stderr, "demoted=%d\n", demoted);
}

int main(int argc, char **argv) {
    alarm(20);
    is_fiber = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    if (argc > 1 && strcmp(argv[1], "demoted") == 0) {
        demoted_case();
        fprintf(stderr, "preloaded=%d\n", fiber_seen);
        return 0;
    }
    pthread_t t;

    CHECK(pthread_create(&t, 0, waiter, 0) == 0);
    while (!waiter_ready) usleep(1000);
    union sigval v = {.sival_int = 41};
    CHECK(pthread_sigqueue(t, SIGRTMIN, v) == 0);
    CHECK(tgsigqueue(waiter_tid, SIGRTMIN, 42) == 0);
    waiter_ready = 2;
    while (waiter_ready != 3) usleep(1000);
    /* Two instances queued while the thread does not wait: both arrive, in order. */
    v.sival_int = 43;
    CHECK(pthread_sigqueue(t, SIGRTMIN, v) == 0);
    CHECK(tgsigqueue(waiter_tid, SIGRTMIN, 44) == 0);
    waiter_ready = 4;
    pthread_join(t, 0);

    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_queued; sa.sa_flags = SA_SIGINFO; sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGRTMIN + 1, &sa, 0) == 0);
    /* Only the target thread may take it: main blocks it. */
    sigset_t s; sigemptyset(&s); sigaddset(&s, SIGRTMIN + 1);
    CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
    CHECK(pthread_create(&t, 0, catcher, 0) == 0);
    while (!catcher_ready) usleep(1000);
    v.sival_int = 51;
    CHECK(pthread_sigqueue(t, SIGRTMIN + 1, v) == 0);
    int ok = wait_handled(1);
    printf("handler pthread_sigqueue: ran=%d in_thread=%d code=%s value=%d pid_ok=%d\n", ok, handled_in_target == handled,
           code_name(last_code), last_value, last_pid_ok);
    CHECK(tgsigqueue(catcher_tid, SIGRTMIN + 1, 52) == 0);
    ok = wait_handled(2);
    printf("handler rt_tgsigqueueinfo: ran=%d in_thread=%d code=%s value=%d pid_ok=%d\n", ok, handled_in_target == handled,
           code_name(last_code), last_value, last_pid_ok);
    catcher_ready = 2;
    pthread_join(t, 0);

    /* `sig_queue notimers`: without the thread timers (qemu-user does not deliver a
     * SIGEV_THREAD_ID timer's expiries, natively either). */
    if (!(argc > 1 && strcmp(argv[1], "notimers") == 0)) {
        sa.sa_sigaction = on_tick;
        CHECK(sigaction(SIGRTMIN + 2, &sa, 0) == 0);
        sigemptyset(&s); sigaddset(&s, SIGRTMIN + 2);
        CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
        CHECK(pthread_create(&t, 0, ticker, 0) == 0);
        pthread_join(t, 0);
    }

    fprintf(stderr, "preloaded=%d\n", fiber_seen);
    return 0;
}
