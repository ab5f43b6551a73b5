/* sync_barrier_once_spin: barriers (serial thread, errors, destroy right after a
 * round, process-shared), pthread_once / call_once (concurrent callers, nesting,
 * a routine that calls pthread_exit), spinlocks (with holders that yield or sleep),
 * and a bounded stress run where fibers and the main thread share one rwlock, a ring
 * of semaphores and a barrier. Deterministic stdout, same natively and under the
 * preload; preload evidence on stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>

#include "sync_common.h"

#define EXPECT(expr, want)                                                      \
    do {                                                                        \
        int got_ = (expr);                                                      \
        CHECK(got_ == (want), "%s = %d, want %d", #expr, got_, (int)(want));    \
    } while (0)

/* ============================================================================ */
/* Barriers                                                                     */
/* ============================================================================ */

static void test_barrier_basic(void) {
    pthread_barrier_t b;
    EXPECT(pthread_barrier_init(&b, NULL, 0), EINVAL);
    EXPECT(pthread_barrier_init(&b, NULL, UINT_MAX / 2), EINVAL);
    EXPECT(pthread_barrier_init(&b, NULL, UINT_MAX), EINVAL);
    EXPECT(pthread_barrier_init(&b, NULL, UINT_MAX / 2 - 1), 0);
    EXPECT(pthread_barrier_destroy(&b), 0);
    EXPECT(pthread_barrier_init(&b, NULL, 1), 0);
    int s1 = pthread_barrier_wait(&b), s2 = pthread_barrier_wait(&b), s3 = pthread_barrier_wait(&b);
    EXPECT(pthread_barrier_destroy(&b), 0);
    printf("barrier: count 0 and >= UINT_MAX/2 EINVAL; count 1 returns serial each time: %d %d %d\n",
           s1 == PTHREAD_BARRIER_SERIAL_THREAD, s2 == PTHREAD_BARRIER_SERIAL_THREAD,
           s3 == PTHREAD_BARRIER_SERIAL_THREAD);
}

#define BN 4
#define BROUNDS 500
static pthread_barrier_t rb;
static atomic_int arrived[BROUNDS], serials[BROUNDS];

static void barrier_rounds(void) {
    for (int r = 0; r < BROUNDS; r++) {
        atomic_fetch_add(&arrived[r], 1);
        int ret = pthread_barrier_wait(&rb);
        CHECK(ret == 0 || ret == PTHREAD_BARRIER_SERIAL_THREAD, "barrier ret %d", ret);
        if (ret == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&serials[r], 1);
        CHECK(atomic_load(&arrived[r]) == BN, "left round %d with %d arrived", r, atomic_load(&arrived[r]));
        if (r % 50 == 0)
            sched_yield();
    }
}

static void *barrier_rounds_body(void *arg) {
    (void)arg;
    note_fiber();
    barrier_rounds();
    return NULL;
}

static void test_barrier_rounds(void) {
    EXPECT(pthread_barrier_init(&rb, NULL, BN), 0);
    pthread_t t[BN - 1];
    for (int i = 0; i < BN - 1; i++)
        t[i] = spawn(barrier_rounds_body, NULL);
    barrier_rounds();
    for (int i = 0; i < BN - 1; i++)
        join(t[i]);
    int bad = 0;
    for (int r = 0; r < BROUNDS; r++)
        bad += atomic_load(&serials[r]) != 1;
    EXPECT(pthread_barrier_destroy(&rb), 0);
    printf("barrier: %d rounds of %d (main + fibers): rounds without exactly one serial=%d\n", BROUNDS, BN, bad);
}

/* The serial thread destroys and frees the barrier right away. */
static atomic_int destroyed;

static void *destroy_body(void *arg) {
    note_fiber();
    pthread_barrier_t *b = arg;
    if (pthread_barrier_wait(b) == PTHREAD_BARRIER_SERIAL_THREAD) {
        CHECK(pthread_barrier_destroy(b) == 0, "destroy");
        memset(b, 0xA5, sizeof *b);
        free(b);
        atomic_fetch_add(&destroyed, 1);
    }
    return NULL;
}

static void test_barrier_destroy_after_round(void) {
    for (int it = 0; it < 100; it++) {
        pthread_barrier_t *b = malloc(sizeof *b);
        CHECK(b != NULL, "malloc");
        EXPECT(pthread_barrier_init(b, NULL, 4), 0);
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
            t[i] = spawn(destroy_body, b);
        destroy_body(b);
        for (int i = 0; i < 3; i++)
            join(t[i]);
    }
    printf("barrier: serial thread destroyed+freed the barrier in %d of 100 rounds\n", atomic_load(&destroyed));
}

