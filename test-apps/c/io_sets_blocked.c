/* Readiness sets after a blocked worker: 4 pairs of threads play ping-pong over
 * socketpairs while one more thread blocks its kernel thread in a raw nanosleep system
 * call (0.5 s), which the preload does not intercept: its worker is declared blocked and a
 * spare is brought in. After the sleep the blocked worker comes back to a full pool
 * and retires. Under the preload (FIBERIZE_WORKERS=4, a readiness set per worker) the
 * test reads the report: each active worker serves a set of its own (before the fix
 * the spare took the set of the worker with its index modulo 4, and the retired
 * worker's set was served by nobody). Deterministic stdout: the ping-pong's totals. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 4
#define ROUNDS 2000

#define CHECK(c) do { if (!(c)) { perror(#c); exit(1); } } while (0)

static int fds[PAIRS][2];
static long received[PAIRS];

static void *ping(void *arg) {
    int i = (int)(long)arg;
    char b = 'x';
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(write(fds[i][0], &b, 1) == 1);
        CHECK(read(fds[i][0], &b, 1) == 1);
        received[i]++;
    }
    return NULL;
}

static void *pong(void *arg) {
    int i = (int)(long)arg;
    char b;
    for (int r = 0; r < ROUNDS; r++) {
        CHECK(read(fds[i][1], &b, 1) == 1);
        CHECK(write(fds[i][1], &b, 1) == 1);
    }
    return NULL;
}

static void *blocker(void *arg) {
    (void)arg;
    /* Half a second in the kernel, behind the preload's back. */
    struct timespec t = {0, 500 * 1000 * 1000};
    syscall(SYS_nanosleep, &t, NULL);
    return NULL;
}

int main(void) {
    pthread_t b, t[2 * PAIRS];
    CHECK(pthread_create(&b, NULL, blocker, NULL) == 0);
    for (int i = 0; i < PAIRS; i++) CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]) == 0);
    for (int i = 0; i < PAIRS; i++) {
        CHECK(pthread_create(&t[2 * i], NULL, ping, (void *)(long)i) == 0);
        CHECK(pthread_create(&t[2 * i + 1], NULL, pong, (void *)(long)i) == 0);
    }
    CHECK(pthread_join(b, NULL) == 0);
    /* The worker that slept is back (and retired): more traffic on every set. */
    for (int i = 0; i < 2 * PAIRS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    for (int i = 0; i < PAIRS; i++) {
        CHECK(pthread_create(&t[2 * i], NULL, ping, (void *)(long)i) == 0);
        CHECK(pthread_create(&t[2 * i + 1], NULL, pong, (void *)(long)i) == 0);
    }
    for (int i = 0; i < 2 * PAIRS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    long total = 0;
    for (int i = 0; i < PAIRS; i++) total += received[i];
    printf("pairs=%d round_trips=%ld\n", PAIRS, total);
    return 0;
}
