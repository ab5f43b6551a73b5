/* A lock on one raw futex word, the shape of InnoDB's srw_mutex: bit 0 the holder, +2 per
 * thread that is in the lock or waiting for it; an unlock that leaves the word non-zero
 * wakes one waiter (FUTEX_WAKE of 1). Shared by sync_futex_lock.c and
 * test-apps/bench/futex_prodcons.c. */
#ifndef FUTEX_LOCK_H
#define FUTEX_LOCK_H
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { FUTEX_LOCK_HOLDER = 1, FUTEX_LOCK_WAITER = 2 };

static inline void futex_lock(uint32_t *word) {
    uint32_t free_word = 0;
    if (__atomic_compare_exchange_n(word, &free_word, FUTEX_LOCK_HOLDER + FUTEX_LOCK_WAITER, 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
        return;
    uint32_t seen = __atomic_add_fetch(word, FUTEX_LOCK_WAITER, __ATOMIC_ACQUIRE);
    for (;;) {
        if (!(seen & FUTEX_LOCK_HOLDER)) {
            seen = __atomic_fetch_or(word, FUTEX_LOCK_HOLDER, __ATOMIC_ACQUIRE);
            if (!(seen & FUTEX_LOCK_HOLDER))
                return;
            seen |= FUTEX_LOCK_HOLDER;
        }
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, seen, NULL, NULL, 0);
        seen = __atomic_load_n(word, __ATOMIC_ACQUIRE);
    }
}

static inline void futex_unlock(uint32_t *word) {
    if (__atomic_sub_fetch(word, FUTEX_LOCK_HOLDER + FUTEX_LOCK_WAITER, __ATOMIC_RELEASE) != 0)
        syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
#endif
