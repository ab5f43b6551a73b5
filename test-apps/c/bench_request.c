/* Benchmark (and a test's program): one request handler served two ways, so that the
 * preloaded thread-per-connection server can be held against the shape it competes
 * with, an epoll worker pool, on the same work.
 *
 *   bench_request serve threads
 *       Thread-per-connection, blocking read/write (MariaDB's default shape): one thread
 *       accepts, each connection gets a detached thread with a 256 KB stack.
 *   bench_request serve pool
 *       An epoll worker pool shaped like MariaDB's thread pool (threadpool_generic.cc):
 *       one group per CPU of the process's affinity, each with its own epoll set and
 *       one thread to begin with (connections dealt round robin), one listener at a
 *       time in epoll_wait, EPOLLONESHOT re-armed after each request, the thread that
 *       takes an event runs the request itself, a non-blocking epoll_wait before an
 *       idle thread sleeps on its own condition variable, idle threads woken newest
 *       first (LIFO), at most OVERSUBSCRIBE + 1 active threads taking from the queue.
 *       A thread that waits for a commit leaves its group with no active thread: the
 *       group then wakes or creates another (MariaDB's wait_begin).
 *     Both print "port=N" once listening; SIGTERM ends them cleanly with one line on
 *     stderr: "preloaded=P conn_is_fiber=F connections=C requests=R".
 *   bench_request load PORT CONNECTIONS SECONDS [PER_CONNECTION]
 *       The load generator, native, one thread and epoll, one request in flight per
 *       connection. Warms 0.5 s, then counts for SECONDS; prints requests_per_sec=,
 *       p95_us=, requests=. With SERVER_PID set also the server's CPU per request in
 *       the window (server_user_us=, server_sys_us=, server_cpu_us=, from
 *       /proc/PID/stat) and its context switches per request (switches=, summed over
 *       /proc/PID/task/TID/status); with PERF_CTL (and PERF_ACK) it writes "enable" and
 *       "disable" to perf's control fifo around the window. With PER_CONNECTION > 0:
 *       no warm-up, each connection makes exactly that many requests (SECONDS is then
 *       a time limit), and checksum= is a sum of the replies that any correct server
 *       gives alike.
 *
 * The handler (same code both ways) parses "Q <id> <n>\n", writes STACK_KB (16) KB of
 * its stack in a scattered order (a permutation of its cache lines: the prefetcher
 * cannot stream it, as it streams a walk in order), makes MALLOCS (8) malloc/free pairs
 * of mixed sizes, updates a small shared table under one mutex and, with COMMIT=1,
 * hands a commit to the group-commit thread and waits for its acknowledgment
 * (read_write's shape: that thread takes every queued commit at once, works a few µs,
 * then broadcasts). It answers "A <id> <n> <hash>\n". Settings come from the
 * environment. scripts/bench-request.sh runs the three servers against the load. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include "loopback.h"

static int stack_kb = 16, mallocs = 8, commit;
static long connections, requests;

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static uint64_t mix(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 29;
    return x;
}

/* ---- the handler's parts ---- */

