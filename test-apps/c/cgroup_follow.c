/* Runs for argv[1] ms (default 3000): 4 threads each compute for a moment and sleep 2 ms,
 * over and over, so that the pool keeps waking and often runs dry. The cgroup test
 * changes the program's CPU quota meanwhile and reads the stats line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define THREADS 4

static long duration_ms;
static volatile unsigned long sink;

static long now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void *worker(void *a) {
    long end = (long)a;
    unsigned long rounds = 0;
    while (now_ms() < end) {
        for (int i = 0; i < 20000; i++) sink += (unsigned long)i * rounds;
        struct timespec t = { 0, 2000000 };
        nanosleep(&t, NULL);
        rounds++;
    }
    return (void *)rounds;
}

int main(int argc, char **argv) {
    duration_ms = argc > 1 ? atol(argv[1]) : 3000;
    long end = now_ms() + duration_ms;
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)end) != 0) return 1;
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    printf("done\n");
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
