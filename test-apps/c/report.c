/* The report's test program (FIBERIZE_REPORT): one function blocks its worker in a
 * call the library does not intercept (a raw nanosleep system call), and one function
 * takes a hot, contended mutex. The report must name both, first in their lists.
 *   report BLOCKS SLEEP_MS HAMMER_THREADS LOCKS_PER_THREAD [close-stderr]
 * close-stderr: close fd 2 before exit, as xz does (FIBERIZE_STATS=/path must still work). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared_counter;
static int blocks, sleep_ms, locks_per_thread;

__attribute__((noinline)) static void blocker_in_raw_sleep(void) {
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    syscall(SYS_nanosleep, &ts, NULL); /* not intercepted: blocks the worker */
}

static void *blocker(void *arg) {
    (void)arg;
    for (int i = 0; i < blocks; i++)
        blocker_in_raw_sleep();
    return NULL;
}

__attribute__((noinline)) static void hot_lock_user(void) {
    for (int i = 0; i < locks_per_thread; i++) {
        pthread_mutex_lock(&hot);
        for (int k = 0; k < 200; k++)
            shared_counter++;
        /* Now and then the holder yields with the lock held, so that the other
         * hammers always meet it: without this, on a loaded machine the second
         * worker may not wake before each hammer's few ms are done, and the
         * hammers then run one after another on one worker, never contending. */
        if (i % 500 == 0)
            sched_yield();
        pthread_mutex_unlock(&hot);
    }
}

static void *hammer(void *arg) {
    (void)arg;
    hot_lock_user();
    return NULL;
}

int main(int argc, char **argv) {
    blocks = argc > 1 ? atoi(argv[1]) : 2;
    sleep_ms = argc > 2 ? atoi(argv[2]) : 300;
    int threads = argc > 3 ? atoi(argv[3]) : 8;
    locks_per_thread = argc > 4 ? atoi(argv[4]) : 20000;
    pthread_t b, *h = malloc(sizeof(pthread_t) * threads);
    /* Two phases, one after the other. Run side by side, the blocker could take one of
     * the two workers before the hammers start, and the hammers (a few ms of work) then
     * all ran on the other, one after another, without a single contended wait. */
    pthread_create(&b, NULL, blocker, NULL);
    pthread_join(b, NULL);
    for (int i = 0; i < threads; i++)
        pthread_create(&h[i], NULL, hammer, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(h[i], NULL);
    printf("counter %lu\n", shared_counter);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    if (argc > 5 && strcmp(argv[5], "close-stderr") == 0)
        close(2);
    return 0;
}
