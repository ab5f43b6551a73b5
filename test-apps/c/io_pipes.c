#define _GNU_SOURCE /* O_DIRECT */
/* Pipe chains, eventfd, poll/select over several fds, the program's own epoll, and a
 * thread blocked in a system call the library does not intercept, which must not
 * stall the other threads. Deterministic stdout; exit status 0 when every check held. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

/* ---- a chain of STAGES threads connected by pipes, passing TOKENS integers ---- */
#define STAGES 64
#define TOKENS 2000
static int chain[STAGES + 1][2];
static void *stage(void *a) {
    long i = (long)a; uint32_t v;
    for (;;) {
        ssize_t n = read(chain[i][0], &v, sizeof v);
        if (n == 0) break;
        CHECK(n == sizeof v);
        v += 1;
        CHECK(write(chain[i + 1][1], &v, sizeof v) == sizeof v);
    }
    close(chain[i][0]); close(chain[i + 1][1]);
    return 0;
}
static void pipe_chain(void) {
    for (int i = 0; i <= STAGES; i++) CHECK(pipe(chain[i]) == 0);
    pthread_t t[STAGES];
    for (long i = 0; i < STAGES; i++) CHECK(pthread_create(&t[i], 0, stage, (void *)i) == 0);
    long sum = 0;
    /* Feed and drain from the main thread (a plain thread under the preload). */
    for (uint32_t k = 0; k < TOKENS; k++) {
        CHECK(write(chain[0][1], &k, sizeof k) == sizeof k);
        uint32_t v; CHECK(read(chain[STAGES][0], &v, sizeof v) == sizeof v);
        CHECK(v == k + STAGES); sum += v;
    }
    close(chain[0][1]);
    for (int i = 0; i < STAGES; i++) pthread_join(t[i], 0);
    uint32_t v; CHECK(read(chain[STAGES][0], &v, sizeof v) == 0); /* EOF */
    printf("pipe_chain stages=%d tokens=%d sum=%ld\n", STAGES, TOKENS, sum);
}

/* ---- poll and select over several pipes, served by writer threads ---- */
#define NP 8
static int pp[NP][2];
static void *late_writer(void *a) {
    long i = (long)a; usleep(1000 * (int)(i + 1));
    char c = 'a' + i; CHECK(write(pp[i][1], &c, 1) == 1);
    return 0;
}
static void *poll_thread(void *a) {
    (void)a;
    for (int i = 0; i < NP; i++) CHECK(pipe(pp[i]) == 0);
    pthread_t w[NP];
    for (long i = 0; i < NP; i++) pthread_create(&w[i], 0, late_writer, (void *)i);
    int got = 0; char seen[NP + 1] = {0};
    while (got < NP) {
        struct pollfd p[NP];
        for (int i = 0; i < NP; i++) { p[i].fd = pp[i][0]; p[i].events = POLLIN; p[i].revents = 0; }
        int r = poll(p, NP, 5000); CHECK(r > 0);
        for (int i = 0; i < NP; i++) if (p[i].revents & POLLIN) { char c; CHECK(read(pp[i][0], &c, 1) == 1); seen[i] = c; got++; }
    }
    for (int i = 0; i < NP; i++) pthread_join(w[i], 0);
    /* select: nothing ready times out; then one ready. */
    fd_set rs; FD_ZERO(&rs); int maxfd = 0;
    for (int i = 0; i < NP; i++) { FD_SET(pp[i][0], &rs); if (pp[i][0] > maxfd) maxfd = pp[i][0]; }
    struct timeval tv = {0, 20000};
    CHECK(select(maxfd + 1, &rs, 0, 0, &tv) == 0);
    pthread_t w3; pthread_create(&w3, 0, late_writer, (void *)3);
    FD_ZERO(&rs); for (int i = 0; i < NP; i++) FD_SET(pp[i][0], &rs);
    tv.tv_sec = 5; tv.tv_usec = 0;
    CHECK(select(maxfd + 1, &rs, 0, 0, &tv) == 1 && FD_ISSET(pp[3][0], &rs));
    pthread_join(w3, 0);
    char c; CHECK(read(pp[3][0], &c, 1) == 1 && c == 'd');
    printf("poll_select seen=%s\n", seen);
    return 0;
}

/* ---- the program's own epoll set and an eventfd ---- */
static int efd;
static void *poster(void *a) {
    (void)a;
    for (int i = 0; i < 100; i++) { uint64_t one = 1; CHECK(write(efd, &one, 8) == 8); if (i % 10 == 0) usleep(200); }
    return 0;
}
static void *epoll_thread(void *a) {
    (void)a;
    efd = eventfd(0, 0); CHECK(efd >= 0);
    int ep = epoll_create1(EPOLL_CLOEXEC); CHECK(ep >= 0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = efd};
    CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev) == 0);
    struct epoll_event out[4];
    CHECK(epoll_wait(ep, out, 4, 20) == 0); /* times out */
    pthread_t p; pthread_create(&p, 0, poster, 0);
    uint64_t total = 0;
    while (total < 100) {
        int n = epoll_wait(ep, out, 4, 5000); CHECK(n > 0);
        uint64_t v; CHECK(read(efd, &v, 8) == 8); total += v;
    }
    pthread_join(p, 0);
    close(ep); close(efd);
    printf("epoll_eventfd total=%llu\n", (unsigned long long)total);
    return 0;
}

