/* fiberize.h: worker-thread-local storage (WTLS) for code that knows it may run
 * under libfiberize.so. C and C++ (GCC or Clang), glibc, x86-64.
 *
 * Under the preload every pthread runs as a fiber with a TLS block of its own, so a
 * per-thread cache is per connection, not per CPU. These macros reach the TLS of the
 * worker OS thread that runs the caller instead. Without the preload (the library's
 * symbols, declared weak here, are null) they are plain TLS, so one source builds and
 * runs both ways.
 *
 *   WTLS_ADDR_OF(var)    address of the __thread/thread_local variable `var` in the
 *                        TLS block of the worker running the caller (&var natively
 *                        and in plain threads). Valid until the caller next blocks,
 *                        yields or waits for a lock; the fiber is not preempted in
 *                        between.
 *   WTLS_REGISTER(var)   make `var` (at most 256 bytes) per worker for the calling
 *                        fiber even where plain code reads it: its bytes are swapped
 *                        between the fiber's and the worker's blocks at every switch.
 *                        0, or EINVAL (too large, not static TLS). No-op natively.
 *   AT_FIBER_DESTROY(fn) run `void fn(void)` when the calling fiber ends, before its
 *                        thread_local and pthread key destructors. Plain threads and
 *                        native runs: the thread's own exit hook (glibc's
 *                        __cxa_thread_atexit_impl, which runs before key destructors
 *                        and before the thread_local destructors registered earlier).
 *                        0 on success.
 */
#ifndef FIBERIZE_H
#define FIBERIZE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

void *fiberize_wtls_addr_of(void *addr) __attribute__((weak));
int fiberize_wtls_register(void *addr, size_t size) __attribute__((weak));
int fiberize_at_fiber_destroy(void (*fn)(void)) __attribute__((weak));
int __cxa_thread_atexit_impl(void (*fn)(void *), void *arg, void *dso) __attribute__((weak));
extern void *__dso_handle __attribute__((visibility("hidden")));

static inline void *fiberize_wtls_addr_of_or_self_(void *addr) {
    return fiberize_wtls_addr_of ? fiberize_wtls_addr_of(addr) : addr;
}

static inline int fiberize_wtls_register_or_nothing_(void *addr, size_t size) {
    if (fiberize_wtls_register)
        return fiberize_wtls_register(addr, size);
    return size > 256 ? 22 /* EINVAL */ : 0;
}

static inline void fiberize_call_fn_(void *fn) {
    ((void (*)(void))fn)();
}

static inline int fiberize_at_fiber_destroy_or_thread_exit_(void (*fn)(void)) {
    int r = fiberize_at_fiber_destroy ? fiberize_at_fiber_destroy(fn) : 1;
    if (r != 1)
        return r; /* 0: the fiber's own list; or an error */
    if (!__cxa_thread_atexit_impl)
        return 38; /* ENOSYS */
    return __cxa_thread_atexit_impl(fiberize_call_fn_, (void *)fn, &__dso_handle);
}

#ifdef __cplusplus
}
#endif

#define WTLS_ADDR_OF(var) ((__typeof__(&(var)))fiberize_wtls_addr_of_or_self_((void *)&(var)))
#define WTLS_REGISTER(var) fiberize_wtls_register_or_nothing_((void *)&(var), sizeof(var))
#define AT_FIBER_DESTROY(fn) fiberize_at_fiber_destroy_or_thread_exit_(fn)

#endif /* FIBERIZE_H */