static size_t gcd(size_t a, size_t b) {
    while (b) {
        size_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Writes stack_kb KB of this frame, one 8-byte word per 64-byte line, lines visited in a
 * permutation (an odd stride coprime with the line count), then reads some back. */
__attribute__((noinline)) static uint64_t scattered_stack(uint64_t h) {
    size_t lines = (size_t)stack_kb * 16;
    if (!lines) return h;
    uint64_t frame[lines * 8];
    size_t stride = (lines * 5 / 8) | 1;
    while (gcd(stride, lines) != 1) stride += 2;
    size_t at = h % lines;
    for (size_t k = 0; k < lines; k++) {
        frame[at * 8 + (at & 7)] = h + k;
        at += stride;
        if (at >= lines) at -= lines;
    }
    __asm__ volatile("" : : "r"(frame) : "memory"); /* the writes happen */
    for (size_t k = 0; k < lines; k += 7) h = mix(h ^ frame[k * 8 + (k & 7)]);
    return h;
}

static uint64_t heap_work(uint64_t h) {
    static const size_t sizes[] = {24, 136, 520, 64, 2000, 40, 300, 4100, 96, 1024};
    void *blocks[64];
    int m = mallocs < 64 ? mallocs : 64;
    for (int i = 0; i < m; i++) {
        size_t sz = sizes[(h + i) % (sizeof sizes / sizeof *sizes)];
        unsigned char *p = malloc(sz);
        if (!p) abort();
        p[0] = (unsigned char)i;
        p[sz - 1] = (unsigned char)h;
        blocks[i] = p;
    }
    for (int i = 0; i < m; i++) free(blocks[i]);
    return mix(h + (uint64_t)m);
}

#define TABLE 64
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uint64_t count, sum; } table[TABLE];

static void shared_update(unsigned id, uint64_t n) {
    pthread_mutex_lock(&table_lock);
    table[id % TABLE].count++;
    table[id % TABLE].sum += n;
    requests++;
    pthread_mutex_unlock(&table_lock);
}

/* Group commit: requests queue a ticket and wait; the committer takes every ticket
 * queued so far, works a few µs, then acknowledges them all with one broadcast. */
static pthread_mutex_t gc_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gc_work = PTHREAD_COND_INITIALIZER, gc_done = PTHREAD_COND_INITIALIZER;
static uint64_t gc_queued, gc_committed;
static int gc_idle;

static void *committer(void *arg) {
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&gc_lock);
        while (gc_queued == gc_committed) {
            gc_idle = 1;
            pthread_cond_wait(&gc_work, &gc_lock);
        }
        gc_idle = 0;
        uint64_t upto = gc_queued;
        pthread_mutex_unlock(&gc_lock);
        volatile uint64_t x = upto; /* the group's "write": a few µs of work, no fsync */
        for (int i = 0; i < 3000; i++) x = x * 2862933555777941757ULL + 3037000493ULL;
        pthread_mutex_lock(&gc_lock);
        gc_committed = upto;
        pthread_cond_broadcast(&gc_done);
        pthread_mutex_unlock(&gc_lock);
    }
    return NULL;
}

static void pool_wait_begin(void);
static void pool_wait_end(void);
static int pool_mode;

static void commit_and_wait(void) {
    if (pool_mode) pool_wait_begin();
    pthread_mutex_lock(&gc_lock);
    uint64_t ticket = ++gc_queued;
    if (gc_idle) pthread_cond_signal(&gc_work);
    while (gc_committed < ticket) pthread_cond_wait(&gc_done, &gc_lock);
    pthread_mutex_unlock(&gc_lock);
    if (pool_mode) pool_wait_end();
}

/* One request: "Q <id> <n>" (without the newline); writes the answer line to out. */
static int handle(const char *req, char *out, size_t cap) {
    unsigned id;
    unsigned long long n;
    if (sscanf(req, "Q %u %llu", &id, &n) != 2) return snprintf(out, cap, "E bad request\n");
    uint64_t h = mix(((uint64_t)id << 32) ^ n ^ 0x9e3779b97f4a7c15ULL);
    h = scattered_stack(h);
    h = heap_work(h);
    shared_update(id, n);
    if (commit) commit_and_wait();
    return snprintf(out, cap, "A %u %llu %016llx\n", id, n, (unsigned long long)h);
}

/* ---- connections ---- */

struct conn {
    int fd, len;
    char buf[256];
};

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EAGAIN) {
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, -1);
            continue;
        }
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Answers every complete line in c->buf; -1 when the connection is to be closed. */
static int serve_lines(struct conn *c) {
    char out[1024];
    int olen = 0, start = 0;
    for (int i = 0; i < c->len; i++) {
        if (c->buf[i] != '\n') continue;
        c->buf[i] = 0;
        olen += handle(c->buf + start, out + olen, sizeof out - (size_t)olen);
        start = i + 1;
        if (olen > (int)sizeof out - 64) {
            if (write_all(c->fd, out, (size_t)olen)) return -1;
            olen = 0;
        }
    }
    memmove(c->buf, c->buf + start, (size_t)(c->len - start));
    c->len -= start;
    if (c->len == (int)sizeof c->buf) return -1; /* a line longer than the buffer */
    return olen ? write_all(c->fd, out, (size_t)olen) : 0;
}

/* Reads what is there (blocking or not), answers; 1: again later, 0: closed. */
static int serve_once(struct conn *c) {
    ssize_t n = read(c->fd, c->buf + c->len, sizeof c->buf - (size_t)c->len);
    if (n < 0 && errno == EAGAIN) return 1;
    if (n <= 0) return 0;
    c->len += (int)n;
    return serve_lines(c) == 0;
}