/* More waiters than the count: rounds form in groups of count. */
static pthread_barrier_t ob;
static atomic_int over_serials;
static void *over_body(void *arg) {
    (void)arg;
    note_fiber();
    if (pthread_barrier_wait(&ob) == PTHREAD_BARRIER_SERIAL_THREAD)
        atomic_fetch_add(&over_serials, 1);
    return NULL;
}

static void test_barrier_overfull(void) {
    EXPECT(pthread_barrier_init(&ob, NULL, 2), 0);
    pthread_t t[6];
    for (int i = 0; i < 6; i++)
        t[i] = spawn(over_body, NULL);
    for (int i = 0; i < 6; i++)
        join(t[i]);
    EXPECT(pthread_barrier_destroy(&ob), 0);
    printf("barrier: 6 waiters on a count-2 barrier: serials=%d\n", atomic_load(&over_serials));
}

/* Process-shared barriers stay glibc's. */
struct pshared_area {
    pthread_barrier_t b;
    atomic_int serials;
    atomic_int arrived;
};
static struct pshared_area *pa;

static void *pshared_barrier_body(void *arg) {
    (void)arg;
    note_fiber();
    for (int r = 0; r < 50; r++)
        if (pthread_barrier_wait(&pa->b) == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&pa->serials, 1);
    return NULL;
}

