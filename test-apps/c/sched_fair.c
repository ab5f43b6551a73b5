/* CPU-bound threads next to a thread that waits for I/O and a thread that spins on
 * sched_yield. HOGS threads compute in chunks (about a millisecond each) until told to
 * stop, with a sched_yield between chunks, or (mode "spin") without one, so that only
 * preemption takes their worker from them; a client thread makes TRIPS round trips
 * through two pipes with an echo thread, and in each waits on a condition variable for
 * the echo thread's acknowledgement before it reads the reply; a spinner calls
 * sched_yield until the client is done. Under the preload a yield, a preemption and a
 * wake-up by readiness all queue at the back of the worker's deque: the client, the
 * echo thread and the spinner must still run, and everything must finish as natively.
 *   sched_fair [hogs=4] [trips=200] [yield|spin]
 * stdout: what finished (the same natively and preloaded); stderr: the preload evidence. */
#include <stdlib.h>
#include <string.h>
#include "sync_common.h"

static int hogs = 4, trips = 200, hogs_yield = 1;
static atomic_int stop, hogs_started;
static int to_echo[2], from_echo[2];
static pthread_mutex_t ack_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ack_cond = PTHREAD_COND_INITIALIZER;
static int acked = -1;

/* About a millisecond of arithmetic the compiler cannot drop. */
static unsigned chunk(unsigned x) {
    for (int i = 0; i < 400000; i++)
        x = x * 1103515245u + 12345u;
    return x;
}

static void *hog(void *arg) {
    unsigned x = (unsigned)(long)arg, chunks = 0;
    note_fiber();
    atomic_fetch_add(&hogs_started, 1);
    while (!atomic_load(&stop)) {
        x = chunk(x);
        chunks++;
        if (hogs_yield)
            sched_yield();
    }
    return (void *)(long)(chunks > 0 && x != 1);
}

static void *echo(void *arg) {
    (void)arg;
    note_fiber();
    char c;
    for (int i = 0; i < trips; i++) {
        CHECK(read(to_echo[0], &c, 1) == 1, "echo read");
        CHECK(pthread_mutex_lock(&ack_lock) == 0, "ack lock");
        acked = i;
        CHECK(pthread_cond_signal(&ack_cond) == 0 && pthread_mutex_unlock(&ack_lock) == 0, "ack");
        usleep(100); /* the client reads before the reply is there: a wait for readiness */
        CHECK(write(from_echo[1], &c, 1) == 1, "echo write");
    }
    return NULL;
}

static void *client(void *arg) {
    (void)arg;
    note_fiber();
    for (int i = 0; i < trips; i++) {
        char c = (char)i, back = 0;
        CHECK(pthread_mutex_lock(&ack_lock) == 0, "client lock");
        CHECK(write(to_echo[1], &c, 1) == 1, "client write");
        while (acked < i)
            CHECK(pthread_cond_wait(&ack_cond, &ack_lock) == 0, "client wait");
        CHECK(pthread_mutex_unlock(&ack_lock) == 0, "client unlock");
        CHECK(read(from_echo[0], &back, 1) == 1 && back == c, "client read, trip %d", i);
    }
    atomic_store(&stop, 1);
    return NULL;
}

static void *spinner(void *arg) {
    long spins = 0;
    (void)arg;
    note_fiber();
    while (!atomic_load(&stop)) {
        sched_yield();
        spins++;
    }
    return (void *)(long)(spins > 0);
}

int main(int argc, char **argv) {
    if (argc > 1) hogs = atoi(argv[1]);
    if (argc > 2) trips = atoi(argv[2]);
    if (argc > 3) hogs_yield = strcmp(argv[3], "spin") != 0;
    CHECK(hogs >= 0 && hogs <= 64 && trips > 0 && trips <= 100000, "bad arguments");
    report_preload();
    fprintf(stderr, "preloaded=%d\n", p_active ? p_active() : 0);
    CHECK(pipe(to_echo) == 0 && pipe(from_echo) == 0, "pipe");
    pthread_t *h = calloc(hogs + 1, sizeof *h);
    for (int k = 0; k < hogs; k++)
        h[k] = spawn(hog, (void *)(long)(k + 2));
    while (atomic_load(&hogs_started) < hogs)
        sleep_ms(1);
    pthread_t s = spawn(spinner, NULL), e = spawn(echo, NULL), c = spawn(client, NULL);
    join(c);
    join(e);
    void *r;
    CHECK(pthread_join(s, &r) == 0 && r == (void *)1L, "spinner");
    int hogs_ok = 0;
    for (int k = 0; k < hogs; k++) {
        CHECK(pthread_join(h[k], &r) == 0, "join hog");
        hogs_ok += r == (void *)1L;
    }
    printf("round trips: %d\nhogs that computed and stopped: %d of %d\nspinner stopped\n", trips, hogs_ok, hogs);
    if (p_active && p_active())
        CHECK(atomic_load(&fiber_seen), "threads did not run as fibers");
    free(h);
    return 0;
}
