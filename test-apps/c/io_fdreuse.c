/* Descriptor numbers closed in bulk or out of the library's sight, then reused
 * (issue 25: varnishd closes with close_range(3, ~0U, 0), opens a file that gets
 * number 3, and its write() must not be taken for a send() on the socket 3 was).
 * Each way of closing first gets a socketpair end and a pipe end waited on by a thread
 * (so that the library registered them in its reactor), closes them, then reuses the
 * numbers: a regular file is written and read back, and a pipe made with a raw system
 * call (which the library does not see) is read by a thread that waits for its data.
 * Also close_range(CLOSE_RANGE_CLOEXEC), which closes nothing: the socket still works.
 * With argument "from3": close_range(3, ~0U, 0) once threads ran (the runtime's own
 * descriptors must survive it), then threads wait in reads as before. Last, a forked
 * child reuses and closes numbers (one was the library's epoll set, which it drops).
 * Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static char path[64];

struct reader { int fd; long r; };
static void *read_one(void *a) {
    struct reader *rd = a;
    char c;
    rd->r = read(rd->fd, &c, 1);
    return 0;
}

/* A thread blocks reading `fd` until `peer` gets a byte 30 ms later: the result. */
static long blocked_read(int fd, int peer) {
    struct reader rd = { fd, -2 };
    pthread_t t;
    CHECK(pthread_create(&t, 0, read_one, &rd) == 0);
    usleep(30000);
    CHECK(write(peer, "x", 1) == 1);
    CHECK(pthread_join(t, 0) == 0);
    return rd.r;
}

/* close(2) as an inline system call: no library sees it. */
static long raw_close(int fd) {
    long r;
#if defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_close;
    register long x0 __asm__("x0") = fd;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8) : "memory");
    r = x0;
#else
    __asm__ volatile("syscall" : "=a"(r) : "0"((long)SYS_close), "D"((long)fd) : "rcx", "r11", "memory");
#endif
    return r;
}

enum how { CLOSE_RANGE, CLOSEFROM, SYSCALL_CLOSE_RANGE, SYSCALL_CLOSE, FCLOSE, UNSHARE_ALONE, RAW_CLOSE_THEN_DUPFD,
           RAW_CLOSE_THEN_OPEN, HOWS };
static const char *how_name[] = { "close_range", "closefrom", "syscall_close_range", "syscall_close", "fclose_fdopen",
                                  "close_range_unshare", "raw_close_then_F_DUPFD", "raw_close_then_open" };

static void scenario(enum how how) {
    int sv[2], p[2];
    int early = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600); /* below the numbers closed */
    CHECK(early >= 0);
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 && pipe(p) == 0);
    long waited = blocked_read(sv[0], sv[1]) + blocked_read(p[0], p[1]);
    int lo = sv[0];
    for (int i = 0; i < 2; i++) {
        if (sv[i] < lo) lo = sv[i];
        if (p[i] < lo) lo = p[i];
    }
    long closed = 0;
    int dupfd = -1;
    switch (how) {
    case CLOSE_RANGE: closed = close_range(lo, ~0U, 0); break;
    case CLOSEFROM: closefrom(lo); break;
    case SYSCALL_CLOSE_RANGE: closed = syscall(SYS_close_range, lo, ~0U, 0); break;
    case SYSCALL_CLOSE:
        for (int i = 0; i < 2; i++) closed |= syscall(SYS_close, sv[i]) | syscall(SYS_close, p[i]);
        break;
    case FCLOSE: {
        FILE *a = fdopen(sv[0], "r+"), *b = fdopen(p[0], "r");
        CHECK(a && b);
        closed = fclose(a) | fclose(b) | close(sv[1]) | close(p[1]);
        break;
    }
    case UNSHARE_ALONE: /* every other thread has ended: the table is this thread's alone */
        closed = close_range(lo, ~0U, CLOSE_RANGE_UNSHARE);
        break;
    case RAW_CLOSE_THEN_DUPFD: /* closed where nobody sees it; the number comes back through F_DUPFD */
        closed = raw_close(sv[0]) | close(sv[1]) | close(p[0]) | close(p[1]);
        dupfd = fcntl(early, F_DUPFD, sv[0]);
        break;
    case RAW_CLOSE_THEN_OPEN: /* closed where nobody sees it; open() takes the number */
        closed = raw_close(sv[0]) | close(sv[1]) | close(p[0]) | close(p[1]);
        break;
    case HOWS: break;
    }
    int f = dupfd >= 0 ? dupfd : open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(f >= 0);
    int reused = f == sv[0] || f == sv[1] || f == p[0] || f == p[1];
    errno = 0;
    long w = write(f, "hello", 5);
    int werr = errno;
    char buf[8] = "";
    long r = pread(f, buf, 5, 0);
    /* A pipe the library never saw, under a number it may still remember. */
    int q[2];
    CHECK(syscall(SYS_pipe2, q, 0) == 0);
    long rawpipe = blocked_read(q[0], q[1]);
    printf("%-22s waited=%ld closed=%ld reused=%d write=%ld %s read=%ld %.5s raw_pipe_read=%ld\n", how_name[how], waited,
           closed, reused, w, w < 0 ? strerrorname_np(werr) : "-", r, buf, rawpipe);
    close(f);
    close(early);
    close(q[0]);
    close(q[1]);
}

/* close_range(CLOSE_RANGE_CLOEXEC) only marks: the socket stays open and keeps working. */
static void cloexec_scenario(void) {
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    long before = blocked_read(sv[0], sv[1]);
    long r = close_range(sv[0], sv[1], CLOSE_RANGE_CLOEXEC);
    int cloexec = (fcntl(sv[0], F_GETFD) & FD_CLOEXEC) != 0;
    long after = blocked_read(sv[0], sv[1]);
    printf("close_range_cloexec    waited=%ld r=%ld cloexec=%d read_after=%ld\n", before, r, cloexec, after);
    close(sv[0]);
    close(sv[1]);
}

static void *in_thread(void *a) {
    (void)a;
    int (*is_fiber)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    fprintf(stderr, "thread is_fiber=%d\n", is_fiber ? is_fiber() : 0);
    return 0;
}

int main(int argc, char **argv) {
    alarm(60); /* a wait that never ends fails the test instead of hanging it */
    setvbuf(stdout, 0, _IOLBF, 0);
    snprintf(path, sizeof path, "/tmp/io_fdreuse.%d", (int)getpid());
    pthread_t t;
    CHECK(pthread_create(&t, 0, in_thread, 0) == 0 && pthread_join(t, 0) == 0);
    if (argc > 1 && strcmp(argv[1], "from3") == 0) {
        long r = close_range(3, ~0U, 0);
        int sv[2];
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
        long reads = 0;
        for (int i = 0; i < 20; i++)
            reads += blocked_read(sv[0], sv[1]);
        printf("close_range(3, ~0U, 0)=%ld reads=%ld\n", r, reads);
    } else {
        for (enum how h = 0; h < HOWS; h++)
            scenario(h);
        cloexec_scenario();
        unlink(path);
        /* A forked child lets go of the library's epoll set; the number is the child's
         * to reuse, and its close of that number must close. */
        pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
            int failed = 0;
            for (int i = 0; i < 8; i++) {
                int f = open("/dev/null", O_RDONLY);
                failed += f < 0 || close(f) != 0;
            }
            _exit(failed);
        }
        int st;
        CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st));
        printf("forked child: closes failed=%d\n", WEXITSTATUS(st));
    }
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
