/* Issue 12: a thread that sleeps long with a shallow stack after deep calls, then goes
 * deep again. Under the preload such a sleep gives the dead stack pages back
 * (runtime/sleep/stack_release.rs); what lies above the stack pointer must survive it, what
 * lies below must read as the program wrote it again. Each of N threads (default 64)
 * fills ~96 KiB of stack in a recursion, sleeps 300 ms with live data in its frame and
 * errno set, checks both, recurses again, and a signal handler with a 16 KiB frame
 * interrupts one sleeper; then two long sleeps at one depth (the second finds nothing to give
 * back) and deep calls again. Deterministic stdout; stderr: preloaded=, VmRSS samples. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
#define MAXT 1000
#define DEPTH 24
#define FRAME 4096

static volatile int asleep_flag;
static volatile uint64_t handler_sum;

/* Writes a per-depth pattern into a 4 KiB frame at every level, sums it on the way back. */
__attribute__((noinline)) static uint64_t deep(int depth, uint64_t seed) {
    volatile unsigned char frame[FRAME];
    for (int i = 0; i < FRAME; i++) frame[i] = (unsigned char)(seed * 31 + depth * 7 + i);
    uint64_t below = depth > 1 ? deep(depth - 1, seed) : 0;
    uint64_t sum = 0;
    for (int i = 0; i < FRAME; i++) sum += frame[i] * (uint64_t)(i + 1);
    return sum + below;
}

static void on_usr1(int sig) {
    (void)sig;
    volatile unsigned char buf[16384];
    for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (unsigned char)i;
    uint64_t s = 0;
    for (int i = 0; i < (int)sizeof buf; i++) s += buf[i];
    handler_sum = s;
}

static long vm_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &v) == 1) break;
    fclose(f);
    return v;
}

/* Sleeps ms in full, through interruptions; returns how many there were. */
static int sleep_ms(long ms) {
    struct timespec req = {ms / 1000, (ms % 1000) * 1000000L}, rem;
    int interrupted = 0;
    while (nanosleep(&req, &rem) != 0) {
        CHECK(errno == EINTR);
        interrupted++;
        req = rem;
    }
    return interrupted;
}

static void *terminal(void *arg) {
    long id = (long)arg;
    uint64_t first = deep(DEPTH, (uint64_t)id);
    /* Live data in this frame, just above the stack pointer of the sleep. */
    volatile char live[512];
    for (int i = 0; i < (int)sizeof live; i++) live[i] = (char)(id + i);
    errno = 1234;
    struct timespec req = {0, 300 * 1000000L};
    if (id == 0) asleep_flag = 1;
    int r = nanosleep(&req, NULL);
    if (r == 0) CHECK(errno == 1234); /* a successful sleep leaves errno alone */
    else { CHECK(errno == EINTR); sleep_ms(300); }
    for (int i = 0; i < (int)sizeof live; i++) CHECK(live[i] == (char)(id + i));
    uint64_t second = deep(DEPTH, (uint64_t)id);
    CHECK(first == second);
    sleep_ms(100); /* a second long sleep after going deep again */
    CHECK(deep(DEPTH, (uint64_t)id) == first);
    /* Two long sleeps at one depth: the second finds nothing written below the kept
     * margin since the first gave it back, and leaves the stack alone (preloaded:
     * stack_releases_skipped); deep calls after it, and the next long sleep releases. */
    sleep_ms(60);
    sleep_ms(60);
    CHECK(deep(DEPTH, (uint64_t)id) == first);
    sleep_ms(60);
    /* The signalled one stays until its handler ran (main signals it while it lives). */
    for (int i = 0; id == 0 && !handler_sum && i < 10000; i++) sleep_ms(1);
    return (void *)(uintptr_t)(first & 0xffff);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    CHECK(n > 0 && n <= MAXT);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART: the sleep returns EINTR */
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    static pthread_t t[MAXT];
    long rss_before = vm_rss_kib();
    for (long i = 0; i < n; i++) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setstacksize(&a, 1 << 20);
        CHECK(pthread_create(&t[i], &a, terminal, (void *)i) == 0);
        pthread_attr_destroy(&a);
    }
    while (!asleep_flag) usleep(1000);
    usleep(100 * 1000);
    long rss_asleep = vm_rss_kib();
    CHECK(pthread_kill(t[0], SIGUSR1) == 0);
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        void *ret;
        CHECK(pthread_join(t[i], &ret) == 0);
        total += (uintptr_t)ret;
    }
    uint64_t expect = 0;
    for (int i = 0; i < (int)16384; i++) expect += (unsigned char)i;
    CHECK(handler_sum == expect);
    printf("%d threads slept shallow after deep calls and went deep again: sum %llu\n", n, (unsigned long long)total);
    printf("signal handler with a 16 KiB frame during a sleep: ok\n");
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d rss_before_kib=%ld rss_asleep_kib=%ld\n", active ? active() : 0, rss_before, rss_asleep);
    return 0;
}
