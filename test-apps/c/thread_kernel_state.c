/* Per-thread kernel state reached by calls that name the calling thread implicitly
 * (the properties stress-ng's pthread stressor checks, and a few more), from many
 * threads at once:
 *   set_tid_address returns gettid(); prctl(PR_GET_TID_ADDRESS) names the thread's own
 *   word and reads back what set_tid_address set; get_robust_list(0) names the thread's
 *   own list head, set_robust_list round-trips; tgkill/tkill to itself (signal 0 and a
 *   real one, raw and through libc); sched_getaffinity/sched_setaffinity and the
 *   scheduling policy with pid 0; prctl/pthread_setname_np names, read back and seen in
 *   /proc/self/task/TID/comm; sigaltstack round trip and its errors; rseq fails or works.
 * Every thread leaves its name, affinity, policy and alternate stack changed when it
 * ends: natively they end with it. A second generation of threads must start without
 * them, and afterwards no thread of the process may still carry them (a worker that
 * ran the calls for a fiber would).
 *   thread_kernel_state [THREADS] [ROUNDS] */
#define _GNU_SOURCE
#include <dirent.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "sync_common.h"

#define MAXT 512

static int nthreads = 100, rounds = 20;
static int ncpus;
static atomic_int ready;
static __thread volatile int usr1_seen;
static cpu_set_t first_cpu;

static void on_usr1(int sig) {
    (void)sig;
    usr1_seen++;
}

/* Whether address `p` lies in the calling thread's own `struct pthread` (glibc keeps the
 * clear-child-tid word and the robust list head there). */
static int in_own_tcb(const void *p) {
    uintptr_t self = (uintptr_t)pthread_self(), a = (uintptr_t)p;
    return a > self && a < self + 4096;
}

static void tid_address(pid_t tid) {
    unsigned long addr = 0, again = 0;
    CHECK(prctl(PR_GET_TID_ADDRESS, &addr, 0, 0, 0) == 0, "PR_GET_TID_ADDRESS errno %d", errno);
    CHECK(addr != 0 && in_own_tcb((void *)addr), "tid address %#lx not in own TCB %#lx", addr,
          (unsigned long)pthread_self());
    long r = syscall(SYS_set_tid_address, NULL);
    CHECK(r == tid, "set_tid_address(NULL) returned %ld, gettid %d", r, tid);
    CHECK(prctl(PR_GET_TID_ADDRESS, &again, 0, 0, 0) == 0 && again == 0, "cleared tid address reads %#lx", again);
    r = syscall(SYS_set_tid_address, addr);
    CHECK(r == tid, "set_tid_address returned %ld, gettid %d", r, tid);
    CHECK(prctl(PR_GET_TID_ADDRESS, &again, 0, 0, 0) == 0 && again == addr, "tid address %#lx, set %#lx", again, addr);
}

static void robust_list(pid_t tid) {
    struct robust_list_head *head = NULL, *h2 = NULL, copy;
    size_t len = 0, len2 = 0;
    CHECK(syscall(SYS_get_robust_list, 0, &head, &len) == 0, "get_robust_list errno %d", errno);
    CHECK(len == sizeof(struct robust_list_head) && in_own_tcb(head), "robust head %p len %zu", (void *)head, len);
    CHECK(syscall(SYS_get_robust_list, tid, &h2, &len2) == 0 && h2 == head, "get_robust_list(gettid) %p", (void *)h2);
    memcpy(&copy, head, len);
    CHECK(syscall(SYS_set_robust_list, &copy, len) == 0, "set_robust_list errno %d", errno);
    CHECK(syscall(SYS_get_robust_list, 0, &h2, &len2) == 0 && h2 == &copy, "robust head after set %p", (void *)h2);
    errno = 0;
    CHECK(syscall(SYS_set_robust_list, &copy, 0) == -1 && errno == EINVAL, "set_robust_list len 0: errno %d", errno);
    CHECK(syscall(SYS_set_robust_list, head, len) == 0, "restoring the robust list: errno %d", errno);
    CHECK(syscall(SYS_get_robust_list, 0, &h2, &len2) == 0 && h2 == head, "restored head %p", (void *)h2);
}

