/* closefrom() where the close_range system call is denied (issue 59, finding 6): a
 * seccomp filter makes close_range fail with ENOSYS, as a kernel before 5.9 or a
 * container's profile does. glibc then walks /proc/self/fd and closes what it lists,
 * the library's own descriptors (its epoll sets, eventfds, kept files) among them
 * unless the library walks itself. Afterwards the program's descriptors from the low
 * number are closed, the ones below stay, and threads still run, sleep and wait on
 * pipes and sockets. Deterministic stdout. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "io_ping_pong.h"

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s (line %d, errno %d)\n", #c, __LINE__, errno); exit(1); } } while (0)

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

/* close_range fails with ENOSYS for this thread and every thread made after it. */
static int deny_close_range(void) {
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close_range, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof f / sizeof f[0], f };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : -1;
}

/* Two threads pass bytes both ways over two pipes, then over a socketpair. */
static int ping_pong(void) {
    int ok = ping_pong_rounds(40);
    pthread_t t;
    void *r;
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    struct pong_args q = { { sv[1], -1, -1, sv[1] }, 40 };
    CHECK(pthread_create(&t, 0, pong_thread, &q) == 0);
    for (int i = 0; i < 40; i++) {
        char c = 'A' + i % 26, d = 0;
        CHECK(write(sv[0], &c, 1) == 1);
        ok += read(sv[0], &d, 1) == 1 && d == c;
    }
    CHECK(pthread_join(t, &r) == 0 && r == 0);
    close(sv[0]);
    close(sv[1]);
    return ok;
}

int main(void) {
    alarm(20); /* a wait that never ends fails the test instead of hanging it */
    setvbuf(stdout, 0, _IOLBF, 0);
    int keep = open("/dev/null", O_RDONLY); /* below the closed numbers: stays */
    if (deny_close_range() != 0) {
        printf("seccomp unavailable\n");
        return 0;
    }
    errno = 0;
    long r = syscall(SYS_close_range, 3, ~0U, 0);
    printf("close_range denied: %ld %s\n", r, strerrorname_np(errno));
    printf("before: ping-pong=%d\n", ping_pong());
    int low = open("/dev/null", O_RDONLY), other = open("/dev/zero", O_RDONLY);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    closefrom(low);
    int open_after = (fcntl(low, F_GETFD) >= 0) + (fcntl(other, F_GETFD) >= 0) + (fcntl(sv[0], F_GETFD) >= 0) +
                     (fcntl(sv[1], F_GETFD) >= 0);
    printf("closefrom: program descriptors left open=%d, kept below=%d\n", open_after, fcntl(keep, F_GETFD) >= 0);
    int reopened = open("/dev/null", O_RDONLY);
    printf("next open gets the low number again=%d\n", reopened == low);
    pthread_t s[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&s[i], 0, sleeper_thread, 0) == 0);
    printf("after: ping-pong=%d\n", ping_pong());
    for (int i = 0; i < 4; i++) CHECK(pthread_join(s[i], 0) == 0);
    printf("sleepers joined\n");
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    return 0;
}
