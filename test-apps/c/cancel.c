/* pthread_cancel of threads sleeping, waiting on a condvar (the mutex is held again in
 * the cleanup handler), polling with pthread_testcancel, and with cancellation disabled
 * for a while: all end with PTHREAD_CANCELED after running their cleanup handlers. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <time.h>
static int cleaned[4];
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER; static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static void cleanup(void *a) { cleaned[(long)a] = 1; }
static void cleanup_unlock(void *a) { cleaned[(long)a] = 1; pthread_mutex_unlock(&m); }
void *sleeper(void *a) { pthread_cleanup_push(cleanup, a); for (;;) sleep(10); pthread_cleanup_pop(0); return 0; }
void *condw(void *a) { pthread_mutex_lock(&m); pthread_cleanup_push(cleanup_unlock, a); for (;;) pthread_cond_wait(&c, &m); pthread_cleanup_pop(0); return 0; }
void *spinner(void *a) { pthread_cleanup_push(cleanup, a); for (;;) { pthread_testcancel(); usleep(100); } pthread_cleanup_pop(0); return 0; }
/* t3 tells main when its cancellation is disabled and waits until main has cancelled it:
 * the cancel is then pending during the usleep (a cancellation point that must not act)
 * however slowly the threads start (a sleep in main ordered them before: under qemu,
 * t3 sometimes finished first and returned 7). */
static sem_t t3_disabled, t3_cancel_sent;
void *disabled(void *a) {
  int old; pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
  sem_post(&t3_disabled); while (sem_wait(&t3_cancel_sent) != 0) {}
  usleep(30000); pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, &old);
  pthread_cleanup_push(cleanup, a); pthread_testcancel(); pthread_cleanup_pop(0); return (void*)7;
}
/* Joiners: a thread blocked in pthread_join (of a fiber, of a small-stack thread that
 * stays a plain thread) is cancelled; so is a waiter on a process-shared condvar. */
static pthread_mutex_t hold = PTHREAD_MUTEX_INITIALIZER;
static void *held(void *a) { (void)a; pthread_mutex_lock(&hold); pthread_mutex_unlock(&hold); return 0; }
static void *joiner(void *a) { pthread_join(*(pthread_t *)a, 0); return (void *)1; }
static pthread_mutex_t *shm_m; static pthread_cond_t *shm_c;
static void unlock_shm(void *a) { (void)a; pthread_mutex_unlock(shm_m); }
static void *shared_waiter(void *a) { (void)a; pthread_mutex_lock(shm_m); pthread_cleanup_push(unlock_shm, 0); for (;;) pthread_cond_wait(shm_c, shm_m); pthread_cleanup_pop(0); return 0; }
static void *looper(void *a) { (void)a; for (;;) sleep(1); return 0; }
static void on_alarm(int s) { (void)s; }
static volatile unsigned long spins; static volatile int async_ready;
static pthread_mutex_t async_m = PTHREAD_MUTEX_INITIALIZER;
static void *async_spinner(void *a) {
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, 0); pthread_cleanup_push(cleanup, a); async_ready = 1;
  for (;;) spins++;
  pthread_cleanup_pop(0); return 0;
}
static void *async_locker(void *a) {
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, 0); pthread_cleanup_push(cleanup, a); async_ready = 1;
  pthread_mutex_lock(&async_m); /* held by main: blocks until cancelled */
  pthread_cleanup_pop(0); return 0;
}