static int conn_is_fiber = -1;

static void *connection_thread(void *arg) {
    struct conn *c = arg;
    if (conn_is_fiber < 0) {
        int (*is_fiber)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
        conn_is_fiber = is_fiber ? is_fiber() : 0;
    }
    while (serve_once(c)) {
    }
    close(c->fd);
    free(c);
    return NULL;
}

/* ---- the pool ---- */

#define OVERSUBSCRIBE 3 /* MariaDB's thread_pool_oversubscribe */
#define MAX_THREADS 65536 /* MariaDB's thread_pool_max_threads, for the whole pool */

struct worker {
    pthread_cond_t cv;
    int woken;
    struct worker *next;
};

/* A thread is active unless it listens, sleeps as idle or waits for a commit. */
struct group {
    pthread_mutex_t mu;
    int ep, listener, active, threads, connections;
    double last_create;
    struct worker *waiting;     /* idle threads, newest first */
    struct conn **queue;        /* ready connections, FIFO ring */
    size_t qhead, qlen, qcap;
} __attribute__((aligned(64)));

static struct group *groups;
static int ngroups, pool_threads;
static __thread struct group *my_group;

static void queue_push(struct group *g, struct conn *c) {
    if (g->qlen == g->qcap) {
        size_t cap = g->qcap ? g->qcap * 2 : 64;
        struct conn **q = malloc(cap * sizeof *q);
        for (size_t i = 0; i < g->qlen; i++) q[i] = g->queue[(g->qhead + i) % g->qcap];
        free(g->queue);
        g->queue = q, g->qcap = cap, g->qhead = 0;
    }
    g->queue[(g->qhead + g->qlen++) % g->qcap] = c;
}

static struct conn *queue_pop(struct group *g) {
    if (!g->qlen) return NULL;
    struct conn *c = g->queue[g->qhead];
    g->qhead = (g->qhead + 1) % g->qcap;
    g->qlen--;
    return c;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *pool_thread(void *arg);

/* With g->mu held: wakes the newest idle thread; 0 if there was one. */
static int wake_thread(struct group *g) {
    struct worker *w = g->waiting;
    if (!w) return -1;
    g->waiting = w->next;
    w->woken = 1;
    pthread_cond_signal(&w->cv);
    return 0;
}

/* With g->mu held: a new thread, counted active from now. */
static void create_thread(struct group *g) {
    if (__atomic_load_n(&pool_threads, __ATOMIC_RELAXED) >= MAX_THREADS) return;
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 << 10);
    if (pthread_create(&t, &a, pool_thread, g) == 0) {
        g->threads++, g->active++;
        __atomic_add_fetch(&pool_threads, 1, __ATOMIC_RELAXED);
        g->last_create = now_s();
    }
    pthread_attr_destroy(&a);
}

/* With g->mu held: an idle thread, else a new one while the group has no more threads
 * than connections: at once without an active thread, otherwise throttled as MariaDB's
 * (not below 4 threads, then 50, 100, 200 ms apart). */
static void wake_or_create(struct group *g) {
    if (wake_thread(g) == 0 || g->threads > g->connections) return;
    double gap = g->threads < 4 ? 0 : g->threads < 8 ? 0.05 : g->threads < 16 ? 0.1 : 0.2;
    if (g->active == 0 || now_s() - g->last_create >= gap) create_thread(g);
}

static void pool_wait_begin(void) {
    struct group *g = my_group;
    pthread_mutex_lock(&g->mu);
    if (--g->active == 0 && (g->qlen || !g->listener)) wake_or_create(g);
    pthread_mutex_unlock(&g->mu);
}

static void pool_wait_end(void) {
    struct group *g = my_group;
    pthread_mutex_lock(&g->mu);
    g->active++;
    pthread_mutex_unlock(&g->mu);
}

/* The listener, entered and left with g->mu held: waits in epoll_wait; runs the first
 * event itself if the queue was empty, otherwise queues them all, wakes one thread if
 * none is active (creates one if it is alone) and stays the listener. */
