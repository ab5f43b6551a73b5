/* Futexes without the private flag through syscall(SYS_futex, ...), as libstdc++'s
 * atomic::wait uses them, on words in private memory (the library parks their waiters)
 * and in a MAP_SHARED anonymous mapping (the kernel does), natively and preloaded.
 *
 *   mmap          200 waits on a private word, each after a private mmap: the waits
 *                 return at once (value mismatch, then a 1 us timeout); the test reads
 *                 the library's count of /proc/self/maps reads.
 *   wake_op       FUTEX_WAKE_OP(uaddr private, uaddr2 shared): waiters on both words.
 *   wake_op_rev   FUTEX_WAKE_OP(uaddr shared, uaddr2 private): waiters on both words.
 *   requeue       FUTEX_CMP_REQUEUE and FUTEX_REQUEUE from a private word to a shared one.
 *   requeue_rev   FUTEX_CMP_REQUEUE and FUTEX_REQUEUE from a shared word to a private one.
 *   requeue_private  the same between two private words (both in the library): the
 *                 kernel's FUTEX_REQUEUE, as CMP_REQUEUE, returns woken + requeued.
 *
 * The private word's waiters are threads (fibers, preloaded) and, in a second round,
 * the main thread (a plain thread, preloaded: it waits in the library's lot as well).
 *
 * Each waiter waits once with a timeout and says whether it was woken or timed out;
 * the waker repeats its operation (a waiter may start waiting late) until every
 * waiter has returned, and prints what the operations returned in total (each waiter
 * is woken or requeued by exactly one of them). Deterministic stdout. */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "sync_common.h"

static long fx(uint32_t *a, int op, uint32_t v, const struct timespec *t, uint32_t *a2, uint32_t v3) {
    return syscall(SYS_futex, a, op, v, t, a2, v3);
}

/* The count argument FUTEX_REQUEUE and FUTEX_WAKE_OP read in the timeout's place. */
#define VAL2(n) ((const struct timespec *)(uintptr_t)(n))

static uint32_t private_word, private_word2;
static uint32_t *shared_word, *shared_word2;
static atomic_int woken, timed_out;

/* Waits once on *word (value 0), up to 2 s: woken (0) or ETIMEDOUT. */
static void *waiter(void *arg) {
    uint32_t *word = arg;
    note_fiber();
    for (;;) {
        struct timespec ts = {2 * slow_factor(), 0};
        long r = fx(word, FUTEX_WAIT, 0, &ts, 0, 0);
        if (r == 0) {
            atomic_fetch_add(&woken, 1);
            return 0;
        }
        if (errno == ETIMEDOUT) {
            atomic_fetch_add(&timed_out, 1);
            return 0;
        }
        CHECK(errno == EINTR, "FUTEX_WAIT: errno %d", errno);
    }
}

enum { MAX_WAITERS = 8 };

/* Starts `on_first` waiters on `first` and `on_second` on `second`, then repeats
 * `op` (which returns the operation's result) until all of them have returned or
 * 3 s have passed, and prints what happened. */
static void round_of(const char *name, uint32_t *first, int on_first, uint32_t *second, int on_second,
                     long (*op)(void)) {
    pthread_t t[MAX_WAITERS];
    int n = on_first + on_second;
    atomic_store(&woken, 0);
    atomic_store(&timed_out, 0);
    for (int i = 0; i < n; i++)
        t[i] = spawn(waiter, i < on_first ? first : second);
    sleep_ms(20);
    long total = 0;
    struct timespec until = at_ms(CLOCK_MONOTONIC, 3000L * slow_factor()), now;
    while (atomic_load(&woken) + atomic_load(&timed_out) < n) {
        long r = op();
        CHECK(r >= 0, "%s: errno %d", name, errno);
        total += r;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec > until.tv_nsec))
            break;
        sleep_ms(2);
    }
    for (int i = 0; i < n; i++)
        join(t[i]);
    printf("%s: waiters=%d woken=%d timed_out=%d returned=%ld\n", name, n, atomic_load(&woken),
           atomic_load(&timed_out), total);
}

/* The same with the main thread (a plain thread, preloaded) as the only waiter, on
 * `word`, and a thread repeating `op` until main has returned. */
static long (*main_round_op)(void);
static atomic_int main_returned;
static void *main_round_waker(void *arg) {
    (void)arg;
    struct timespec until = at_ms(CLOCK_MONOTONIC, 3000L * slow_factor()), now;
    while (!atomic_load(&main_returned)) {
        CHECK(main_round_op() >= 0, "waker: errno %d", errno);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > until.tv_sec || (now.tv_sec == until.tv_sec && now.tv_nsec > until.tv_nsec))
            break;
        sleep_ms(2);
    }
    return 0;
}
static void main_waits(const char *name, uint32_t *word, long (*op)(void)) {
    atomic_store(&woken, 0);
    atomic_store(&timed_out, 0);
    atomic_store(&main_returned, 0);
    main_round_op = op;
    pthread_t t = spawn(main_round_waker, NULL);
    waiter(word);
    atomic_store(&main_returned, 1);
    join(t);
    printf("%s, main waits: woken=%d timed_out=%d\n", name, atomic_load(&woken), atomic_load(&timed_out));
}

