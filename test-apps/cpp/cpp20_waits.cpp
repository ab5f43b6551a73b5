// C++20 waits across 200 std::threads: std::atomic<int>::wait/notify_one/notify_all,
// std::atomic_flag::wait, std::latch, std::barrier and std::counting_semaphore.
// libstdc++ 12 waits for all of them with FUTEX_WAIT *without* the private flag; the
// library must park them like private ones (their words are in private memory), so the
// program runs on the workers alone (`cpp20_waits waits [rounds]`). `cpp20_waits shared`:
// a futex word in a MAP_SHARED page is waited on by this process and woken by a forked
// child (and the reverse), from main and from a thread: that one must go to the kernel.
// Deterministic stdout; stderr: preloaded=, distinct_tids= (kernel threads that ran the
// threads' code, read from /proc/thread-self, not gettid).
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <mutex>
#include <semaphore>
#include <set>
#include <thread>
#include <vector>

static int kernel_tid() {
    char buf[64] = {0};
    ssize_t n = readlink("/proc/thread-self", buf, sizeof buf - 1);
    if (n <= 0) return -1;
    const char* slash = strrchr(buf, '/');
    return slash ? atoi(slash + 1) : -1;
}

static long futex(std::atomic<unsigned>* w, int op, unsigned val, const timespec* ts) {
    return syscall(SYS_futex, reinterpret_cast<unsigned*>(w), op, val, ts, nullptr, 0);
}

// A word in a MAP_SHARED page: the parent waits (non-private FUTEX_WAIT) and the child
// wakes it, then the child waits and the parent wakes it. Returns a line for stdout.
static const char* shared_page_case() {
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return "shared: mmap failed";
    auto* w = new (p) std::atomic<unsigned>[2]{0, 0};
    pid_t pid = fork();
    if (pid < 0) return "shared: fork failed";
    if (pid == 0) {
        usleep(100 * 1000);  // let the parent reach its wait
        w[0].store(1);
        futex(&w[0], FUTEX_WAKE, 1, nullptr);
        timespec ts{5, 0};
        long r = 0;
        while (w[1].load() == 0 && r == 0) r = futex(&w[1], FUTEX_WAIT, 0, &ts);
        _exit(w[1].load() == 1 && r == 0 ? 0 : 3);
    }
    timespec ts{5, 0};
    long r = futex(&w[0], FUTEX_WAIT, 0, &ts);
    int e = errno;
    const char* res = "shared: parent woken by child";
    if (r != 0 && !(r == -1 && e == EAGAIN)) res = "shared: parent NOT woken (timed out)";
    usleep(100 * 1000);  // let the child reach its wait
    w[1].store(1);
    futex(&w[1], FUTEX_WAKE, 1, nullptr);
    int st = 0;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) res = "shared: child NOT woken by parent";
    munmap(p, 4096);
    return res;
}

static int shared_main() {
    const char* from_main = shared_page_case();
    // The same from a thread (a fiber under the preload).
    const char* from_thread = nullptr;
    std::thread([&] { from_thread = shared_page_case(); }).join();
    auto active = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "fiberize_active"));
    std::fprintf(stderr, "preloaded=%d\n", active ? active() : 0);
    printf("%s (main)\n%s (thread)\n", from_main, from_thread);
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "shared") == 0) return shared_main();
    const int n = 200, rounds = argc > 2 ? atoi(argv[2]) : 20;
    std::latch started(n), finished(n);
    long phases = 0;
    std::barrier bar(n, [&]() noexcept { phases++; });
    std::counting_semaphore<4> slots(4);
    std::atomic<int> inside{0}, most_inside{0};
    std::atomic<int> turn{0};       // the token ring: notify_all
    std::atomic_flag go = ATOMIC_FLAG_INIT;
    std::vector<std::atomic<int>> mailbox(n);  // pairs: notify_one
    std::mutex m;
    std::set<int> tids;
    long ring_sum = 0, mail_sum = 0;

    std::vector<std::thread> ts;
    for (int i = 0; i < n; i++) {
        ts.emplace_back([&, i] {
            std::set<int> mine;
            started.count_down();
            go.wait(false);  // atomic_flag::wait, opened by main
            mine.insert(kernel_tid());
            for (int r = 0; r < rounds; r++) {
                slots.acquire();
                int now = inside.fetch_add(1) + 1;
                int seen = most_inside.load();
                while (now > seen && !most_inside.compare_exchange_weak(seen, now)) {
                }
                std::this_thread::yield();
                inside.fetch_sub(1);
                slots.release();
                // Pairs: even threads send r+1 to their odd neighbour, which answers.
                if (i % 2 == 0) {
                    mailbox[i + 1].store(r + 1);
                    mailbox[i + 1].notify_one();
                    int v;
                    while ((v = mailbox[i].load()) != -(r + 1)) mailbox[i].wait(v);
                } else {
                    int v;
                    while ((v = mailbox[i].load()) != r + 1) mailbox[i].wait(v);
                    mailbox[i - 1].store(-(r + 1));
                    mailbox[i - 1].notify_one();
                }
                bar.arrive_and_wait();
                mine.insert(kernel_tid());
            }
            // The token ring, 3 laps: each thread waits for its turn (notify_all).
            for (int lap = 0; lap < 3; lap++) {
                int want = lap * n + i, v;
                while ((v = turn.load()) != want) turn.wait(v);
                {
                    std::lock_guard<std::mutex> l(m);
                    ring_sum += i;
                }
                turn.store(want + 1);
                turn.notify_all();
            }
            mine.insert(kernel_tid());
            {
                std::lock_guard<std::mutex> l(m);
                if (i % 2) mail_sum += mailbox[i].load();
                tids.insert(mine.begin(), mine.end());
            }
            finished.count_down();
        });
    }
    started.wait();  // main is a plain thread here: its wait is woken by fibers
    go.test_and_set();
    go.notify_all();
    finished.wait();
    for (auto& t : ts) t.join();

    auto active = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "fiberize_active"));
    std::fprintf(stderr, "preloaded=%d distinct_tids=%zu\n", active ? active() : 0, tids.size());
    printf("threads=%d rounds=%d phases=%ld most_inside<=4:%d ring_sum=%ld mail_sum=%ld turn=%d\n", n, rounds, phases,
           most_inside.load() <= 4, ring_sum, mail_sum, turn.load());
    return 0;
}
