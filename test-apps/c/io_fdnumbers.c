/* The descriptor numbers a program gets are the ones it gets natively, whatever the
 * library opens meanwhile (issue 59, finding 7). open() gives the lowest free number,
 * and programs count on it: the first open after the first pthread_create (when the
 * library starts its pool and makes its epoll sets, eventfds and kept files), and the
 * opens of one thread while another makes the library read /proc/self/maps (a
 * non-private futex wait after a MAP_SHARED mmap, which makes the library rebuild its
 * table of the address space). Then two runs of the same in other conditions:
 *   limit=N    RLIMIT_NOFILE set to N first (64: the library's floor for its own
 *              descriptors comes down to N/2; 1048576: up, where the kernel allows);
 *   closeall=PATH  close_range(0, ~0U, 0) first thing, as some daemons do; stdout and
 *              stderr then go to PATH.
 * Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "io_ping_pong.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static atomic_int mapping_done;
static int futex_word = 1;

/* Non-private futex waits that return at once (the word is not 0), each after a
 * MAP_SHARED mmap and munmap: the library rereads /proc/self/maps for each. */
static void *remap(void *a) {
    (void)a;
    for (int i = 0; i < 300; i++) {
        void *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED);
        long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT, 0, 0, 0, 0);
        CHECK(r == -1 && errno == EAGAIN);
        munmap(p, 4096);
    }
    atomic_store(&mapping_done, 1);
    return 0;
}

/* Opens and closes /dev/null until `remap` is done: the number it got other than `want`. */
struct opener { int want; long opens, others; };
static void *open_loop(void *a) {
    struct opener *o = a;
    do {
        int fd = open("/dev/null", O_RDONLY);
        CHECK(fd >= 0);
        o->others += fd != o->want;
        o->opens++;
        close(fd);
    } while (!atomic_load(&mapping_done));
    return 0;
}

static void *nothing(void *a) { return a; }

int main(int argc, char **argv) {
    alarm(30);
    const char *limit = 0, *closeall = 0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "limit=", 6) == 0) limit = argv[i] + 6;
        if (strncmp(argv[i], "closeall=", 9) == 0) closeall = argv[i] + 9;
    }
    if (closeall) {
        long r = syscall(SYS_close_range, 0, ~0U, 0);
        int out = open(closeall, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
        if (out != 0) _exit(3);
        if (dup(out) != 1 || dup(out) != 2) _exit(4);
        printf("close_range(0, ~0U, 0)=%ld\n", r);
    }
    setvbuf(stdout, 0, _IOLBF, 0);
    if (limit) {
        struct rlimit rl = { strtoul(limit, 0, 10), strtoul(limit, 0, 10) };
        struct rlimit old;
        CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
        if (rl.rlim_cur > old.rlim_max) rl.rlim_max = rl.rlim_cur;
        else rl.rlim_max = old.rlim_max;
        int r = setrlimit(RLIMIT_NOFILE, &rl);
        if (r != 0) { /* not allowed above the hard limit here: as high as allowed */
            rl.rlim_cur = rl.rlim_max = old.rlim_max;
            r = setrlimit(RLIMIT_NOFILE, &rl);
        }
        printf("limit %s (or the hard limit): %s\n", limit, r == 0 ? "set" : "refused");
    }
    int first = open("/dev/null", O_RDONLY);
    pthread_t t;
    CHECK(pthread_create(&t, 0, nothing, 0) == 0 && pthread_join(t, 0) == 0);
    int after_pool = open("/dev/null", O_RDONLY);
    printf("first open=%d, after the first thread=%d\n", first, after_pool);
    close(after_pool);

    struct opener o = { after_pool, 0, 0 };
    pthread_t a, b;
    CHECK(pthread_create(&b, 0, open_loop, &o) == 0);
    CHECK(pthread_create(&a, 0, remap, 0) == 0);
    CHECK(pthread_join(a, 0) == 0 && pthread_join(b, 0) == 0);
    printf("opens during maps reads: other numbers=%ld (of %s)\n", o.others, o.opens > 0 ? "some" : "none");
    printf("ping-pong=%d\n", ping_pong_rounds(50));
    int again = open("/dev/null", O_RDONLY);
    printf("open at the end=%d\n", again);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
