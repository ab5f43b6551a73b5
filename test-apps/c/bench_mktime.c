/* bench_mktime THREADS [SECONDS]: THREADS threads call mktime in a loop, as a logging
 * library does per log statement (glog: the broken-down time of "now", converted back
 * with mktime to get the GMT offset), for SECONDS (default 2). Prints the total rate:
 *
 *   threads=8 calls=... seconds=2.00 calls_per_sec=... check=...
 *
 * Run it with TZ unset to see glibc's per-call stat of /etc/localtime (issue 4).
 * Natively every call runs tzset; under libfiberize.so the real tzset runs once a
 * second. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile int stop;
struct worker {
    pthread_t th;
    uint64_t calls;
    int64_t check;
    char pad[64];
};

static void *run(void *arg) {
    struct worker *w = arg;
    time_t now = time(NULL);
    struct tm base;
    localtime_r(&now, &base);
    uint64_t n = 0;
    int64_t check = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        for (int k = 0; k < 256; k++) {
            struct tm tm = base;
            tm.tm_sec += (int)(n & 4095); /* a different second each call, like a log */
            tm.tm_isdst = -1;
            check += mktime(&tm);
            n++;
        }
    }
    w->calls = n;
    w->check = check;
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    double seconds = argc > 2 ? atof(argv[2]) : 2.0;
    if (threads < 1 || threads > 1024 || seconds <= 0) {
        fprintf(stderr, "usage: %s THREADS [SECONDS]\n", argv[0]);
        return 2;
    }
    struct worker *ws = calloc((size_t)threads, sizeof *ws);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&ws[i].th, NULL, run, &ws[i]) != 0) { perror("pthread_create"); return 1; }
    struct timespec d = { (time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9) };
    nanosleep(&d, NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    uint64_t total = 0;
    int64_t check = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(ws[i].th, NULL);
        total += ws[i].calls;
        check += ws[i].check;
    }
    double el = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("threads=%d calls=%llu seconds=%.2f calls_per_sec=%.0f check=%lld\n", threads,
           (unsigned long long)total, el, (double)total / el, (long long)check);
    free(ws);
    return 0;
}
