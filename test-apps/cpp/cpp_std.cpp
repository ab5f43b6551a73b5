// Issue 2: a C++ program using std::thread, std::mutex, std::condition_variable
// (wait and wait_for), std::atomic wait/notify (C++20, futex), thread_local objects
// with destructors, and std::async. Deterministic stdout.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <future>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "../c/kernel_tid.h"

static std::atomic<int> dtors{0};
struct Tracked {
    int id = -1;
    ~Tracked() { if (id >= 0) dtors.fetch_add(1); }
};
thread_local Tracked tracked;
thread_local int tl_value = 42;

int main() {
    const int n = 100;
    std::mutex m;
    std::condition_variable cv;
    int ready = 0, turn = 0;
    long sum = 0;
    std::set<long> tids;
    std::atomic<int> gate{0};
    std::vector<std::thread> ts;
    for (int i = 0; i < n; i++) {
        ts.emplace_back([&, i] {
            tracked.id = i;
            tl_value = i;
            gate.wait(0);  // C++20 atomic wait (futex)
            {
                std::unique_lock<std::mutex> l(m);
                ready++;
                cv.notify_all();
                cv.wait(l, [&] { return turn == i; });
                sum += i;
                tids.insert(running_kernel_tid());
                turn++;
                cv.notify_all();
            }
            std::unique_lock<std::mutex> l(m);
            bool timed_out = !cv.wait_for(l, std::chrono::milliseconds(2), [] { return false; });
            if (!timed_out || tl_value != i) std::abort();
        });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    gate.store(1);
    gate.notify_all();
    for (auto &t : ts) t.join();

    auto f1 = std::async(std::launch::async, [] { return 21 * 2; });
    auto f2 = std::async(std::launch::async, [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); return 7; });
    int asyncs = f1.get() + f2.get();

    std::printf("threads=%d sum=%ld ready=%d tracked_dtors=%d async=%d\n", n, sum, ready, dtors.load(), asyncs);
    auto active = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "fiberize_active"));
    std::fprintf(stderr, "preloaded=%d distinct_tids=%zu\n", active ? active() : 0, tids.size());
    return dtors.load() == n ? 0 : 1;
}
