/* Raw futex operations through syscall(SYS_futex, ...), as Rust std, libstdc++ and
 * InnoDB use them, between threads and the main thread: WAIT/WAKE (private), timeouts
 * (relative for WAIT, absolute for WAIT_BITSET on both clocks), EAGAIN, bitsets,
 * REQUEUE/CMP_REQUEUE, WAKE_OP, EINVAL. Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
#define P(op) ((op) | FUTEX_PRIVATE_FLAG)

static long fx(uint32_t *a, int op, uint32_t v, const struct timespec *t, uint32_t *a2, uint32_t v3) {
    return syscall(SYS_futex, a, op, v, t, a2, v3);
}

static uint32_t word, word2, woke;
static void *waiter(void *arg) {
    uint32_t bits = (uint32_t)(uintptr_t)arg;
    while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0) {
        long r = bits ? fx(&word, P(FUTEX_WAIT_BITSET), 0, 0, 0, bits) : fx(&word, P(FUTEX_WAIT), 0, 0, 0, 0);
        CHECK(r == 0 || errno == EAGAIN || errno == EINTR);
    }
    __atomic_add_fetch(&woke, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static int count_waiting_ready(void) { usleep(50000); return 1; }

int main(void) {
    /* EAGAIN when the value differs; ETIMEDOUT relative and absolute. */
    word = 1;
    CHECK(fx(&word, P(FUTEX_WAIT), 0, 0, 0, 0) == -1 && errno == EAGAIN);
    struct timespec rel = {0, 10 * 1000 * 1000};
    word = 0;
    CHECK(fx(&word, P(FUTEX_WAIT), 0, &rel, 0, 0) == -1 && errno == ETIMEDOUT);
    struct timespec abs; clock_gettime(CLOCK_MONOTONIC, &abs); abs.tv_nsec += 10000000; if (abs.tv_nsec >= 1000000000) { abs.tv_sec++; abs.tv_nsec -= 1000000000; }
    CHECK(fx(&word, P(FUTEX_WAIT_BITSET), 0, &abs, 0, FUTEX_BITSET_MATCH_ANY) == -1 && errno == ETIMEDOUT);
    clock_gettime(CLOCK_REALTIME, &abs); abs.tv_nsec += 10000000; if (abs.tv_nsec >= 1000000000) { abs.tv_sec++; abs.tv_nsec -= 1000000000; }
    CHECK(fx(&word, P(FUTEX_WAIT_BITSET) | FUTEX_CLOCK_REALTIME, 0, &abs, 0, FUTEX_BITSET_MATCH_ANY) == -1 && errno == ETIMEDOUT);
    CHECK(fx(&word, P(FUTEX_WAIT_BITSET), 0, 0, 0, 0) == -1 && errno == EINVAL);
    struct timespec badt = {0, 1000000000L};
    CHECK(fx(&word, P(FUTEX_WAIT), 0, &badt, 0, 0) == -1 && errno == EINVAL);
    CHECK(fx(&word, P(FUTEX_WAKE), 1, 0, 0, 0) == 0);
    printf("errors and timeouts: ok\n");

    /* WAKE wakes waiting threads; the main thread is the waker. */
    pthread_t t[8];
    word = 0; woke = 0;
    for (int i = 0; i < 8; i++) pthread_create(&t[i], 0, waiter, 0);
    count_waiting_ready();
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    long n = 0; while (__atomic_load_n(&woke, __ATOMIC_SEQ_CST) < 8) { long r = fx(&word, P(FUTEX_WAKE), INT_MAX, 0, 0, 0); CHECK(r >= 0); n += r; usleep(1000); }
    for (int i = 0; i < 8; i++) pthread_join(t[i], 0);
    printf("wake: woke=%u\n", woke);

    /* WAKE_BITSET only wakes waiters whose bitset intersects. */
    word = 0; woke = 0;
    pthread_create(&t[0], 0, waiter, (void *)(uintptr_t)1);
    pthread_create(&t[1], 0, waiter, (void *)(uintptr_t)2);
    count_waiting_ready();
    CHECK(fx(&word, P(FUTEX_WAKE_BITSET), INT_MAX, 0, 0, 4) == 0); /* no one has bit 2 */
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&woke, __ATOMIC_SEQ_CST) < 2) { fx(&word, P(FUTEX_WAKE_BITSET), INT_MAX, 0, 0, 3); usleep(1000); }
    pthread_join(t[0], 0); pthread_join(t[1], 0);
    printf("bitset: woke=%u\n", woke);

    /* CMP_REQUEUE: EAGAIN on a value mismatch; moves waiters to another word. */
    word = 0; woke = 0;
    for (int i = 0; i < 4; i++) pthread_create(&t[i], 0, waiter, 0);
    count_waiting_ready();
    CHECK(fx(&word, P(FUTEX_CMP_REQUEUE), 0, (void *)(uintptr_t)INT_MAX, &word2, 99) == -1 && errno == EAGAIN);
    /* All four, unless some were slow to start waiting: under load none may wait yet
     * after count_waiting_ready's sleep, so ask again (bounded: 2 s) until one does. */
    long moved = 0;
    for (int i = 0; i < 200 && moved == 0; i++) {
        moved = fx(&word, P(FUTEX_CMP_REQUEUE), 0, (void *)(uintptr_t)INT_MAX, &word2, 0);
        if (moved == 0) usleep(10000);
    }
    CHECK(moved >= 1 && moved <= 4);
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    /* requeued waiters sleep on word2 now; any latecomer on word */
    while (__atomic_load_n(&woke, __ATOMIC_SEQ_CST) < 4) {
        CHECK(fx(&word2, P(FUTEX_WAKE), INT_MAX, 0, 0, 0) >= 0);
        CHECK(fx(&word, P(FUTEX_WAKE), INT_MAX, 0, 0, 0) >= 0);
        usleep(1000);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], 0);
    printf("requeue: woke=%u\n", woke);

    /* WAKE_OP: word2 += 1; wake 1 on word, and on word2 if old == 0. */
    word2 = 0;
    long r = fx(&word, P(FUTEX_WAKE_OP), 1, (void *)(uintptr_t)1, &word2, FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_EQ, 0));
    CHECK(r == 0 && word2 == 1);
    printf("wake_op: word2=%u\n", word2);

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