static struct conn *listen_for_events(struct group *g) {
    struct epoll_event ev[64];
    for (;;) {
        pthread_mutex_unlock(&g->mu);
        int n = epoll_wait(g->ep, ev, 64, -1);
        pthread_mutex_lock(&g->mu);
        if (n <= 0) continue;
        int picks = g->qlen == 0;
        for (int i = picks; i < n; i++) queue_push(g, ev[i].data.ptr);
        if (picks) return ev[0].data.ptr;
        if (g->active == 0 && wake_thread(g) && g->threads == 1) create_thread(g);
    }
}

/* The next connection with a request for this thread (MariaDB's get_event): from the
 * queue unless the group is oversubscribed, as the listener if there is none, from a
 * non-blocking epoll_wait, or after sleeping on its own condition variable. */
static struct conn *get_event(struct group *g, struct worker *self) {
    struct conn *c = NULL;
    pthread_mutex_lock(&g->mu);
    for (;;) {
        int oversubscribed = g->active >= 1 + OVERSUBSCRIBE;
        if (!oversubscribed && (c = queue_pop(g))) break;
        if (!g->listener) {
            g->listener = 1;
            g->active--;
            c = listen_for_events(g);
            g->active++;
            g->listener = 0;
            break;
        }
        struct epoll_event e;
        if (!oversubscribed && epoll_wait(g->ep, &e, 1, 0) == 1) {
            c = e.data.ptr;
            break;
        }
        self->woken = 0;
        self->next = g->waiting;
        g->waiting = self;
        g->active--;
        while (!self->woken) pthread_cond_wait(&self->cv, &g->mu);
        g->active++;
    }
    pthread_mutex_unlock(&g->mu);
    return c;
}

static void *pool_thread(void *arg) {
    struct group *g = arg;
    struct worker self = {.woken = 0};
    pthread_cond_init(&self.cv, NULL);
    my_group = g;
    for (;;) {
        struct conn *c = get_event(g, &self);
        if (serve_once(c)) {
            struct epoll_event e = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
            epoll_ctl(g->ep, EPOLL_CTL_MOD, c->fd, &e);
        } else {
            pthread_mutex_lock(&g->mu);
            g->connections--;
            pthread_mutex_unlock(&g->mu);
            close(c->fd);
            free(c);
        }
    }
    return NULL;
}

static void pool_start(void) {
    cpu_set_t set;
    ngroups = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
    groups = aligned_alloc(64, sizeof *groups * (size_t)ngroups);
    memset(groups, 0, sizeof *groups * (size_t)ngroups);
    for (int i = 0; i < ngroups; i++) {
        pthread_mutex_init(&groups[i].mu, NULL);
        groups[i].ep = epoll_create1(EPOLL_CLOEXEC);
        pthread_mutex_lock(&groups[i].mu);
        create_thread(&groups[i]);
        pthread_mutex_unlock(&groups[i].mu);
    }
}

/* Hands a new connection to a group, round robin. */
static void pool_add(struct conn *c, unsigned next) {
    struct group *g = &groups[next % (unsigned)ngroups];
    pthread_mutex_lock(&g->mu);
    g->connections++;
    pthread_mutex_unlock(&g->mu);
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct epoll_event e = {.events = EPOLLIN | EPOLLONESHOT, .data.ptr = c};
    epoll_ctl(g->ep, EPOLL_CTL_ADD, c->fd, &e);
}

/* ---- serve ---- */

static int stop_pipe[2];
static void on_term(int sig) {
    (void)sig;
    if (write(stop_pipe[1], "x", 1)) {
    }
}

static void *acceptor(void *arg) {
    int ls = (int)(long)arg;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&a, 256 << 10);
    for (unsigned next = 0;; next++) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            perror("accept");
            exit(1);
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        c->fd = fd;
        __atomic_add_fetch(&connections, 1, __ATOMIC_RELAXED);
        if (pool_mode) {
            pool_add(c, next);
        } else {
            pthread_t t;
            int err = pthread_create(&t, &a, connection_thread, c);
            if (err) {
                fprintf(stderr, "pthread_create: %s after %ld connections\n", strerror(err), connections);
                exit(1);
            }
        }
    }
    return NULL;
}

