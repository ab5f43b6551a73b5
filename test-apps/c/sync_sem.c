/* sync_sem: unnamed semaphores (errors, timeouts, wake-ups between fibers and the
 * main thread), process-shared and named semaphores (which must stay glibc's: they
 * are used across fork here), and a bounded stress run. Deterministic stdout, same
 * natively and under the preload; preload evidence on stderr. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sync_common.h"

/* Runs a sem call and renders "0" or "-1/ERRNO". */
#define R(call) ({ errno = 0; int r_ = (call); int e_ = errno; render(r_, e_); })
static const char *render(int r, int e) {
    static char bufs[8][48];
    static int i;
    char *b = bufs[i++ % 8];
    if (r == 0)
        snprintf(b, 48, "0");
    else
        snprintf(b, 48, "%d/%s", r, ename(e));
    return b;
}
#define EXPECT(call, want)                                                      \
    do {                                                                        \
        const char *got_ = R(call);                                             \
        CHECK(strcmp(got_, want) == 0, "%s = %s, want %s", #call, got_, want);  \
    } while (0)

static int value(sem_t *s) {
    int v = -12345;
    CHECK(sem_getvalue(s, &v) == 0, "sem_getvalue");
    return v;
}

static int private_field(sem_t *s) {
    int p;
    memcpy(&p, (char *)s + 8, sizeof p);
    return p;
}

/* ---------------------------------------------------------------------------- */

static void test_basic(void) {
    sem_t s;
    struct timespec past = {0, 0};
    struct timespec neg = {-1, 0};
    struct timespec bad = {0, -1};
    struct timespec big = {0, 1000000000L};

    EXPECT(sem_init(&s, 0, (unsigned)SEM_VALUE_MAX + 1), "-1/EINVAL");
    EXPECT(sem_init(&s, 0, 0), "0");
    printf("private sem: private field=%d value=%d\n", private_field(&s), value(&s));
    EXPECT(sem_trywait(&s), "-1/EAGAIN");
    EXPECT(sem_timedwait(&s, &past), "-1/ETIMEDOUT");
    EXPECT(sem_timedwait(&s, &neg), "-1/ETIMEDOUT");
    EXPECT(sem_clockwait(&s, CLOCK_MONOTONIC, &past), "-1/ETIMEDOUT");
    EXPECT(sem_timedwait(&s, &bad), "-1/EINVAL");
    EXPECT(sem_post(&s), "0");
    EXPECT(sem_post(&s), "0");
    printf("after two posts: value=%d\n", value(&s));
    /* the timespec is checked before a token is taken */
    EXPECT(sem_timedwait(&s, &bad), "-1/EINVAL");
    EXPECT(sem_timedwait(&s, &big), "-1/EINVAL");
    EXPECT(sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &past), "-1/EINVAL");
    EXPECT(sem_clockwait(&s, 4242, &past), "-1/EINVAL");
    printf("after rejected waits: value=%d\n", value(&s));
    /* a token is taken even with an expired deadline */
    EXPECT(sem_timedwait(&s, &neg), "0");
    EXPECT(sem_clockwait(&s, CLOCK_MONOTONIC, &past), "0");
    EXPECT(sem_trywait(&s), "-1/EAGAIN");
    EXPECT(sem_destroy(&s), "0");

    EXPECT(sem_init(&s, 0, SEM_VALUE_MAX), "0");
    EXPECT(sem_post(&s), "-1/EOVERFLOW");
    printf("at SEM_VALUE_MAX: value=%d\n", value(&s));
    EXPECT(sem_wait(&s), "0");
    EXPECT(sem_post(&s), "0");
    EXPECT(sem_post(&s), "-1/EOVERFLOW");
    EXPECT(sem_destroy(&s), "0");
    printf("basic: EINVAL, EAGAIN, ETIMEDOUT, EOVERFLOW as glibc\n");
}

/* ---------------------------------------------------------------------------- */
/* Wake-ups between fibers and the main thread                                  */
/* ---------------------------------------------------------------------------- */

static sem_t items, done_sem;
static atomic_long consumed;

static void *consumer(void *arg) {
    long n = (long)(intptr_t)arg;
    note_fiber();
    for (long i = 0; i < n; i++) {
        CHECK(sem_wait(&items) == 0, "sem_wait");
        atomic_fetch_add(&consumed, 1);
    }
    CHECK(sem_post(&done_sem) == 0, "post done");
    return NULL;
}

static void *delayed_poster(void *arg) {
    note_fiber();
    sleep_ms(30);
    CHECK(sem_post(arg) == 0, "post");
    return NULL;
}

/* Posts only after main's timed wait has timed out (a sleep ordered them before: an
 * emulator could delay main past the post, and sem_timedwait then took the token). */
