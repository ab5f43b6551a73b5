/* Thread-per-connection TCP echo server on loopback with N client threads, each
 * sending M messages and checking the echoes; also exercises SO_RCVTIMEO, a
 * non-blocking connect (EINPROGRESS), O_NONBLOCK as the program sees it through
 * fcntl/ioctl, partial reads, and EOF. Prints deterministic results on stdout. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int port, nclients, nmsgs, naccept;
static long total_ok;
static int tids[65536]; static int ntids;
static pthread_mutex_t tid_lock = PTHREAD_MUTEX_INITIALIZER;

#include "kernel_tid.h"

static void note_tid(void) {
    int t = running_kernel_tid();
    pthread_mutex_lock(&tid_lock);
    int seen = 0;
    for (int i = 0; i < ntids; i++) if (tids[i] == t) { seen = 1; break; }
    if (!seen && ntids < 65536) tids[ntids++] = t;
    pthread_mutex_unlock(&tid_lock);
}

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

static void *conn(void *a) {
    int fd = (int)(long)a; char buf[512];
    note_tid();
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        ssize_t w = 0;
        while (w < n) { ssize_t k = write(fd, buf + w, n - w); CHECK(k > 0); w += k; }
    }
    close(fd);
    return 0;
}

static void *acceptor(void *a) {
    int ls = (int)(long)a;
    for (int i = 0; i < naccept; i++) {
        int fd = accept(ls, 0, 0);
        CHECK(fd >= 0);
        pthread_t t; CHECK(pthread_create(&t, 0, conn, (void *)(long)fd) == 0); pthread_detach(t);
    }
    return 0;
}

static int dial(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0); CHECK(fd >= 0);
    struct sockaddr_in sa = {0}; sa.sin_family = AF_INET; sa.sin_port = htons(port); sa.sin_addr.s_addr = htonl(0x7f000001);
    CHECK(connect(fd, (void *)&sa, sizeof sa) == 0);
    int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void *client(void *a) {
    (void)a;
    int fd = dial();
    note_tid();
    /* The program's view of O_NONBLOCK is what it set: blocking by default. */
    CHECK((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    char msg[64], buf[64]; long ok = 0;
    for (int i = 0; i < nmsgs; i++) {
        int len = snprintf(msg, sizeof msg, "message %d from a client thread", i);
        CHECK(write(fd, msg, len) == len);
        int got = 0;
        while (got < len) { ssize_t n = read(fd, buf + got, len - got); CHECK(n > 0); got += n; }
        if (!memcmp(buf, msg, len)) ok++;
        if (i % 50 == 0) usleep(100);
    }
    close(fd);
    __atomic_add_fetch(&total_ok, ok, __ATOMIC_SEQ_CST);
    return 0;
}

static void *close_later(void *a) {
    usleep(20000);
    close((int)(long)a);
    return NULL;
}

static void *edge_cases(void *a) {
    (void)a;
    int fd = dial();
    /* SO_RCVTIMEO: a read with nothing to read times out with EAGAIN. */
    struct timeval tv = {0, 50000};
    CHECK(setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
    char c; errno = 0;
    CHECK(read(fd, &c, 1) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
    /* O_NONBLOCK set by the program: EAGAIN at once, and F_GETFL shows it. */
    int fl = fcntl(fd, F_GETFL); CHECK(fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
    CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
    CHECK(recv(fd, &c, 1, 0) == -1 && errno == EAGAIN);
    CHECK(fcntl(fd, F_SETFL, fl) == 0); CHECK((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    int on = 1; CHECK(ioctl(fd, FIONBIO, &on) == 0); CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
    CHECK(read(fd, &c, 1) == -1 && errno == EAGAIN);
    on = 0; CHECK(ioctl(fd, FIONBIO, &on) == 0); CHECK((fcntl(fd, F_GETFL) & O_NONBLOCK) == 0);
    /* MSG_DONTWAIT on a blocking socket. */
    CHECK(recv(fd, &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    /* poll with a timeout and nothing to read: 0 after the timeout. */
    struct pollfd p = {fd, POLLIN, 0};
    CHECK(poll(&p, 1, 30) == 0);
    /* Echo through poll-then-read, as MariaDB does. */
    CHECK(write(fd, "x", 1) == 1);
    p.revents = 0; CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
    CHECK(recv(fd, &c, 1, MSG_DONTWAIT) == 1 && c == 'x');
    /* libmariadb's read loop: recv(MSG_DONTWAIT) until EAGAIN, then poll, then recv. */
    for (int i = 0; i < 200; i++) {
        CHECK(write(fd, "y", 1) == 1);
        for (;;) {
            ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
            if (n == 1) { CHECK(c == 'y'); break; }
            CHECK(n == -1 && errno == EAGAIN);
            p.revents = 0;
            CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
        }
    }
    close(fd);
    /* The peer hangs up while we wait in poll after an EAGAIN: poll returns, EOF. */
    int sv[2]; CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    CHECK(recv(sv[0], &c, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    pthread_t closer; CHECK(pthread_create(&closer, NULL, close_later, (void *)(long)sv[1]) == 0);
    struct pollfd h = {sv[0], POLLIN, 0};
    CHECK(poll(&h, 1, 5000) == 1 && (h.revents & (POLLIN | POLLHUP)));
    CHECK(recv(sv[0], &c, 1, 0) == 0);
    pthread_join(closer, NULL);
    close(sv[0]);
    /* send and sendto with MSG_DONTWAIT on a blocking socket: they fill the buffer, then
       EAGAIN; to a closed peer EPIPE (MSG_NOSIGNAL: no SIGPIPE). */
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    char chunk[4096] = {0};
    long queued = 0;
    for (int i = 0; i < 100000; i++) {
        ssize_t n = i % 2 ? send(sv[0], chunk, sizeof chunk, MSG_DONTWAIT) : sendto(sv[0], chunk, sizeof chunk, MSG_DONTWAIT, NULL, 0);
        if (n < 0) { CHECK(errno == EAGAIN); break; }
        queued += n;
    }
    CHECK(queued > 0 && send(sv[0], chunk, 1, MSG_DONTWAIT) == -1 && errno == EAGAIN);
    close(sv[1]);
    CHECK(send(sv[0], chunk, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == -1 && errno == EPIPE);
    CHECK(sendto(sv[0], chunk, 1, MSG_DONTWAIT | MSG_NOSIGNAL, NULL, 0) == -1 && errno == EPIPE);
    close(sv[0]);
    /* Non-blocking connect: EINPROGRESS (or 0 on loopback), then writable. */
    int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0); CHECK(s >= 0);
    CHECK(fcntl(s, F_GETFL) & O_NONBLOCK);
    struct sockaddr_in sa = {0}; sa.sin_family = AF_INET; sa.sin_port = htons(port); sa.sin_addr.s_addr = htonl(0x7f000001);
    int r = connect(s, (void *)&sa, sizeof sa);
    CHECK(r == 0 || errno == EINPROGRESS);
    struct pollfd q = {s, POLLOUT, 0}; CHECK(poll(&q, 1, 5000) == 1);
    int err = -1; socklen_t el = sizeof err; CHECK(getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0);
    close(s);
    /* A refused connect reports ECONNREFUSED. */
    int u = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sb = {0}; sb.sin_family = AF_INET; sb.sin_port = htons(1); sb.sin_addr.s_addr = htonl(0x7f000001);
    CHECK(connect(u, (void *)&sb, sizeof sb) == -1 && errno == ECONNREFUSED);
    close(u);
    return 0;
}

int main(int argc, char **argv) {
    nclients = argc > 1 ? atoi(argv[1]) : 200;
    nmsgs = argc > 2 ? atoi(argv[2]) : 100;
    int ls = socket(AF_INET, SOCK_STREAM, 0); CHECK(ls >= 0);
    int one = 1; setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {0}; sa.sin_family = AF_INET; sa.sin_addr.s_addr = htonl(0x7f000001);
    CHECK(bind(ls, (void *)&sa, sizeof sa) == 0); CHECK(listen(ls, 4096) == 0);
    socklen_t l = sizeof sa; getsockname(ls, (void *)&sa, &l); port = ntohs(sa.sin_port);
    /* clients, plus 2 connections from edge_cases and 2 extra dials at the end */
    naccept = nclients + 4;
    pthread_t at; CHECK(pthread_create(&at, 0, acceptor, (void *)(long)ls) == 0);
    pthread_t e; CHECK(pthread_create(&e, 0, edge_cases, 0) == 0);
    pthread_t *c = malloc(sizeof(pthread_t) * nclients);
    for (int i = 0; i < nclients; i++) CHECK(pthread_create(&c[i], 0, client, 0) == 0);
    for (int i = 0; i < nclients; i++) pthread_join(c[i], 0);
    pthread_join(e, 0);
    /* edge_cases made 2 of the accepted connections; make the last 2. */
    int extra1 = dial(), extra2 = dial(); close(extra1); close(extra2);
    pthread_join(at, 0);
    printf("clients=%d messages_ok=%ld\n", nclients, total_ok);
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d distinct_tids=%d\n", active ? active() : 0, ntids);
    return total_ok == (long)nclients * nmsgs ? 0 : 1;
}
