/* A blocking call of a thread that the preload demoted to a plain thread (its fiber
 * blocked its worker for over a second and was handed to its donor for good) is
 * interrupted by pthread_kill as natively. Under the preload the thread first blocks
 * its worker in a raw nanosleep system call, which the library does not intercept,
 * until the monitor marks its fiber for demotion (at most DEMOTE_TRIES sleeps), then
 * makes an intercepted call (a read of a byte ready in a pipe) that demotes it, and
 * reports whether it is still a fiber. Natively the thread skips the sleeps. Then:
 *   - accept without SA_RESTART, signalled every 2 ms (at most MAX_SIGNALS): EINTR;
 *   - read of an empty pipe with an SA_RESTART handler, signalled 5 times: still
 *     blocked (restarted), then it returns the byte the main thread writes;
 *   - a signal the thread blocks with pthread_sigmask while it is signalled stays
 *     pending (sigpending shows it) until it unblocks it, then its handler runs;
 *   - pthread_cancel while it blocks in accept ends it (cleanup handler run, join
 *     returns PTHREAD_CANCELED).
 * (Before the fix the demoted thread ran on its donor with every signal blocked and
 * pthread_kill only held the signal in the fiber: accept was never interrupted, and
 * pthread_cancel only recorded the request in the fiber: the thread never ended.)
 * Deterministic stdout; stderr says whether the demotion happened. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
#define MAX_SIGNALS 1000 /* 2 s of signals at most */
#define DEMOTE_TRIES 5   /* raw sleeps of 1.5 s at most before giving up on the demotion */

static volatile int handled;
static void on_usr1(int sig) { (void)sig; handled++; }

static int listener, pipe_fds[2], ready_fds[2];
static volatile int phase; /* set by the thread: 1 blocked in accept, 2 in read, 3 masked */
static long accept_result, read_result;
static volatile int cleanup_ran;
static int accept_err, pending_seen, handled_while_masked, handled_after_unmask, demoted = -1;

static void set_handler(int restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = restart ? SA_RESTART : 0;
    CHECK(sigaction(SIGUSR1, &sa, 0) == 0);
}

/* Under the preload: block the worker until the fiber is demoted. */
static void get_demoted(void) {
    int (*is_fiber)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    if (!is_fiber || !is_fiber()) return;
    char c;
    for (int i = 0; i < DEMOTE_TRIES && is_fiber(); i++) {
        struct timespec ts = { 1, 500000000 };
        while (syscall(SYS_nanosleep, &ts, &ts) != 0 && errno == EINTR) {}
        CHECK(write(ready_fds[1], "r", 1) == 1);
        CHECK(read(ready_fds[0], &c, 1) == 1); /* an intercepted call: the demotion happens here */
    }
    demoted = !is_fiber();
}

static void on_cleanup(void *a) { (void)a; cleanup_ran = 1; }

static void *blocked(void *a) {
    (void)a;
    get_demoted();
    __atomic_store_n(&phase, 1, __ATOMIC_RELEASE);
    accept_result = accept(listener, 0, 0);
    accept_err = accept_result < 0 ? errno : 0;
    if (accept_result >= 0) close((int)accept_result);
    set_handler(1);
    int before = handled;
    __atomic_store_n(&phase, 2, __ATOMIC_RELEASE);
    char c;
    read_result = read(pipe_fds[0], &c, 1);
    int handled_in_read = handled - before;
    /* Masked: the main thread signals once and waits for phase 4. */
    sigset_t usr1, pend;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    CHECK(pthread_sigmask(SIG_BLOCK, &usr1, 0) == 0);
    before = handled;
    __atomic_store_n(&phase, 3, __ATOMIC_RELEASE);
    while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != 4) usleep(1000);
    CHECK(sigpending(&pend) == 0);
    pending_seen = sigismember(&pend, SIGUSR1);
    handled_while_masked = handled - before;
    CHECK(pthread_sigmask(SIG_UNBLOCK, &usr1, 0) == 0);
    handled_after_unmask = handled - before;
    if (handled_in_read == 0) handled_after_unmask = -1;
    /* Cancelled in accept (a cancellation point). */
    pthread_cleanup_push(on_cleanup, 0);
    __atomic_store_n(&phase, 5, __ATOMIC_RELEASE);
    long r = accept(listener, 0, 0);
    if (r >= 0) close((int)r);
    pthread_cleanup_pop(0);
    return 0;
}

static void wait_phase(int p) {
    while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != p) usleep(100);
    usleep(20000); /* let it reach the blocking call */
}

int main(void) {
    setvbuf(stdout, 0, _IOLBF, 0);
    alarm(60); /* a wait that never ends fails the test instead of hanging it */
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof sa;
    listener = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(listener >= 0 && bind(listener, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(listener, 4) == 0);
    CHECK(getsockname(listener, (struct sockaddr *)&sa, &len) == 0);
    CHECK(pipe(pipe_fds) == 0 && pipe(ready_fds) == 0);
    set_handler(0);
    pthread_t t;
    CHECK(pthread_create(&t, 0, blocked, 0) == 0);

    wait_phase(1);
    int signals = 0;
    while (signals < MAX_SIGNALS && __atomic_load_n(&phase, __ATOMIC_ACQUIRE) == 1) {
        CHECK(pthread_kill(t, SIGUSR1) == 0);
        signals++;
        usleep(2000);
    }
    int interrupted = __atomic_load_n(&phase, __ATOMIC_ACQUIRE) != 1;
    if (!interrupted) { /* release it: a connection to accept */
        int c = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0);
        wait_phase(2);
        close(c);
    }
    wait_phase(2);
    for (int i = 0; i < 5; i++) {
        CHECK(pthread_kill(t, SIGUSR1) == 0);
        usleep(2000);
    }
    usleep(20000);
    int restarted = __atomic_load_n(&phase, __ATOMIC_ACQUIRE) == 2;
    CHECK(write(pipe_fds[1], "y", 1) == 1);
    wait_phase(3);
    CHECK(pthread_kill(t, SIGUSR1) == 0);
    usleep(20000);
    __atomic_store_n(&phase, 4, __ATOMIC_RELEASE);
    wait_phase(5);
    CHECK(pthread_cancel(t) == 0);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    void *ret = 0;
    int joined = pthread_timedjoin_np(t, &ret, &deadline);
    if (joined != 0) { /* not cancelled: release it (a connection to accept), then join */
        int c = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(connect(c, (struct sockaddr *)&sa, sizeof sa) == 0);
        CHECK(pthread_join(t, &ret) == 0);
        close(c);
    }

    printf("accept sa_restart=0: interrupted %d result %ld errno %s\n", interrupted, accept_result,
           accept_err == EINTR ? "EINTR" : accept_err ? "other" : "none");
    printf("read sa_restart=1: blocked after 5 signals %d result %ld\n", restarted, read_result);
    printf("masked: pending %d handled while masked %d, after unmask %d\n", pending_seen, handled_while_masked,
           handled_after_unmask);
    printf("cancel in accept: ended %d cancelled %d cleanup %d\n", joined == 0, ret == PTHREAD_CANCELED, cleanup_ran);
    fprintf(stderr, "demoted=%d\n", demoted);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
