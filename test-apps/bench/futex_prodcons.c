/* A producer/consumer on raw futex calls, as futex-based condition variables (Rust std's)
 * do it (a measurement, not a test): 8 producers push 200 000 items into a ring under a
 * futex lock of InnoDB's `srw_mutex` shape (test-apps/c/futex_lock.h) and wake one consumer per push while any
 * sleeps (FUTEX_WAKE of 1 on a sequence word); 8 consumers pop, sleeping on the word
 * when the ring is empty. Prints "items_per_sec=N". A futex wake of one that hands the
 * waker's worker to the wakee makes every push a round trip between two fibers.
 *   cc -O2 -pthread -o futex_prodcons test-apps/bench/futex_prodcons.c */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "../c/futex_lock.h"

enum { PRODUCERS = 8, CONSUMERS = 8, ITEMS = 200000, RING = 1024 };
static uint32_t lock_word, seq, sleepers;
static long head, tail, taken;
static long ring[RING];

static long futex(uint32_t *word, int op, uint32_t val, const struct timespec *timeout) {
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static void *producer(void *arg) {
    (void)arg;
    for (int i = 0; i < ITEMS / PRODUCERS; i++) {
        for (;;) {
            futex_lock(&lock_word);
            if (head - tail < RING)
                break;
            futex_unlock(&lock_word);
            sched_yield();
        }
        ring[head++ % RING] = i;
        futex_unlock(&lock_word);
        __atomic_add_fetch(&seq, 1, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(&sleepers, __ATOMIC_SEQ_CST))
            futex(&seq, FUTEX_WAKE_PRIVATE, 1, NULL);
    }
    return NULL;
}

static void *consumer(void *arg) {
    (void)arg;
    for (;;) {
        uint32_t seen = __atomic_load_n(&seq, __ATOMIC_SEQ_CST);
        futex_lock(&lock_word);
        if (tail < head) {
            tail++;
            taken++;
            futex_unlock(&lock_word);
            continue;
        }
        int done = taken >= ITEMS;
        futex_unlock(&lock_word);
        if (done)
            return NULL;
        __atomic_add_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
        struct timespec one_ms = {0, 1000000}; /* the last items' consumers see the end */
        futex(&seq, FUTEX_WAIT_PRIVATE, seen, &one_ms);
        __atomic_sub_fetch(&sleepers, 1, __ATOMIC_SEQ_CST);
    }
}

int main(void) {
    pthread_t t[PRODUCERS + CONSUMERS];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < CONSUMERS; i++)
        pthread_create(&t[i], NULL, consumer, NULL);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_create(&t[CONSUMERS + i], NULL, producer, NULL);
    for (int i = 0; i < PRODUCERS + CONSUMERS; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("items_per_sec=%.0f\n", ITEMS / (b.tv_sec - a.tv_sec + (b.tv_nsec - a.tv_nsec) / 1e9));
    return 0;
}
