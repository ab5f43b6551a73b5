/* dup2 onto the numbers the library holds (issue 59, finding 10). Natively those
 * numbers are free: the program finds them as the descriptors open in /proc/self/fd
 * that it did not open (none natively; the library's epoll sets, eventfds and kept
 * files preloaded), and adds two free numbers of its own choosing. A forked child
 * first dup2s onto each and closes it (0 natively); then the parent dup2s a file of its
 * own onto each, runs threads that sleep and pass bytes over pipes, and checks that
 * each number still holds its file, untouched (an eventfd write lands 8 bytes in it),
 * and that close() of each succeeds. Deterministic stdout. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "io_ping_pong.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)
#define MAX 256

static int targets[MAX], ntargets;

/* The descriptors open from 3 up, except `known`'s (-1 ended), into `out`: their count. */
static int open_descriptors(const int *known, int *out, int max) {
    DIR *d = opendir("/proc/self/fd");
    CHECK(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) && n < max) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd < 3 || fd == dirfd(d)) continue;
        int mine = 0;
        for (const int *k = known; *k >= 0; k++) mine |= *k == fd;
        if (!mine) out[n++] = fd;
    }
    closedir(d);
    return n;
}

static void *nothing(void *a) { return a; }

static void *read_a_byte(void *a) {
    char c;
    return (void *)(long)(read(((int *)a)[0], &c, 1) == 1 && c == 'w');
}

int main(int argc, char **argv) {
    alarm(20);
    setvbuf(stdout, 0, _IOLBF, 0);
    char path[64];
    snprintf(path, sizeof path, "/tmp/io_dup2_own.%d", (int)getpid());
    /* Inherited ones (a test runner's) are not the library's. */
    int known[MAX + 2];
    int inherited = open_descriptors((int[]){ -1 }, known, MAX);
    pthread_t t;
    CHECK(pthread_create(&t, 0, nothing, 0) == 0 && pthread_join(t, 0) == 0);
    int file = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(file >= 0 && write(file, "data", 4) == 4);
    unlink(path);
    known[inherited] = file;
    known[inherited + 1] = -1;
    ntargets = open_descriptors(known, targets, MAX - 2);
    fprintf(stderr, "the library's descriptors: %d\n", ntargets);
    targets[ntargets++] = 700; /* free both ways */
    targets[ntargets++] = 701;

    /* A forked child: dup2 onto each number, then close it. */
    pid_t child = fork();
    CHECK(child >= 0);
    if (child == 0) {
        int failed = 0;
        for (int i = 0; i < ntargets; i++)
            failed += dup2(file, targets[i]) != targets[i] || close(targets[i]) != 0;
        _exit(failed);
    }
    int st;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st));
    printf("forked child: dup2 then close failed=%d\n", WEXITSTATUS(st));

    /* The parent: dup2 its file onto each number, and keep it there while threads run;
     * a thread waits in a read meanwhile (the library's eventfds move under it). */
    int wp[2];
    CHECK(pipe(wp) == 0);
    pthread_t reader;
    CHECK(pthread_create(&reader, 0, read_a_byte, wp) == 0);
    usleep(20000);
    int dup_failed = 0;
    for (int i = 0; i < ntargets; i++) dup_failed += dup2(file, targets[i]) != targets[i];
    printf("dup2 failed=%d\n", dup_failed);
    usleep(20000);
    CHECK(write(wp[1], "w", 1) == 1);
    void *byte;
    CHECK(pthread_join(reader, &byte) == 0);
    printf("the reader waiting meanwhile got its byte=%d\n", byte == (void *)1);
    pthread_t s[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&s[i], 0, sleeper_thread, 0) == 0);
    printf("ping-pong=%d\n", ping_pong_rounds(40));
    for (int i = 0; i < 4; i++) CHECK(pthread_join(s[i], 0) == 0);
    printf("ping-pong again=%d\n", ping_pong_rounds(40));
    struct stat want, got;
    CHECK(fstat(file, &want) == 0);
    int changed = 0, close_failed = 0;
    for (int i = 0; i < ntargets; i++) {
        char buf[16] = "";
        changed += fstat(targets[i], &got) != 0 || got.st_ino != want.st_ino || got.st_dev != want.st_dev ||
                   got.st_size != 4 || pread(targets[i], buf, sizeof buf, 0) != 4 || memcmp(buf, "data", 4) != 0;
        close_failed += close(targets[i]) != 0;
    }
    printf("numbers not holding the file untouched=%d, close failed=%d\n", changed, close_failed);
    printf("ping-pong at the end=%d\n", ping_pong_rounds(40));
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    (void)argc;
    (void)argv;
    return 0;
}
