// memory_plan.cpp — peak memory of a Krea2 run measured before allocating, available memory,
// and what fits instead.

#include "memory_plan.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace krea2 {

namespace {

size_t sat_add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }
size_t sat_mul(size_t a, size_t b) { return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b; }

// One block's weights as the weight sources hand them over (every linear in F32, as synthetic
// weights and float checkpoints do), plus the F32 copy of the largest linear that dequantizing
// an INT8 checkpoint into F32/BF16 makes.
size_t host_block_bytes(const config & c) {
    config one = c;
    one.blocks = 1;
    const size_t f32_block = model::weight_bytes_for(one, wtype::f32);
    const size_t largest   = sat_mul(sat_mul((size_t) c.hidden, (size_t) std::max(c.heads * HEAD_DIM, c.mlp)), sizeof(float));
    return sat_add(f32_block, largest);
}

} // namespace

bool estimate_memory(runner & r, const config & cfg, const std::vector<phase_spec> & phases, memory_estimate & e,
                     std::string & err) {
    e = memory_estimate{};
    err = cfg.validate();
    if (!err.empty()) return false;
    const size_t act = sat_mul(sat_mul((size_t) cfg.hidden, (size_t) cfg.tokens), sizeof(float)); // x, outputs
    const size_t pe  = sat_mul((size_t) cfg.tokens, 256 * sizeof(float));
    const size_t hb  = host_block_bytes(cfg);
    config one = cfg; // every block graph has the same shape: measure block 0 of a 1-block layout
    one.blocks = 1;

    size_t max_c = 0, max_w = 0; // compute and CPU work buffers only grow across phases
    auto   consider = [&](size_t k, bool loading, size_t W, size_t host) {
        const size_t total = sat_add(sat_add(W, sat_add(max_c, max_w)), host);
        if (total <= e.total) return;
        e.total              = total;
        e.weights            = W;
        e.compute            = max_c;
        e.cpu_work           = max_w;
        e.host               = host;
        e.peak_phase         = (int) k;
        e.peak_while_loading = loading;
    };
    for (size_t k = 0; k < phases.size(); ++k) {
        const phase_spec & ph = phases[k];
        const size_t       W  = model::weight_bytes_for(cfg, ph.type);
        const size_t       held = (size_t) ph.held_outputs;
        // loading: a block's host copies are released linear by linear as they are copied in, so
        // at most one block is in both places; the earlier phases' buffers are still there
        const size_t W1 = model::weight_bytes_for(one, ph.type);
        consider(k, true, W, sat_add(hb > W1 ? hb - W1 : 0, sat_mul(1 + held, act)));
        model m;
        if (!m.load(one, ph.type, nullptr, err)) return false;
        runner::memory_use u;
        if (!r.measure(m, ph.bo, u, err)) return false;
        max_c = std::max(max_c, u.compute_bytes);
        max_w = std::max(max_w, u.cpu_work_bytes);
        // running: x, the running output, the held outputs and pe
        consider(k, false, W, sat_add(sat_mul(2 + held, act), pe));
    }
    // what the process holds already (with a Vulkan device in the registry the driver and its
    // compiler are resident: ~40 MB on lavapipe) stays through the run
    e.process = r.resident_at_init();
    e.total   = sat_add(sat_add(e.total, e.process), RUNTIME_OVERHEAD_BYTES);
    return true;
}

// ---------------------------------------------------------------------------------------------
// Available memory