static atomic_int main_timed_out;
static void *slow_poster(void *arg) {
    note_fiber();
    while (!atomic_load(&main_timed_out))
        sleep_ms(1);
    CHECK(sem_post(arg) == 0, "post");
    return NULL;
}

static void test_wakeups(void) {
    CHECK(sem_init(&items, 0, 0) == 0, "init");
    CHECK(sem_init(&done_sem, 0, 0) == 0, "init");
    atomic_store(&consumed, 0);
    enum { C = 6, PER = 2000 };
    pthread_t t[C];
    for (int i = 0; i < C; i++)
        t[i] = spawn(consumer, (void *)(intptr_t)PER);
    for (int i = 0; i < C * PER; i++) {
        CHECK(sem_post(&items) == 0, "post");
        if (i % 500 == 0)
            sleep_ms(1);
    }
    for (int i = 0; i < C; i++)
        CHECK(sem_wait(&done_sem) == 0, "wait done");
    for (int i = 0; i < C; i++)
        join(t[i]);
    printf("wakeups: main posted %d, %d fibers consumed %ld, value now %d\n", C * PER, C,
           atomic_load(&consumed), value(&items));

    /* main waits (a plain thread), a fiber posts later */
    sem_t s;
    CHECK(sem_init(&s, 0, 0) == 0, "init");
    pthread_t p = spawn(delayed_poster, &s);
    struct timespec d = at_ms(CLOCK_REALTIME, 5000);
    EXPECT(sem_timedwait(&s, &d), "0");
    join(p);
    p = spawn(delayed_poster, &s);
    d = at_ms(CLOCK_MONOTONIC, 5000);
    EXPECT(sem_clockwait(&s, CLOCK_MONOTONIC, &d), "0");
    join(p);
    p = spawn(delayed_poster, &s);
    EXPECT(sem_wait(&s), "0");
    join(p);
    /* and a timeout while a fiber will post too late */
    d = at_ms(CLOCK_REALTIME, 20);
    p = spawn(slow_poster, &s);
    EXPECT(sem_timedwait(&s, &d), "-1/ETIMEDOUT");
    atomic_store(&main_timed_out, 1);
    join(p);
    printf("wakeups: late post leaves value=%d\n", value(&s));
    EXPECT(sem_trywait(&s), "0");
    sem_destroy(&s);
    sem_destroy(&items);
    sem_destroy(&done_sem);
}

/* Fibers wait with timeouts; only some get tokens. A wait that began before main's
 * posts and timed out is tried again (a slow machine or an emulator may delay main
 * past the deadline): only a timeout of a wait begun after all 3 posts counts, and
 * such a wait times out only if the 3 tokens went to others. So the counts are
 * exact however slow the run, and a lost wakeup or a timeout despite a token still
 * shows. */
static sem_t tsem;
static atomic_int t_ok, t_timeout, t_waiting, t_posted;

static void *timed_waiter(void *arg) {
    (void)arg;
    note_fiber();
    atomic_fetch_add(&t_waiting, 1);
    for (;;) {
        int after_posts = atomic_load(&t_posted);
        struct timespec d = at_ms(CLOCK_MONOTONIC, 150);
        int r = sem_clockwait(&tsem, CLOCK_MONOTONIC, &d);
        if (r == 0) {
            atomic_fetch_add(&t_ok, 1);
            return NULL;
        }
        CHECK(errno == ETIMEDOUT, "sem_clockwait: %s", ename(errno));
        if (after_posts) {
            atomic_fetch_add(&t_timeout, 1);
            return NULL;
        }
    }
}

static void test_timed_mix(void) {
    CHECK(sem_init(&tsem, 0, 0) == 0, "init");
    pthread_t t[8];
    for (int i = 0; i < 8; i++)
        t[i] = spawn(timed_waiter, NULL);
    while (atomic_load(&t_waiting) < 8)
        sleep_ms(1);
    sleep_ms(20); /* the waiters now sleep in sem_clockwait */
    for (int i = 0; i < 3; i++)
        CHECK(sem_post(&tsem) == 0, "post");
    atomic_store(&t_posted, 1);
    for (int i = 0; i < 8; i++)
        join(t[i]);
    printf("timed mix: 8 waiters, 3 posts: ok=%d timedout=%d value=%d\n", atomic_load(&t_ok),
           atomic_load(&t_timeout), value(&tsem));
    sem_destroy(&tsem);
}

/* ---------------------------------------------------------------------------- */
/* Process-shared and named semaphores stay glibc's                             */
/* ---------------------------------------------------------------------------- */

static sem_t *psem;
static atomic_int p_got;

static void *pshared_waiter(void *arg) {
    (void)arg;
    note_fiber();
    CHECK(sem_wait(psem) == 0, "sem_wait pshared");
    atomic_fetch_add(&p_got, 1);
    return NULL;
}

