/* Mutexes and condition variables with glibc's exact return codes: every static
 * initializer, types from attributes, trylock/timedlock/clocklock, errorcheck and
 * recursive rules, destroy, condvar clocks, signal/broadcast, a token ring, and the
 * main thread (a plain thread under the preload) contending with threads. Prints one
 * line per check group; exit status 0 when all held. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d)\n", #c, __LINE__); exit(1); } } while (0)

static struct timespec in_ms(clockid_t clk, long ms) {
    struct timespec t; clock_gettime(clk, &t);
    t.tv_nsec += ms * 1000000L; t.tv_sec += t.tv_nsec / 1000000000L; t.tv_nsec %= 1000000000L;
    return t;
}

static pthread_mutex_t m_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_err = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_adapt = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

static void *try_from_other(void *a) { return (void *)(long)pthread_mutex_trylock((pthread_mutex_t *)a); }
static void *unlock_from_other(void *a) { return (void *)(long)pthread_mutex_unlock((pthread_mutex_t *)a); }
static long in_thread(void *(*f)(void *), void *a) { pthread_t t; void *r; pthread_create(&t, 0, f, a); pthread_join(t, &r); return (long)r; }

static void *mutex_rules(void *unused) {
    (void)unused;
    /* static initializers */
    CHECK(pthread_mutex_lock(&m_normal) == 0); CHECK(pthread_mutex_trylock(&m_normal) == EBUSY);
    CHECK(in_thread(try_from_other, &m_normal) == EBUSY); CHECK(pthread_mutex_unlock(&m_normal) == 0);
    CHECK(pthread_mutex_lock(&m_rec) == 0); CHECK(pthread_mutex_lock(&m_rec) == 0); CHECK(pthread_mutex_trylock(&m_rec) == 0);
    CHECK(in_thread(try_from_other, &m_rec) == EBUSY); CHECK(in_thread(unlock_from_other, &m_rec) == EPERM);
    CHECK(pthread_mutex_unlock(&m_rec) == 0); CHECK(pthread_mutex_unlock(&m_rec) == 0); CHECK(pthread_mutex_unlock(&m_rec) == 0);
    CHECK(pthread_mutex_unlock(&m_rec) == EPERM);
    CHECK(pthread_mutex_lock(&m_err) == 0); CHECK(pthread_mutex_lock(&m_err) == EDEADLK); CHECK(pthread_mutex_trylock(&m_err) == EBUSY);
    CHECK(in_thread(unlock_from_other, &m_err) == EPERM); CHECK(pthread_mutex_unlock(&m_err) == 0); CHECK(pthread_mutex_unlock(&m_err) == EPERM);
    CHECK(pthread_mutex_lock(&m_adapt) == 0); CHECK(pthread_mutex_trylock(&m_adapt) == EBUSY); CHECK(pthread_mutex_unlock(&m_adapt) == 0);
    printf("static initializers: ok\n");

    /* attributes */
    int types[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE, PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_ADAPTIVE_NP};
    for (int i = 0; i < 4; i++) {
        pthread_mutexattr_t a; pthread_mutexattr_init(&a); CHECK(pthread_mutexattr_settype(&a, types[i]) == 0);
        int got; CHECK(pthread_mutexattr_gettype(&a, &got) == 0 && got == types[i]);
        pthread_mutex_t mm; CHECK(pthread_mutex_init(&mm, &a) == 0); pthread_mutexattr_destroy(&a);
        CHECK(pthread_mutex_lock(&mm) == 0);
        int r = pthread_mutex_lock(types[i] == PTHREAD_MUTEX_ERRORCHECK ? &mm : &m_normal);
        if (types[i] == PTHREAD_MUTEX_ERRORCHECK) CHECK(r == EDEADLK); else pthread_mutex_unlock(&m_normal);
        CHECK(pthread_mutex_destroy(&mm) == EBUSY);
        CHECK(pthread_mutex_unlock(&mm) == 0);
        CHECK(pthread_mutex_destroy(&mm) == 0);
    }
    printf("attribute types and destroy: ok\n");

    /* timed locks */
    pthread_mutex_t tm = PTHREAD_MUTEX_INITIALIZER;
    CHECK(pthread_mutex_lock(&tm) == 0);
    void *timed(void *a) {
        struct timespec t = in_ms(CLOCK_REALTIME, 20);
        int r1 = pthread_mutex_timedlock((pthread_mutex_t *)a, &t);
        struct timespec t2 = in_ms(CLOCK_MONOTONIC, 20);
        int r2 = pthread_mutex_clocklock((pthread_mutex_t *)a, CLOCK_MONOTONIC, &t2);
        struct timespec bad = {0, 2000000000L};
        int r3 = pthread_mutex_timedlock((pthread_mutex_t *)a, &bad);
        return (void *)(long)(r1 == ETIMEDOUT && r2 == ETIMEDOUT && r3 == EINVAL);
    }
    CHECK(in_thread(timed, &tm) == 1);
    CHECK(pthread_mutex_unlock(&tm) == 0);
    struct timespec bad = {0, 2000000000L};
    CHECK(pthread_mutex_timedlock(&tm, &bad) == 0); /* uncontended: glibc does not look at the time */
    CHECK(pthread_mutex_unlock(&tm) == 0);
    printf("timed locks: ok\n");

    /* condition variables: timeouts on both clocks, EINVAL, errorcheck ownership */
    pthread_cond_t c1 = PTHREAD_COND_INITIALIZER, c2;
    pthread_condattr_t ca; pthread_condattr_init(&ca); CHECK(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0);
    CHECK(pthread_cond_init(&c2, &ca) == 0); pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&m_normal);
    struct timespec t = in_ms(CLOCK_REALTIME, 10); CHECK(pthread_cond_timedwait(&c1, &m_normal, &t) == ETIMEDOUT);
    t = in_ms(CLOCK_MONOTONIC, 10); CHECK(pthread_cond_timedwait(&c2, &m_normal, &t) == ETIMEDOUT);
    t = in_ms(CLOCK_MONOTONIC, 10); CHECK(pthread_cond_clockwait(&c1, &m_normal, CLOCK_MONOTONIC, &t) == ETIMEDOUT);
    CHECK(pthread_cond_timedwait(&c1, &m_normal, &bad) == EINVAL);
    CHECK(pthread_cond_clockwait(&c1, &m_normal, CLOCK_PROCESS_CPUTIME_ID, &t) == EINVAL);
    pthread_mutex_unlock(&m_normal);
    t = in_ms(CLOCK_REALTIME, 10); CHECK(pthread_cond_timedwait(&c1, &m_err, &t) == EPERM);
    CHECK(pthread_cond_signal(&c1) == 0 && pthread_cond_broadcast(&c1) == 0);
    CHECK(pthread_cond_destroy(&c1) == 0 && pthread_cond_destroy(&c2) == 0);
    printf("condition variable timeouts and errors: ok\n");
    return 0;
}

