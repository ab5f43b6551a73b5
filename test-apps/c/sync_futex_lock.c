/* A lock built on raw futex calls the way InnoDB's srw_mutex is (futex_lock.h), taken
 * by 8 threads 3000 times each; every 64th holder sleeps 200 us inside its critical
 * section, so others find the lock held and sleep on the word. Prints the shared count, which
 * only mutual exclusion keeps exact; the futex emulation must lose no wake-up and let
 * no two holders in. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "futex_lock.h"

enum { THREADS = 8, ROUNDS = 3000 };
static uint32_t lock_word;
static long count;
static int fiber_threads;
static int (*is_fiber)(void);

static void *worker(void *arg) {
    (void)arg;
    if (is_fiber && is_fiber())
        __atomic_add_fetch(&fiber_threads, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < ROUNDS; i++) {
        futex_lock(&lock_word);
        long c = count;
        if (i % 64 == 0)
            usleep(200); /* a holder that sleeps: the others find the lock held */
        count = c + 1;
        futex_unlock(&lock_word);
    }
    return NULL;
}

int main(void) {
    is_fiber = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL))
            return 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("count=%ld word=%u\n", count, lock_word);
    fprintf(stderr, "preloaded=%d fiber_threads=%d\n", active ? active() : 0, fiber_threads);
    return 0;
}
