/* CPU-bound threads while other processes compete for the CPUs (issue 27, the share
 * policy: runtime::scheduler::share). argv[1] threads (default 64) each run a fixed
 * amount of arithmetic (argv[2] million steps, default 20) and add their result to a
 * checksum. Deterministic stdout: the checksum. The test runs competing busy threads
 * in its own process meanwhile; under the preload the pool should take more workers. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long steps;
static unsigned long long total;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *work(void *a) {
    unsigned long long x = (unsigned long long)(long)a + 1;
    for (long i = 0; i < steps; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    pthread_mutex_lock(&lock);
    total += x;
    pthread_mutex_unlock(&lock);
    return 0;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 64;
    steps = (argc > 2 ? atol(argv[2]) : 20) * 1000000L;
    pthread_t *t = calloc(n, sizeof *t);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], 0, work, (void *)(long)i) != 0) return 1;
    for (int i = 0; i < n; i++) pthread_join(t[i], 0);
    printf("threads %d checksum %llu\n", n, total);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
