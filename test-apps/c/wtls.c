/* WTLS (fiberize.h) natively and preloaded: WTLS_ADDR_OF, WTLS_REGISTER and
 * AT_FIBER_DESTROY, with fibers that migrate between workers (a shared mutex hands
 * waiters to the unlocker's worker; yields let idle workers steal).
 *
 *   wtls THREADS ROUNDS
 *
 * stdout is the same both ways (each check knows what it must see in its mode);
 * stderr says how many worker blocks were seen and how many threads migrated. */
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <unistd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "fiberize.h"

#define CHECK(c)                                                                    \
    do {                                                                            \
        if (!(c)) {                                                                 \
            fprintf(stderr, "CHECK failed line %d: %s\n", __LINE__, #c);            \
            exit(1);                                                                \
        }                                                                           \
    } while (0)

#define MAX_BLOCKS 64
static __thread long per_worker_count; /* reached through WTLS_ADDR_OF */
static __thread long registered_count; /* WTLS_REGISTER: per worker while a fiber runs */
static __thread int destroy_callback_ran;
static __thread int my_id;

static int preloaded;
static int rounds;
static pthread_mutex_t handoff = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static long *count_blocks[MAX_BLOCKS]; /* distinct translated addresses seen */
static long *registered_blocks[MAX_BLOCKS];
static int n_count_blocks, n_registered_blocks;
static atomic_long own_total, registered_own_total;
static atomic_int migrated, not_translated, callbacks_before_destructors, destructors_run;
static pthread_key_t key;
static sem_t from_main; /* posted by the main thread: wake-ups through the global queue */
#define WAKE_EVERY 20

static void remember(long **blocks, int *n, long *p) {
    pthread_mutex_lock(&seen_lock);
    int i;
    for (i = 0; i < *n && blocks[i] != p; i++) {
    }
    if (i == *n) {
        CHECK(*n < MAX_BLOCKS);
        blocks[(*n)++] = p;
    }
    pthread_mutex_unlock(&seen_lock);
}

static void at_destroy(void) {
    destroy_callback_ran = 1;
    /* The registered variable holds the fiber's own value again only after the last
     * switch out; the callback runs in the fiber, before that. Nothing to check. */
}

static void key_destructor(void *v) {
    (void)v;
    atomic_fetch_add(&destructors_run, 1);
    if (destroy_callback_ran)
        atomic_fetch_add(&callbacks_before_destructors, 1);
    /* Natively the thread is its own worker: its own value plus every increment.
     * Preloaded its own value is back in its block (the increments went to workers). */
    long own = 1000 + my_id;
    long expect = preloaded ? own : own + rounds;
    CHECK(registered_count == expect);
    atomic_fetch_add(&registered_own_total, registered_count - own);
}

static void *body(void *arg) {
    my_id = (int)(long)arg;
    pthread_setspecific(key, (void *)1);
    CHECK(AT_FIBER_DESTROY(at_destroy) == 0);
    registered_count = 1000 + my_id;
    CHECK(WTLS_REGISTER(registered_count) == 0);
    if (!preloaded)
        CHECK(registered_count == 1000 + my_id);
    long *first = NULL;
    int moved = 0;
    for (int r = 0; r < rounds; r++) {
        long *p = WTLS_ADDR_OF(per_worker_count);
        /* Used before anything that may switch: remember() takes a mutex, and a fiber
         * that waits there may go on on another worker, whose fibers then race on this
         * block (an increment lost 1 in 12800 under qemu before this order). No
         * preemption falls in between either. */
        (*p)++;
        if (p == &per_worker_count)
            atomic_fetch_add(&not_translated, 1);
        else
            remember(count_blocks, &n_count_blocks, p);
        if (first == NULL)
            first = p;
        else if (p != first)
            moved = 1;
        registered_count++;
        /* The block of the worker that got this increment (no switch in between): a
         * worker that ran the fiber for a while, a spare the monitor brought in on a
         * loaded machine included, though no fiber ends there. */
        if (preloaded)
            remember(registered_blocks, &n_registered_blocks, WTLS_ADDR_OF(registered_count));
        if (r % WAKE_EVERY == WAKE_EVERY / 2) {
            sem_wait(&from_main);
        } else if (r % 2) {
            pthread_mutex_lock(&handoff);
            sched_yield();
            pthread_mutex_unlock(&handoff);
        } else {
            sched_yield();
        }
    }
    if (moved)
        atomic_fetch_add(&migrated, 1);
    atomic_fetch_add(&own_total, per_worker_count);
    if (my_id % 2)
        pthread_exit(NULL); /* the callback runs on this path too */
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 64;
    rounds = argc > 2 ? atoi(argv[2]) : 200;
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    preloaded = active ? active() : 0;
    pthread_key_create(&key, key_destructor);
    sem_init(&from_main, 0, 0);

    /* The main thread is a plain thread: its own block, both ways. */
    CHECK(WTLS_ADDR_OF(per_worker_count) == &per_worker_count);
    CHECK(WTLS_REGISTER(registered_count) == 0);
    char too_big[300];
    (void)too_big;
    static __thread char big[300];
    CHECK(WTLS_REGISTER(big) == 22);
    printf("main thread keeps its own TLS\n");

    pthread_t *t = malloc(sizeof(pthread_t) * threads);
    for (long i = 0; i < threads; i++)
        CHECK(pthread_create(&t[i], NULL, body, (void *)i) == 0);
    long wakes = (long)threads * ((rounds + WAKE_EVERY / 2) / WAKE_EVERY);
    for (long i = 0; i < wakes; i++) {
        sem_post(&from_main);
        if (i % 8 == 0)
            usleep(100);
    }
    for (int i = 0; i < threads; i++)
        CHECK(pthread_join(t[i], NULL) == 0);

    /* Every increment is somewhere: in the threads' own blocks natively, in the
     * workers' blocks (alive: workers never exit) preloaded. */
    long in_workers = 0, registered_in_workers = 0;
    for (int i = 0; i < n_count_blocks; i++)
        in_workers += *count_blocks[i];
    if (preloaded)
        for (int i = 0; i < n_registered_blocks; i++)
            registered_in_workers += *registered_blocks[i];
    printf("WTLS_ADDR_OF increments %ld of %ld\n", own_total + in_workers, (long)threads * rounds);
    printf("WTLS_REGISTER increments %ld of %ld\n", registered_own_total + registered_in_workers,
           (long)threads * rounds);
    printf("AT_FIBER_DESTROY before destructors %d of %d\n", callbacks_before_destructors, destructors_run);
    if (preloaded)
        CHECK(not_translated == 0 && n_count_blocks >= 1);
    else
        CHECK(n_count_blocks == 0);
    fprintf(stderr, "preloaded=%d worker_blocks=%d migrated=%d\n", preloaded, n_count_blocks, migrated);
    return 0;
}
