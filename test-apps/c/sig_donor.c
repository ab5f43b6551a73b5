/* Signals reach a thread that waits in a call the library runs on the fiber's donor
 * (waitpid, sigtimedwait), as natively: the kernel may pick that thread for a signal
 * of the process, and pthread_kill names it. The main thread blocks SIGUSR1/SIGUSR2;
 * thread W unblocks SIGUSR1 and waits:
 *   A: in waitpid (SA_RESTART handler) while thread S sleeps in a usleep loop with
 *      SIGUSR1 unblocked too; kill(getpid(), SIGUSR1): the handler runs at once (on W
 *      or S), and waitpid goes on;
 *   B: in waitpid, S blocking SIGUSR1 (no other thread takes it); kill(getpid()):
 *      the handler runs on W and waitpid returns -1/EINTR (no SA_RESTART);
 *   C: in sigtimedwait({SIGUSR2}, 3 s); kill(getpid(), SIGUSR1): the handler runs on W
 *      and sigtimedwait returns -1/EINTR;
 *   D: in waitpid; pthread_kill(W, SIGUSR1): the handler runs on W, waitpid -1/EINTR.
 * Mode "early": the main thread blocks the signals before it creates any thread (the
 * pool's workers block them too); "late": after a first thread (the workers let them
 * through in their own context). A call that is not interrupted within 3 s ends by
 * itself (the child exits when the main thread writes to its pipe; sigtimedwait times
 * out), so a failure shows in the output instead of a hang. Deterministic stdout.
 * (Before the fix, under the preload a process signal was held for W in its waitpid and
 * ran only when the call returned; sigtimedwait ignored a signal outside its set.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

enum { CASES = 4 };
static pthread_t w_thread;
static volatile sig_atomic_t handled, handled_on_w;
static int child_pipe[CASES][2];
static pid_t child[CASES];
static int is_fiber = -1;
static volatile int phase = -1, ready = -1, finished = -1, sleeper_blocks, stop_sleeper;
static int result[CASES], result_errno[CASES];

static void on_sig(int sig) {
    (void)sig;
    handled++;
    if (pthread_equal(pthread_self(), w_thread)) handled_on_w++;
}

static void set_handler(int restart) {
    struct sigaction sa = { .sa_handler = on_sig, .sa_flags = restart ? SA_RESTART : 0 };
    CHECK(sigaction(SIGUSR1, &sa, 0) == 0);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void unblock_usr1(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    CHECK(pthread_sigmask(SIG_UNBLOCK, &s, 0) == 0);
}

static void *w_main(void *a) {
    (void)a;
    int (*fib)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    is_fiber = fib ? fib() : 0;
    unblock_usr1();
    for (int c = 0; c < CASES; c++) {
        while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != c) usleep(1000);
        __atomic_store_n(&ready, c, __ATOMIC_RELEASE);
        if (c == 2) {
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, SIGUSR2);
            struct timespec limit = { 3, 0 };
            result[c] = sigtimedwait(&set, 0, &limit);
        } else {
            int status;
            result[c] = waitpid(child[c], &status, 0);
        }
        result_errno[c] = result[c] < 0 ? errno : 0;
        if (result[c] < 0 && c != 2) {
            int status;
            CHECK(write(child_pipe[c][1], "x", 1) == 1); /* let the child go, then reap it */
            CHECK(waitpid(child[c], &status, 0) == child[c]);
        }
        __atomic_store_n(&finished, c, __ATOMIC_RELEASE);
    }
    return 0;
}

static void *s_main(void *a) {
    (void)a;
    unblock_usr1();
    int blocked = 0;
    while (!__atomic_load_n(&stop_sleeper, __ATOMIC_ACQUIRE)) {
        int want = __atomic_load_n(&sleeper_blocks, __ATOMIC_ACQUIRE);
        if (!(want & 2)) {
            if (want != blocked) {
                sigset_t s;
                sigemptyset(&s);
                sigaddset(&s, SIGUSR1);
                CHECK(pthread_sigmask(want ? SIG_BLOCK : SIG_UNBLOCK, &s, 0) == 0);
                blocked = want;
            }
            __atomic_store_n(&sleeper_blocks, want | 2, __ATOMIC_RELEASE); /* acknowledged */
        }
        usleep(1000);
    }
    return 0;
}

static void *nothing(void *a) { return a; }

static void block_signals(void) {
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigaddset(&s, SIGUSR2);
    CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
}

int main(int argc, char **argv) {
    int early = argc > 1 && strcmp(argv[1], "early") == 0;
    signal(SIGPIPE, SIG_IGN); /* a child that already went: its pipe says EPIPE */
    for (int c = 0; c < CASES; c++) {
        CHECK(pipe(child_pipe[c]) == 0);
        child[c] = fork();
        CHECK(child[c] >= 0);
        if (child[c] == 0) {
            char b;
            close(child_pipe[c][1]);
            (void)!read(child_pipe[c][0], &b, 1);
            _exit(0);
        }
        close(child_pipe[c][0]);
    }
    if (early) {
        block_signals();
    } else {
        pthread_t t;
        CHECK(pthread_create(&t, 0, nothing, 0) == 0);
        CHECK(pthread_join(t, 0) == 0);
        block_signals();
    }
    pthread_t s;
    CHECK(pthread_create(&w_thread, 0, w_main, 0) == 0);
    CHECK(pthread_create(&s, 0, s_main, 0) == 0);
    static const char *const names[CASES] = { "A waitpid+sleeper", "B waitpid", "C sigtimedwait", "D pthread_kill" };
    for (int c = 0; c < CASES; c++) {
        int s_blocks = c != 0;
        __atomic_store_n(&sleeper_blocks, s_blocks, __ATOMIC_RELEASE);
        while (__atomic_load_n(&sleeper_blocks, __ATOMIC_ACQUIRE) != (s_blocks | 2)) usleep(1000);
        set_handler(c == 0);
        handled = handled_on_w = 0;
        __atomic_store_n(&phase, c, __ATOMIC_RELEASE);
        while (__atomic_load_n(&ready, __ATOMIC_ACQUIRE) != c) usleep(1000);
        usleep(200 * 1000); /* W is in its call by now */
        double sent = now();
        if (c == 3) CHECK(pthread_kill(w_thread, SIGUSR1) == 0);
        else CHECK(kill(getpid(), SIGUSR1) == 0);
        while (!handled && now() - sent < 3) usleep(1000);
        int fast = handled && now() - sent < 1.5;
        if (c != 2) {
            usleep(100 * 1000);
            /* A: the wait goes on (SA_RESTART); the others ended it already, or the
             * rescue ends it now. */
            CHECK(write(child_pipe[c][1], "x", 1) == 1 || errno == EPIPE);
        }
        while (__atomic_load_n(&finished, __ATOMIC_ACQUIRE) != c) usleep(1000);
        int r = result[c];
        printf("%s: handled=%d fast=%d on_w=%d call=%s errno=%s\n", names[c], (int)handled, fast,
               c == 0 ? -1 : (int)handled_on_w, r < 0 ? "-1" : (c == 2 ? "signal" : "child"),
               result_errno[c] ? strerror(result_errno[c]) : "0");
    }
    __atomic_store_n(&phase, CASES, __ATOMIC_RELEASE);
    __atomic_store_n(&stop_sleeper, 1, __ATOMIC_RELEASE);
    CHECK(pthread_join(w_thread, 0) == 0);
    CHECK(pthread_join(s, 0) == 0);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d fiber=%d\n", active ? active() : 0, is_fiber);
    return 0;
}
