/* Issue 2 acceptance: N threads (default 500) each keep their thread identity across
 * sleeps, yields, mutex and timed condition waits: __thread values, errno,
 * pthread_self() (equal to what the creator got), a stack address inside
 * pthread_getattr_np's bounds, a pthread_key value whose destructor runs with that
 * value. Also pthread_exit from a nested call, detached threads, tryjoin/timedjoin,
 * attr stack sizes. Deterministic stdout; distinct kernel tids on stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
#define MAXT 5000

static __thread long tls_a = 7;
static __thread char tls_buf[64];
static pthread_key_t key;
static long dtor_sum, dtor_calls;
static pthread_t created[MAXT];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long shared_counter;
static int tids[MAXT * 2]; static int ntids;
static pthread_mutex_t tid_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile int start_flag;

static void key_dtor(void *v) {
    __atomic_add_fetch(&dtor_sum, (long)(intptr_t)v, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&dtor_calls, 1, __ATOMIC_SEQ_CST);
}

#include "kernel_tid.h"

static void note_tid(void) {
    int t = running_kernel_tid();
    pthread_mutex_lock(&tid_lock);
    int seen = 0;
    for (int i = 0; i < ntids; i++) if (tids[i] == t) { seen = 1; break; }
    if (!seen && ntids < MAXT * 2) tids[ntids++] = t;
    pthread_mutex_unlock(&tid_lock);
}

static void check_identity(long id, pthread_t self_at_start) {
    int marker;
    CHECK(tls_a == id * 3 + 1);
    char expect[64]; snprintf(expect, sizeof expect, "thread-%ld", id);
    CHECK(strcmp(tls_buf, expect) == 0);
    CHECK(pthread_equal(pthread_self(), self_at_start));
    CHECK((intptr_t)pthread_getspecific(key) == id + 1);
    pthread_attr_t at; void *addr; size_t size;
    CHECK(pthread_getattr_np(pthread_self(), &at) == 0);
    CHECK(pthread_attr_getstack(&at, &addr, &size) == 0);
    pthread_attr_destroy(&at);
    CHECK((char *)&marker >= (char *)addr && (char *)&marker < (char *)addr + size);
}

static void *body(void *arg) {
    long id = (long)arg;
    tls_a = id * 3 + 1;
    snprintf(tls_buf, sizeof tls_buf, "thread-%ld", id);
    CHECK(pthread_setspecific(key, (void *)(intptr_t)(id + 1)) == 0);
    pthread_t me = pthread_self();
    while (!start_flag) sched_yield();
    CHECK(pthread_equal(me, created[id]));
    unsigned seed = (unsigned)id * 2654435761u;
    for (int round = 0; round < 6; round++) {
        note_tid();
        errno = (int)(id % 100) + 1;
        struct timespec ts = {0, (long)(rand_r(&seed) % 2000) * 1000};
        nanosleep(&ts, 0);
        check_identity(id, me);
        errno = (int)(id % 100) + 1;
        sched_yield();
        CHECK(errno == (int)(id % 100) + 1);
        pthread_mutex_lock(&m);
        shared_counter++;
        struct timespec dl; clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 200 * 1000; if (dl.tv_nsec >= 1000000000) { dl.tv_sec++; dl.tv_nsec -= 1000000000; }
        int r = pthread_cond_timedwait(&cv, &m, &dl);
        CHECK(r == 0 || r == ETIMEDOUT);
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
        usleep(rand_r(&seed) % 500);
        check_identity(id, me);
    }
    return (void *)(id * 2);
}

/* ---- lifecycle corner cases ---- */
static void nested_exit(long v) { if (v >= 0) pthread_exit((void *)(v + 1000)); }
static void *exiter(void *a) { nested_exit((long)a); return 0; }
static volatile int detached_done;
static void *detached(void *a) { (void)a; usleep(1000); __atomic_add_fetch(&detached_done, 1, __ATOMIC_SEQ_CST); return 0; }
static volatile int release_slow;
static void *slow(void *a) { while (!release_slow) usleep(1000); return a; }
static void *big_stack_user(void *a) {
    size_t want = (size_t)a;
    volatile char buf[40 * 1024];
    for (size_t i = 0; i < sizeof buf; i += 512) buf[i] = (char)i;
    pthread_attr_t at; void *addr; size_t size;
    CHECK(pthread_getattr_np(pthread_self(), &at) == 0);
    CHECK(pthread_attr_getstack(&at, &addr, &size) == 0);
    pthread_attr_destroy(&at);
    return (void *)(uintptr_t)(size >= want && buf[512] == (char)512);
}

