/* The WTLS demo and benchmark (issue 13): N connection threads, each serving
 * requests that take objects from a per-thread object pool (a cache, as allocators,
 * loggers and statistics keep per thread).
 *
 *   bench_wtls CONNECTIONS SECONDS thread|wtls
 *
 * thread: the pool is a plain __thread variable: one pool per connection natively
 *         and under the preload (every thread_local is per fiber there).
 * wtls:   the pool is reached through WTLS_ADDR_OF: one pool per worker under the
 *         preload; natively the macro is plain TLS, the same as `thread`.
 *
 * Clients (CLIENTS threads) each own a share of the connections and run a closed
 * loop: one request byte to each of their connections, then each reply. A request
 * takes OBJECTS_PER_REQUEST objects from the pool (FIFO), fills and sums them, and
 * gives them back. Prints "ops=<requests/s> pool_kib=<bytes of pool slabs, KiB>
 * pools=<pools made> rss_mb=<peak RSS>". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "fiberize.h"

#define OBJECT_BYTES 256
#define POOL_OBJECTS 64 /* a 16 KiB slab per pool */
#define OBJECTS_PER_REQUEST 8
#define CLIENTS 4

struct object {
    struct object *next;
    unsigned char payload[OBJECT_BYTES - sizeof(struct object *)];
};

/* A FIFO free list: objects come back at the tail, so a pool cycles through its
 * whole slab, as buffer pools and allocator caches that rotate their objects do. */
struct pool {
    struct object *head, *tail;
};

static __thread struct pool thread_pool;
static int use_wtls;
static atomic_long pool_bytes, pools_made;
static atomic_int stop;
static atomic_long requests;

static struct pool *my_pool(void) {
    return use_wtls ? WTLS_ADDR_OF(thread_pool) : &thread_pool;
}

static void pool_fill(struct pool *p) {
    struct object *slab = malloc(sizeof(struct object) * POOL_OBJECTS);
    for (int i = 0; i < POOL_OBJECTS; i++)
        slab[i].next = i + 1 < POOL_OBJECTS ? &slab[i + 1] : NULL;
    p->head = &slab[0];
    p->tail = &slab[POOL_OBJECTS - 1];
    atomic_fetch_add(&pool_bytes, sizeof(struct object) * POOL_OBJECTS);
    atomic_fetch_add(&pools_made, 1);
}

/* One request: no blocking call between taking the pool and giving the objects
 * back, so the worker's pool is never shared by two fibers at once. */
static unsigned serve(unsigned char seed) {
    struct pool *p = my_pool();
    if (!p->head)
        pool_fill(p);
    struct object *taken[OBJECTS_PER_REQUEST];
    unsigned sum = 0;
    for (int i = 0; i < OBJECTS_PER_REQUEST; i++) {
        taken[i] = p->head;
        p->head = taken[i]->next;
        memset(taken[i]->payload, seed + i, sizeof taken[i]->payload);
    }
    for (int i = 0; i < OBJECTS_PER_REQUEST; i++) {
        for (size_t j = 0; j < sizeof taken[i]->payload; j += 16)
            sum += taken[i]->payload[j];
        taken[i]->next = NULL;
        if (p->head)
            p->tail->next = taken[i];
        else
            p->head = taken[i];
        p->tail = taken[i];
    }
    return sum;
}

static void *connection(void *arg) {
    int fd = (int)(long)arg;
    unsigned char c;
    while (read(fd, &c, 1) == 1) {
        unsigned char reply = (unsigned char)serve(c);
        if (write(fd, &reply, 1) != 1)
            break;
    }
    return NULL;
}

struct client {
    int *fds;
    int n;
};

static void *client(void *arg) {
    struct client *c = arg;
    unsigned char b = 1;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < c->n; i++)
            if (write(c->fds[i], &b, 1) != 1)
                return NULL;
        for (int i = 0; i < c->n; i++)
            if (read(c->fds[i], &b, 1) != 1)
                return NULL;
        atomic_fetch_add_explicit(&requests, c->n, memory_order_relaxed);
    }
    return NULL;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static long peak_rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_wtls CONNECTIONS SECONDS thread|wtls\n");
        return 2;
    }
    int n = atoi(argv[1]);
    double seconds = atof(argv[2]);
    use_wtls = strcmp(argv[3], "wtls") == 0;
    int(*client_fds)[2] = malloc(sizeof(int[2]) * n);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t *conns = malloc(sizeof(pthread_t) * n);
    for (int i = 0; i < n; i++) {
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, client_fds[i]) != 0) {
            perror("socketpair");
            return 1;
        }
        if (pthread_create(&conns[i], &attr, connection, (void *)(long)client_fds[i][1]) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    struct client cl[CLIENTS];
    pthread_t clients[CLIENTS];
    int *fds = malloc(sizeof(int) * n);
    for (int i = 0; i < n; i++)
        fds[i] = client_fds[i][0];
    for (int c = 0; c < CLIENTS; c++) {
        cl[c].fds = fds + (long)n * c / CLIENTS;
        cl[c].n = (int)((long)n * (c + 1) / CLIENTS - (long)n * c / CLIENTS);
    }
    /* Warm-up: every connection serves once before the clock starts. */
    double t0 = now();
    for (int c = 0; c < CLIENTS; c++)
        pthread_create(&clients[c], &attr, client, &cl[c]);
    usleep(200 * 1000);
    long start_requests = atomic_load(&requests);
    t0 = now();
    usleep((useconds_t)(seconds * 1e6));
    long done = atomic_load(&requests) - start_requests;
    double t1 = now();
    atomic_store(&stop, 1);
    for (int c = 0; c < CLIENTS; c++)
        pthread_join(clients[c], NULL);
    for (int i = 0; i < n; i++)
        shutdown(client_fds[i][0], SHUT_RDWR);
    for (int i = 0; i < n; i++)
        pthread_join(conns[i], NULL);
    printf("ops=%.0f pool_kib=%ld pools=%ld rss_mb=%.1f\n", done / (t1 - t0), atomic_load(&pool_bytes) / 1024,
           atomic_load(&pools_made), peak_rss_kib() / 1024.0);
    return 0;
}
