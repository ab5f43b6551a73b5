/* Benchmarks of the runtime core (issues 2 and 3), not tests. One program, one
 * scenario per invocation; prints "<metric>=<value>" where higher is better.
 *   yield        1000 threads: ~1 us of work, then sched_yield      ops/s
 *   pingpong     2 threads pass a token through a mutex + condvar     round trips/s
 *   sleepers     5000 threads: sleep 1-10 ms, 20 us work, shared lock ops/s (fixed 3 s)
 *   createjoin   create + join threads in batches of 16               threads/s
 *   uncontended  lock + unlock of a private mutex                      pairs/s
 *   hammer       64 threads hammering one mutex                        locks/s
 *   prodcons     8 producers, 8 consumers, queue on mutex + 2 condvars items/s
 *   fileread     8 threads pread 4 KiB from a file in the page cache     reads/s
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static volatile uint64_t sink;
static int fileread_fd = -1;
/* Busy work of about `us` microseconds: iterations per microsecond are calibrated at
   start-up (before any thread exists) so that "1 us of work" means the same natively
   and preloaded. */
static long iters_per_us = 300;
static void spin_iters(long n) { uint64_t x = sink; for (long i = 0; i < n; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL; sink = x; }
static void work_us(int us) { spin_iters(us * iters_per_us); }
static void calibrate(void) {
    long n = 2000000; double a = now(); spin_iters(n); double b = now();
    iters_per_us = (long)(n / ((b - a) * 1e6)); if (iters_per_us < 1) iters_per_us = 1;
}

static void *run_threads(int n, void *(*f)(void *), void *arg) {
    pthread_t *t = malloc(sizeof(pthread_t) * n);
    for (int i = 0; i < n; i++) if (pthread_create(&t[i], 0, f, arg)) { perror("pthread_create"); exit(1); }
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    free(t);
    return 0;
}

/* yield */
static long yield_iters;
static void *yielder(void *a) { (void)a; for (long i = 0; i < yield_iters; i++) { work_us(1); sched_yield(); } return 0; }

/* pingpong */
static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t pc = PTHREAD_COND_INITIALIZER;
static int pturn; static long prounds;
static void *pinger(void *a) {
    int me = (int)(long)a;
    for (long i = 0; i < prounds; i++) {
        pthread_mutex_lock(&pm); while (pturn != me) pthread_cond_wait(&pc, &pm);
        pturn = 1 - me; pthread_cond_signal(&pc); pthread_mutex_unlock(&pm);
    }
    return 0;
}

/* sleepers */
static pthread_mutex_t sm = PTHREAD_MUTEX_INITIALIZER; static long sops; static volatile int sstop;
static void *sleeper(void *a) {
    unsigned seed = (unsigned)(uintptr_t)a;
    while (!sstop) {
        usleep(1000 + rand_r(&seed) % 9000);
        work_us(20);
        pthread_mutex_lock(&sm); sops++; pthread_mutex_unlock(&sm);
    }
    return 0;
}

/* createjoin */
static void *nothing(void *a) { return a; }

/* hammer */
static pthread_mutex_t hm = PTHREAD_MUTEX_INITIALIZER; static long hcount, hper;
static void *hammerer(void *a) { (void)a; for (long i = 0; i < hper; i++) { pthread_mutex_lock(&hm); hcount++; pthread_mutex_unlock(&hm); } return 0; }

/* prodcons */
#define QCAP 64
static pthread_mutex_t qm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t not_empty = PTHREAD_COND_INITIALIZER, not_full = PTHREAD_COND_INITIALIZER;
static long q[QCAP]; static int qh, qt, qn; static long per_producer; static long consumed_sum;
static void *producer(void *a) {
    (void)a;
    for (long i = 0; i < per_producer; i++) {
        pthread_mutex_lock(&qm); while (qn == QCAP) pthread_cond_wait(&not_full, &qm);
        q[qt] = i; qt = (qt + 1) % QCAP; qn++; pthread_cond_signal(&not_empty); pthread_mutex_unlock(&qm);
    }
    return 0;
}
static void *consumer(void *a) {
    (void)a;
    for (long i = 0; i < per_producer; i++) {
        pthread_mutex_lock(&qm); while (qn == 0) pthread_cond_wait(&not_empty, &qm);
        consumed_sum += q[qh]; qh = (qh + 1) % QCAP; qn--; pthread_cond_signal(&not_full); pthread_mutex_unlock(&qm);
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *s = argc > 1 ? argv[1] : "";
    calibrate();
    double t0 = now(), t1;
    if (!strcmp(s, "yield")) {
        yield_iters = 2000; run_threads(1000, yielder, 0); t1 = now();
        printf("ops_per_sec=%.0f\n", 1000.0 * yield_iters / (t1 - t0));
    } else if (!strcmp(s, "pingpong")) {
        prounds = argc > 2 ? atol(argv[2]) : 100000;
        pthread_t a, b; pthread_create(&a, 0, pinger, (void *)0); pthread_create(&b, 0, pinger, (void *)1);
        pthread_join(a, 0); pthread_join(b, 0); t1 = now();
        printf("roundtrips_per_sec=%.0f\n", prounds / (t1 - t0));
    } else if (!strcmp(s, "sleepers")) {
        int n = 5000; pthread_t *t = malloc(sizeof(pthread_t) * n);
        for (int i = 0; i < n; i++) pthread_create(&t[i], 0, sleeper, (void *)(uintptr_t)(i + 1));
        usleep(500000); pthread_mutex_lock(&sm); long base = sops; pthread_mutex_unlock(&sm);
        double a = now(); sleep(3);
        pthread_mutex_lock(&sm); long ops = sops - base; pthread_mutex_unlock(&sm); double b = now();
        sstop = 1; for (int i = 0; i < n; i++) pthread_join(t[i], 0);
        printf("ops_per_sec=%.0f\n", ops / (b - a));
    } else if (!strcmp(s, "createjoin")) {
        int n = 20000;
        for (int i = 0; i < n; i += 16) { pthread_t t[16]; for (int k = 0; k < 16; k++) pthread_create(&t[k], 0, nothing, 0); for (int k = 0; k < 16; k++) pthread_join(t[k], 0); }
        t1 = now(); printf("threads_per_sec=%.0f\n", n / (t1 - t0));
    } else if (!strcmp(s, "uncontended")) {
        /* measured inside a thread (a fiber under the preload) */
        void *body(void *a) {
            (void)a; pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; long n = 50000000;
            double a0 = now(); for (long i = 0; i < n; i++) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); }
            printf("pairs_per_sec=%.0f\n", n / (now() - a0)); return 0;
        }
        run_threads(1, body, 0);
    } else if (!strcmp(s, "hammer")) {
        hper = 100000; run_threads(64, hammerer, 0); t1 = now();
        if (hcount != 64 * hper) { fprintf(stderr, "lost updates\n"); return 1; }
        printf("locks_per_sec=%.0f\n", hcount / (t1 - t0));
    } else if (!strcmp(s, "prodcons")) {
        per_producer = 50000;
        pthread_t p[8], c[8];
        for (int i = 0; i < 8; i++) { pthread_create(&p[i], 0, producer, 0); pthread_create(&c[i], 0, consumer, 0); }
        for (int i = 0; i < 8; i++) { pthread_join(p[i], 0); pthread_join(c[i], 0); }
        t1 = now(); printf("items_per_sec=%.0f\n", 8.0 * per_producer / (t1 - t0));
    } else if (!strcmp(s, "fileread")) {
        /* page-cache hits: what the library adds to a file read that never waits */
        char path[] = "/tmp/bench_core-XXXXXX"; static char block[4096];
        fileread_fd = mkstemp(path); if (fileread_fd < 0) { perror("mkstemp"); return 1; }
        unlink(path);
        for (int i = 0; i < 256; i++) if (write(fileread_fd, block, sizeof block) != (ssize_t)sizeof block) { perror("write"); return 1; }
        void *reader(void *a) {
            char buf[4096]; long n = 200000, off = (long)(uintptr_t)a;
            for (long i = 0; i < n; i++) if (pread(fileread_fd, buf, sizeof buf, ((i + off) % 256) * 4096) != (ssize_t)sizeof buf) { perror("pread"); exit(1); }
            return 0;
        }
        t0 = now(); run_threads(8, reader, 0); t1 = now();
        printf("reads_per_sec=%.0f\n", 8 * 200000 / (t1 - t0));
    } else {
        fprintf(stderr, "usage: %s yield|pingpong|sleepers|createjoin|uncontended|hammer|prodcons|fileread\n", argv[0]);
        return 2;
    }
    return 0;
}
