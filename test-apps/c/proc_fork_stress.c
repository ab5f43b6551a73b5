#define _GNU_SOURCE
/* Fork/exec stress (issue 17): T threads each fork N children while the parent's
 * other threads contend on a mutex and a condition variable (which the program's
 * atfork hooks take across every fork). Each child creates threads, sleeps, joins and
 * ends one of three ways: by returning from the forking thread (status 0), by exit(k),
 * or by execv of /bin/true (status 0). Every child is reaped with the status expected
 * of it. Usage: proc_fork_stress [threads] [forks_per_thread]. Deterministic stdout. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t hot_cv = PTHREAD_COND_INITIALIZER;
static long hot_counter;
static volatile int stop;
static int forks_per_thread;
static long reaped_ok, reaped_bad;
static pthread_mutex_t tally = PTHREAD_MUTEX_INITIALIZER;

static void prep(void) { pthread_mutex_lock(&hot); }
static void parent(void) { pthread_mutex_unlock(&hot); }
static void child(void) { pthread_mutex_unlock(&hot); }

static void *contender(void *a) {
    (void)a;
    while (!stop) {
        pthread_mutex_lock(&hot);
        hot_counter++;
        if (hot_counter % 64 == 0) pthread_cond_broadcast(&hot_cv);
        pthread_mutex_unlock(&hot);
        if (hot_counter % 16 == 0) sched_yield();
    }
    return 0;
}

static pthread_mutex_t cm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ccv = PTHREAD_COND_INITIALIZER;
static int child_count;
static void *child_thread(void *a) {
    struct timespec ts = {0, 200 * 1000};
    nanosleep(&ts, 0);
    pthread_mutex_lock(&cm);
    child_count++;
    pthread_cond_signal(&ccv);
    pthread_mutex_unlock(&cm);
    pthread_mutex_lock(&hot); pthread_mutex_unlock(&hot);
    return a;
}

/* In the child: two threads, a condition wait for both, joins. */
static int child_work(void) {
    pthread_t t[2];
    for (long i = 0; i < 2; i++) if (pthread_create(&t[i], 0, child_thread, (void *)i) != 0) return 0;
    pthread_mutex_lock(&cm);
    while (child_count < 2) pthread_cond_wait(&ccv, &cm);
    pthread_mutex_unlock(&cm);
    for (long i = 0; i < 2; i++) { void *r; if (pthread_join(t[i], &r) != 0 || r != (void *)i) return 0; }
    return 1;
}

static void *forker(void *a) {
    long id = (long)a;
    for (int k = 0; k < forks_per_thread; k++) {
        int mode = (int)((id + k) % 3), code = (int)((id * 7 + k) % 100) + 1;
        pid_t p = fork();
        CHECK(p >= 0);
        if (p == 0) {
            if (!child_work()) _exit(200);
            if (mode == 0) return 0;               /* the last thread ends: status 0 */
            if (mode == 1) exit(code);
            char *argv[] = {"/bin/true", 0};
            execv(argv[0], argv);
            _exit(201);
        }
        int st;
        CHECK(waitpid(p, &st, 0) == p);
        int want = mode == 1 ? code : 0;
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == want;
        if (!ok) fprintf(stderr, "child mode %d: status %#x, want exit %d\n", mode, st, want);
        pthread_mutex_lock(&tally);
        if (ok) reaped_ok++; else reaped_bad++;
        pthread_mutex_unlock(&tally);
    }
    return 0;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 64;
    forks_per_thread = argc > 2 ? atoi(argv[2]) : 20;
    CHECK(pthread_atfork(prep, parent, child) == 0);
    pthread_t c[4], *f = calloc(threads, sizeof *f);
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&c[i], 0, contender, 0) == 0);
    for (long i = 0; i < threads; i++) CHECK(pthread_create(&f[i], 0, forker, (void *)i) == 0);
    for (int i = 0; i < threads; i++) CHECK(pthread_join(f[i], 0) == 0);
    stop = 1;
    for (int i = 0; i < 4; i++) CHECK(pthread_join(c[i], 0) == 0);
    CHECK(waitpid(-1, 0, WNOHANG) == -1 && errno == ECHILD);
    printf("children reaped ok=%ld bad=%ld of %d contended=%d\n", reaped_ok, reaped_bad, threads * forks_per_thread, hot_counter > 0);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return reaped_bad != 0;
}
