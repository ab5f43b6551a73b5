/* A lock built on raw futex calls the way InnoDB's srw_mutex is (futex_lock.h), taken
 * by 8 threads 3000 times each; every 64th holder sleeps 200 us inside its critical
 * section, so others find the lock held and sleep on the word. Prints the shared count, which
 * only mutual exclusion keeps exact; the futex emulation must lose no wake-up and let
 * no two holders in.
 *   sync_futex_lock signal: instead, a producer signals a consumer through a sequence word
 *   (FUTEX_WAKE of 1 per item, the consumer sleeping on the word when it caught up), as a
 *   futex-based condition variable does; the producer never waits on that word. Prints
 *   what the consumer saw. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
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

enum { ITEMS = 20000 };
static uint32_t seq;
static int consumer_waiting;

static void *consumer(void *arg) {
    (void)arg;
    if (is_fiber && is_fiber())
        __atomic_add_fetch(&fiber_threads, 1, __ATOMIC_RELAXED);
    for (;;) {
        uint32_t seen = __atomic_load_n(&seq, __ATOMIC_ACQUIRE);
        if (seen >= ITEMS)
            return NULL;
        __atomic_store_n(&consumer_waiting, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &seq, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
    }
}

static void *producer(void *arg) {
    (void)arg;
    if (is_fiber && is_fiber())
        __atomic_add_fetch(&fiber_threads, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < ITEMS; i++) {
        __atomic_add_fetch(&seq, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
    return NULL;
}

static int signal_mode(void) {
    pthread_t c, p;
    if (pthread_create(&c, NULL, consumer, NULL))
        return 1;
    /* The consumer sleeps on the word before the first signal. */
    while (!__atomic_load_n(&consumer_waiting, __ATOMIC_ACQUIRE))
        usleep(1000);
    usleep(10000);
    if (pthread_create(&p, NULL, producer, NULL))
        return 1;
    pthread_join(p, NULL);
    pthread_join(c, NULL);
    printf("signals=%d consumer_saw=%u\n", ITEMS, seq);
    return 0;
}

int main(int argc, char **argv) {
    is_fiber = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    if (argc > 1 && strcmp(argv[1], "signal") == 0) {
        int r = signal_mode();
        fprintf(stderr, "preloaded=%d fiber_threads=%d\n", active ? active() : 0, fiber_threads);
        return r;
    }
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