static void test_pshared(void) {
    sem_t *s = mmap(NULL, sizeof(sem_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(s != MAP_FAILED, "mmap");
    EXPECT(sem_init(s, 1, (unsigned)SEM_VALUE_MAX + 1), "-1/EINVAL");
    EXPECT(sem_init(s, 1, 0), "0");
    printf("pshared sem: private field=%d (glibc's FUTEX_SHARED)\n", private_field(s));

    /* a child process posts; the parent's main thread and two fibers wait */
    psem = s;
    atomic_store(&p_got, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        t[i] = spawn(pshared_waiter, NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        sleep_ms(50);
        for (int i = 0; i < 3; i++)
            if (sem_post(s) != 0)
                _exit(2);
        _exit(0);
    }
    EXPECT(sem_wait(s), "0");
    for (int i = 0; i < 2; i++)
        join(t[i]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
    printf("pshared sem: child posted 3, main + 2 fibers woke, fibers got=%d, value=%d\n",
           atomic_load(&p_got), value(s));

    /* the parent posts, the child waits with a timeout */
    pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        struct timespec d = at_ms(CLOCK_REALTIME, 5000);
        _exit(sem_timedwait(s, &d) == 0 ? 0 : 3);
    }
    sleep_ms(30);
    EXPECT(sem_post(s), "0");
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st), "child");
    printf("pshared sem: child timedwait status=%d\n", WEXITSTATUS(st));
    struct timespec past = {0, 0};
    EXPECT(sem_timedwait(s, &past), "-1/ETIMEDOUT");
    EXPECT(sem_trywait(s), "-1/EAGAIN");
    EXPECT(sem_destroy(s), "0");
    munmap(s, sizeof(sem_t));
}

static void test_named(void) {
    char name[64];
    snprintf(name, sizeof name, "/fiberize_sync_sem_%d", (int)getpid());
    sem_unlink(name);
    sem_t *s = sem_open(name, O_CREAT | O_EXCL, 0600, 1);
    CHECK(s != SEM_FAILED, "sem_open: %s", strerror(errno));
    printf("named sem: private field=%d value=%d\n", private_field(s), value(s));
    EXPECT(sem_trywait(s), "0");
    EXPECT(sem_trywait(s), "-1/EAGAIN");

    /* another process opens it by name and posts twice; a fiber and main wait */
    psem = s;
    atomic_store(&p_got, 0);
    pthread_t t = spawn(pshared_waiter, NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        sem_t *c = sem_open(name, 0);
        if (c == SEM_FAILED)
            _exit(4);
        sleep_ms(40);
        sem_post(c);
        sem_post(c);
        sem_close(c);
        _exit(0);
    }
    struct timespec d = at_ms(CLOCK_MONOTONIC, 5000);
    EXPECT(sem_clockwait(s, CLOCK_MONOTONIC, &d), "0");
    join(t);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
    printf("named sem: child posted 2 by name, fiber got=%d, value=%d\n", atomic_load(&p_got), value(s));
    EXPECT(sem_close(s), "0");
    EXPECT(sem_unlink(name), "0");
}

/* ---------------------------------------------------------------------------- */
/* Stress: ping-pong rings between fibers and the main thread                  */
/* ---------------------------------------------------------------------------- */

#define RING 5
#define ROUNDS 5000
static sem_t ring[RING + 1];
static long ring_count[RING + 1];

static void *ring_body(void *arg) {
    int i = (int)(intptr_t)arg;
    note_fiber();
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(sem_wait(&ring[i]) == 0, "ring wait");
        ring_count[i]++;
        CHECK(sem_post(&ring[(i + 1) % (RING + 1)]) == 0, "ring post");
    }
    return NULL;
}

static void test_ring(void) {
    for (int i = 0; i <= RING; i++)
        CHECK(sem_init(&ring[i], 0, 0) == 0, "init");
    pthread_t t[RING];
    for (int i = 1; i <= RING; i++)
        t[i - 1] = spawn(ring_body, (void *)(intptr_t)i);
    /* main is position 0 of the ring */
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(sem_post(&ring[1]) == 0, "post");
        struct timespec d = at_ms(CLOCK_REALTIME, 10000);
        CHECK(sem_timedwait(&ring[0], &d) == 0, "main ring wait: %s", strerror(errno));
        ring_count[0]++;
    }
    for (int i = 0; i < RING; i++)
        join(t[i]);
    long total = 0;
    for (int i = 0; i <= RING; i++) {
        total += ring_count[i];
        sem_destroy(&ring[i]);
    }
    printf("ring: main + %d fibers passed a token %d rounds: %ld hand-offs\n", RING, ROUNDS, total);
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    deadline_s(55);
    report_preload();
    test_basic();
    test_wakeups();
    test_timed_mix();
    test_pshared();
    test_named();
    test_ring();
    fprintf(stderr, "threads_were_fibers=%d\n", atomic_load(&fiber_seen));
    printf("sync_sem: ok\n");
    return 0;
}
