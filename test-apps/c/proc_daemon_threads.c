#define _GNU_SOURCE
/* A daemon that forks before it starts any thread (issue 25, part 1): the parent only
 * forks and waits; the child calls setsid and then runs 8 threads that take turns on a
 * mutex and condition variable; it reports the work and how many of its threads were
 * fibers back to the parent through a pipe. Once with one fork, once daemon(3)-style
 * (fork, setsid, fork, the middle process exits at once).
 *
 * stdout (the same natively and preloaded): what each child computed. stderr:
 * `preloaded=`, and `child_fibers=` per case (the number of the child's 8 threads for
 * which fiberize_is_fiber() was 1: 0 natively, 8 preloaded). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

/* Weak: natively there is no definition and the address is null. */
extern int fiberize_is_fiber(void) __attribute__((weak));
extern int fiberize_active(void) __attribute__((weak));

enum { THREADS = 8, ROUNDS = 200 };

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn;         /* whose turn it is: threads run in order 0, 1, .., 7, 0, .. */
static long total;       /* sum of (thread index + 1) over every turn taken */
static int fibers;       /* threads that found themselves to be fibers */

static void *worker(void *arg) {
    int me = (int)(long)arg;
    int is_fiber = fiberize_is_fiber ? fiberize_is_fiber() : 0;
    pthread_mutex_lock(&m);
    fibers += is_fiber;
    for (int r = 0; r < ROUNDS; r++) {
        while (turn % THREADS != me) pthread_cond_wait(&cv, &m);
        total += me + 1;
        turn++;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&m);
    return 0;
}

/* The daemon's work, in a process that has had no thread yet: writes one line. */
static void run_daemon(int out) {
    pthread_t t[THREADS];
    for (long i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], 0, worker, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], 0) == 0);
    char line[128];
    int n = snprintf(line, sizeof line, "turns=%d total=%ld fibers=%d\n", turn, total, fibers);
    CHECK(write(out, line, n) == n);
    /* exit, not _exit: the runtime's exit-time stats line shows that it ran here; `out`
     * closes after it, so the parent's read ends after the line is written. */
    exit(0);
}

static int status_of(pid_t p) {
    int st;
    CHECK(waitpid(p, &st, 0) == p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

/* Forks the daemon (twice when `double_fork`) and prints what it reported. */
static void start_and_read(const char *name, int double_fork) {
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(stdout); /* or the children would print the parent's buffered lines again */
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        close(p[0]);
        CHECK(setsid() > 0);
        if (double_fork) {
            pid_t grandchild = fork();
            CHECK(grandchild >= 0);
            if (grandchild > 0) _exit(0); /* the middle process leaves at once */
        }
        run_daemon(p[1]);
    }
    close(p[1]);
    char buf[256];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof buf - 1 && (r = read(p[0], buf + got, sizeof buf - 1 - got)) != 0) {
        if (r < 0 && errno == EINTR) continue;
        CHECK(r > 0);
        got += (size_t)r;
    }
    buf[got] = 0;
    close(p[0]);
    printf("%s: child status=%d\n", name, status_of(child));
    int child_fibers = -1;
    long child_total = -1;
    int child_turns = -1;
    CHECK(sscanf(buf, "turns=%d total=%ld fibers=%d", &child_turns, &child_total, &child_fibers) == 3);
    printf("%s: turns=%d total=%ld\n", name, child_turns, child_total);
    fprintf(stderr, "%s: child_fibers=%d\n", name, child_fibers);
}

int main(void) {
    fprintf(stderr, "preloaded=%d\n", fiberize_active ? fiberize_active() : 0);
    start_and_read("fork", 0);
    start_and_read("double_fork", 1);
    /* The parent started no thread of its own: still none of its threads is a fiber. */
    fprintf(stderr, "parent_is_fiber=%d\n", fiberize_is_fiber ? fiberize_is_fiber() : 0);
    return 0;
}
