/* Spinning hand-offs (issue 16): N threads pass a baton around by busy-waiting on a
 * shared step counter, without ever calling into the C library while they wait.
 * Thread k acts at steps where step % N == N-1-k, so each hand-off goes to a thread
 * created *before* the one that hands over: under a fiber scheduler without
 * preemption the spinners that got the workers first never let the next holder of
 * the baton run (with more spinners than workers: a livelock). Natively the kernel
 * time-slices them. Mode `libc` spins inside the C library instead (memchr over a
 * zeroed buffer between two looks at the counter), where the library must not preempt
 * a fiber (libc may hold locks): it falls back to a spare worker.
 *   sync_spin_handoff [threads=8] [rounds=4] [program|libc]
 * stdout: one line per round and the total; stderr: the preload evidence. */
#include <stdlib.h>
#include <string.h>
#include "sync_common.h"

/* The spin-wait hint of the processor (a spin loop in program code, as in redis). */
static inline void cpu_relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static int nthreads = 8, rounds = 4;
static atomic_int step;
static atomic_int round_done[64];
static int spin_in_libc;
static char zeros[4 << 20];

static void *spinner(void *arg) {
    int k = (int)(long)arg;
    note_fiber();
    for (int r = 0; r < rounds; r++) {
        int target = r * nthreads + (nthreads - 1 - k);
        while (atomic_load_explicit(&step, memory_order_acquire) != target) {
            if (spin_in_libc)
                CHECK(memchr(zeros, 1, sizeof zeros) == NULL, "memchr");
            else
                cpu_relax();
        }
        atomic_fetch_add(&round_done[r], 1);
        atomic_store_explicit(&step, target + 1, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1) nthreads = atoi(argv[1]);
    if (argc > 2) rounds = atoi(argv[2]);
    if (argc > 3) spin_in_libc = strcmp(argv[3], "libc") == 0;
    CHECK(nthreads > 0 && nthreads <= 1024 && rounds > 0 && rounds <= 64, "bad arguments");
    report_preload();
    fprintf(stderr, "preloaded=%d\n", p_active ? p_active() : 0);
    /* The baton starts with the thread created last: nothing may run before all are
     * spinning (step -1 matches no target). */
    atomic_store(&step, -1);
    pthread_t *t = calloc(nthreads, sizeof *t);
    for (int k = 0; k < nthreads; k++)
        t[k] = spawn(spinner, (void *)(long)k);
    atomic_store(&step, 0);
    for (int k = 0; k < nthreads; k++)
        join(t[k]);
    for (int r = 0; r < rounds; r++)
        printf("round %d: %d hand-offs\n", r, atomic_load(&round_done[r]));
    printf("steps=%d\n", atomic_load(&step));
    if (p_active && p_active())
        CHECK(atomic_load(&fiber_seen), "spinners did not run as fibers");
    free(t);
    return 0;
}