namespace {

bool read_u64(const std::string & path, size_t & v) {
    std::ifstream f(path);
    if (!f) return false;
    std::string s;
    f >> s;
    if (s.empty() || s == "max") { v = SIZE_MAX; return !s.empty(); }
    char *             end = nullptr;
    unsigned long long x   = std::strtoull(s.c_str(), &end, 10);
    if (*end != '\0') return false;
    v = (size_t) x;
    return true;
}

// A "key value" line of a stat file (memory.stat: "inactive_file 123"; meminfo: "MemAvailable: 1 kB").
bool read_key(const std::string & path, const std::string & key, size_t & v) {
    std::ifstream f(path);
    std::string   line;
    while (std::getline(f, line)) {
        if (line.compare(0, key.size(), key) != 0) continue;
        std::istringstream is(line.substr(key.size()));
        unsigned long long x = 0;
        if (!(is >> x)) return false;
        v = (size_t) x;
        return true;
    }
    return false;
}

void take_min(available_memory & a, size_t bytes, const std::string & source) {
    if (bytes < a.bytes) {
        a.bytes  = bytes;
        a.source = source;
    }
}

// limit - usage + reclaimable file pages of one cgroup directory, if it has a limit.
void cgroup_dir(available_memory & a, const std::string & dir, bool v2) {
    size_t limit = SIZE_MAX, usage = 0, inactive = 0;
    if (!read_u64(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"), limit)) return;
    // v1 reports "no limit" as a huge page-aligned number
    if (limit == SIZE_MAX || limit >= ((size_t) 1 << 60)) return;
    if (!read_u64(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"), usage)) return;
    read_key(dir + "/memory.stat", v2 ? "inactive_file " : "total_inactive_file ", inactive);
    const size_t used = usage > inactive ? usage - inactive : 0;
    take_min(a, limit > used ? limit - used : 0, v2 ? "cgroup memory.max" : "cgroup memory.limit_in_bytes");
}

} // namespace

available_memory query_available_memory() {
    return query_available_memory_from("/proc/meminfo", "/proc/self/cgroup", "/sys/fs/cgroup");
}

available_memory query_available_memory_from(const std::string & meminfo, const std::string & self_cgroup,
                                             const std::string & cgroup_root) {
    available_memory a;
    size_t           kb = 0;
    if (read_key(meminfo, "MemAvailable:", kb)) take_min(a, sat_mul(kb, 1024), "MemAvailable");

    // every enclosing cgroup's limit applies; the mount may show our cgroup as its root (namespaces)
    std::ifstream f(self_cgroup);
    std::string   line;
    while (std::getline(f, line)) {
        const size_t c1 = line.find(':'), c2 = line.find(':', c1 == std::string::npos ? 0 : c1 + 1);
        if (c1 == std::string::npos || c2 == std::string::npos) continue;
        const std::string ctrl = line.substr(c1 + 1, c2 - c1 - 1);
        std::string       path = line.substr(c2 + 1);
        const bool        v2   = ctrl.empty();
        if (!v2 && ctrl.find("memory") == std::string::npos) continue;
        const std::string root = v2 ? cgroup_root : cgroup_root + "/memory";
        for (;;) {
            cgroup_dir(a, root + (path == "/" ? "" : path), v2);
            if (path.empty() || path == "/") break;
            const size_t s = path.rfind('/');
            path           = s == 0 || s == std::string::npos ? "/" : path.substr(0, s);
        }
    }
    return a;
}

// ---------------------------------------------------------------------------------------------
// What fits

namespace {

size_t need_of(runner & r, const config & c, const std::vector<phase_spec> & phases) {
    memory_estimate e;
    std::string     err;
    return estimate_memory(r, c, phases, e, err) ? e.total : SIZE_MAX;
}

// Largest v in [lo, hi] with fits(v) (fits monotone: true up to some point), or lo - 1.
template <typename F> int64_t largest_fitting(int64_t lo, int64_t hi, F fits) {
    int64_t best = lo - 1;
    while (lo <= hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (fits(mid)) { best = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    return best;
}

} // namespace

size_t suggest_headroom(size_t avail) {
    return std::max<size_t>(avail / 64, (size_t) 4 << 20); // 1.6%, at least 4 MiB
}

std::string suggest_fit(runner & r, const config & cfg, const std::vector<phase_spec> & phases, size_t avail_all,
                        int check_phase, bool text_tokens_fixed) {
    std::vector<std::string> tries;
    const size_t             room  = suggest_headroom(avail_all);
    const size_t             avail = avail_all > room ? avail_all - room : 0;

    // fewer tokens (multiples of 64), same blocks
    const int64_t step = 64;
    const int64_t tmax = (cfg.tokens - 1) / step;
    const int64_t t    = largest_fitting(1, tmax, [&](int64_t k) {
        config c = cfg;
        c.tokens = k * step;
        if (!text_tokens_fixed) c.text_tokens = std::min<int64_t>(32, c.tokens / 2);
        if (c.tokens <= c.text_tokens) return false;
        return need_of(r, c, phases) <= avail;
    });
    if (t >= 1) tries.push_back("--tokens " + std::to_string(t * step));

    // fewer blocks, same tokens
    const int64_t b = largest_fitting(1, cfg.blocks - 1, [&](int64_t n) {
        config c = cfg;
        c.blocks = (int) n;
        return need_of(r, c, phases) <= avail;
    });
    if (b >= 1) tries.push_back("--blocks " + std::to_string(b));

    // no F32 check phase
    if (check_phase >= 0 && (size_t) check_phase < phases.size() && phases.size() > 1) {
        std::vector<phase_spec> p;
        for (size_t k = 0; k < phases.size(); ++k)
            if ((int) k != check_phase) p.push_back(phases[k]);
        if (need_of(r, cfg, p) <= avail) tries.push_back("--no-check");
    }

    if (tries.empty()) return "";
    std::string s = "try " + tries[0];
    for (size_t i = 1; i < tries.size(); ++i) s += (i + 1 == tries.size() ? " or " : ", ") + tries[i];
    return s;
}

} // namespace krea2
