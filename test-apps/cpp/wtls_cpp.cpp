// fiberize.h from C++: WTLS_ADDR_OF on a thread_local, WTLS_REGISTER, and an
// AT_FIBER_DESTROY callback that runs before the thread_local destructors.
//   wtls_cpp THREADS ROUNDS
#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "fiberize.h"

static thread_local long hits;
static thread_local int callback_ran;
static std::atomic<int> ordered{0}, destroyed{0};

struct Guard {
    ~Guard() {
        destroyed++;
        if (callback_ran)
            ordered++;
    }
};
static thread_local Guard guard;

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 32;
    int rounds = argc > 2 ? atoi(argv[2]) : 100;
    auto active = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "fiberize_active"));
    int preloaded = active ? active() : 0;
    std::atomic<long> own{0};
    std::vector<long *> blocks;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; i++)
        ts.emplace_back([&] {
            (void)&guard; // constructed before the callback is registered
            if (AT_FIBER_DESTROY(+[] { callback_ran = 1; }) != 0)
                std::abort();
            for (int r = 0; r < rounds; r++) {
                long *p = WTLS_ADDR_OF(hits);
                ++*p;
                if (p != &hits) {
                    pthread_mutex_lock(&m);
                    bool known = false;
                    for (long *b : blocks)
                        known |= b == p;
                    if (!known)
                        blocks.push_back(p);
                    pthread_mutex_unlock(&m);
                }
                std::this_thread::yield();
            }
            own += hits;
        });
    for (auto &t : ts)
        t.join();
    long total = own;
    for (long *b : blocks)
        total += *b;
    std::printf("increments %ld of %ld, callbacks before thread_local destructors %d of %d\n", total,
                long(threads) * rounds, ordered.load(), destroyed.load());
    std::fprintf(stderr, "preloaded=%d worker_blocks=%zu\n", preloaded, blocks.size());
    return 0;
}