/* ---- a thread stuck in a system call we do not intercept ---- */
static volatile int progress;
static void *stuck(void *a) {
    (void)a;
    /* nanosleep through the raw syscall() path: not intercepted, blocks its worker. */
    struct timespec ts = {2, 0};
    syscall(SYS_nanosleep, &ts, NULL);
    return 0;
}
static void *ticker(void *a) {
    (void)a;
    for (int i = 0; i < 100; i++) { usleep(1000); __atomic_add_fetch(&progress, 1, __ATOMIC_SEQ_CST); }
    return 0;
}
static void blocked_syscall(void) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    pthread_t s[64], t;
    for (long i = 0; i < ncpu && i < 64; i++) pthread_create(&s[i], 0, stuck, 0);
    struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_create(&t, 0, ticker, 0);
    pthread_join(t, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    for (long i = 0; i < ncpu && i < 64; i++) pthread_join(s[i], 0);
    /* The ticker must have finished while the stuck threads still slept (2 s), i.e.
       they did not stall it. 100 x 1 ms sleeps take ~100-150 ms (generous margin for
       a loaded machine). */
    printf("blocked_syscall ticks=%d ticker_done_before_stuck=%s\n", progress, ms < 1900 ? "yes" : "no");
    fprintf(stderr, "ticker took %.1f ms\n", ms);
}

/* ---- a thread that blocks in unintercepted calls again and again ---- */
static pthread_mutex_t offender_lock = PTHREAD_MUTEX_INITIALIZER;
static void *repeat_offender(void *a) {
    (void)a;
    long rounds = 0;
    for (int i = 0; i < 8; i++) {
        struct timespec ts = {0, 30 * 1000 * 1000};
        syscall(SYS_nanosleep, &ts, NULL);          /* blocks its worker */
        usleep(2000);                                /* an intercepted call in between */
        pthread_mutex_lock(&offender_lock);
        rounds++;
        pthread_mutex_unlock(&offender_lock);
    }
    return (void *)rounds;
}
static void repeat_offenders(void) {
    pthread_t t[2]; void *r0, *r1;
    pthread_create(&t[0], 0, repeat_offender, 0); pthread_create(&t[1], 0, repeat_offender, 0);
    pthread_join(t[0], &r0); pthread_join(t[1], &r1);
    printf("repeat_offenders rounds=%ld\n", (long)r0 + (long)r1);
}

/* ---- a thread that waits for completions in a raw system call (InnoDB's inline
 * io_uring_enter through liburing): one episode marks it for demotion, and its next
 * intercepted wait hands it to its donor. rt_sigtimedwait stands for the completion
 * wait here (no io_uring needed); the `syscall` instruction is inline, as in liburing,
 * so no export sees it. */
static long raw_sigtimedwait_ms(long ms) {
    unsigned long set = 1UL << (SIGUSR2 - 1); /* never sent: the wait times out */
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
#if defined(__x86_64__)
    long ret;
    register long r10 __asm__("r10") = 8;
    __asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_rt_sigtimedwait), "D"(&set), "S"(0L), "d"(&ts), "r"(r10)
                     : "rcx", "r11", "memory");
    return ret;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_rt_sigtimedwait;
    register long x0 __asm__("x0") = (long)&set;
    register long x1 __asm__("x1") = 0;
    register long x2 __asm__("x2") = (long)&ts;
    register long x3 __asm__("x3") = 8;
    __asm__ volatile("svc #0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
    return x0;
#else
    return syscall(SYS_rt_sigtimedwait, &set, NULL, &ts, 8);
#endif
}
static void *completion_waiter(void *a) {
    (void)a;
    long timeouts = 0;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t c = PTHREAD_COND_INITIALIZER;
    for (int i = 0; i < 3; i++) {
        if (raw_sigtimedwait_ms(250) == -EAGAIN) timeouts++; /* blocks its worker */
        struct timespec d; clock_gettime(CLOCK_REALTIME, &d);
        d.tv_nsec += 1000000; if (d.tv_nsec >= 1000000000) { d.tv_sec++; d.tv_nsec -= 1000000000; }
        pthread_mutex_lock(&m);
        pthread_cond_timedwait(&c, &m, &d);                /* an intercepted wait */
        pthread_mutex_unlock(&m);
    }
    return (void *)timeouts;
}
static void completion_waits(void) {
    pthread_t t; void *r;
    pthread_create(&t, 0, completion_waiter, 0);
    pthread_join(t, &r);
    printf("completion_waits timeouts=%ld\n", (long)r);
}

