/* A program that sleeps most of the time: under the library every worker sleeps, and
 * the monitor thread dozes instead of ticking 1 000 times a second (stat monitor_dozes).
 * What must still happen on time, or at all, while the pool sleeps: a nanosleep's
 * timer, a condvar's timeout, a pipe's readiness (written by the main thread), and a
 * condvar signal from the main thread. And a thread that wakes every 40 ms for a moment:
 * the monitor dozes again soon after each of its errands. Stdout is the same natively
 * and preloaded. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); _exit(1); } } while (0)

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int signalled;
static int pipe_fds[2];

static void sleep_ms(long ms) {
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&t, &t) != 0) CHECK(errno == EINTR);
}

static void *sleeper(void *a) {
    (void)a;
    sleep_ms(150);
    return (void *)"nanosleep 150 ms returned";
}

static void *timed_waiter(void *a) {
    (void)a;
    struct timespec until;
    CHECK(clock_gettime(CLOCK_REALTIME, &until) == 0);
    until.tv_nsec += 200 * 1000000L;
    if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&m);
    int r = 0;
    while (!signalled && r == 0) r = pthread_cond_timedwait(&c, &m, &until);
    pthread_mutex_unlock(&m);
    return (void *)(r == ETIMEDOUT ? "timedwait 200 ms timed out" : "timedwait did not time out");
}

static void *reader(void *a) {
    (void)a;
    char buf[8];
    ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    return (void *)(n == 5 && memcmp(buf, "hello", 5) == 0 ? "pipe read hello" : "pipe read wrong");
}

/* Wakes every 40 ms for a moment, as an idle server's background threads do: between
 * its errands the monitor dozes again after two quiet ticks (stat monitor_wakeups). */
static void *ticker(void *a) {
    (void)a;
    for (int i = 0; i < 10; i++) sleep_ms(40);
    return (void *)"ticker woke 10 times";
}

static void *signal_waiter(void *a) {
    (void)a;
    pthread_mutex_lock(&m);
    while (signalled != 2) pthread_cond_wait(&c, &m);
    pthread_mutex_unlock(&m);
    return (void *)"condvar signal arrived";
}

int main(void) {
    CHECK(pipe(pipe_fds) == 0);
    pthread_t t[5];
    void *(*fns[5])(void *) = { sleeper, timed_waiter, reader, signal_waiter, ticker };
    for (int i = 0; i < 5; i++) CHECK(pthread_create(&t[i], 0, fns[i], 0) == 0);
    /* Long enough for the pool to fall asleep and the monitor to doze, twice. */
    sleep_ms(300);
    CHECK(write(pipe_fds[1], "hello", 5) == 5);
    sleep_ms(150);
    pthread_mutex_lock(&m);
    signalled = 2;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < 5; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0);
        printf("%s\n", (const char *)r);
    }
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
