/* Signals sent to the process (kill(getpid(), sig)) reach the one thread that does not
 * block them, in its blocking call, as natively. The main thread blocks SIGUSR1 and
 * SIGUSR2; the worker thread T unblocks SIGUSR1 only and blocks in
 *   - read of an empty pipe (no SA_RESTART): -1/EINTR, the handler ran on T;
 *   - nanosleep of 5 s: -1/EINTR with most of the time left;
 *   - sem_wait: -1/EINTR;
 *   - accept with an SA_RESTART handler: the handler runs on T and accept goes on, then
 *     returns the connection the main thread makes;
 *   - (mode "early" only) SIGUSR2, which every thread blocks: it stays pending for the
 *     process (sigpending in main and in T) until T unblocks it, then its handler runs
 *     on T.
 * Mode "early": the main thread blocks the signals before it creates any thread; mode
 * "late": it creates (and joins) a thread first, then blocks them (under the preload
 * the pool's workers then let them through in their own context). If a call is not
 * interrupted within 3 s the main thread ends it (a byte, sem_post, a connection), so
 * a failure shows in the output instead of a hang. Deterministic stdout. (Before the
 * fix, under the preload the signal stayed pending for the process in mode "early"
 * and ran its handler on a worker for no thread in mode "late": no call returned
 * EINTR.) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static pthread_t t_thread;
static volatile int handled1, handled1_on_t, handled2, handled2_on_t;
static int pipe_fds[2], listener, port, early, is_fiber = -1;
static sem_t sem;
static volatile int phase, done;

static void on_sig(int sig) {
    int on_t = pthread_equal(pthread_self(), t_thread);
    if (sig == SIGUSR1) { handled1++; handled1_on_t += on_t; }
    else { handled2++; handled2_on_t += on_t; }
}

static void set_handler(int sig, int restart) {
    struct sigaction sa = { .sa_handler = on_sig, .sa_flags = restart ? SA_RESTART : 0 }; /* sa_mask: empty */
    CHECK(sigaction(sig, &sa, 0) == 0);
}

static void begin(int p) { handled1 = handled1_on_t = 0; __atomic_store_n(&phase, p, __ATOMIC_RELEASE); }
static void end(int p) { __atomic_store_n(&done, p, __ATOMIC_RELEASE); }

static void *t_main(void *a) {
    (void)a;
    int (*fib)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    is_fiber = fib ? fib() : 0;
    sigset_t s1, s2;
    sigemptyset(&s1); sigaddset(&s1, SIGUSR1);
    sigemptyset(&s2); sigaddset(&s2, SIGUSR2);
    CHECK(pthread_sigmask(SIG_UNBLOCK, &s1, 0) == 0);

    char c;
    begin(1);
    ssize_t r = read(pipe_fds[0], &c, 1);
    int e = errno;
    printf("read: r=%zd errno=%s handled=%d on_t=%d\n", r, r < 0 ? strerror(e) : "-", handled1, handled1_on_t);
    end(1);

    begin(2);
    struct timespec ts = { 5, 0 }, rem = { 0, 0 };
    int n = nanosleep(&ts, &rem);
    e = errno;
    printf("nanosleep: r=%d errno=%s most_left=%d handled=%d on_t=%d\n", n, n < 0 ? strerror(e) : "-", rem.tv_sec >= 3,
           handled1, handled1_on_t);
    end(2);

    begin(3);
    n = sem_wait(&sem);
    e = errno;
    printf("sem_wait: r=%d errno=%s handled=%d on_t=%d\n", n, n < 0 ? strerror(e) : "-", handled1, handled1_on_t);
    end(3);

    set_handler(SIGUSR1, 1);
    begin(4);
    int fd = accept(listener, 0, 0);
    e = errno;
    printf("accept with SA_RESTART: ok=%d errno=%s handled=%d on_t=%d\n", fd >= 0, fd < 0 ? strerror(e) : "-", handled1,
           handled1_on_t);
    if (fd >= 0) close(fd);
    end(4);

    if (early) {
        begin(5);
        while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != 6) usleep(1000); /* main sent SIGUSR2 */
        usleep(200000);
        sigset_t pend;
        sigpending(&pend);
        printf("nobody takes SIGUSR2: pending in t=%d handled=%d\n", sigismember(&pend, SIGUSR2), handled2);
        CHECK(pthread_sigmask(SIG_UNBLOCK, &s2, 0) == 0);
        printf("after t unblocks it: handled=%d on_t=%d\n", handled2, handled2_on_t);
        end(5);
    }
    return 0;
}

/* Sends SIGUSR1 to the process while T is in phase p; ends the call after 3 s. */
static void signal_phase(int p) {
    while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != p) usleep(1000);
    usleep(100000);
    CHECK(kill(getpid(), SIGUSR1) == 0);
    if (p == 4) {
        usleep(200000); /* accept restarted: now give it its connection */
        int s = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        CHECK(connect(s, (struct sockaddr *)&a, sizeof a) == 0);
        while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != p) usleep(1000);
        close(s);
        return;
    }
    for (int i = 0; i < 3000 && __atomic_load_n(&done, __ATOMIC_ACQUIRE) != p; i++) usleep(1000);
    if (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != p) {
        if (p == 1) CHECK(write(pipe_fds[1], "x", 1) == 1);
        if (p == 3) sem_post(&sem);
    }
    while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) != p) usleep(1000);
}

static void *nothing(void *a) { return a; }

int main(int argc, char **argv) {
    early = argc > 1 && strcmp(argv[1], "early") == 0;
    set_handler(SIGUSR1, 0);
    set_handler(SIGUSR2, 0);
    CHECK(pipe(pipe_fds) == 0);
    CHECK(sem_init(&sem, 0, 0) == 0);
    listener = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    CHECK(bind(listener, (struct sockaddr *)&a, sizeof a) == 0 && listen(listener, 4) == 0);
    CHECK(getsockname(listener, (struct sockaddr *)&a, &len) == 0);
    port = ntohs(a.sin_port);
    if (!early) {
        pthread_t t;
        CHECK(pthread_create(&t, 0, nothing, 0) == 0 && pthread_join(t, 0) == 0);
    }
    sigset_t both;
    sigemptyset(&both); sigaddset(&both, SIGUSR1); sigaddset(&both, SIGUSR2);
    CHECK(pthread_sigmask(SIG_BLOCK, &both, 0) == 0);
    CHECK(pthread_create(&t_thread, 0, t_main, 0) == 0);
    for (int p = 1; p <= 4; p++) signal_phase(p);
    if (early) {
        while (__atomic_load_n(&phase, __ATOMIC_ACQUIRE) != 5) usleep(1000);
        CHECK(kill(getpid(), SIGUSR2) == 0);
        usleep(100000);
        sigset_t pend;
        sigpending(&pend);
        printf("nobody takes SIGUSR2: pending in main=%d\n", sigismember(&pend, SIGUSR2));
        fflush(stdout);
        __atomic_store_n(&phase, 6, __ATOMIC_RELEASE);
    }
    CHECK(pthread_join(t_thread, 0) == 0);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d fiber=%d\n", active ? active() : 0, is_fiber);
    return 0;
}
