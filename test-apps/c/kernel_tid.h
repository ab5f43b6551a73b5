/* The kernel thread running the caller, by a raw system call instruction: gettid() and
 * syscall(SYS_gettid) give a fiber its own id (its donor's) under the preload, so the
 * apps that count the kernel threads running fibers read it this way. C and C++. */
#ifndef FIBERIZE_TEST_KERNEL_TID_H
#define FIBERIZE_TEST_KERNEL_TID_H
#include <sys/syscall.h>

static inline int running_kernel_tid(void) {
    long r;
#if defined(__aarch64__)
    register long x8 __asm__("x8") = SYS_gettid;
    register long x0 __asm__("x0");
    __asm__ volatile("svc 0" : "=r"(x0) : "r"(x8) : "memory");
    r = x0;
#else
    __asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_gettid) : "rcx", "r11", "memory");
#endif
    return (int)r;
}
#endif