static void signal_self(pid_t tid) {
    CHECK(syscall(SYS_tgkill, getpid(), tid, 0) == 0, "tgkill(self, 0) errno %d", errno);
    CHECK(syscall(SYS_tkill, tid, 0) == 0, "tkill(self, 0) errno %d", errno);
    CHECK(tgkill(getpid(), tid, 0) == 0, "libc tgkill(self, 0) errno %d", errno);
    errno = 0;
    CHECK(syscall(SYS_tgkill, getpid(), tid, -1) == -1 && errno == EINVAL, "tgkill bad signal: errno %d", errno);
    int before = usr1_seen;
    CHECK(syscall(SYS_tgkill, getpid(), tid, SIGUSR1) == 0, "tgkill(self, SIGUSR1) errno %d", errno);
    for (int i = 0; i < 2000 && usr1_seen == before; i++)
        sleep_ms(1);
    CHECK(usr1_seen == before + 1, "SIGUSR1 to self seen %d times", usr1_seen - before);
    CHECK(syscall(SYS_tkill, tid, SIGUSR1) == 0, "tkill(self, SIGUSR1) errno %d", errno);
    for (int i = 0; i < 2000 && usr1_seen == before + 1; i++)
        sleep_ms(1);
    CHECK(usr1_seen == before + 2, "SIGUSR1 by tkill seen %d times", usr1_seen - before - 1);
}

static void scheduling(pid_t tid) {
    cpu_set_t all, got;
    CPU_ZERO(&all);
    CPU_ZERO(&got);
    CHECK(syscall(SYS_sched_getaffinity, 0, sizeof all, &all) > 0, "sched_getaffinity errno %d", errno);
    CHECK(CPU_COUNT(&all) == ncpus, "own affinity has %d CPUs of %d", CPU_COUNT(&all), ncpus);
    CHECK(syscall(SYS_sched_setaffinity, 0, sizeof first_cpu, &first_cpu) == 0, "sched_setaffinity errno %d", errno);
    CHECK(sched_getaffinity(0, sizeof got, &got) == 0 && CPU_EQUAL(&got, &first_cpu), "libc affinity after set");
    CHECK(syscall(SYS_sched_getaffinity, tid, sizeof got, &got) > 0 && CPU_EQUAL(&got, &first_cpu), "affinity by tid");
    CHECK(pthread_getaffinity_np(pthread_self(), sizeof got, &got) == 0 && CPU_EQUAL(&got, &first_cpu), "pthread affinity");
    CHECK(syscall(SYS_sched_setaffinity, 0, sizeof all, &all) == 0, "restoring affinity errno %d", errno);
    struct sched_param p = {0};
    CHECK(syscall(SYS_sched_getscheduler, 0) == SCHED_OTHER, "policy %ld", syscall(SYS_sched_getscheduler, 0));
    CHECK(syscall(SYS_sched_setscheduler, 0, SCHED_BATCH, &p) == 0, "SCHED_BATCH errno %d", errno);
    CHECK(sched_getscheduler(0) == SCHED_BATCH && sched_getscheduler(tid) == SCHED_BATCH, "policy after set");
    CHECK(sched_setscheduler(0, SCHED_OTHER, &p) == 0 && syscall(SYS_sched_getscheduler, 0) == SCHED_OTHER,
          "policy back to SCHED_OTHER");
    p.sched_priority = 5;
    CHECK(syscall(SYS_sched_getparam, 0, &p) == 0 && p.sched_priority == 0, "sched_getparam %d", p.sched_priority);
}

