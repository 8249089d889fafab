// ggml-time.cpp — upstream's timer functions (ggml_time_init/ms/us, ggml_cycles), on the
// monotonic clock. Clients use them for progress and profiling output only.

#include "ggml.h"

#include <chrono>
#include <ctime>

namespace {

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

} // namespace

extern "C" {

void ggml_time_init(void) {} // the steady clock needs no set-up

int64_t ggml_time_ms(void) { return now_ns() / 1000000; }

int64_t ggml_time_us(void) { return now_ns() / 1000; }

int64_t ggml_cycles(void) { return (int64_t) std::clock(); }

int64_t ggml_cycles_per_ms(void) { return (int64_t) (CLOCKS_PER_SEC / 1000); }

} // extern "C"
