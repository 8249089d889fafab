// threadpool.cpp — persistent worker threads for the CPU backend.
//
// Design:
// * Workers are started once and wait for work by spinning for a while (params.poll) and then
//   sleeping on a condition variable, so short back-to-back graphs do not pay a wake-up each
//   time, while an idle pool costs no CPU.
// * A run is published as one 64-bit word (generation << 32 | n_threads). Workers decide from
//   that single load whether they take part, so a worker that wakes late can never mix the
//   thread count of one run with the task of another. Participants read fn/data only after
//   seeing the word, and the caller cannot publish the next run before they have finished.
// * The barrier spins on a generation counter because it runs between every pair of graph
//   nodes, where a sleep/wake round trip would dominate small nodes. After a short spin it
//   sleeps on a futex: with more runnable threads than cores (a busy machine) pure spinning or
//   sched_yield can stall a barrier for whole scheduler time slices.
// * The end of a run is itself a barrier of all its threads, so a participant never touches
//   fn/data after the caller has returned.

#include "threadpool.h"

#include "../ggml-impl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#include <climits>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
static inline void cpu_relax() { _mm_pause(); }
#elif defined(__aarch64__)
static inline void cpu_relax() { __asm__ __volatile__("yield"); }
#else
static inline void cpu_relax() {}
#endif

namespace {

// Barrier spin before sleeping, in wall time (the cost of a pause instruction varies ~20x
// between CPUs): long enough to cover the usual imbalance between threads of one node, short
// enough that a stalled barrier soon gives its core to the thread everybody waits for.
constexpr std::chrono::microseconds BARRIER_SPIN_TIME{100};

// Spin rounds per unit of params.poll before a worker goes to sleep between runs.
constexpr uint32_t POLL_ROUNDS_PER_UNIT = 1024;

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain 32-bit word");

// Sleep while *addr == val (returns at once if it already differs; spurious wake-ups possible).
inline void futex_wait(std::atomic<uint32_t> * addr, uint32_t val) {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), FUTEX_WAIT_PRIVATE, val, nullptr, nullptr, 0);
#else
    (void) addr;
    (void) val;
    std::this_thread::yield();
#endif
}

inline void futex_wake_all(std::atomic<uint32_t> * addr) {
#if defined(__linux__)
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
    (void) addr;
#endif
}

} // namespace

struct ggml_threadpool {
    ggml_threadpool_params params;
    int                    n_threads = 1; // pool size including the caller (worker 0)

    std::vector<std::thread> workers; // workers[i] is thread ith = i + 1

    std::mutex run_mutex; // one run at a time

    // published run: (generation << 32) | n_threads of the run
    alignas(64) std::atomic<uint64_t> job{0};
    ggml_threadpool_task_t fn   = nullptr;
    void *                 data = nullptr;

    alignas(64) std::atomic<int> barrier_count{0};
    alignas(64) std::atomic<uint32_t> barrier_gen{0};
    std::atomic<int> barrier_sleepers{0};
    std::atomic<int> run_n{1}; // threads in the current run (read by the barrier)

    // sleeping between runs
    alignas(64) std::mutex sleep_mutex;
    std::condition_variable sleep_cv;
    std::atomic<int>        n_sleeping{0};
    std::atomic<bool>       stop{false};
    std::atomic<bool>       paused{false};
};

// ---------------------------------------------------------------------------------------------
// Worker setup (best effort: failures to set affinity or priority are ignored, since they
// usually mean missing privileges and the pool still works without them)

static void apply_thread_settings(const ggml_threadpool_params & p, int ith) {
#if defined(__linux__)
    std::vector<int> cpus;
    for (int i = 0; i < GGML_MAX_N_THREADS && i < CPU_SETSIZE; ++i) {
        if (p.cpumask[i]) cpus.push_back(i);
    }
    if (!cpus.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        if (p.strict_cpu) {
            CPU_SET(cpus[(size_t) ith % cpus.size()], &set);
        } else {
            for (int c : cpus) CPU_SET(c, &set);
        }
        (void) pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    }

    switch (p.prio) {
        case GGML_SCHED_PRIO_LOW: (void) setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), 5); break;
        case GGML_SCHED_PRIO_NORMAL: break;
        case GGML_SCHED_PRIO_MEDIUM: (void) setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), -5); break;
        case GGML_SCHED_PRIO_HIGH: (void) setpriority(PRIO_PROCESS, (id_t) syscall(SYS_gettid), -10); break;
        case GGML_SCHED_PRIO_REALTIME: {
            sched_param sp;
            sp.sched_priority = sched_get_priority_max(SCHED_FIFO) / 2;
            (void) pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
            break;
        }
    }