/* ---- a token ring over one mutex and one condvar ---- */
#define RING 8
#define LAPS 2000
static pthread_mutex_t ring_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ring_c = PTHREAD_COND_INITIALIZER;
static int ring_turn; static long ring_hops;
static void *ring_member(void *a) {
    int me = (int)(long)a;
    for (int lap = 0; lap < LAPS; lap++) {
        pthread_mutex_lock(&ring_m);
        while (ring_turn != me) pthread_cond_wait(&ring_c, &ring_m);
        ring_turn = (me + 1) % RING; ring_hops++;
        pthread_cond_broadcast(&ring_c);
        pthread_mutex_unlock(&ring_m);
    }
    return 0;
}

/* ---- broadcast wakes every waiter; the main thread (plain) joins the crowd ---- */
static pthread_mutex_t gate_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_c = PTHREAD_COND_INITIALIZER;
static int gate_open, waiting, passed;
static void *gate_waiter(void *a) {
    (void)a;
    pthread_mutex_lock(&gate_m); waiting++;
    while (!gate_open) pthread_cond_wait(&gate_c, &gate_m);
    passed++; pthread_mutex_unlock(&gate_m);
    return 0;
}

/* ---- a convoy: threads queued on a mutex its holder keeps while they arrive; each
 * member's unlock wakes the next while others still wait (under the preload: the
 * unlocker yields its worker to the wakee, wake::unpark_lock_waiter) ---- */
#define CONVOY 8
static pthread_mutex_t convoy_m = PTHREAD_MUTEX_INITIALIZER; static long convoy_sum, convoy_passed;
static void *convoy_member(void *a) {
    pthread_mutex_lock(&convoy_m);
    convoy_sum += (long)a; convoy_passed++;
    pthread_mutex_unlock(&convoy_m);
    return 0;
}

/* ---- main thread and threads hammering one mutex ---- */
static pthread_mutex_t hm = PTHREAD_MUTEX_INITIALIZER; static long hcount;
static void *hammer(void *a) { for (int i = 0; i < 20000; i++) { pthread_mutex_lock(&hm); hcount++; pthread_mutex_unlock(&hm); if (i % 1000 == 0) sched_yield(); } return a; }

int main(void) {
    pthread_t t; pthread_create(&t, 0, mutex_rules, 0); pthread_join(t, 0);
    mutex_rules(0); /* the same rules from the main thread */

    pthread_t r[RING];
    for (long i = 0; i < RING; i++) pthread_create(&r[i], 0, ring_member, (void *)i);
    for (int i = 0; i < RING; i++) pthread_join(r[i], 0);
    printf("ring hops=%ld\n", ring_hops);

    pthread_t g[50];
    for (int i = 0; i < 50; i++) pthread_create(&g[i], 0, gate_waiter, 0);
    for (;;) { pthread_mutex_lock(&gate_m); int w = waiting; pthread_mutex_unlock(&gate_m); if (w == 50) break; usleep(1000); }
    pthread_mutex_lock(&gate_m); gate_open = 1; pthread_cond_broadcast(&gate_c); pthread_mutex_unlock(&gate_m);
    for (int i = 0; i < 50; i++) pthread_join(g[i], 0);
    printf("broadcast passed=%d\n", passed);

    pthread_t cv[CONVOY];
    pthread_mutex_lock(&convoy_m);
    for (long i = 0; i < CONVOY; i++) pthread_create(&cv[i], 0, convoy_member, (void *)(i + 1));
    usleep(200000); /* they queue on convoy_m meanwhile */
    CHECK(convoy_passed == 0);
    pthread_mutex_unlock(&convoy_m);
    for (int i = 0; i < CONVOY; i++) pthread_join(cv[i], 0);
    printf("convoy passed=%ld sum=%ld\n", convoy_passed, convoy_sum);

    pthread_t h[16];
    for (int i = 0; i < 16; i++) pthread_create(&h[i], 0, hammer, 0);
    hammer(0);
    for (int i = 0; i < 16; i++) pthread_join(h[i], 0);
    printf("hammer count=%ld\n", hcount);

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