static void more_cases(void) {
  /* cancelled before it ever ran */
  for (int i = 0; i < 20; i++) {
    pthread_t t; void *r; pthread_create(&t, 0, looper, 0); pthread_cancel(t); pthread_join(t, &r);
    if (r != PTHREAD_CANCELED) { printf("early cancel lost\n"); return; }
  }
  printf("cancel before first run: ok\n");
  for (int small = 0; small < 2; small++) {
    pthread_attr_t at; pthread_attr_init(&at); if (small) pthread_attr_setstacksize(&at, PTHREAD_STACK_MIN);
    pthread_mutex_lock(&hold);
    pthread_t child, j; void *r; pthread_create(&child, &at, held, 0); pthread_create(&j, 0, joiner, &child);
    usleep(20000); pthread_cancel(j); pthread_join(j, &r);
    pthread_mutex_unlock(&hold);
    int rc = pthread_join(child, 0);
    printf("joiner of %s thread canceled=%d child still joinable=%d\n", small ? "a small-stack" : "a", r == PTHREAD_CANCELED, rc == 0);
    pthread_attr_destroy(&at);
  }
  shm_m = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0); shm_c = (pthread_cond_t *)(shm_m + 1);
  pthread_mutexattr_t ma; pthread_mutexattr_init(&ma); pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED); pthread_mutex_init(shm_m, &ma);
  pthread_condattr_t ca; pthread_condattr_init(&ca); pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED); pthread_cond_init(shm_c, &ca);
  pthread_t w; void *r; pthread_create(&w, 0, shared_waiter, 0); usleep(20000); pthread_cancel(w); pthread_join(w, &r);
  printf("process-shared cond waiter canceled=%d mutex free=%d\n", r == PTHREAD_CANCELED, pthread_mutex_trylock(shm_m) == 0);
  /* asynchronous cancellation of a busy loop and of a mutex wait */
  void *(*af[2])(void *) = {async_spinner, async_locker};
  pthread_mutex_lock(&async_m);
  for (int i = 0; i < 2; i++) {
    pthread_t t; void *r; cleaned[i] = 0; async_ready = 0;
    pthread_create(&t, 0, af[i], (void *)(long)i);
    while (!async_ready) usleep(1000);
    usleep(10000); pthread_cancel(t); pthread_join(t, &r);
    printf("async %s canceled=%d cleaned=%d\n", i ? "mutex waiter" : "spinner", r == PTHREAD_CANCELED, cleaned[i]);
  }
  pthread_mutex_unlock(&async_m);
  /* sem_wait in the main (plain) thread returns EINTR when a handler without SA_RESTART runs */
  struct sigaction sa; memset(&sa, 0, sizeof sa); sa.sa_handler = on_alarm; sigaction(SIGALRM, &sa, 0);
  sem_t s; sem_init(&s, 0, 0); alarm(1);
  int rs = sem_wait(&s); printf("sem_wait interrupted: %d %s\n", rs, rs ? strerror(errno) : "-");
}

/* Waits that a fiber runs on its donor thread: signal waits, poll/select over several
 * descriptors, waitpid. Cancellation must reach them (promptly where glibc's would),
 * and a signal sent with pthread_kill must reach a thread waiting for it in sigwait. */
static int donor_kind;
static int wait_pipe[2], wait_pipe2[2];
static void *donor_waiter(void *a) {
  (void)a; sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2);
  switch (donor_kind) {
  case 0: { int sig; sigwait(&s, &sig); break; }
  case 1: { struct pollfd p[2] = {{wait_pipe[0], POLLIN, 0}, {wait_pipe2[0], POLLIN, 0}}; poll(p, 2, 10000); break; }
  case 2: { fd_set r; FD_ZERO(&r); FD_SET(wait_pipe[0], &r); FD_SET(wait_pipe2[0], &r); select(64, &r, 0, 0, 0); break; }
  case 3: { pid_t c = fork(); if (c == 0) { usleep(300000); _exit(0); } waitpid(c, 0, 0); break; }
  }
  return (void *)1L;
}
static void *signal_waiter(void *a) {
  (void)a; sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2); int sig = 0;
  int r = sigwait(&s, &sig);
  struct timespec ts = {0, 50 * 1000 * 1000}; siginfo_t info;
  int t = sigtimedwait(&s, &info, &ts); int e = errno;
  return (void *)(long)(r == 0 && sig == SIGUSR2 && t == -1 && e == EAGAIN);
}
/* A thread in sigwait sleeps until its signal comes, as natively: under the preload the
 * wait runs on the fiber's donor, and pthread_kill must end it without the donor waking
 * to look every few milliseconds (it did every 10 ms: 100 wake-ups a second for an idle
 * server's signal thread). Counted with the waiting thread's voluntary context switches. */
