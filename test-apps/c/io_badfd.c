/* Every wrapped I/O call against every kind of descriptor, from a plain thread (main)
 * and from a created thread (a fiber under the preload): the kernel's answer must come
 * back at once, as natively, also where the descriptor cannot do the call (a write to
 * the read end of a pipe: EBADF, not a wait for writability that never comes).
 * Each case is built so that the native call does not block (data present, the call
 * invalid for that descriptor, or a short timeout for the readiness waits), and each
 * call runs under alarm(): a hang kills the program and fails the test.
 * Prints "who call kind -> ret errno" per case; only return values, errno names and
 * poll's revents, so the output is deterministic. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

/* How long the readiness waits (poll, select, epoll_wait) wait when nothing is ready. */
#define WAIT_MS 20

enum kind { PIPE_R, PIPE_W, CLOSED, MINUS_ONE, REGFILE, DIRECTORY, DEVNULL, LISTENING, TCP_UNCONN, UDP_UNCONN,
            EVENTFD, TIMERFD, OPATH, SOCKPAIR, EPOLLFD, KINDS };
static const char *kind_name[] = { "pipe_r", "pipe_w", "closed", "minus1", "regfile", "dir", "devnull", "listen",
                                   "tcp_unconn", "udp_unconn", "eventfd", "timerfd", "o_path", "sockpair", "epoll" };

enum call { READ, WRITE, READV, WRITEV, PREAD, PWRITE, RECV, RECVFROM, RECVMSG, SEND, SENDTO, SENDMSG, ACCEPT,
            ACCEPT4, CONNECT, POLL, PPOLL, SELECT, PSELECT, EPOLL_WAIT, EPOLL_PWAIT, FSYNC, FDATASYNC,
            READ_NULL, WRITE_NULL, READV_BADCNT, WRITEV_BADCNT, CALLS };
static const char *call_name[] = { "read", "write", "readv", "writev", "pread", "pwrite", "recv", "recvfrom",
                                   "recvmsg", "send", "sendto", "sendmsg", "accept", "accept4", "connect", "poll",
                                   "ppoll", "select", "pselect", "epoll_wait", "epoll_pwait", "fsync", "fdatasync",
                                   "read_null", "write_null", "readv_-1", "writev_-1" };

static char regfile_path[64];
/* Bad arguments, hidden from the compiler's checks. */
static void *volatile null_buf;
static volatile int bad_count = -1;
static struct sockaddr_in target;   /* a listener that connects succeed to */

static struct sockaddr_in loopback_listener(int fd, int backlog) {
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, backlog) == 0);
    CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    return a;
}

/* Makes a descriptor of `k` for which no wrapped call blocks natively; `extra` gets
 * the descriptors kept open beside it (the other pipe end, a peer), -1 if none. */
static int make(enum kind k, int extra[2]) {
    int p[2], fd = -1;
    extra[0] = extra[1] = -1;
    switch (k) {
    case PIPE_R: /* one byte to read; the writer stays open */
        CHECK(pipe(p) == 0 && write(p[1], "x", 1) == 1);
        extra[0] = p[1];
        return p[0];
    case PIPE_W: /* room to write; the reader stays open */
        CHECK(pipe(p) == 0);
        extra[0] = p[0];
        return p[1];
    case CLOSED: /* a number that was a socket, closed */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0 && close(fd) == 0);
        return fd;
    case MINUS_ONE: return -1;
    case REGFILE: fd = open(regfile_path, O_RDWR); break;
    case DIRECTORY: fd = open(".", O_RDONLY | O_DIRECTORY); break;
    case DEVNULL: fd = open("/dev/null", O_RDWR); break;
    case LISTENING: { /* one connection waits to be accepted */
        fd = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(fd >= 0);
        struct sockaddr_in a = loopback_listener(fd, 4);
        extra[0] = socket(AF_INET, SOCK_STREAM, 0);
        CHECK(extra[0] >= 0 && connect(extra[0], (struct sockaddr *)&a, sizeof a) == 0);
        return fd;
    }
    case TCP_UNCONN: fd = socket(AF_INET, SOCK_STREAM, 0); break;
    case UDP_UNCONN: { /* bound, one datagram queued */
        fd = socket(AF_INET, SOCK_DGRAM, 0);
        CHECK(fd >= 0);
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof a;
        CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0);
        CHECK(sendto(fd, "x", 1, 0, (struct sockaddr *)&a, sizeof a) == 1);
        return fd;
    }
    case EVENTFD: fd = eventfd(0, 0); break;    /* counter 0: an 8-byte read would block */
    case TIMERFD: fd = timerfd_create(CLOCK_MONOTONIC, 0); break;  /* never armed */
    case OPATH: fd = open(".", O_PATH); break;
    case SOCKPAIR: /* one byte to read; the peer stays open */
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, p) == 0 && write(p[1], "x", 1) == 1);
        extra[0] = p[1];
        return p[0];
    case EPOLLFD: fd = epoll_create1(0); break;  /* empty */
    case KINDS: break;
    }
    CHECK(fd >= 0);
    return fd;
}

