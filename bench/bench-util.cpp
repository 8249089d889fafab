#include "bench-util.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <thread>

namespace bench {

static bool read_cpu(long long & total, long long & idle) {
    std::ifstream f("/proc/stat");
    std::string   cpu;
    long long     v[10] = {};
    if (!(f >> cpu) || cpu != "cpu") return false;
    total = 0;
    for (int i = 0; i < 10 && (f >> v[i]); ++i) total += v[i];
    idle = v[3] + v[4];
    return true;
}

bool wait_idle(int max_busy_percent, int timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
        long long t0, i0, t1, i1;
        if (!read_cpu(t0, i0)) return true; // no /proc: cannot tell, do not block
        std::this_thread::sleep_for(std::chrono::seconds(1));
        if (!read_cpu(t1, i1)) return true;
        const long long dt = std::max(1LL, t1 - t0);
        const long long busy = 100 * ((t1 - t0) - (i1 - i0)) / dt;
        if (busy <= max_busy_percent) return true;
    }
    return false;
}

static int g_cpu_clock_threads = 0; // 0: wall clock

void set_cpu_clock(int threads) { g_cpu_clock_threads = threads > 0 ? threads : 0; }
bool cpu_clock() { return g_cpu_clock_threads > 0; }

static double process_cpu_s() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

timing time_it(const std::function<void()> & fn, int min_reps, double min_time_s, int max_reps) {
    using clk = std::chrono::steady_clock;
    fn(); // warm-up: first-touch of buffers, thread-pool start, caches
    std::vector<double> samples;
    const auto start = clk::now();
    while ((int) samples.size() < max_reps) {
        const auto   t0 = clk::now();
        const double c0 = g_cpu_clock_threads ? process_cpu_s() : 0.0;
        fn();
        samples.push_back(g_cpu_clock_threads ? (process_cpu_s() - c0) / g_cpu_clock_threads
                                              : std::chrono::duration<double>(clk::now() - t0).count());
        const double elapsed = std::chrono::duration<double>(clk::now() - start).count();
        if ((int) samples.size() >= min_reps && elapsed >= min_time_s) break;
    }
    std::sort(samples.begin(), samples.end());
    timing t;
    t.reps     = (int) samples.size();
    t.best_s   = samples.front();
    t.median_s = samples[samples.size() / 2];
    return t;
}

bool arg_reader::flag(const char * name, bool & out) {
    if (!is(name)) return false;
    out = true;
    return true;
}

const char * arg_reader::value(const char * name) {
    if (i_ + 1 >= argc_) {
        fprintf(stderr, "%s: %s needs a value\n", prog_, name);
        ok_ = false;
        return nullptr;
    }
    return argv_[++i_];
}

bool arg_reader::int_opt(const char * name, long lo, long hi, int & out) {
    if (!is(name)) return false;
    const char * v = value(name);
    if (!v) return true;
    char * end = nullptr;
    long   n   = strtol(v, &end, 10);
    if (end == v || *end || n < lo || n > hi) {
        fprintf(stderr, "%s: %s must be an integer in %ld..%ld, got '%s'\n", prog_, name, lo, hi, v);
        ok_ = false;
        return true;
    }
    out = (int) n;
    return true;
}

bool arg_reader::double_opt(const char * name, double lo, double hi, double & out) {
    if (!is(name)) return false;
    const char * v = value(name);
    if (!v) return true;
    char * end = nullptr;
    double d   = strtod(v, &end);
    if (end == v || *end || !(d >= lo && d <= hi)) {
        fprintf(stderr, "%s: %s must be a number in %g..%g, got '%s'\n", prog_, name, lo, hi, v);
        ok_ = false;
        return true;
    }
    out = d;
    return true;
}

bool arg_reader::string_opt(const char * name, std::string & out) {
    if (!is(name)) return false;
    const char * v = value(name);
    if (v) out = v;
    return true;
}

bool arg_reader::unknown() {
    fprintf(stderr, "%s: unknown argument '%s' (see --help)\n", prog_, argv_[i_]);
    ok_ = false;
    return false;
}

static double rate(const row & r, double seconds) {
    return seconds > 0 ? r.work / seconds / 1e9 : 0.0;
}

void print_table_header() {
    printf("%-22s %-30s %10s %10s %12s %-16s %8s\n", "op", "shape", "best ms", "median ms", "rate",
           "baseline", "ratio");
}

void print_row(const row & r) {
    const char * unit = r.is_bytes ? "GB/s" : "GFLOP/s";
    char rate_s[32];
    snprintf(rate_s, sizeof rate_s, "%.1f %s", rate(r, r.t.best_s), unit);
    char ratio_s[32] = "-";
    if (r.base.best_s > 0) snprintf(ratio_s, sizeof ratio_s, "%.2fx", r.base.best_s / r.t.best_s);
    printf("%-22s %-30s %10.3f %10.3f %12s %-16s %8s%s%s\n", r.op.c_str(), r.shape.c_str(), r.t.best_s * 1e3,
           r.t.median_s * 1e3, rate_s, r.baseline.empty() ? "-" : r.baseline.c_str(), ratio_s,
           r.kernel.empty() ? "" : "  ", r.kernel.c_str());
    fflush(stdout);
}

void print_json(const row & r) {
    printf("{\"op\":\"%s\",\"shape\":\"%s\",\"best_ms\":%.4f,\"median_ms\":%.4f,\"reps\":%d,\"%s\":%.3f",
           r.op.c_str(), r.shape.c_str(), r.t.best_s * 1e3, r.t.median_s * 1e3, r.t.reps,
           r.is_bytes ? "gbps" : "gflops", rate(r, r.t.best_s));
    if (r.base.best_s > 0) {
        printf(",\"baseline\":\"%s\",\"baseline_best_ms\":%.4f,\"ratio\":%.4f", r.baseline.c_str(),
               r.base.best_s * 1e3, r.base.best_s / r.t.best_s);
    }
    if (!r.kernel.empty()) printf(",\"kernel\":\"%s\"", r.kernel.c_str());
    printf("}\n");
    fflush(stdout);
}

} // namespace bench