static void lifecycle(void) {
    void *rv;
    pthread_t t; CHECK(pthread_create(&t, 0, exiter, (void *)5) == 0);
    CHECK(pthread_join(t, &rv) == 0 && rv == (void *)1005);
    for (int i = 0; i < 20; i++) {
        pthread_attr_t a; pthread_attr_init(&a); pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        CHECK(pthread_create(&t, &a, detached, 0) == 0); pthread_attr_destroy(&a);
    }
    pthread_t t2; CHECK(pthread_create(&t2, 0, detached, 0) == 0); CHECK(pthread_detach(t2) == 0);
    for (int i = 0; i < 500 && detached_done < 21; i++) usleep(1000);
    pthread_t s; CHECK(pthread_create(&s, 0, slow, (void *)77) == 0);
    CHECK(pthread_tryjoin_np(s, &rv) == EBUSY);
    struct timespec dl; clock_gettime(CLOCK_REALTIME, &dl); dl.tv_nsec += 20 * 1000 * 1000;
    if (dl.tv_nsec >= 1000000000) { dl.tv_sec++; dl.tv_nsec -= 1000000000; }
    CHECK(pthread_timedjoin_np(s, &rv, &dl) == ETIMEDOUT);
    release_slow = 1;
    CHECK(pthread_join(s, &rv) == 0 && rv == (void *)77);
    /* 64 KiB, or the architecture's minimum if larger (128 KiB on aarch64). */
    size_t sizes[2] = {PTHREAD_STACK_MIN > 64 * 1024 ? PTHREAD_STACK_MIN : 64 * 1024, 1024 * 1024};
    for (int i = 0; i < 2; i++) {
        pthread_attr_t a; pthread_attr_init(&a); CHECK(pthread_attr_setstacksize(&a, sizes[i]) == 0);
        pthread_attr_setguardsize(&a, 8192);
        CHECK(pthread_create(&t, &a, big_stack_user, (void *)sizes[i]) == 0); pthread_attr_destroy(&a);
        CHECK(pthread_join(t, &rv) == 0 && rv == (void *)1);
    }
    printf("lifecycle: exit_value ok, detached=%d, tryjoin/timedjoin ok, stack sizes ok\n", detached_done);
}

/* A thread that joins another from inside a thread (fiber joining fiber). */
static void *joiner(void *a) {
    pthread_t t; void *rv;
    CHECK(pthread_create(&t, 0, exiter, a) == 0);
    CHECK(pthread_join(t, &rv) == 0);
    return rv;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 500;
    if (n > MAXT) n = MAXT;
    CHECK(pthread_key_create(&key, key_dtor) == 0);
    for (long i = 0; i < n; i++) CHECK(pthread_create(&created[i], 0, body, (void *)i) == 0);
    start_flag = 1;
    long sum = 0;
    for (long i = 0; i < n; i++) { void *rv; CHECK(pthread_join(created[i], &rv) == 0); sum += (long)rv; }
    /* join returns after the key destructors ran */
    printf("threads=%d sum=%ld counter=%ld dtor_calls=%ld dtor_sum=%ld\n", n, sum, shared_counter, dtor_calls,
           dtor_sum);
    CHECK(dtor_calls == n && dtor_sum == (long)n * (n + 1) / 2);
    lifecycle();
    pthread_t j; void *rv; CHECK(pthread_create(&j, 0, joiner, (void *)9) == 0);
    CHECK(pthread_join(j, &rv) == 0 && rv == (void *)1009);
    printf("nested join ok\n");
    CHECK(tls_a == 7); /* main thread's own TLS untouched */
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d distinct_tids=%d\n", active ? active() : 0, ntids);
    return 0;
}
