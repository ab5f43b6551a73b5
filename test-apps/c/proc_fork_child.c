#define _GNU_SOURCE
/* The fork/vfork family (issue 17), each case natively and preloaded with the same
 * output: a forked thread's child that ends by returning or pthread_exit (status 0,
 * thread-specific destructors run), a child that uses threads, locks, condition
 * variables and sleeps and forks again; a vfork child that resets a handler, closes
 * and dup2s descriptors before exec; a forked child that closes a pipe the parent's
 * thread waits on; daemon(); exec from a thread while other threads run; system,
 * popen and posix_spawn from many threads at once. Deterministic stdout. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
extern char **environ;

static int status_of(pid_t p) {
    int st; CHECK(waitpid(p, &st, 0) == p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}
static void msleep(int ms) { struct timespec ts = {0, ms * 1000000L}; nanosleep(&ts, 0); }

/* 1. The forking thread ends in the child: return, pthread_exit; a key destructor
 *    runs in the child (it writes to a pipe). */
static pthread_key_t key; static int key_pipe[2];
static void key_dtor(void *v) { char c = (char)(long)v; (void)!write(key_pipe[1], &c, 1); }
static void *end_by(void *a) {
    long how = (long)a;
    pid_t p = fork();
    if (p == 0) {
        pthread_setspecific(key, (void *)(long)('a' + how));
        msleep(5);
        if (how == 1) pthread_exit(0);
        return 0;
    }
    return (void *)(long)status_of(p);
}

/* 2. A child that creates threads, contends on a lock, waits on a condition variable,
 *    sleeps, joins, and forks a grandchild that does the same and ends by returning. */
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int arrived;
static void *busy(void *a) {
    for (int i = 0; i < 1000; i++) { pthread_mutex_lock(&m); arrived += 0; pthread_mutex_unlock(&m); }
    msleep(2);
    pthread_mutex_lock(&m); arrived++; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&m);
    return a;
}
static int threads_in_child(void) {
    pthread_t t[4]; arrived = 0;
    for (long i = 0; i < 4; i++) if (pthread_create(&t[i], 0, busy, (void *)i)) return 0;
    pthread_mutex_lock(&m);
    while (arrived < 4) pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    for (long i = 0; i < 4; i++) { void *r; if (pthread_join(t[i], &r) || r != (void *)i) return 0; }
    return 1;
}
static void *grand_forker(void *a) {
    (void)a;
    pid_t g = fork();
    if (g == 0) return threads_in_child() ? 0 : (void *)1; /* grandchild: status 0 */
    return (void *)(long)status_of(g);
}
static void *nested(void *a) {
    (void)a;
    pid_t p = fork();
    if (p == 0) {
        if (!threads_in_child()) _exit(20);
        pthread_t t; void *r;
        if (pthread_create(&t, 0, grand_forker, 0) || pthread_join(t, &r)) _exit(21);
        if (r != 0) _exit(22);
        _exit(7);
    }
    return (void *)(long)status_of(p);
}

/* 3. vfork: the child resets SIGUSR1, redirects stdout into a pipe with dup2, closes
 *    the pipe's ends and execs; the parent's handler and its pipe stay intact. */
static volatile sig_atomic_t usr1;
static void on_usr1(int s) { usr1 = s; }
static void *vforker(void *a) {
    (void)a;
    int pfd[2]; CHECK(pipe(pfd) == 0);
    pid_t p = vfork();
    if (p == 0) {
        struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_handler = SIG_DFL;
        sigaction(SIGUSR1, &sa, 0);
        sigset_t none; sigemptyset(&none); sigprocmask(SIG_SETMASK, &none, 0);
        dup2(pfd[1], 1); close(pfd[0]); close(pfd[1]);
        execl("/bin/echo", "echo", "from-vfork-child", (char *)0);
        _exit(127);
    }
    close(pfd[1]);
    char buf[64] = {0}; ssize_t n, got = 0;
    while ((n = read(pfd[0], buf + got, sizeof buf - 1 - got)) > 0) got += n;
    close(pfd[0]);
    int st = status_of(p);
    struct sigaction cur; sigaction(SIGUSR1, 0, &cur);
    kill(getpid(), SIGUSR1);
    for (int i = 0; i < 100 && !usr1; i++) msleep(1);
    printf("vfork status=%d read=%s handler_kept=%d handler_ran=%d\n", st, strtok(buf, "\n"),
           cur.sa_handler == on_usr1, usr1 == SIGUSR1);
    return 0;
}