static void names(pid_t tid, int idx, int round) {
    char want[16], got[32] = {0}, path[64];
    snprintf(want, sizeof want, "kst-%d-%d", idx, round % 10);
    CHECK(prctl(PR_SET_NAME, want, 0, 0, 0) == 0, "PR_SET_NAME errno %d", errno);
    CHECK(syscall(SYS_prctl, PR_GET_NAME, got, 0, 0, 0) == 0 && strcmp(got, want) == 0, "name %s, set %s", got, want);
    CHECK(pthread_getname_np(pthread_self(), got, sizeof got) == 0 && strcmp(got, want) == 0, "getname_np %s", got);
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(got, sizeof got, f), "reading %s", path);
    fclose(f);
    got[strcspn(got, "\n")] = 0;
    CHECK(strcmp(got, want) == 0, "%s says %s, set %s", path, got, want);
    snprintf(want, sizeof want, "kstp-%d", idx);
    CHECK(pthread_setname_np(pthread_self(), want) == 0, "pthread_setname_np");
    CHECK(prctl(PR_GET_NAME, got, 0, 0, 0) == 0 && strcmp(got, want) == 0, "name %s, set %s", got, want);
}

static void altstack(void) {
    stack_t old, ss, now;
    CHECK(sigaltstack(NULL, &old) == 0 && old.ss_flags == SS_DISABLE, "new thread's altstack flags %d", old.ss_flags);
    size_t size = 4 * SIGSTKSZ;
    void *mem = malloc(size);
    ss = (stack_t){.ss_sp = mem, .ss_size = size, .ss_flags = 0};
    CHECK(sigaltstack(&ss, &old) == 0 && old.ss_flags == SS_DISABLE, "sigaltstack set errno %d", errno);
    CHECK(syscall(SYS_sigaltstack, NULL, &now) == 0 && now.ss_sp == mem && now.ss_size == size && now.ss_flags == 0,
          "altstack read back %p %zu %d", now.ss_sp, now.ss_size, now.ss_flags);
    stack_t small = {.ss_sp = mem, .ss_size = 64, .ss_flags = 0}, bad = {.ss_sp = mem, .ss_size = size, .ss_flags = 7};
    errno = 0;
    CHECK(sigaltstack(&small, NULL) == -1 && errno == ENOMEM, "tiny altstack: errno %d", errno);
    errno = 0;
    CHECK(syscall(SYS_sigaltstack, &bad, NULL) == -1 && errno == EINVAL, "bad flags: errno %d", errno);
    CHECK(sigaltstack(NULL, &now) == 0 && now.ss_sp == mem, "failed calls changed the altstack");
    ss.ss_flags = SS_DISABLE;
    CHECK(syscall(SYS_sigaltstack, &ss, &old) == 0 && old.ss_sp == mem, "disabling errno %d", errno);
    CHECK(sigaltstack(NULL, &now) == 0 && now.ss_flags == SS_DISABLE && now.ss_size == 0, "disabled altstack %d",
          now.ss_flags);
    free(mem);
}

static void rseq_call(void) {
    /* Natively glibc may own the registration (EBUSY, EINVAL for another size) or not
     * (then it succeeds); a fiber gets ENOSYS. Only "no crash, consistent" is checked. */
    static __thread char area[64] __attribute__((aligned(32)));
    long r = syscall(SYS_rseq, area, 32, 0, 0x53053053);
    if (r == 0)
        CHECK(syscall(SYS_rseq, area, 32, 1 /* RSEQ_FLAG_UNREGISTER */, 0x53053053) == 0, "rseq unregister errno %d",
              errno);
    else
        CHECK(errno == EBUSY || errno == EINVAL || errno == ENOSYS || errno == EPERM, "rseq errno %d", errno);
}

