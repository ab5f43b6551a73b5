/* A lock built on raw futex calls the way InnoDB's srw_mutex is (one word: bit 0 the
 * holder, +2 per thread that is in the lock or waiting for it; an unlock that leaves the
 * word non-zero wakes one waiter with FUTEX_WAKE of 1), taken by 8 threads 3000 times
 * each; every 64th holder yields inside its critical section, so others find the lock
 * held and sleep on the word. Prints the shared count, which only mutual exclusion
 * keeps exact; the futex emulation must lose no wake-up and let no two holders in. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { THREADS = 8, ROUNDS = 3000, HOLDER = 1, WAITER = 2 };
static uint32_t lock_word;
static long count;
static int fiber_threads;
static int (*is_fiber)(void);

static void futex_lock(void) {
    uint32_t free_word = 0;
    if (__atomic_compare_exchange_n(&lock_word, &free_word, HOLDER + WAITER, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    uint32_t seen = __atomic_add_fetch(&lock_word, WAITER, __ATOMIC_ACQUIRE);
    for (;;) {
        if (!(seen & HOLDER)) {
            seen = __atomic_fetch_or(&lock_word, HOLDER, __ATOMIC_ACQUIRE);
            if (!(seen & HOLDER))
                return;
            seen |= HOLDER;
        }
        syscall(SYS_futex, &lock_word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        seen = __atomic_load_n(&lock_word, __ATOMIC_ACQUIRE);
    }
}

static void futex_unlock(void) {
    if (__atomic_sub_fetch(&lock_word, HOLDER + WAITER, __ATOMIC_RELEASE) != 0)
        syscall(SYS_futex, &lock_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *worker(void *arg) {
    (void)arg;
    if (is_fiber && is_fiber())
        __atomic_add_fetch(&fiber_threads, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < ROUNDS; i++) {
        futex_lock();
        long c = count;
        if (i % 64 == 0)
            sched_yield();
        count = c + 1;
        futex_unlock();
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
