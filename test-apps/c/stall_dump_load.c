/* Issue 11: fiber dumps under load, and the runtime never stands still.
 *
 *   stall_dump_load IDLE CHURNERS ROUNDS [stuck-stderr]
 *
 * IDLE threads wait on one condition variable with a long timeout (a server's thread
 * cache: thousands of fibers alive, each in every dump). CHURNERS threads each run
 * ROUNDS rounds of: create and join a short-lived thread (thread creation and exit),
 * a contended mutex increment, a condition-variable hand-off with a partner, and a
 * 1 ms timed wait that times out. Meanwhile, under the preload, a dumper thread
 * raises FIBERIZE_DUMP_SIGNAL (when set) every 2 ms, so dumps run during every kind
 * of runtime activity. A progress thread checks that the churners never stand still
 * for two seconds (it prints "stall" lines: the stdout comparison with the native
 * run then fails). Stdout is deterministic: the totals.
 *
 * With "stuck-stderr", before the churn: stderr becomes a pipe nobody reads, one dump
 * is requested (with IDLE in the thousands it is far larger than a pipe buffer, so its
 * writer blocks for good), and then a thread blocks its worker in a raw read() that
 * only another thread's write ends: with one worker that needs the monitor to notice
 * the blocked worker and bring in a spare. When the monitor itself printed dumps, it
 * was the blocked writer, and the program hung. The pipe is drained and stderr
 * restored afterwards. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { printf("check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static int idle_release, idle_waiting;

static pthread_mutex_t counter_lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static atomic_long progress, children_ran, timeouts, handoffs;
static atomic_int done;
/* Set once every churner was joined: from then on nothing is expected to progress
 * (the idle threads' release and join can take seconds on a loaded machine). */
static atomic_int churn_over;
static int rounds;

struct pair {
    pthread_mutex_t m;
    pthread_cond_t c;
    int turn; /* 0: even side, 1: odd side */
};

static void deadline_in(struct timespec *ts, long ms) {
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += ms / 1000;
    ts->tv_nsec += (ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) { ts->tv_sec++; ts->tv_nsec -= 1000000000L; }
}

static void *idle_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&idle_lock);
    idle_waiting++;
    while (!idle_release) {
        struct timespec ts;
        deadline_in(&ts, 60000);
        pthread_cond_timedwait(&idle_cond, &idle_lock, &ts);
    }
    idle_waiting--;
    pthread_mutex_unlock(&idle_lock);
    return NULL;
}

static void *child_main(void *arg) {
    atomic_fetch_add(&children_ran, 1);
    return arg;
}

struct churner { struct pair *pair; int side; };

static void *churn_main(void *arg) {
    struct churner *c = arg;
    pthread_mutex_t quiet_m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t quiet_c = PTHREAD_COND_INITIALIZER;
    for (int r = 0; r < rounds; r++) {
        pthread_t t;
        void *ret;
        CHECK(pthread_create(&t, NULL, child_main, (void *)(long)r) == 0);
        CHECK(pthread_join(t, &ret) == 0 && ret == (void *)(long)r);

        pthread_mutex_lock(&counter_lock);
        counter++;
        pthread_mutex_unlock(&counter_lock);

        /* Hand-off with the partner: each side waits for its turn, then passes it. */
        pthread_mutex_lock(&c->pair->m);
        while (c->pair->turn != c->side) pthread_cond_wait(&c->pair->c, &c->pair->m);
        c->pair->turn = !c->side;
        pthread_cond_signal(&c->pair->c);
        pthread_mutex_unlock(&c->pair->m);
        atomic_fetch_add(&handoffs, 1);

        if (r % 8 == 0) {
            struct timespec ts;
            deadline_in(&ts, 1);
            pthread_mutex_lock(&quiet_m);
            int e = pthread_cond_timedwait(&quiet_c, &quiet_m, &ts);
            pthread_mutex_unlock(&quiet_m);
            CHECK(e == ETIMEDOUT);
            atomic_fetch_add(&timeouts, 1);
        }
        atomic_fetch_add(&progress, 1);
    }
    return NULL;
}

static int blocker_pipe[2];

static void *raw_reader_main(void *arg) {
    (void)arg;
    char c;
    /* A raw system call: the runtime does not see it coming and the worker blocks. */
    long n = syscall(SYS_read, blocker_pipe[0], &c, 1);
    CHECK(n == 1 && c == 'x');
    return NULL;
}

