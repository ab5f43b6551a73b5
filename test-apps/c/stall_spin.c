/* Issue 11: the stall watchdog. With one worker, thread A wakes thread B (which then
 * waits in A's worker's queue) and computes for SPIN_MS without a single call that
 * could switch: under the preload no fiber is switched to for that long while B is
 * runnable, which FIBERIZE_WATCHDOG must report (the test sets it below SPIN_MS).
 * Natively and preloaded the program prints the same lines. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static sem_t go;
static long spin_ms = 1500;

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *waiter_main(void *arg) {
    (void)arg;
    sem_wait(&go);
    return "waiter ran";
}

static void *spinner_main(void *arg) {
    (void)arg;
    usleep(50000); /* the waiter is parked in sem_wait by now */
    sem_post(&go);
    long end = now_ms() + spin_ms;
    volatile unsigned long x = 0;
    while (now_ms() < end) x++;
    return "spinner done";
}

int main(int argc, char **argv) {
    if (argc > 1) spin_ms = atol(argv[1]);
    sem_init(&go, 0, 0);
    pthread_t w, s;
    pthread_create(&w, NULL, waiter_main, NULL);
    pthread_create(&s, NULL, spinner_main, NULL);
    void *rs, *rw;
    pthread_join(s, &rs);
    pthread_join(w, &rw);
    printf("%s\n%s\n", (char *)rw, (char *)rs);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
