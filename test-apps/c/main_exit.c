/* main() ends with pthread_exit: the process must live until its last thread ends and
 * then exit with status 0 (glibc's rule), even though the library's workers never end. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static void *worker(void *a) {
    usleep(20000 * (int)(long)a);
    printf("thread %ld done\n", (long)a);
    fflush(stdout);
    return 0;
}
int main(void) {
    pthread_t t;
    for (long i = 1; i <= 3; i++) pthread_create(&t, 0, worker, (void *)i);
    printf("main exits\n");
    fflush(stdout);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    pthread_exit(0);
}