static void *body(void *arg) {
    int idx = (int)(long)arg;
    pid_t tid = gettid();
    note_fiber();
    CHECK(syscall(SYS_gettid) == tid, "syscall(SYS_gettid) %ld, gettid %d", syscall(SYS_gettid), tid);
    atomic_fetch_add(&ready, 1);
    while (atomic_load(&ready) < nthreads)
        sched_yield();
    for (int r = 0; r < rounds; r++) {
        tid_address(tid);
        robust_list(tid);
        signal_self(tid);
        scheduling(tid);
        names(tid, idx, r);
        altstack();
        rseq_call();
        sched_yield();
    }
    /* Leave this thread's own state changed: it ends with the thread. */
    char name[16];
    snprintf(name, sizeof name, "kst-end-%d", idx);
    CHECK(prctl(PR_SET_NAME, name, 0, 0, 0) == 0, "PR_SET_NAME");
    CHECK(sched_setaffinity(0, sizeof first_cpu, &first_cpu) == 0, "sched_setaffinity");
    struct sched_param p = {0};
    CHECK(sched_setscheduler(0, SCHED_BATCH, &p) == 0, "SCHED_BATCH");
    /* An alternate stack too (never freed: the thread may be on no other stack when
     * it dies); the next generation's threads must start without one. */
    stack_t ss = {.ss_sp = malloc(4 * SIGSTKSZ), .ss_size = 4 * SIGSTKSZ, .ss_flags = 0};
    CHECK(sigaltstack(&ss, NULL) == 0, "leaving an altstack: errno %d", errno);
    return NULL;
}

/* Threads of the process still named kst-*, pinned to one CPU or in SCHED_BATCH (the
 * marks the threads left), after the ended threads had up to 2 s to leave /proc. */
static int marked_threads(const cpu_set_t *all) {
    int marked = 0;
    for (int tries = 0; tries < 200; tries++) {
        marked = 0;
        DIR *d = opendir("/proc/self/task");
        CHECK(d, "opendir /proc/self/task");
        struct dirent *e;
        while ((e = readdir(d))) {
            int tid = atoi(e->d_name);
            if (tid <= 0)
                continue;
            char path[64], comm[32] = {0};
            snprintf(path, sizeof path, "/proc/self/task/%d/comm", tid);
            FILE *f = fopen(path, "r");
            if (!f)
                continue; /* ended meanwhile */
            if (!fgets(comm, sizeof comm, f))
                comm[0] = 0;
            fclose(f);
            cpu_set_t set;
            CPU_ZERO(&set);
            int pinned = syscall(SYS_sched_getaffinity, tid, sizeof set, &set) > 0 && !CPU_EQUAL(&set, all);
            int batch = syscall(SYS_sched_getscheduler, tid) == SCHED_BATCH;
            if (strncmp(comm, "kst", 3) == 0 || pinned || batch) {
                marked++;
                if (tries == 199)
                    fprintf(stderr, "thread %d %s pinned=%d batch=%d\n", tid, comm, pinned, batch);
            }
        }
        closedir(d);
        if (marked == 0)
            break;
        sleep_ms(10);
    }
    return marked;
}

int main(int argc, char **argv) {
    if (argc > 1)
        nthreads = atoi(argv[1]);
    if (argc > 2)
        rounds = atoi(argv[2]);
    if (nthreads > MAXT)
        nthreads = MAXT;
    report_preload();
    deadline_s(120);
    cpu_set_t all;
    CPU_ZERO(&all);
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "main affinity");
    ncpus = CPU_COUNT(&all);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            CPU_ZERO(&first_cpu);
            CPU_SET(c, &first_cpu);
            break;
        }
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");
    /* Two generations: the second starts where the first left its state. */
    pthread_t t[MAXT];
    for (int gen = 0; gen < 2; gen++) {
        atomic_store(&ready, 0);
        for (long i = 0; i < nthreads; i++)
            CHECK(pthread_create(&t[i], NULL, body, (void *)i) == 0, "pthread_create");
        for (int i = 0; i < nthreads; i++)
            CHECK(pthread_join(t[i], NULL) == 0, "pthread_join");
    }
    printf("threads=%d rounds=%d generations=2: set_tid_address, robust list, tgkill/tkill self, sched_* 0, names, sigaltstack, "
           "rseq ok\n",
           nthreads, rounds);
    printf("threads left with a thread's name, affinity or policy: %d\n", marked_threads(&all));
    fprintf(stderr, "fiber_seen=%d preloaded=%d\n", atomic_load(&fiber_seen), p_active ? p_active() : 0);
    return 0;
}