/* word2 |= 0 (unchanged: late waiters still find 0), then wake all on uaddr, and all
 * on uaddr2 as the old value is 0. */
static long wake_op(void) {
    return fx(&private_word, FUTEX_WAKE_OP, INT_MAX, VAL2(INT_MAX), shared_word,
              FUTEX_OP(FUTEX_OP_OR, 0, FUTEX_OP_CMP_EQ, 0));
}
static long wake_op_rev(void) {
    return fx(shared_word, FUTEX_WAKE_OP, INT_MAX, VAL2(INT_MAX), &private_word,
              FUTEX_OP(FUTEX_OP_OR, 0, FUTEX_OP_CMP_EQ, 0));
}

/* Wake one, requeue the rest; the requeued are woken on the second word by the next
 * call's FUTEX_WAKE (whose count is not part of the total). */
static uint32_t *requeue_from, *requeue_to;
static int requeue_op;
static long requeue(void) {
    fx(requeue_to, FUTEX_WAKE, INT_MAX, 0, 0, 0);
    return fx(requeue_from, requeue_op, 1, VAL2(INT_MAX), requeue_to, 0);
}

static void requeue_rounds(const char *name, uint32_t *from, uint32_t *to) {
    *from = 0;
    CHECK(fx(from, FUTEX_CMP_REQUEUE, 1, VAL2(INT_MAX), to, 1) == -1 && errno == EAGAIN, "%s: no EAGAIN", name);
    requeue_from = from;
    requeue_to = to;
    char label[64];
    requeue_op = FUTEX_CMP_REQUEUE;
    snprintf(label, sizeof label, "%s cmp_requeue", name);
    round_of(label, from, 3, from, 0, requeue);
    main_waits(label, from, requeue);
    requeue_op = FUTEX_REQUEUE;
    snprintf(label, sizeof label, "%s requeue", name);
    round_of(label, from, 3, from, 0, requeue);
}

/* 200 waits on a private word, each after a private mmap (a quarter unmapped again),
 * in a thread (a fiber, preloaded). */
static void *mmap_then_wait(void *arg) {
    (void)arg;
    note_fiber();
    int again = 0, timeouts = 0;
    for (int i = 0; i < 200; i++) {
        char *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED, "mmap private: errno %d", errno);
        p[0] = 1;
        private_word = 0;
        struct timespec ts = {0, 1000};
        if (i % 2 == 0)
            again += fx(&private_word, FUTEX_WAIT, 1, &ts, 0, 0) == -1 && errno == EAGAIN;
        else
            timeouts += fx(&private_word, FUTEX_WAIT, 0, &ts, 0, 0) == -1 && errno == ETIMEDOUT;
        if (i % 4 == 3)
            CHECK(munmap(p, 65536) == 0, "munmap: errno %d", errno);
    }
    printf("mmap: 200 waits, EAGAIN=%d ETIMEDOUT=%d\n", again, timeouts);
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    report_preload();
    deadline_s(30);
    shared_word = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(shared_word != MAP_FAILED, "mmap shared: errno %d", errno);
    shared_word2 = shared_word + 16;
    if (strcmp(mode, "mmap") == 0) {
        join(spawn(mmap_then_wait, NULL));
    } else if (strcmp(mode, "wake_op") == 0) {
        round_of("wake_op private->shared", &private_word, 3, shared_word, 2, wake_op);
        main_waits("wake_op private->shared", &private_word, wake_op);
        printf("wake_op: shared word %u\n", *shared_word);
    } else if (strcmp(mode, "wake_op_rev") == 0) {
        round_of("wake_op shared->private", shared_word, 2, &private_word, 3, wake_op_rev);
        main_waits("wake_op shared->private", &private_word, wake_op_rev);
        printf("wake_op_rev: private word %u\n", private_word);
    } else if (strcmp(mode, "requeue") == 0) {
        requeue_rounds("private->shared", &private_word, shared_word2);
    } else if (strcmp(mode, "requeue_private") == 0) {
        requeue_rounds("private->private", &private_word, &private_word2);
    } else if (strcmp(mode, "requeue_rev") == 0) {
        requeue_rounds("shared->private", shared_word, &private_word2);
    } else {
        CHECK(0, "unknown mode '%s'", mode);
    }
    fprintf(stderr, "waiter_is_fiber=%d preloaded=%d\n", atomic_load(&fiber_seen), p_active ? p_active() : 0);
    return 0;
}