static volatile long quiet_waiter_tid;
static int (*is_fiber_fn)(void);
static volatile int quiet_waiter_was_fiber;
static void *quiet_signal_waiter(void *a) {
  (void)a; sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2); int sig = 0;
  quiet_waiter_was_fiber = is_fiber_fn ? is_fiber_fn() : 0;
  quiet_waiter_tid = syscall(SYS_gettid);
  int r = sigwait(&s, &sig);
  return (void *)(long)(r == 0 && sig == SIGUSR2);
}
static long voluntary_switches(long tid) {
  char path[64], line[128]; long n = -1;
  snprintf(path, sizeof path, "/proc/self/task/%ld/status", tid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  while (fgets(line, sizeof line, f)) if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1) break;
  fclose(f);
  return n;
}
static void quiet_sigwait_case(void) {
  is_fiber_fn = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
  pthread_t t; void *r; struct timespec a, b;
  pthread_create(&t, 0, quiet_signal_waiter, 0);
  while (!quiet_waiter_tid) usleep(1000);
  usleep(100000);
  long before = voluntary_switches(quiet_waiter_tid);
  usleep(300000);
  long after = voluntary_switches(quiet_waiter_tid);
  clock_gettime(CLOCK_MONOTONIC, &a);
  pthread_kill(t, SIGUSR2); pthread_join(t, &r);
  clock_gettime(CLOCK_MONOTONIC, &b);
  long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
  /* natively 0 wake-ups in the 300 ms; 10 ms slices gave ~30 */
  printf("a thread in sigwait sleeps until pthread_kill: ok=%ld quiet=%d prompt=%d\n", (long)r,
         before >= 0 && after - before <= 3, ms < 1000);
  fprintf(stderr, "quiet sigwait: %ld wake-ups in 300 ms, pthread_kill answered in %ld ms, fiber=%d\n",
          after - before, ms, quiet_waiter_was_fiber);
}

static void donor_wait_cases(void) {
  static const char *names[] = {"sigwait", "poll_two_fds", "select_two_fds", "waitpid"};
  sigset_t s; sigemptyset(&s); sigaddset(&s, SIGUSR2); pthread_sigmask(SIG_BLOCK, &s, 0); /* inherited */
  if (pipe(wait_pipe) || pipe(wait_pipe2)) { printf("pipe failed\n"); return; }
  for (donor_kind = 0; donor_kind < 4; donor_kind++) {
    pthread_t t; void *r; struct timespec a, b;
    pthread_create(&t, 0, donor_waiter, 0);
    usleep(100000);
    clock_gettime(CLOCK_MONOTONIC, &a);
    pthread_cancel(t); pthread_join(t, &r);
    clock_gettime(CLOCK_MONOTONIC, &b);
    long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    /* waitpid: natively at once; under the preload when the child has exited */
    printf("cancel in %s: canceled=%d prompt=%d\n", names[donor_kind], r == PTHREAD_CANCELED, ms < 1000);
  }
  while (waitpid(-1, 0, WNOHANG) > 0) {}
  pthread_t t; void *r;
  pthread_create(&t, 0, signal_waiter, 0);
  usleep(100000);
  pthread_kill(t, SIGUSR2); pthread_join(t, &r);
  printf("pthread_kill to a thread in sigwait: ok=%ld\n", (long)r);
  quiet_sigwait_case();
  pthread_sigmask(SIG_UNBLOCK, &s, 0);
}

int main() {
  void *(*f[4])(void*) = {sleeper, condw, spinner, disabled}; pthread_t t[4];
  sem_init(&t3_disabled, 0, 0); sem_init(&t3_cancel_sent, 0, 0);
  for (long i = 0; i < 4; i++) pthread_create(&t[i], 0, f[i], (void*)i);
  usleep(10000);
  while (sem_wait(&t3_disabled) != 0) {}
  for (int i = 0; i < 4; i++) pthread_cancel(t[i]);
  sem_post(&t3_cancel_sent);
  for (int i = 0; i < 4; i++) { void *r; pthread_join(t[i], &r); printf("t%d canceled=%d cleaned=%d\n", i, r == PTHREAD_CANCELED, cleaned[i]); }
  pthread_mutex_lock(&m); pthread_mutex_unlock(&m); printf("mutex free\n");
  more_cases();
  donor_wait_cases();
  int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fiberize_active"); fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
}