/* Runs `c` on `fd`; returns its result with errno kept; `*note` gets poll's revents. */
static long do_call(enum call c, int fd, char *note) {
    char buf[16] = "x";
    struct iovec iov = { buf, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
    struct epoll_event ev[4];
    struct sockaddr_in from;
    socklen_t fromlen = sizeof from;
    switch (c) {
    case READ: return read(fd, buf, 1);
    case WRITE: return write(fd, buf, 1);
    case READV: return readv(fd, &iov, 1);
    case WRITEV: return writev(fd, &iov, 1);
    case PREAD: return pread(fd, buf, 1, 0);
    case PWRITE: return pwrite(fd, buf, 1, 0);
    case RECV: return recv(fd, buf, 1, 0);
    case RECVFROM: return recvfrom(fd, buf, 1, 0, (struct sockaddr *)&from, &fromlen);
    case RECVMSG: return recvmsg(fd, &m, 0);
    case SEND: return send(fd, buf, 1, 0);
    case SENDTO: return sendto(fd, buf, 1, 0, 0, 0);
    case SENDMSG: return sendmsg(fd, &m, 0);
    case ACCEPT: return accept(fd, 0, 0);
    case ACCEPT4: return accept4(fd, 0, 0, SOCK_CLOEXEC);
    case CONNECT: return connect(fd, (struct sockaddr *)&target, sizeof target);
    case POLL: case PPOLL: {
        struct pollfd p = { fd, POLLIN | POLLOUT, 0 };
        struct timespec ts = { 0, WAIT_MS * 1000000L };
        long r = c == POLL ? poll(&p, 1, WAIT_MS) : ppoll(&p, 1, &ts, 0);
        int e = errno;
        sprintf(note, " revents=%#x", p.revents);
        errno = e;
        return r;
    }
    case SELECT: case PSELECT: {
        if (fd < 0 || fd >= FD_SETSIZE) {
            strcpy(note, " (not in an fd_set)");
            errno = 0;
            return 0;
        }
        fd_set r, w;
        FD_ZERO(&r); FD_ZERO(&w); FD_SET(fd, &r); FD_SET(fd, &w);
        struct timeval tv = { 0, WAIT_MS * 1000 };
        struct timespec ts = { 0, WAIT_MS * 1000000L };
        long n = c == SELECT ? select(fd + 1, &r, &w, 0, &tv) : pselect(fd + 1, &r, &w, 0, &ts, 0);
        int e = errno;
        if (n >= 0) sprintf(note, " r=%d w=%d", FD_ISSET(fd, &r) != 0, FD_ISSET(fd, &w) != 0);
        errno = e;
        return n;
    }
    case EPOLL_WAIT: return epoll_wait(fd, ev, 4, WAIT_MS);
    case EPOLL_PWAIT: return epoll_pwait(fd, ev, 4, WAIT_MS, 0);
    case FSYNC: return fsync(fd);
    case FDATASYNC: return fdatasync(fd);
    /* Bad arguments: the kernel's answer, whatever the descriptor is ready for. */
    case READ_NULL: return read(fd, null_buf, 1);
    case WRITE_NULL: return write(fd, null_buf, 1);
    case READV_BADCNT: return readv(fd, &iov, bad_count);
    case WRITEV_BADCNT: return writev(fd, &iov, bad_count);
    case CALLS: break;
    }
    return 0;
}

/* Seconds a call may take before alarm() ends the program (argv[1]; default 10). */
static unsigned limit_s = 10;

static void run_all(const char *who) {
    for (enum call c = 0; c < CALLS; c++) {
        for (enum kind k = 0; k < KINDS; k++) {
            int extra[2];
            int fd = make(k, extra);
            char note[64] = "";
            errno = 0;
            alarm(limit_s); /* a call that hangs kills the program: the test fails, it does not hang */
            long r = do_call(c, fd, note);
            int e = errno;
            alarm(0);
            char ret[32];
            if (r >= 0 && (c == ACCEPT || c == ACCEPT4)) {
                strcpy(ret, "fd");
                close((int)r);
            } else {
                sprintf(ret, "%ld", r);
            }
            printf("%-5s %-11s %-10s -> %s %s%s\n", who, call_name[c], kind_name[k], ret,
                   r < 0 ? (strerrorname_np(e) ? strerrorname_np(e) : "?") : "-", note);
            if (k != CLOSED && fd >= 0) close(fd);
            for (int i = 0; i < 2; i++)
                if (extra[i] >= 0) close(extra[i]);
        }
    }
}

static int is_fiber(void) {
    int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    return f ? f() : 0;
}

static void *thread_main(void *arg) {
    (void)arg;
    fprintf(stderr, "thread is_fiber=%d\n", is_fiber());
    run_all("fiber");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1) limit_s = (unsigned)atoi(argv[1]);
    setvbuf(stdout, 0, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    snprintf(regfile_path, sizeof regfile_path, "/tmp/io_badfd.%d", (int)getpid());
    int f = open(regfile_path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(f >= 0 && write(f, "hello", 5) == 5 && close(f) == 0);
    int t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(t >= 0);
    target = loopback_listener(t, SOMAXCONN);

    run_all("main");
    pthread_t th;
    CHECK(pthread_create(&th, 0, thread_main, 0) == 0);
    CHECK(pthread_join(th, 0) == 0);

    close(t);
    unlink(regfile_path);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