/* 3b. The same through libc's clone(CLONE_VM | CLONE_VFORK) on a stack of its own. */
static int cpfd[2];
static int clone_child(void *a) {
    (void)a;
    struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_handler = SIG_DFL;
    sigaction(SIGUSR1, &sa, 0);
    dup2(cpfd[1], 1); close(cpfd[0]); close(cpfd[1]);
    execl("/bin/echo", "echo", "from-clone-child", (char *)0);
    _exit(127);
}
static void *cloner(void *a) {
    (void)a;
    CHECK(pipe(cpfd) == 0);
    static char stack[64 * 1024] __attribute__((aligned(16)));
    pid_t p = clone(clone_child, stack + sizeof stack, CLONE_VM | CLONE_VFORK | SIGCHLD, 0);
    CHECK(p > 0);
    close(cpfd[1]);
    char buf[64] = {0}; ssize_t n, got = 0;
    while ((n = read(cpfd[0], buf + got, sizeof buf - 1 - got)) > 0) got += n;
    close(cpfd[0]);
    int st = status_of(p);
    struct sigaction cur; sigaction(SIGUSR1, 0, &cur);
    usr1 = 0;
    kill(getpid(), SIGUSR1);
    for (int i = 0; i < 100 && !usr1; i++) msleep(1);
    printf("clone(CLONE_VM|CLONE_VFORK) status=%d read=%s handler_kept=%d handler_ran=%d\n", st, strtok(buf, "\n"),
           cur.sa_handler == on_usr1, usr1 == SIGUSR1);
    return 0;
}

/* 4. A forked child closes the read end of a pipe that a parent thread is blocked on
 *    (and its own copy of the write end); the parent's reader still gets the data. */
static int rp[2];
static void *pipe_reader(void *a) {
    (void)a; char buf[16] = {0};
    ssize_t n = read(rp[0], buf, sizeof buf - 1);
    return (void *)(long)(n == 5 && strcmp(buf, "hello") == 0);
}

/* 5. exec from a thread while other threads run (in a child, so the test goes on). */
static volatile int spin_stop;
static void *spinner(void *a) {
    while (!spin_stop) { pthread_mutex_lock(&m); pthread_mutex_unlock(&m); sched_yield(); }
    return a;
}
static void *execer(void *a) {
    (void)a; msleep(5);
    execl("/bin/sh", "sh", "-c", "exit 5", (char *)0);
    return 0;
}

/* 6. daemon() from a thread of a forked child: the daemon reports through a pipe. */
static int dp[2];
static void *daemonizer(void *a) {
    (void)a;
    if (daemon(1, 1) != 0) _exit(30);
    pthread_t x; void *xr;
    if (pthread_create(&x, 0, busy, (void *)9) || pthread_join(x, &xr)) _exit(31);
    (void)!write(dp[1], "daemon-ok", 9);
    return 0;
}

/* 7. system, popen, posix_spawn from many threads at once. */
static void *spawner(void *a) {
    long i = (long)a;
    char cmd[64]; snprintf(cmd, sizeof cmd, "exit %ld", i % 7);
    int r = system(cmd);
    FILE *p = popen("echo popen-ok", "r");
    char buf[32] = {0};
    int popen_ok = p && fgets(buf, sizeof buf, p) && pclose(p) == 0 && strcmp(buf, "popen-ok\n") == 0;
    pid_t pid; char *argv[] = {"/bin/sh", "-c", "exit 3", 0};
    posix_spawn_file_actions_t fa; posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    int sp = posix_spawn(&pid, "/bin/sh", &fa, 0, argv, environ) == 0 && status_of(pid) == 3;
    posix_spawn_file_actions_destroy(&fa);
    return (void *)(long)(WIFEXITED(r) && WEXITSTATUS(r) == i % 7 && popen_ok && sp);
}

