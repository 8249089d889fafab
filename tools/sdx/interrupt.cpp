// interrupt.cpp — SIGINT/SIGTERM to a stop request polled by the backend (see interrupt.h).

#include "interrupt.h"

#include "cli.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <string>

namespace sdx {

namespace {

// Lock-free atomics are safe to touch in a signal handler and from every worker thread.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the stop flag must be usable in a signal handler");

std::atomic<long long> g_polls{0};
long long              g_raise_at  = 0; // test hook: raise g_raise_sig at this poll (0: never)
int                    g_raise_sig = SIGINT;

struct sigaction g_old_int, g_old_term;

extern "C" void on_stop_signal(int sig) {
    int expected = 0;
    if (!g_signal.compare_exchange_strong(expected, sig)) {
        // asked twice: the user wants out now; the default action (termination) it is
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

// strict positive decimal, else 0 (a malformed hook value is ignored)
long long parse_hook(const char * s) {
    if (!s || !*s) return 0;
    long long v = 0;
    for (const char * p = s; *p; ++p) {
        if (*p < '0' || *p > '9' || v > (1LL << 50)) return 0;
        v = v * 10 + (*p - '0');
    }
    return v;
}

} // namespace

interrupt_scope::interrupt_scope() {
    g_signal.store(0);
    g_polls.store(0);
    g_raise_at  = parse_hook(std::getenv("SDX_TEST_SIGINT_AT_POLL"));
    g_raise_sig = SIGINT;
    if (g_raise_at == 0) {
        g_raise_at  = parse_hook(std::getenv("SDX_TEST_SIGTERM_AT_POLL"));
        g_raise_sig = SIGTERM;
    }
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    sigaction(SIGINT, &sa, &g_old_int);
    sigaction(SIGTERM, &sa, &g_old_term);
}

interrupt_scope::~interrupt_scope() {
    sigaction(SIGINT, &g_old_int, nullptr);
    sigaction(SIGTERM, &g_old_term, nullptr);
}

int interrupt_signal() { return g_signal.load(std::memory_order_relaxed); }

bool abort_poll(void *) {
    if (g_raise_at > 0 && g_polls.fetch_add(1, std::memory_order_relaxed) + 1 == g_raise_at) raise(g_raise_sig);
    return g_signal.load(std::memory_order_relaxed) != 0;
}

void stop_if_interrupted() {
    const int sig = interrupt_signal();
    if (sig == 0) return;
    const std::string name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal " + std::to_string(sig);
    throw failure(128 + sig, "interrupted by " + name + "; stopped cleanly, nothing written");
}

} // namespace sdx