static int serve(const char *how) {
    if (!strcmp(how, "pool")) pool_mode = 1;
    else if (strcmp(how, "threads")) return 2;
    if (pipe(stop_pipe)) return 1;
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa = {.sa_handler = on_term};
    sigaction(SIGTERM, &sa, NULL);
    pthread_t t;
    if (commit) pthread_create(&t, NULL, committer, NULL);
    if (pool_mode) pool_start();
    int port, ls = listen_loopback(&port);
    pthread_create(&t, NULL, acceptor, (void *)(long)ls);
    printf("port=%d\n", port);
    fflush(stdout);
    char x;
    while (read(stop_pipe[0], &x, 1) < 0 && errno == EINTR) {
    }
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    pthread_mutex_lock(&table_lock);
    fprintf(stderr, "preloaded=%d conn_is_fiber=%d connections=%ld requests=%ld\n", active ? active() : 0,
            pool_mode ? 0 : conn_is_fiber, connections, requests);
    pthread_mutex_unlock(&table_lock);
    exit(0);
}

/* ---- load ---- */

/* The server's CPU time (utime, stime of /proc/PID/stat, in clock ticks). */
static void server_cpu(int pid, long *utime, long *stime) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    *utime = *stime = 0;
    /* after ") ": state is field 3; utime and stime are fields 14 and 15 */
    if (p) sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", utime, stime);
}

/* The server's context switches, voluntary and not, summed over its threads. */
static long server_switches(int pid) {
    char path[300], line[256];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    long sum = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/status", pid, e->d_name);
        FILE *f = fopen(path, "r");
        long v;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 || sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
                sum += v;
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return sum;
}

/* perf's control fifo (perf record/stat --control fifo:CTL,ACK): "enable"/"disable",
 * then perf's "ack" awaited. Gives up after 2 s without a reader, 30 s without an ack
 * (perf gone or never started) rather than block the load. */
static void perf_control(const char *cmd) {
    const char *ctl = getenv("PERF_CTL"), *ack = getenv("PERF_ACK");
    if (!ctl || !*ctl) return;
    int fd = -1;
    for (int i = 0; i < 200 && fd < 0; i++) {
        fd = open(ctl, O_WRONLY | O_NONBLOCK); /* ENXIO while nobody reads it */
        if (fd < 0) usleep(10000);
    }
    if (fd < 0 || write(fd, cmd, strlen(cmd)) < 0) {
        perror("PERF_CTL");
        if (fd >= 0) close(fd);
        return;
    }
    close(fd);
    if (!ack || !*ack) return;
    fd = open(ack, O_RDONLY | O_NONBLOCK);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    char buf[16];
    if (fd < 0 || poll(&pf, 1, 30000) != 1 || read(fd, buf, sizeof buf) <= 0) fprintf(stderr, "PERF_ACK: no ack from perf\n");
    if (fd >= 0) close(fd);
}

/* Latency histogram: 1 µs buckets below 65 ms, 64 µs buckets up to 60 s. */
#define FINE_US 65536L
#define HIST (FINE_US + 60000000L / 64)
static long bucket_of(long us) { return us < FINE_US ? us : us - FINE_US < (HIST - FINE_US) * 64 ? FINE_US + (us - FINE_US) / 64 : HIST - 1; }
static long us_of(long b) { return b < FINE_US ? b : FINE_US + (b - FINE_US) * 64; }

struct lconn {
    int fd, len;
    unsigned long long n;
    double sent;
    char buf[128];
};

static int send_request(struct lconn *c, unsigned id) {
    char req[64];
    int len = snprintf(req, sizeof req, "Q %u %llu\n", id, c->n);
    c->sent = now_s();
    return write_all(c->fd, req, (size_t)len);
}