static const char *only;
static int want(const char *name) { return !only || strcmp(only, name) == 0; }

/* Usage: proc_fork_child [case]: all cases, or the one named. */
int main(int argc, char **argv) {
    only = argc > 1 ? argv[1] : 0;
    setvbuf(stdout, 0, _IONBF, 0);
    CHECK(pipe(key_pipe) == 0);
    CHECK(pthread_key_create(&key, key_dtor) == 0);
    pthread_t t; void *r; pid_t p;
    if (want("end")) for (long how = 0; how < 2; how++) {
        pthread_t t; void *r;
        CHECK(pthread_create(&t, 0, end_by, (void *)how) == 0 && pthread_join(t, &r) == 0);
        char c = 0; CHECK(read(key_pipe[0], &c, 1) == 1);
        printf("fork from thread, child %s: status=%ld key_destructor=%c\n", how ? "pthread_exit" : "returns", (long)r, c);
    }

    if (want("nested")) {
    CHECK(pthread_create(&t, 0, nested, 0) == 0 && pthread_join(t, &r) == 0);
    printf("child with threads, locks, condvar, sleep and a grandchild: status=%ld\n", (long)r);

    }
    if (want("vfork")) {
    signal(SIGUSR1, on_usr1);
    CHECK(pthread_create(&t, 0, vforker, 0) == 0 && pthread_join(t, 0) == 0);
    }
    if (want("clone")) {
    signal(SIGUSR1, on_usr1);
    CHECK(pthread_create(&t, 0, cloner, 0) == 0 && pthread_join(t, 0) == 0);
    }
    if (want("pipe")) {
    CHECK(pipe(rp) == 0);
    CHECK(pthread_create(&t, 0, pipe_reader, 0) == 0);
    msleep(20); /* the reader is waiting */
    p = fork();
    if (p == 0) { close(rp[0]); close(rp[1]); _exit(0); }
    CHECK(status_of(p) == 0);
    msleep(5);
    CHECK(write(rp[1], "hello", 5) == 5);
    CHECK(pthread_join(t, &r) == 0);
    printf("parent reader after the child closed the pipe: ok=%ld\n", (long)r);
    }
    if (want("exec")) {
    p = fork();
    if (p == 0) {
        pthread_t s[3], e;
        for (int i = 0; i < 3; i++) pthread_create(&s[i], 0, spinner, 0);
        pthread_create(&e, 0, execer, 0);
        pthread_join(e, 0);
        _exit(99);
    }
    printf("exec from a thread while others run: status=%d\n", status_of(p));
    }
    if (want("daemon")) {
    CHECK(pipe(dp) == 0);
    p = fork();
    if (p == 0) {
        pthread_t dt; pthread_create(&dt, 0, daemonizer, 0); pthread_join(dt, 0);
        _exit(0);
    }
    close(dp[1]);
    char dbuf[16] = {0}; ssize_t n, got = 0;
    while ((n = read(dp[0], dbuf + got, sizeof dbuf - 1 - got)) > 0) got += n;
    printf("daemon: parent_status=%d report=%s\n", status_of(p), dbuf);
    }
    if (want("spawn")) {

    pthread_t sp[16]; long ok = 0;
    for (long i = 0; i < 16; i++) CHECK(pthread_create(&sp[i], 0, spawner, (void *)i) == 0);
    for (int i = 0; i < 16; i++) { CHECK(pthread_join(sp[i], &r) == 0); ok += (long)r; }
    printf("system, popen, posix_spawn from 16 threads: ok=%ld\n", ok);
    }

    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