static void test_barrier_pshared(void) {
    pa = mmap(NULL, sizeof *pa, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(pa != MAP_FAILED, "mmap");
    pthread_barrierattr_t a;
    pthread_barrierattr_init(&a);
    EXPECT(pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED), 0);
    EXPECT(pthread_barrier_init(&pa->b, &a, 0), EINVAL);
    EXPECT(pthread_barrier_init(&pa->b, &a, 2), 0);
    int shared;
    memcpy(&shared, (char *)&pa->b + 12, sizeof shared);
    printf("pshared barrier: shared field=%d\n", shared);

    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        for (int r = 0; r < 20; r++)
            if (pthread_barrier_wait(&pa->b) == PTHREAD_BARRIER_SERIAL_THREAD)
                atomic_fetch_add(&pa->serials, 1);
        _exit(0);
    }
    for (int r = 0; r < 20; r++)
        if (pthread_barrier_wait(&pa->b) == PTHREAD_BARRIER_SERIAL_THREAD)
            atomic_fetch_add(&pa->serials, 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
    printf("pshared barrier: parent and child met 20 times, serials=%d\n", atomic_load(&pa->serials));
    EXPECT(pthread_barrier_destroy(&pa->b), 0);

    /* fibers and main on a process-shared barrier */
    EXPECT(pthread_barrier_init(&pa->b, &a, 3), 0);
    atomic_store(&pa->serials, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        t[i] = spawn(pshared_barrier_body, NULL);
    pshared_barrier_body(NULL);
    for (int i = 0; i < 2; i++)
        join(t[i]);
    printf("pshared barrier: main + 2 fibers, 50 rounds, serials=%d\n", atomic_load(&pa->serials));
    EXPECT(pthread_barrier_destroy(&pa->b), 0);
    pthread_barrierattr_destroy(&a);
    munmap(pa, sizeof *pa);
}

/* ============================================================================ */
/* pthread_once / call_once                                                     */
/* ============================================================================ */

static pthread_once_t once_a = PTHREAD_ONCE_INIT;
static atomic_int runs_a, ready_a;

static void init_a(void) {
    atomic_fetch_add(&runs_a, 1);
    sleep_ms(50);
    atomic_store(&ready_a, 1);
}

static void *once_a_body(void *arg) {
    (void)arg;
    note_fiber();
    EXPECT(pthread_once(&once_a, init_a), 0);
    CHECK(atomic_load(&ready_a) == 1, "returned before the routine finished");
    return NULL;
}

/* Nested once calls on different objects. */
static pthread_once_t once_b = PTHREAD_ONCE_INIT, once_c = PTHREAD_ONCE_INIT, once_d = PTHREAD_ONCE_INIT;
static pthread_mutex_t nest_mu = PTHREAD_MUTEX_INITIALIZER;
static char nest_log[32];
static void nest_note(const char *s) {
    pthread_mutex_lock(&nest_mu);
    strcat(nest_log, s);
    pthread_mutex_unlock(&nest_mu);
}
static void init_d(void) {
    sleep_ms(10);
    nest_note("D");
}
static void init_c(void) {
    EXPECT(pthread_once(&once_d, init_d), 0);
    nest_note("C");
}
static void init_b(void) {
    EXPECT(pthread_once(&once_c, init_c), 0);
    nest_note("B");
}
static void *nest_body(void *arg) {
    note_fiber();
    switch ((int)(intptr_t)arg % 3) {
    case 0: EXPECT(pthread_once(&once_b, init_b), 0); break;
    case 1: EXPECT(pthread_once(&once_c, init_c), 0); break;
    default: EXPECT(pthread_once(&once_d, init_d), 0); break;
    }
    return NULL;
}

/* A routine that ends its thread with pthread_exit the first time. */
static pthread_once_t once_e = PTHREAD_ONCE_INIT;
static atomic_int runs_e, e_returned_in_exiter;
static void init_e(void) {
    if (atomic_fetch_add(&runs_e, 1) == 0) {
        sleep_ms(60);
        pthread_exit(NULL);
    }
}
static void *once_exiter(void *arg) {
    (void)arg;
    note_fiber();
    pthread_once(&once_e, init_e);
    atomic_store(&e_returned_in_exiter, 1); /* not reached */
    return NULL;
}
static void *once_e_waiter(void *arg) {
    (void)arg;
    note_fiber();
    EXPECT(pthread_once(&once_e, init_e), 0);
    return NULL;
}

static once_flag c11_flag = ONCE_FLAG_INIT;
static atomic_int c11_runs;
static void c11_init(void) {
    atomic_fetch_add(&c11_runs, 1);
    sleep_ms(20);
}
static void *c11_body(void *arg) {
    (void)arg;
    note_fiber();
    call_once(&c11_flag, c11_init);
    CHECK(atomic_load(&c11_runs) == 1, "call_once returned early");
    return NULL;
}

static void test_once(void) {
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = spawn(once_a_body, NULL);
    once_a_body(NULL);
    for (int i = 0; i < 8; i++)
        join(t[i]);
    EXPECT(pthread_once(&once_a, init_a), 0);
    printf("once: 9 concurrent callers (main + fibers): routine ran %d time(s)\n", atomic_load(&runs_a));

    for (int i = 0; i < 6; i++)
        t[i] = spawn(nest_body, (void *)(intptr_t)i);
    for (int i = 0; i < 6; i++)
        join(t[i]);
    EXPECT(pthread_once(&once_b, init_b), 0);
    printf("once: nested once objects completed in order %s\n", nest_log);

    pthread_t ex = spawn(once_exiter, NULL);
    sleep_ms(15);
    pthread_t w1 = spawn(once_e_waiter, NULL), w2 = spawn(once_e_waiter, NULL);
    EXPECT(pthread_once(&once_e, init_e), 0); /* main waits too */
    join(ex);
    join(w1);
    join(w2);
    printf("once: routine called pthread_exit the first time: runs=%d, exiting caller returned=%d\n",
           atomic_load(&runs_e), atomic_load(&e_returned_in_exiter));

    for (int i = 0; i < 5; i++)
        t[i] = spawn(c11_body, NULL);
    c11_body(NULL);
    for (int i = 0; i < 5; i++)
        join(t[i]);
    printf("call_once: 6 callers, routine ran %d time(s)\n", atomic_load(&c11_runs));
}

/* ============================================================================ */
/* Spinlocks                                                                    */
/* ============================================================================ */

static pthread_spinlock_t sl;
static long spin_counter;
#define SPIN_THREADS 4
#define SPIN_ITERS 10000

static void spin_work(unsigned seed) {
    for (int i = 0; i < SPIN_ITERS; i++) {
        EXPECT(pthread_spin_lock(&sl), 0);
        long v = spin_counter;
        unsigned x = rand_r(&seed) % 2000;
        if (x == 0)
            sleep_ms(1); /* holder sleeps: waiters must let it run again */
        else if (x < 10)
            sched_yield(); /* holder yields while holding */
        spin_counter = v + 1;
        EXPECT(pthread_spin_unlock(&sl), 0);
    }
}

static void *spin_body(void *arg) {
    note_fiber();
    spin_work((unsigned)(uintptr_t)arg);
    return NULL;
}

static void test_spin(void) {
    pthread_spinlock_t l;
    EXPECT(pthread_spin_init(&l, PTHREAD_PROCESS_PRIVATE), 0);
    EXPECT(pthread_spin_trylock(&l), 0);
    EXPECT(pthread_spin_trylock(&l), EBUSY);
    EXPECT(pthread_spin_unlock(&l), 0);
    EXPECT(pthread_spin_lock(&l), 0);
    int locked_value = (int)l;
    EXPECT(pthread_spin_trylock(&l), EBUSY);
    EXPECT(pthread_spin_unlock(&l), 0);
    EXPECT(pthread_spin_destroy(&l), 0);
    EXPECT(pthread_spin_init(&l, PTHREAD_PROCESS_SHARED), 0);
    printf("spin: trylock EBUSY while held; init value=%d, locked value=%d\n", (int)l, locked_value);
    EXPECT(pthread_spin_destroy(&l), 0);
    pthread_spinlock_t zero = 0; /* never initialized */
    printf("spin: zero-filled spinlock trylock=%s\n", pthread_spin_trylock(&zero) == EBUSY ? "EBUSY" : "0");

    EXPECT(pthread_spin_init(&sl, PTHREAD_PROCESS_PRIVATE), 0);
    pthread_t t[SPIN_THREADS];
    for (int i = 0; i < SPIN_THREADS; i++)
        t[i] = spawn(spin_body, (void *)(uintptr_t)(i + 1));
    spin_work(99);
    for (int i = 0; i < SPIN_THREADS; i++)
        join(t[i]);
    printf("spin: %d fibers + main, %d increments each: counter=%ld\n", SPIN_THREADS, SPIN_ITERS, spin_counter);
    EXPECT(pthread_spin_destroy(&sl), 0);
}

/* ============================================================================ */
/* Stress: fibers and main share a barrier, an rwlock and a semaphore ring        */
/* ============================================================================ */

#define MN 5 /* main + 4 fibers */
#define MROUNDS 400
static pthread_barrier_t mb;
static pthread_rwlock_t mrw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t mring[MN];
static long mtable[MN];
static atomic_long m_serial_checks;

static void mix_participant(int id) {
    unsigned seed = (unsigned)id * 7919u + 1;
    for (int r = 0; r < MROUNDS; r++) {
        /* phase 1: rwlock traffic */
        for (int k = 0; k < 8; k++) {
            if (rand_r(&seed) % 4 == 0) {
                EXPECT(pthread_rwlock_wrlock(&mrw), 0);
                mtable[id]++;
                EXPECT(pthread_rwlock_unlock(&mrw), 0);
            } else {
                EXPECT(pthread_rwlock_rdlock(&mrw), 0);
                long s = 0;
                for (int i = 0; i < MN; i++)
                    s += mtable[i];
                CHECK(s >= 0, "sum");
                EXPECT(pthread_rwlock_unlock(&mrw), 0);
            }
        }
        /* phase 2: pass one token around the ring */
        if (id == 0)
            CHECK(sem_post(&mring[1]) == 0, "post");
        CHECK(sem_wait(&mring[id]) == 0, "wait");
        if (id != 0)
            CHECK(sem_post(&mring[(id + 1) % MN]) == 0, "post");
        /* phase 3: everybody meets; the serial thread checks the ring is empty */
        int ret = pthread_barrier_wait(&mb);
        if (ret == PTHREAD_BARRIER_SERIAL_THREAD) {
            for (int i = 0; i < MN; i++) {
                int v;
                sem_getvalue(&mring[i], &v);
                CHECK(v == 0, "ring %d holds %d after round %d", i, v, r);
            }
            atomic_fetch_add(&m_serial_checks, 1);
        }
        CHECK(pthread_barrier_wait(&mb) != EINVAL, "barrier");
    }
}

static void *mix_body(void *arg) {
    note_fiber();
    mix_participant((int)(intptr_t)arg);
    return NULL;
}

static void test_mix(void) {
    EXPECT(pthread_barrier_init(&mb, NULL, MN), 0);
    for (int i = 0; i < MN; i++)
        CHECK(sem_init(&mring[i], 0, 0) == 0, "sem_init");
    pthread_t t[MN - 1];
    for (int i = 1; i < MN; i++)
        t[i - 1] = spawn(mix_body, (void *)(intptr_t)i);
    mix_participant(0);
    for (int i = 0; i < MN - 1; i++)
        join(t[i]);
    long total = 0;
    for (int i = 0; i < MN; i++)
        total += mtable[i];
    unsigned seeds_total = 0;
    for (int id = 0; id < MN; id++) {
        unsigned seed = (unsigned)id * 7919u + 1;
        for (int r = 0; r < MROUNDS; r++)
            for (int k = 0; k < 8; k++)
                seeds_total += rand_r(&seed) % 4 == 0;
    }
    printf("mix: %d participants x %d rounds: serial checks=%ld, writes=%ld (expected %u)\n", MN, MROUNDS,
           atomic_load(&m_serial_checks), total, seeds_total);
    EXPECT(pthread_barrier_destroy(&mb), 0);
    for (int i = 0; i < MN; i++)
        sem_destroy(&mring[i]);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    deadline_s(55);
    report_preload();
    test_barrier_basic();
    test_barrier_rounds();
    test_barrier_destroy_after_round();
    test_barrier_overfull();
    test_barrier_pshared();
    test_once();
    test_spin();
    test_mix();
    fprintf(stderr, "threads_were_fibers=%d\n", atomic_load(&fiber_seen));
    printf("sync_barrier_once_spin: ok\n");
    return 0;
}