static int load(int port, int conns, double seconds, long per_conn) {
    const char *sp = getenv("SERVER_PID");
    int pid = per_conn > 0 || !sp ? 0 : atoi(sp);
    int ep = epoll_create1(0);
    struct lconn *cs = calloc((size_t)conns, sizeof *cs);
    unsigned *hist = calloc(HIST, sizeof *hist);
    for (int i = 0; i < conns; i++) {
        cs[i].fd = connect_loopback(port);
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, cs[i].fd, &e);
    }
    for (int i = 0; i < conns; i++)
        if (send_request(&cs[i], (unsigned)i)) { perror("write"); return 1; }
    /* Phases: 0 warm-up (0.5 s); with SERVER_PID, 1 settling (0.3 s) after the slow
     * read of every thread's context switches; 2 the measured window, bracketed by two
     * reads of the server's CPU time (and perf's enable/disable); then the switches
     * again. The switches are per answer counted between their two reads. */
    double t0 = now_s(), t1 = 0, deadline = t0 + seconds;
    int phase = per_conn > 0 ? 2 : 0, finished = 0;
    long done = 0, answers = 0, sw0 = 0, ut0 = 0, st0 = 0;
    uint64_t checksum = 0;
    struct epoll_event ev[256];
    for (;;) {
        int n = epoll_wait(ep, ev, 256, 30000);
        if (n <= 0) { fprintf(stderr, "load: no answer for 30 s\n"); return 1; }
        double t = now_s();
        for (int k = 0; k < n; k++) {
            unsigned i = ev[k].data.u32;
            struct lconn *c = &cs[i];
            ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - (size_t)c->len);
            if (r <= 0) { fprintf(stderr, "load: connection %u closed\n", i); return 1; }
            c->len += (int)r;
            char *nl = memchr(c->buf, '\n', (size_t)c->len);
            if (!nl) continue; /* an answer may arrive in pieces */
            *nl = 0;
            unsigned id;
            unsigned long long an, h;
            if (sscanf(c->buf, "A %u %llu %llx", &id, &an, &h) != 3 || id != i || an != c->n) {
                fprintf(stderr, "load: wrong answer \"%s\" to request %u %llu\n", c->buf, i, c->n);
                return 1;
            }
            c->len = 0; /* one request in flight: nothing follows the answer */
            checksum += mix(h ^ id);
            answers += phase >= 1;
            if (phase == 2) {
                done++;
                hist[bucket_of((long)((t - c->sent) * 1e6))]++;
            }
            c->n++;
            if (per_conn > 0 && (long)c->n == per_conn) {
                finished++;
                continue;
            }
            if (send_request(c, i)) { perror("write"); return 1; }
        }
        if (per_conn > 0) {
            if (finished == conns) break;
            if (t > deadline) { fprintf(stderr, "load: not done in %.1f s\n", seconds); return 1; }
        } else if (phase == 0 && t - t0 >= 0.5) {
            phase = 1;
            if (pid) sw0 = server_switches(pid);
            t0 = now_s();
        } else if (phase == 1 && (!pid || t - t0 >= 0.3)) {
            phase = 2;
            perf_control("enable\n");
            if (pid) server_cpu(pid, &ut0, &st0);
            t0 = now_s();
        } else if (phase == 2 && t - t0 >= seconds) {
            break;
        }
    }
    t1 = now_s();
    double el = t1 - t0;
    long b = 0;
    for (long seen = 0, want = (long)(done * 0.95); b < HIST - 1; b++)
        if ((seen += hist[b]) > want) break;
    printf("requests_per_sec=%.0f\np95_us=%ld\nrequests=%ld\n", done / el, us_of(b), done);
    if (per_conn > 0) printf("checksum=%016llx\n", (unsigned long long)checksum);
    if (pid) {
        long ut1, st1;
        server_cpu(pid, &ut1, &st1);
        perf_control("disable\n");
        long sw1 = server_switches(pid);
        double tick_us = 1e6 / (double)sysconf(_SC_CLK_TCK), req = done ? (double)done : 1;
        printf("server_user_us=%.2f\nserver_sys_us=%.2f\nserver_cpu_us=%.2f\nswitches=%.3f\n", (ut1 - ut0) * tick_us / req,
               (st1 - st0) * tick_us / req, (ut1 - ut0 + st1 - st0) * tick_us / req,
               (double)(sw1 - sw0) / (double)(answers ? answers : 1));
    }
    return 0;
}

int main(int argc, char **argv) {
    stack_kb = env_int("STACK_KB", 16);
    mallocs = env_int("MALLOCS", 8);
    commit = env_int("COMMIT", 0);
    if (stack_kb < 0 || stack_kb > 192) { fprintf(stderr, "STACK_KB: 0 to 192\n"); return 2; }
    if (argc == 3 && !strcmp(argv[1], "serve")) return serve(argv[2]);
    if ((argc == 5 || argc == 6) && !strcmp(argv[1], "load"))
        return load(atoi(argv[2]), atoi(argv[3]), atof(argv[4]), argc == 6 ? atol(argv[5]) : 0);
    fprintf(stderr, "usage: bench_request serve threads|pool | load PORT CONNECTIONS SECONDS [PER_CONNECTION]\n");
    return 2;
}
