// `std::call_once` whose callable throws the first time: glibc resets the once
// control during unwinding (which must pass through our `pthread_once` frame), the
// exception reaches the caller, and a waiting caller runs the callable again.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <dlfcn.h>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

static std::once_flag flag;
static std::atomic<int> attempts{0}, caught{0}, fibers{0};

static void note_fiber() {
    auto f = (int (*)())dlsym(RTLD_DEFAULT, "fiberize_is_fiber");
    if (f && f()) fibers = 1;
}

static void init() {
    if (++attempts == 1) {
        std::this_thread::sleep_for(std::chrono::milliseconds(60));
        throw std::runtime_error("first attempt fails");
    }
}

static void caller() {
    note_fiber();
    try {
        std::call_once(flag, init);
    } catch (const std::runtime_error &) {
        ++caught;
    }
}

int main() {
    auto a = (int (*)())dlsym(RTLD_DEFAULT, "fiberize_active");
    fprintf(stderr, "fiberize_active=%d main_is_fiber=0\n", a ? a() : -1);
    std::vector<std::thread> ts;
    ts.emplace_back(caller);
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    for (int i = 0; i < 3; i++) ts.emplace_back(caller);
    caller();
    for (auto &t : ts) t.join();
    try { std::call_once(flag, init); } catch (...) { ++caught; }
    fprintf(stderr, "threads_were_fibers=%d\n", fibers.load());
    printf("call_once with a throwing callable: attempts=%d caught=%d\n", attempts.load(), caught.load());
    printf("call_once_throw: ok\n");
    return 0;
}
