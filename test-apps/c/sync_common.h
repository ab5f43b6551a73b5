/* Shared by the sync_* test apps: a CHECK that prints the failing line on stdout (so
 * the native/preloaded stdout comparison shows it) and exits 1, the preload evidence
 * on stderr, and a sleep that survives signals. Include after the system headers. */
#ifndef SYNC_COMMON_H
#define SYNC_COMMON_H
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
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

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

#endif