#else
    (void) p;
    (void) ith;
#endif
}

// Returns the newly published job word, or the old one if the pool is stopping.
static uint64_t wait_for_job(ggml_threadpool * tp, uint64_t seen) {
    if (!tp->paused.load(std::memory_order_relaxed)) {
        const uint64_t rounds = (uint64_t) tp->params.poll * POLL_ROUNDS_PER_UNIT;
        for (uint64_t r = 0; r < rounds; ++r) {
            const uint64_t cur = tp->job.load(std::memory_order_acquire);
            if (cur != seen) return cur;
            if (tp->stop.load(std::memory_order_relaxed) || tp->paused.load(std::memory_order_relaxed)) break;
            if ((r & 63) == 63) {
                std::this_thread::yield();
            } else {
                cpu_relax();
            }
        }
    }

    std::unique_lock<std::mutex> lock(tp->sleep_mutex);
    // seq_cst pairs with the caller's store of job / load of n_sleeping: either the caller
    // sees us asleep and notifies, or we see its job here and never sleep.
    tp->n_sleeping.fetch_add(1, std::memory_order_seq_cst);
    tp->sleep_cv.wait(lock, [&] {
        return tp->job.load(std::memory_order_seq_cst) != seen || tp->stop.load(std::memory_order_seq_cst);
    });
    tp->n_sleeping.fetch_sub(1, std::memory_order_relaxed);
    return tp->job.load(std::memory_order_acquire);
}