/* ---- pread/pwrite with O_DIRECT (InnoDB's page I/O): a fiber runs them on its donor;
 * the data must come back as written. Where the file system refuses O_DIRECT (tmpfs),
 * the same calls run buffered and inline. ---- */
static int direct_fd = -1;
static void *direct_io_thread(void *a) {
    long id = (long)a, bad = 0;
    void *buf;
    if (posix_memalign(&buf, 4096, 4096)) exit(1);
    for (int round = 0; round < 16; round++) {
        off_t off = (off_t)(id * 16 + round) * 4096;
        memset(buf, (int)(id * 16 + round), 4096);
        if (pwrite(direct_fd, buf, 4096, off) != 4096) { perror("pwrite"); exit(1); }
        memset(buf, 0xff, 4096);
        if (pread(direct_fd, buf, 4096, off) != 4096) { perror("pread"); exit(1); }
        for (int i = 0; i < 4096; i++) if (((unsigned char *)buf)[i] != (unsigned char)(id * 16 + round)) bad++;
    }
    free(buf);
    return (void *)bad;
}
static void direct_io(void) {
    char path[] = "./fiberize-direct-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { perror("mkstemp"); exit(1); }
    direct_fd = open(path, O_RDWR | O_DIRECT);
    int direct = direct_fd >= 0;
    if (!direct) direct_fd = fd;
    pthread_t t[8]; long bad = 0;
    for (long i = 0; i < 8; i++) pthread_create(&t[i], 0, direct_io_thread, (void *)i);
    for (int i = 0; i < 8; i++) { void *r; pthread_join(t[i], &r); bad += (long)r; }
    if (direct) close(direct_fd);
    /* The library keeps each descriptor's O_DIRECT answer; F_SETFL through a duplicate
     * changes the shared file description, so the answer for `buffered` must follow:
     * 16 buffered rounds inline, then 16 O_DIRECT rounds on the donor. */
    int buffered = open(path, O_RDWR);
    CHECK(buffered >= 0);
    direct_fd = buffered;
    pthread_create(&t[0], 0, direct_io_thread, (void *)0);
    { void *r; pthread_join(t[0], &r); bad += (long)r; }
    int twin = dup(buffered);
    int flags = fcntl(twin, F_GETFL);
    int switched = direct && fcntl(twin, F_SETFL, flags | O_DIRECT) == 0 && (fcntl(buffered, F_GETFL) & O_DIRECT);
    pthread_create(&t[0], 0, direct_io_thread, (void *)1);
    { void *r; pthread_join(t[0], &r); bad += (long)r; }
    close(twin); close(buffered);
    close(fd); unlink(path);
    printf("direct_io blocks=%d bad=%ld\n", 10 * 16, bad);
    fprintf(stderr, "direct_io O_DIRECT=%d switched=%d\n", direct, switched);
}

/* Bulk transfer over a socketpair and a pipe with a slow reader: the writer's blocking
 * writes fill the buffer and must be woken by write readiness (EPOLLOUT). */
#define BULK (8 << 20)
static int bulk_fd[2];
static void *bulk_writer(void *a) {
    (void)a; static char buf[65536]; unsigned long sent = 0;
    while (sent < BULK) {
        for (int i = 0; i < (int)sizeof buf; i++) buf[i] = (char)((sent + i) * 7);
        ssize_t n = write(bulk_fd[1], buf, sizeof buf);
        if (n <= 0) { perror("bulk write"); exit(1); }
        if (n != (ssize_t)sizeof buf) { fprintf(stderr, "short blocking write %zd\n", n); exit(1); }
        sent += n;
    }
    close(bulk_fd[1]);
    return 0;
}
static void bulk(int use_socket) {
    if (use_socket) socketpair(AF_UNIX, SOCK_STREAM, 0, bulk_fd); else if (pipe(bulk_fd)) exit(1);
    pthread_t w; pthread_create(&w, 0, bulk_writer, 0);
    char buf[4096]; unsigned long got = 0, bad = 0; int reads = 0;
    for (;;) {
        ssize_t n = read(bulk_fd[0], buf, sizeof buf);
        if (n < 0) { perror("bulk read"); exit(1); }
        if (n == 0) break;
        for (ssize_t i = 0; i < n; i++) if (buf[i] != (char)((got + i) * 7)) bad++;
        got += n;
        if (++reads % 256 == 0) usleep(1000); /* slow reader: the writer blocks */
    }
    pthread_join(w, 0); close(bulk_fd[0]);
    printf("bulk over %s: %lu bytes, %lu bad\n", use_socket ? "socketpair" : "pipe", got, bad);
}

int main(void) {
    pipe_chain();
    bulk(1);
    bulk(0);
    pthread_t a, b;
    pthread_create(&a, 0, poll_thread, 0); pthread_join(a, 0);
    pthread_create(&b, 0, epoll_thread, 0); pthread_join(b, 0);
    blocked_syscall();
    repeat_offenders();
    completion_waits();
    direct_io();
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
