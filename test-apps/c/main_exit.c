/* main() ends with pthread_exit: the process must live until its last thread ends and
 * then exit with status 0 (glibc's rule), even though the library's workers never end.
 * The threads take turns after main's line (a turn each, then 20 ms of sleep, so they
 * outlive main): the order is explicit, not a matter of sleeps racing main's printf
 * (under qemu on a loaded host, thread 1 once printed before main). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
static atomic_long turn;
static void *worker(void *a) {
    long i = (long)a;
    while (atomic_load(&turn) != i)
        usleep(1000);
    usleep(20000);
    printf("thread %ld done\n", i);
    fflush(stdout);
    atomic_store(&turn, i + 1);
    return 0;
}
int main(void) {
    pthread_t t;
    for (long i = 1; i <= 3; i++) pthread_create(&t, 0, worker, (void *)i);
    printf("main exits\n");
    fflush(stdout);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    atomic_store(&turn, 1);
    pthread_exit(0);
}
