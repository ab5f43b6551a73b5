/* Shared by the sync_* test apps: a CHECK that prints the failing line on stdout (so
 * the native/preloaded stdout comparison shows it) and exits 1, the preload evidence
 * on stderr, a sleep that survives signals, error names, absolute deadlines, and
 * checked thread create/join. Include after the system headers. */
#ifndef SYNC_COMMON_H
#define SYNC_COMMON_H
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                         \
            printf(__VA_ARGS__);                                                \
            printf("\n");                                                       \
            fflush(stdout);                                                     \
            _exit(1);                                                           \
        }                                                                       \
    } while (0)

static int (*p_active)(void);
static int (*p_is_fiber)(void);
static atomic_int fiber_seen;

static void note_fiber(void) {
    if (p_is_fiber && p_is_fiber())
        atomic_store(&fiber_seen, 1);
}

static void report_preload(void) {
    p_active = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    p_is_fiber = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    fprintf(stderr, "fiberize_active=%d main_is_fiber=%d\n", p_active ? p_active() : -1,
            p_is_fiber ? p_is_fiber() : -1);
}

/* FIBERIZE_TEST_SLOW=N (the test harness sets it when the apps run under an emulator,
 * qemu-user: test-apps/tests/harness): the apps' own deadlines (alarm) are N times
 * longer, and a check whose run time is a huge iteration count alone (2^29 read
 * locks) is left out. 1 (the default) natively. */
__attribute__((unused)) static unsigned slow_factor(void) {
    const char *s = getenv("FIBERIZE_TEST_SLOW");
    int n = s ? atoi(s) : 1;
    return n > 1 ? (unsigned)n : 1;
}

/* The app's own deadline: a wait that never ends kills it (SIGALRM) and fails the test. */
__attribute__((unused)) static void deadline_s(unsigned seconds) {
    alarm(seconds * slow_factor());
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* The name of an error number the sync functions return ("0" for success). */
__attribute__((unused)) static const char *ename(int e) {
    switch (e) {
    case 0: return "0";
    case EAGAIN: return "EAGAIN";
    case EBUSY: return "EBUSY";
    case EDEADLK: return "EDEADLK";
    case EINTR: return "EINTR";
    case EINVAL: return "EINVAL";
    case EOVERFLOW: return "EOVERFLOW";
    case EPERM: return "EPERM";
    case ETIMEDOUT: return "ETIMEDOUT";
    default: {
        static char buf[32];
        snprintf(buf, sizeof buf, "%d", e);
        return buf;
    }
    }
}

/* Clock `c` now plus `ms` milliseconds, for the timed and clock waits. */
__attribute__((unused)) static struct timespec at_ms(clockid_t c, long ms) {
    struct timespec ts;
    clock_gettime(c, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

__attribute__((unused)) static pthread_t spawn(void *(*fn)(void *), void *arg) {
    pthread_t t;
    int r = pthread_create(&t, NULL, fn, arg);
    CHECK(r == 0, "pthread_create: %d", r);
    return t;
}

__attribute__((unused)) static void join(pthread_t t) {
    int r = pthread_join(t, NULL);
    CHECK(r == 0, "pthread_join: %d", r);
}

#endif