static void worker_main(ggml_threadpool * tp, int ith) {
    apply_thread_settings(tp->params, ith);

    // not job.load(): a thread that starts after the first run was published must still see it
    uint64_t seen = 0;
    for (;;) {
        const uint64_t cur = wait_for_job(tp, seen);
        if (cur == seen) {
            if (tp->stop.load(std::memory_order_acquire)) return;
            continue;
        }
        seen        = cur;
        const int n = (int) (cur & 0xffffffffu);
        if (ith < n) {
            tp->fn(ith, n, tp->data);
            ggml_threadpool_barrier(tp); // end of run
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Public API

extern "C" {

void ggml_threadpool_params_init(struct ggml_threadpool_params * p, int n_threads) {
    GGML_ASSERT(p != nullptr);
    memset(p, 0, sizeof(*p));
    p->n_threads  = n_threads;
    p->prio       = GGML_SCHED_PRIO_NORMAL;
    p->poll       = 50;
    p->strict_cpu = false;
    p->paused     = false;
}

struct ggml_threadpool_params ggml_threadpool_params_default(int n_threads) {
    ggml_threadpool_params p;
    ggml_threadpool_params_init(&p, n_threads);
    return p;
}

bool ggml_threadpool_params_match(const struct ggml_threadpool_params * p0,
                                  const struct ggml_threadpool_params * p1) {
    if (p0->n_threads != p1->n_threads) return false;
    if (p0->prio != p1->prio) return false;
    if (p0->poll != p1->poll) return false;
    if (p0->strict_cpu != p1->strict_cpu) return false;
    return memcmp(p0->cpumask, p1->cpumask, sizeof(p0->cpumask)) == 0;
}

struct ggml_threadpool * ggml_threadpool_new(struct ggml_threadpool_params * params) {
    GGML_ASSERT(params != nullptr);
    GGML_ASSERT(params->n_threads >= 1 && params->n_threads <= GGML_MAX_N_THREADS &&
                "ggml_threadpool_new: n_threads must be in [1, GGML_MAX_N_THREADS]");

    ggml_threadpool * tp = new (std::nothrow) ggml_threadpool();
    if (!tp) return nullptr;
    tp->params = *params;
    tp->params.poll = std::min<uint32_t>(params->poll, 100);
    tp->paused.store(params->paused, std::memory_order_relaxed);

    try {
        tp->workers.reserve((size_t) params->n_threads - 1);
        for (int i = 1; i < params->n_threads; ++i) {
            tp->workers.emplace_back(worker_main, tp, i);
        }
    } catch (...) {
        // Thread creation can fail under resource limits; a smaller pool still computes
        // correctly, so keep what was started rather than failing the whole backend.
        GGML_LOG_WARN("ggml_threadpool_new: could only start %d of %d threads\n", (int) tp->workers.size() + 1,
                      params->n_threads);
    }
    tp->n_threads = (int) tp->workers.size() + 1;
    return tp;
}

void ggml_threadpool_free(struct ggml_threadpool * tp) {
    if (!tp) return;
    {
        // wait for a run in progress (if any) to finish before tearing down
        std::lock_guard<std::mutex> run_lock(tp->run_mutex);
        std::lock_guard<std::mutex> lock(tp->sleep_mutex);
        tp->stop.store(true, std::memory_order_seq_cst);
    }
    tp->sleep_cv.notify_all();
    for (auto & t : tp->workers) {
        if (t.joinable()) t.join();
    }
    delete tp;
}

int ggml_threadpool_get_n_threads(struct ggml_threadpool * tp) {
    GGML_ASSERT(tp != nullptr);
    return tp->n_threads;
}

void ggml_threadpool_pause(struct ggml_threadpool * tp) {
    GGML_ASSERT(tp != nullptr);
    tp->paused.store(true, std::memory_order_relaxed);
}

void ggml_threadpool_resume(struct ggml_threadpool * tp) {
    GGML_ASSERT(tp != nullptr);
    tp->paused.store(false, std::memory_order_relaxed);
}

void ggml_threadpool_run(struct ggml_threadpool * tp, int n_threads, ggml_threadpool_task_t fn, void * data) {
    GGML_ASSERT(tp != nullptr && fn != nullptr);
    GGML_ASSERT(n_threads >= 1 && "ggml_threadpool_run: n_threads must be >= 1");
    if (n_threads > tp->n_threads) {
        GGML_LOG_WARN("ggml_threadpool_run: requested %d threads but the pool has %d; using %d\n", n_threads,
                      tp->n_threads, tp->n_threads);
        n_threads = tp->n_threads;
    }

    std::lock_guard<std::mutex> run_lock(tp->run_mutex);

    // a run on a paused pool resumes it (as upstream does), otherwise its workers would only
    // ever be woken by the condition variable
    tp->paused.store(false, std::memory_order_relaxed);

    tp->run_n.store(n_threads, std::memory_order_relaxed);
    tp->barrier_count.store(0, std::memory_order_relaxed);

    if (n_threads == 1) {
        fn(0, 1, data);
        return;
    }

    tp->fn   = fn;
    tp->data = data;

    const uint64_t prev = tp->job.load(std::memory_order_relaxed);
    const uint64_t gen  = (prev >> 32) + 1;
    tp->job.store((gen << 32) | (uint32_t) n_threads, std::memory_order_seq_cst);
    if (tp->n_sleeping.load(std::memory_order_seq_cst) > 0) {
        // taking the mutex orders us after any worker that is between its check and its wait
        { std::lock_guard<std::mutex> lock(tp->sleep_mutex); }
        tp->sleep_cv.notify_all();
    }

    fn(0, n_threads, data);
    ggml_threadpool_barrier(tp); // end of run: every participant is done with fn/data
}

} // extern "C"

void ggml_threadpool_barrier(struct ggml_threadpool * tp) {
    const int n = tp->run_n.load(std::memory_order_relaxed);
    if (n <= 1) return;

    // read the generation before arriving: the acq_rel arrival below keeps this load before it
    const uint32_t gen = tp->barrier_gen.load(std::memory_order_acquire);
    if (tp->barrier_count.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
        // last to arrive: reset for the next barrier, then release everybody
        tp->barrier_count.store(0, std::memory_order_relaxed);
        tp->barrier_gen.fetch_add(1, std::memory_order_seq_cst);
        // seq_cst pairs with the sleepers' increment: either we see them or they see the new gen
        if (tp->barrier_sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&tp->barrier_gen);
        return;
    }
    const auto spin_start = std::chrono::steady_clock::now();
    for (uint32_t i = 1;; ++i) {
        if (tp->barrier_gen.load(std::memory_order_acquire) != gen) return;
        cpu_relax();
        if ((i & 31) == 0 && std::chrono::steady_clock::now() - spin_start > BARRIER_SPIN_TIME) break;
    }
    tp->barrier_sleepers.fetch_add(1, std::memory_order_seq_cst);
    while (tp->barrier_gen.load(std::memory_order_seq_cst) == gen) {
        futex_wait(&tp->barrier_gen, gen);
    }
    tp->barrier_sleepers.fetch_sub(1, std::memory_order_relaxed);
}
