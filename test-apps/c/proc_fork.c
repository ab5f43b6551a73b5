#define _GNU_SOURCE
/* fork, system, popen and posix_spawn from threads (fibers under the preload), with
 * pthread_atfork handlers in order, waitpid, and a child that uses locks and threads
 * after fork (plain glibc behaviour there). Also per-thread signal masks and
 * sched_getcpu. Deterministic stdout. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
extern char **environ;

static char order[64]; static int order_len;
static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static void rec(char c) { if (order_len < 63) order[order_len++] = c; }
static void prep1(void) { pthread_mutex_lock(&order_lock); rec('1'); }
static void prep2(void) { rec('2'); }
static void parent2(void) { rec('P'); }
static void parent1(void) { rec('p'); pthread_mutex_unlock(&order_lock); }
static void child2(void) { rec('C'); }
static void child1(void) { rec('c'); pthread_mutex_unlock(&order_lock); }

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void *child_thread(void *a) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); return a; }

static void *worker(void *a) {
    long i = (long)a;
    char cmd[64]; snprintf(cmd, sizeof cmd, "exit %ld", i % 5);
    int r = system(cmd); CHECK(WIFEXITED(r) && WEXITSTATUS(r) == i % 5);
    FILE *p = popen("echo popen-ok", "r"); CHECK(p);
    char buf[64] = {0}; CHECK(fgets(buf, sizeof buf, p)); CHECK(pclose(p) == 0);
    CHECK(strcmp(buf, "popen-ok\n") == 0);
    pid_t pid; char *argv[] = {"/bin/sh", "-c", "exit 3", 0};
    CHECK(posix_spawn(&pid, "/bin/sh", 0, 0, argv, environ) == 0);
    int st; CHECK(waitpid(pid, &st, 0) == pid && WEXITSTATUS(st) == 3);
    return 0;
}

int main(void) {
    CHECK(pthread_atfork(prep1, parent1, child1) == 0);
    CHECK(pthread_atfork(prep2, parent2, child2) == 0);
    pthread_t t[8];
    for (long i = 0; i < 8; i++) CHECK(pthread_create(&t[i], 0, worker, (void *)i) == 0);
    for (int i = 0; i < 8; i++) pthread_join(t[i], 0);
    printf("system_popen_spawn ok\n");

    /* fork from a thread; the child locks, creates and joins a thread, then exits. */
    order_len = 0;
    pthread_t f;
    struct { int status; } res = {0};
    void *forker(void *a) {
        pid_t pid = fork();
        if (pid == 0) {
            pthread_mutex_lock(&m); pthread_mutex_unlock(&m);
            pthread_t ct; void *rv;
            if (pthread_create(&ct, 0, child_thread, (void *)42) != 0) _exit(10);
            if (pthread_join(ct, &rv) != 0 || rv != (void *)42) _exit(11);
            _exit(order[0] == '2' && order[1] == '1' && order[2] == 'c' && order[3] == 'C' ? 7 : 12);
        }
        int st; CHECK(waitpid(pid, &st, 0) == pid);
        ((typeof(res) *)a)->status = WEXITSTATUS(st);
        return 0;
    }
    CHECK(pthread_create(&f, 0, forker, &res) == 0);
    pthread_join(f, 0);
    order[order_len] = 0;
    printf("fork child_status=%d parent_atfork_order=%s\n", res.status, order);

    /* Per-thread signal masks: a thread blocks SIGUSR1 and sees it blocked after
       sleeping and yielding; another thread does not see it blocked. */
    void *masker(void *a) {
        sigset_t s, o; sigemptyset(&s); sigaddset(&s, SIGUSR1);
        CHECK(pthread_sigmask(SIG_BLOCK, &s, 0) == 0);
        for (int i = 0; i < 20; i++) { usleep(100); sched_yield(); }
        CHECK(pthread_sigmask(SIG_BLOCK, 0, &o) == 0);
        *(int *)a = sigismember(&o, SIGUSR1);
        return 0;
    }
    void *plain(void *a) {
        sigset_t o;
        for (int i = 0; i < 20; i++) { usleep(100); sched_yield(); }
        CHECK(pthread_sigmask(SIG_BLOCK, 0, &o) == 0);
        *(int *)a = sigismember(&o, SIGUSR1);
        return 0;
    }
    void *plain2(void *a) {
        sigset_t o;
        for (int i = 0; i < 20; i++) { usleep(100); sched_yield(); }
        CHECK(pthread_sigmask(SIG_BLOCK, 0, &o) == 0);
        *(int *)a = sigismember(&o, SIGUSR2);
        return 0;
    }
    int blocked_in_masker = -1, blocked_in_plain = -1;
    pthread_t a1, a2;
    pthread_create(&a1, 0, masker, &blocked_in_masker); pthread_create(&a2, 0, plain, &blocked_in_plain);
    pthread_join(a1, 0); pthread_join(a2, 0);
    printf("sigmask masker=%d plain=%d\n", blocked_in_masker, blocked_in_plain);

    /* A new thread starts with its creator's mask: main blocks SIGUSR2, then creates. */
    sigset_t usr2; sigemptyset(&usr2); sigaddset(&usr2, SIGUSR2);
    CHECK(pthread_sigmask(SIG_BLOCK, &usr2, 0) == 0);
    int inherited = -1;
    pthread_create(&a2, 0, plain2, &inherited); pthread_join(a2, 0);
    CHECK(pthread_sigmask(SIG_UNBLOCK, &usr2, 0) == 0);
    printf("sigmask inherited_from_creator=%d\n", inherited);

    /* sched_setaffinity(0) in a thread is that thread's own affinity, read back as set. */
    void *affine(void *a) {
        (void)a; cpu_set_t s; CPU_ZERO(&s); CPU_SET(0, &s);
        CHECK(sched_setaffinity(0, sizeof s, &s) == 0);
        for (int i = 0; i < 5; i++) { usleep(100); sched_yield(); }
        cpu_set_t g; CPU_ZERO(&g); CHECK(sched_getaffinity(0, sizeof g, &g) == 0);
        return (void *)(long)(CPU_COUNT(&g) == 1 && CPU_ISSET(0, &g));
    }
    pthread_t af; void *afr; pthread_create(&af, 0, affine, 0); pthread_join(af, &afr);
    cpu_set_t mine; CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0);
    printf("affinity thread_view_ok=%ld main_unchanged=%d\n", (long)afr, CPU_COUNT(&mine) == sysconf(_SC_NPROCESSORS_ONLN));
    /* setpriority(PRIO_PROCESS, 0 or gettid()) is the calling thread's own nice value:
     * a sibling (under the preload maybe on the same worker) and main keep theirs. */
    static pthread_barrier_t nice_set;
    pthread_barrier_init(&nice_set, 0, 5);
    void *nicer(void *a) {
        (void)a;
        CHECK(setpriority(PRIO_PROCESS, 0, 5) == 0);
        pthread_barrier_wait(&nice_set);
        for (int i = 0; i < 5; i++) { usleep(100); sched_yield(); }
        errno = 0;
        int own = getpriority(PRIO_PROCESS, 0), by_tid = getpriority(PRIO_PROCESS, syscall(SYS_gettid));
        pthread_barrier_wait(&nice_set);
        return (void *)(long)(own == 5 && by_tid == 5 && errno == 0);
    }
    void *sibling(void *a) {
        (void)a;
        pthread_barrier_wait(&nice_set);
        errno = 0;
        int own = getpriority(PRIO_PROCESS, 0), by_tid = getpriority(PRIO_PROCESS, syscall(SYS_gettid));
        pthread_barrier_wait(&nice_set);
        return (void *)(long)(own == 0 && by_tid == 0 && errno == 0);
    }
    pthread_t nt[5]; long nice_ok = 0;
    for (int i = 0; i < 5; i++) pthread_create(&nt[i], 0, i == 0 ? nicer : sibling, 0);
    for (int i = 0; i < 5; i++) { void *r; pthread_join(nt[i], &r); nice_ok += (long)r; }
    printf("nice per_thread_ok=%ld/5 main=%d\n", nice_ok, getpriority(PRIO_PROCESS, 0));
    pthread_barrier_destroy(&nice_set);
    int cpu = sched_getcpu();
    printf("sched_getcpu valid=%d\n", cpu >= 0 && cpu < CPU_SETSIZE);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
