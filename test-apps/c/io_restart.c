// Issue 25: a handler installed with SA_RESTART must not make a blocking accept or
// read fail with EINTR: the call restarts, in the main (plain) thread and in a thread
// (a fiber under the preload). Without SA_RESTART both fail with EINTR, as natively.
// A helper thread signals the blocked thread 5 times, then makes the call succeed.
// Deterministic stdout; each case is bounded by alarm().
#define _GNU_SOURCE
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" // siginterrupt, on purpose
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile int handled;
static void on_usr1(int s) { (void)s; handled++; }

struct job {
    int accept;          // 1: accept on lfd, 0: read from the pipe
    int lfd, pipe_r, pipe_w;
    struct sockaddr_in addr;
    pthread_t target;
};

static void *pester(void *a) {
    struct job *j = a;
    for (int i = 0; i < 5; i++) {
        usleep(20000);
        pthread_kill(j->target, SIGUSR1);
    }
    usleep(20000);
    if (j->accept) {
        int c = socket(AF_INET, SOCK_STREAM, 0);
        connect(c, (struct sockaddr *)&j->addr, sizeof j->addr);
        usleep(50000);
        close(c);
    } else {
        (void)!write(j->pipe_w, "x", 1);
    }
    return 0;
}

// The blocking call, from whichever thread runs this: "ok", "EINTR" or the error.
static void *blocked_call(void *a) {
    struct job *j = a;
    pthread_t p;
    char c;
    j->target = pthread_self();
    handled = 0;
    pthread_create(&p, 0, pester, j);
    int r = j->accept ? accept(j->lfd, 0, 0) : (int)read(j->pipe_r, &c, 1);
    int e = errno;
    pthread_join(p, 0);
    if (r >= 0 && j->accept) close(r);
    return (void *)(r >= 0 ? "ok" : e == EINTR ? "EINTR" : strerror(e));
}

static void *nothing(void *a) { return a; }

int main(void) {
    pthread_t t;
    pthread_create(&t, 0, nothing, 0);  // the pool runs, as in a server
    pthread_join(t, 0);
    for (int restart = 3; restart >= 0; restart--) {
        // 3, 2: SA_RESTART given to sigaction, or set by siginterrupt(sig, 0);
        // 1, 0: left out, or cleared by siginterrupt(sig, 1).
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sa.sa_flags = restart == 3 || restart == 0 ? SA_RESTART : 0;
        sigaction(SIGUSR1, &sa, 0);
        if (restart == 2) siginterrupt(SIGUSR1, 0);
        if (restart == 0) siginterrupt(SIGUSR1, 1);
        for (int acc = 1; acc >= 0; acc--) {
            for (int in_thread = 0; in_thread < 2; in_thread++) {
                struct job j;
                int p[2];
                memset(&j, 0, sizeof j);
                j.accept = acc;
                j.lfd = socket(AF_INET, SOCK_STREAM, 0);
                j.addr.sin_family = AF_INET;
                j.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                bind(j.lfd, (struct sockaddr *)&j.addr, sizeof j.addr);
                socklen_t l = sizeof j.addr;
                getsockname(j.lfd, (struct sockaddr *)&j.addr, &l);
                listen(j.lfd, 4);
                (void)!pipe(p);
                j.pipe_r = p[0];
                j.pipe_w = p[1];
                alarm(10);
                void *res;
                if (in_thread) {
                    pthread_create(&t, 0, blocked_call, &j);
                    pthread_join(t, &res);
                } else {
                    res = blocked_call(&j);
                }
                alarm(0);
                close(j.lfd);
                close(p[0]);
                close(p[1]);
                static const char *how[] = {"siginterrupt(1)", "no SA_RESTART", "siginterrupt(0)", "SA_RESTART"};
                printf("%s %s in the %s thread: %s, handler ran %s\n", how[restart],
                       acc ? "accept" : "read(pipe)", in_thread ? "second" : "main", (char *)res, handled ? "yes" : "no");
            }
        }
    }
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