static void *raw_writer_main(void *arg) {
    (void)arg;
    usleep(50000);
    CHECK(write(blocker_pipe[1], "x", 1) == 1);
    return NULL;
}

/* See the header comment: a dump whose output blocks must not take the monitor down. */
static void stuck_stderr_scenario(int sig) {
    int p[2];
    CHECK(pipe(p) == 0);
    int saved = dup(2);
    CHECK(saved >= 0 && dup2(p[1], 2) == 2);
    if (sig > 0) kill(getpid(), sig);
    usleep(100000);
    CHECK(pipe(blocker_pipe) == 0);
    pthread_t r, w;
    CHECK(pthread_create(&r, NULL, raw_reader_main, NULL) == 0);
    CHECK(pthread_create(&w, NULL, raw_writer_main, NULL) == 0);
    CHECK(pthread_join(r, NULL) == 0 && pthread_join(w, NULL) == 0);
    printf("blocked worker replaced while stderr was stuck\n");
    CHECK(fcntl(p[0], F_SETFL, O_NONBLOCK) == 0);
    char buf[65536];
    for (int quiet = 0; quiet < 5;) {
        if (read(p[0], buf, sizeof buf) > 0) quiet = 0; else { quiet++; usleep(20000); }
    }
    CHECK(dup2(saved, 2) == 2);
    close(saved);
}

static void *dumper_main(void *arg) {
    int sig = (int)(long)arg;
    while (!atomic_load(&done)) {
        if (sig > 0) kill(getpid(), sig);
        usleep(2000);
    }
    return NULL;
}

static void *watch_main(void *arg) {
    (void)arg;
    long last = -1;
    int still = 0;
    while (!atomic_load(&done)) {
        usleep(100000);
        long p = atomic_load(&progress);
        still = (p == last) ? still + 1 : 0;
        if (still == 20 && !atomic_load(&churn_over)) printf("stall: no progress for 2 s at %ld\n", p);
        last = p;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int nidle = argc > 1 ? atoi(argv[1]) : 1000;
    int nchurn = argc > 2 ? atoi(argv[2]) : 16;
    rounds = argc > 3 ? atoi(argv[3]) : 200;
    if (nchurn % 2) nchurn++;
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    int preloaded = active ? active() : 0;
    const char *ds = getenv("FIBERIZE_DUMP_SIGNAL");
    int sig = preloaded && ds ? atoi(ds) : 0;

    pthread_attr_t small;
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 128 * 1024);
    pthread_t *idle = calloc(nidle, sizeof *idle);
    for (int i = 0; i < nidle; i++) CHECK(pthread_create(&idle[i], &small, idle_main, NULL) == 0);
    if (argc > 4 && strcmp(argv[4], "stuck-stderr") == 0) stuck_stderr_scenario(sig);

    pthread_t dumper, watch;
    CHECK(pthread_create(&dumper, NULL, dumper_main, (void *)(long)sig) == 0);
    CHECK(pthread_create(&watch, NULL, watch_main, NULL) == 0);

    pthread_t *churn = calloc(nchurn, sizeof *churn);
    struct churner *cs = calloc(nchurn, sizeof *cs);
    struct pair *pairs = calloc(nchurn / 2, sizeof *pairs);
    for (int i = 0; i < nchurn / 2; i++) {
        pthread_mutex_init(&pairs[i].m, NULL);
        pthread_cond_init(&pairs[i].c, NULL);
    }
    for (int i = 0; i < nchurn; i++) {
        cs[i].pair = &pairs[i / 2];
        cs[i].side = i % 2;
        CHECK(pthread_create(&churn[i], &small, churn_main, &cs[i]) == 0);
    }
    for (int i = 0; i < nchurn; i++) CHECK(pthread_join(churn[i], NULL) == 0);
    atomic_store(&churn_over, 1);

    pthread_mutex_lock(&idle_lock);
    idle_release = 1;
    pthread_cond_broadcast(&idle_cond);
    pthread_mutex_unlock(&idle_lock);
    for (int i = 0; i < nidle; i++) CHECK(pthread_join(idle[i], NULL) == 0);
    atomic_store(&done, 1);
    CHECK(pthread_join(dumper, NULL) == 0);
    CHECK(pthread_join(watch, NULL) == 0);

    printf("idle threads %d released, counter %ld, children %ld, hand-offs %ld, timeouts %ld\n",
        nidle, counter, atomic_load(&children_ran), atomic_load(&handoffs), atomic_load(&timeouts));
    fprintf(stderr, "preloaded=%d\n", preloaded);
    return 0;
}
