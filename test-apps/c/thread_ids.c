#define _GNU_SOURCE
/* Thread ids (issue 25, part 5): N threads (more than the workers) alive at once each
 * read gettid() and syscall(SYS_gettid); the ids must be distinct, the same both ways,
 * and listed in /proc/self/task. Then each thread signals the next one by its tid
 * (tgkill(), syscall(SYS_tgkill), syscall(SYS_tkill) in turn): the handler must run in
 * the target (pthread_self() and gettid() inside it are the target's). Each thread
 * also sets its own nice value through its tid and reads it back, and reads its CPU
 * affinity by tid and by 0.
 *
 * stdout (the same natively and preloaded): the counts of threads that passed each
 * check. stderr: `preloaded=`, `fibers=` (threads for which fiberize_is_fiber() was 1). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

extern int fiberize_is_fiber(void) __attribute__((weak));
extern int fiberize_active(void) __attribute__((weak));

enum { MAX_THREADS = 256 };

static int n_threads;
static pthread_t threads[MAX_THREADS];
static pid_t tids[MAX_THREADS];            /* gettid() of each thread */
static int same_both_ways[MAX_THREADS];    /* gettid() == syscall(SYS_gettid) */
static volatile sig_atomic_t handled[MAX_THREADS]; /* the handler ran in thread i */
static volatile sig_atomic_t handler_tid_ok[MAX_THREADS];
static volatile sig_atomic_t handler_misplaced;    /* ran in a thread no one signalled */
static int nice_ok[MAX_THREADS], affinity_ok[MAX_THREADS], fibers, base_nice;

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int ready, go;

static void on_signal(int sig) {
    (void)sig;
    pthread_t self = pthread_self();
    for (int i = 0; i < n_threads; i++) {
        if (pthread_equal(self, threads[i])) {
            handler_tid_ok[i] = gettid() == tids[i];
            handled[i] = 1;
            return;
        }
    }
    handler_misplaced = 1;
}

static int send_to(int kind, pid_t tid) {
    switch (kind % 3) {
    case 0: return tgkill(getpid(), tid, SIGUSR1);
    case 1: return (int)syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
    default: return (int)syscall(SYS_tkill, tid, SIGUSR1);
    }
}

static void *worker(void *arg) {
    int me = (int)(long)arg;
    pid_t tid = gettid();
    pthread_mutex_lock(&m);
    tids[me] = tid;
    same_both_ways[me] = tid == (pid_t)syscall(SYS_gettid);
    fibers += fiberize_is_fiber ? fiberize_is_fiber() : 0;
    ready++;
    pthread_cond_broadcast(&cv);
    while (!go) pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);

    /* Signal the next thread; it waits for exactly this signal, so it is alive. */
    int next = (me + 1) % n_threads;
    CHECK(send_to(me, tids[next]) == 0);
    for (int i = 0; i < 10000 && !handled[me]; i++) usleep(1000); /* at most 10 s */

    /* Nice value by tid (raising it needs no privilege), read back by tid and by 0. */
    int want = base_nice + 1 + me % 5;
    if (want > 19) want = 19;
    nice_ok[me] = setpriority(PRIO_PROCESS, (id_t)tid, want) == 0 &&
                  getpriority(PRIO_PROCESS, (id_t)tid) == want && getpriority(PRIO_PROCESS, 0) == want;
    cpu_set_t by_tid, by_zero;
    affinity_ok[me] = sched_getaffinity(tid, sizeof by_tid, &by_tid) == 0 &&
                      sched_getaffinity(0, sizeof by_zero, &by_zero) == 0 && CPU_EQUAL(&by_tid, &by_zero) &&
                      sched_setaffinity(tid, sizeof by_tid, &by_tid) == 0;
    return 0;
}

/* Whether `tid` is listed in /proc/self/task. */
static int in_task_list(pid_t tid) {
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d))) found |= atoi(e->d_name) == tid;
    closedir(d);
    return found;
}

int main(int argc, char **argv) {
    n_threads = argc > 1 ? atoi(argv[1]) : 16;
    CHECK(n_threads >= 2 && n_threads <= MAX_THREADS);
    fprintf(stderr, "preloaded=%d\n", fiberize_active ? fiberize_active() : 0);
    errno = 0;
    base_nice = getpriority(PRIO_PROCESS, 0);
    CHECK(errno == 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    CHECK(sigaction(SIGUSR1, &sa, 0) == 0);

    /* The threads exist once `threads[]` is complete: start them with `go` unset. */
    pthread_mutex_lock(&m);
    for (long i = 0; i < n_threads; i++) CHECK(pthread_create(&threads[i], 0, worker, (void *)i) == 0);
    while (ready < n_threads) pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);

    /* All alive: distinct ids, none the main thread's, all in /proc/self/task. */
    int distinct = 0, listed = 0, equal = 0;
    for (int i = 0; i < n_threads; i++) {
        int unique = tids[i] != getpid();
        for (int j = 0; j < n_threads; j++) unique &= j == i || tids[j] != tids[i];
        distinct += unique;
        listed += in_task_list(tids[i]);
        equal += same_both_ways[i];
    }
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < n_threads; i++) CHECK(pthread_join(threads[i], 0) == 0);

    int in_target = 0, tid_in_handler = 0, nice = 0, affinity = 0;
    for (int i = 0; i < n_threads; i++) {
        in_target += handled[i];
        tid_in_handler += handler_tid_ok[i];
        nice += nice_ok[i];
        affinity += affinity_ok[i];
    }
    printf("threads=%d distinct=%d gettid_eq_syscall=%d in_proc_task=%d\n", n_threads, distinct, equal, listed);
    printf("signal_in_target=%d gettid_in_handler=%d misplaced=%d\n", in_target, tid_in_handler, (int)handler_misplaced);
    printf("nice_by_tid=%d affinity_by_tid=%d\n", nice, affinity);
    fprintf(stderr, "fibers=%d\n", fibers);
    return 0;
}
