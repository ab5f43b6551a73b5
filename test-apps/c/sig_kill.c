/* Thread-directed signals: pthread_kill to a sleeping thread runs the handler in that
 * thread (its TLS, its pthread_self) and interrupts nanosleep with EINTR; a blocked
 * signal stays pending until the thread unblocks it; raise runs the handler at once.
 * Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static __thread int handled_here;
static __thread int my_id;
static volatile int handler_saw_id[4];
static volatile int handler_self_ok[4];
static pthread_t threads[4];

static void on_usr1(int sig) {
    (void)sig;
    handled_here++;
    if (my_id >= 0 && my_id < 4) {
        handler_saw_id[my_id] = my_id + 100;
        handler_self_ok[my_id] = pthread_equal(pthread_self(), threads[my_id]);
    }
}

static volatile int ready[4];
static void *sleeper(void *a) {
    my_id = (int)(long)a;
    ready[my_id] = 1;
    struct timespec ts = {5, 0}, rem = {0, 0};
    int r = nanosleep(&ts, &rem);
    int e = errno;
    /* interrupted: -1/EINTR with most of the time left */
    return (void *)(long)(r == -1 && e == EINTR && rem.tv_sec >= 3 && handled_here == 1);
}

static void *blocker(void *a) {
    my_id = (int)(long)a;
    sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR1);
    CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
    ready[my_id] = 1;
    while (ready[my_id] != 2) usleep(1000);     /* main sends the signal meanwhile */
    usleep(20000);
    int before = handled_here;                  /* still blocked: not delivered */
    CHECK(pthread_sigmask(SIG_UNBLOCK, &s, 0) == 0);
    usleep(1000);
    return (void *)(long)(before == 0 && handled_here == 1);
}

int main(void) {
    struct sigaction sa; memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; sigemptyset(&sa.sa_mask); sa.sa_flags = 0; /* no SA_RESTART */
    CHECK(sigaction(SIGUSR1, &sa, 0) == 0);
    my_id = -1;

    CHECK(pthread_create(&threads[0], 0, sleeper, (void *)0) == 0);
    while (!ready[0]) usleep(1000);
    usleep(50000);
    CHECK(pthread_kill(threads[0], SIGUSR1) == 0);
    void *r0; pthread_join(threads[0], &r0);
    printf("sleeper interrupted=%ld handler_in_thread=%d self_ok=%d\n", (long)r0, handler_saw_id[0], handler_self_ok[0]);

    CHECK(pthread_create(&threads[1], 0, blocker, (void *)1) == 0);
    while (!ready[1]) usleep(1000);
    CHECK(pthread_kill(threads[1], SIGUSR1) == 0);
    ready[1] = 2;
    void *r1; pthread_join(threads[1], &r1);
    printf("blocked_then_unblocked ok=%ld handler_in_thread=%d\n", (long)r1, handler_saw_id[1]);

    /* pthread_kill with signal 0 checks existence; an invalid signal is EINVAL. */
    CHECK(pthread_create(&threads[2], 0, sleeper, (void *)2) == 0);
    while (!ready[2]) usleep(1000);
    printf("kill0=%d killbad=%d\n", pthread_kill(threads[2], 0), pthread_kill(threads[2], 999));
    pthread_kill(threads[2], SIGUSR1);
    pthread_join(threads[2], 0);

    /* raise inside a thread runs the handler in that thread before returning. */
    void *raiser(void *a) { my_id = 3; (void)a; int r = raise(SIGUSR1); return (void *)(long)(r == 0 && handled_here == 1); }
    void *r3; CHECK(pthread_create(&threads[3], 0, raiser, 0) == 0); pthread_join(threads[3], &r3);
    printf("raise ok=%ld self_ok=%d\n", (long)r3, handler_self_ok[3]);

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
