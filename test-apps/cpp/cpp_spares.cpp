// Issue 24: a C++ program of 200 std::threads that only uses std::mutex,
// std::shared_mutex, std::condition_variable and std::this_thread::yield. None of
// these blocks a worker under the preload (all are intercepted), so the monitor must
// start no spare worker for them: the test reads `workers_spawned` from the stats line.
// Deterministic stdout.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "../c/kernel_tid.h"

int main(int argc, char** argv) {
    const int pairs = 100, rounds = argc > 1 ? atoi(argv[1]) : 300;
    std::mutex m;                 // one hot lock for everybody
    std::shared_mutex table;      // read by all, written now and then
    long table_value = 0, total = 0;
    struct Pair {
        std::condition_variable cv;
        int turn = 0;  // 0: ping's move, 1: pong's
    };
    std::vector<Pair> ps(pairs);
    std::set<long> tids;  // kernel threads that ran the threads' last rounds
    std::vector<std::thread> ts;
    for (int p = 0; p < pairs; p++) {
        for (int side = 0; side < 2; side++) {
            ts.emplace_back([&, p, side] {
                Pair& pr = ps[p];
                for (int r = 0; r < rounds; r++) {
                    {
                        std::unique_lock<std::mutex> l(m);
                        pr.cv.wait(l, [&] { return pr.turn == side; });
                        total++;
                        pr.turn = 1 - side;
                        pr.cv.notify_one();
                    }
                    if (r % 16 == 0) {
                        std::unique_lock<std::shared_mutex> w(table);
                        table_value++;
                    } else {
                        std::shared_lock<std::shared_mutex> rd(table);
                        (void)table_value;
                    }
                    std::this_thread::yield();
                }
                std::lock_guard<std::mutex> l(m);
                tids.insert(running_kernel_tid());
            });
        }
    }
    for (auto& t : ts) t.join();
    auto active = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "fiberize_active"));
    std::fprintf(stderr, "preloaded=%d distinct_tids=%zu\n", active ? active() : 0, tids.size());
    printf("threads=%d total=%ld table=%ld\n", 2 * pairs, total, table_value);
    return total == 2L * pairs * rounds ? 0 : 1;
}
