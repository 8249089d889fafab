// runner.cpp — block-by-block execution of the Krea2 stack through the scheduler.

#include "runner.h"

#include "device_spec.h"

#include "ggml-cpu.h"
#include "ggml_extensions.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include <unistd.h>

namespace krea2 {

runner::~runner() {
    if (sched_) ggml_backend_sched_free(sched_);
    if (gpu_) ggml_backend_free(gpu_);
    if (backend_) ggml_backend_free(backend_);
}

namespace {
// Resident set of this process now (/proc/self/statm; 0 where unreadable).
size_t resident_bytes() {
    std::ifstream f("/proc/self/statm");
    unsigned long long size_pages = 0, resident_pages = 0;
    if (!(f >> size_pages >> resident_pages)) return 0;
    const long page = sysconf(_SC_PAGESIZE);
    return (size_t) resident_pages * (size_t) (page > 0 ? page : 4096);
}

} // namespace

bool runner::init(int threads, std::string & err, const std::string & device) {
    // kernels and fusion rules of the sd operators on every device in the registry
    if (!sd_ggml_register_extensions()) {
        err = std::string("sd extension registration failed: ") + sd_ggml_last_error();
        return false;
    }
    device_choice choice;
    if (!resolve_device(device, choice, err)) return false;
    ggml_backend_dev_t gpu_dev = choice.dev;
    backend_ = ggml_backend_cpu_init();
    if (!backend_) { err = "cannot initialise the CPU backend"; return false; }
    if (threads > 0) ggml_backend_cpu_set_n_threads(backend_, threads);
    if (gpu_dev) {
        gpu_ = ggml_backend_dev_init(gpu_dev, nullptr);
        if (!gpu_) { err = std::string("cannot initialise ") + ggml_backend_dev_name(gpu_dev); return false; }
    }
    sched_ = new_scheduler();
    if (!sched_) { err = "cannot create the scheduler"; return false; }
    resident_at_init_ = resident_bytes();
    return true;
}

ggml_backend_sched_t runner::new_scheduler() const {
    if (gpu_) {
        ggml_backend_t backends[2] = {gpu_, backend_}; // the CPU last: the fallback
        return ggml_backend_sched_new(backends, nullptr, 2, block_graph_nodes(), false, true);
    }
    ggml_backend_t             be   = backend_;
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    return ggml_backend_sched_new(&be, &buft, 1, block_graph_nodes(), false, false);
}

namespace {

// CPU seconds of the whole process (every pool thread): on a machine shared with other work a
// compute's wall time grows with their load, its CPU time much less (sdx bench --cpu-time)
double process_cpu_s() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

// The sd fusion rules match while the scheduler allocates a graph: sets the model's choice for the
// scope and restores the caller's setting after.
class fusion_scope {
  public:
    explicit fusion_scope(bool on) : before_(sd_ggml_fusion_enabled()) { sd_ggml_set_fusion_enabled(on); }
    ~fusion_scope() { sd_ggml_set_fusion_enabled(before_); }
    fusion_scope(const fusion_scope &)             = delete;
    fusion_scope & operator=(const fusion_scope &) = delete;

  private:
    bool before_;
};

struct block_graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf  = nullptr;
    block_inputs   in;
    ggml_tensor *  out = nullptr;
    void clear() {
        if (ctx) ggml_free(ctx);
        ctx = nullptr, gf = nullptr, in = block_inputs{}, out = nullptr;
    }
    ~block_graph() { clear(); }
};

bool build_graph(const model & m, const build_options & o, int blk, block_graph & g, std::string & err) {
    const size_t n = block_graph_nodes();
    ggml_init_params ip{ggml_tensor_overhead() * n + ggml_graph_overhead_custom(n, false), nullptr, true};
    g.ctx = ggml_init(ip);
    if (!g.ctx) { err = "out of memory (graph context)"; return false; }
    g.gf  = ggml_new_graph_custom(g.ctx, n, false);
    g.in  = new_inputs(g.ctx, m.cfg());
    g.out = build_block(g.ctx, g.gf, m, blk, g.in, o, err);
    return g.out != nullptr;
}

bool is_layout_only(ggml_op op) {
    return op == GGML_OP_NONE || op == GGML_OP_VIEW || op == GGML_OP_RESHAPE || op == GGML_OP_PERMUTE ||
           op == GGML_OP_TRANSPOSE;
}

// The first node that `be` has no kernel for (nullptr: none). The scheduler aborts the process
// on such a node, so the runner looks first.
ggml_tensor * first_unsupported(ggml_backend_t be, ggml_cgraph * gf) {
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i) {
        ggml_tensor * t = ggml_graph_node(gf, i);
        if (!is_layout_only(t->op) && !ggml_backend_supports_op(be, t)) return t;
    }
    return nullptr;
}

// Builds block `blk`'s graph for `be`. Without a kernel for sd_rope_apply (the sd CPU kernels not
// built: SD_CPU_EXTENSIONS=OFF, or not registered) the block uses the native RoPE op chain, which
// computes the same; any other node without a kernel (the INT8 operators have no native
// equivalent) is an error naming it. With an upstream ggml (no extension interface) the native
// chain is the only RoPE there is.
bool make_graph(const model & m, const build_options & requested, int blk, ggml_backend_t be, block_graph & g,
                std::string & err, bool * rope_ext_used = nullptr) {
    build_options o = requested;
    o.rope_ext      = o.rope_ext && sd_ggml_have_extensions();
    if (rope_ext_used) *rope_ext_used = o.rope_ext;
    if (!build_graph(m, o, blk, g, err)) return false;
    ggml_tensor * bad = first_unsupported(be, g.gf);
    if (bad && o.rope_ext && sd_node_is_rope_apply(bad)) {
        build_options native = o;
        native.rope_ext      = false;
        g.clear();
        if (rope_ext_used) *rope_ext_used = false;
        if (!build_graph(m, native, blk, g, err)) return false;
        bad = first_unsupported(be, g.gf);
    }
    if (!bad) return true;
    err = "block " + std::to_string(blk) + ": " + ggml_backend_name(be) + " has no kernel for node " + bad->name + " (" +
          sd_node_op_name(bad) + ")";
    if (sd_node_is_extension(bad)) {
        err += "; the sd CPU kernels are not in this build (configure with -DSD_CPU_EXTENSIONS=ON) or failed to"
               " register; F32 and BF16 weights run on native ops";
    }
    return false;
}

} // namespace

bool runner::forward(const model & m, const build_options & o, const std::vector<float> & x,
                     const std::vector<float> & tvec, result & r, std::string & err, const block_cb & cb) {
    const config & c = m.cfg();
    if (x.size() != (size_t) (c.hidden * c.tokens) || tvec.size() != (size_t) (6 * c.hidden)) {
        err = "input sizes do not match the model";
        return false;
    }
    const std::vector<float> pe  = build_pe(c);
    const float              one = 1.0f;
    r.out                         = x;
    r.block_s.clear();
    r.total_s = 0;
    r.cpu_s   = 0;
    r.aborted = false;
    const fusion_scope fusion(o.fusion);
    for (int i = 0; i < c.blocks; ++i) {
        block_graph g;
        if (!make_graph(m, o, i, backend_, g, err)) return false;
        ggml_backend_sched_reset(sched_);
        if (!ggml_backend_sched_alloc_graph(sched_, g.gf)) {
            err = "the scheduler could not allocate block " + std::to_string(i) + " (out of memory?)";
            return false;
        }
        ggml_backend_tensor_set(g.in.x, r.out.data(), 0, ggml_nbytes(g.in.x));
        ggml_backend_tensor_set(g.in.pe, pe.data(), 0, ggml_nbytes(g.in.pe));
        ggml_backend_tensor_set(g.in.tvec, tvec.data(), 0, ggml_nbytes(g.in.tvec));
        ggml_backend_tensor_set(g.in.one, &one, 0, sizeof(float));
        const double     c0 = process_cpu_s();
        const auto       t0 = std::chrono::steady_clock::now();
        enum ggml_status st = ggml_backend_sched_graph_compute(sched_, g.gf);
        const auto       t1 = std::chrono::steady_clock::now();
        r.cpu_s += process_cpu_s() - c0;
        if (st == GGML_STATUS_ABORTED) {
            r.aborted = true;
            err       = "interrupted in block " + std::to_string(i);
            ggml_backend_sched_reset(sched_);
            return false;
        }
        if (st != GGML_STATUS_SUCCESS) {
            err = "block " + std::to_string(i) + " failed to compute (status " + std::to_string((int) st) + ")";
            return false;
        }
        ggml_backend_tensor_get(g.out, r.out.data(), 0, ggml_nbytes(g.out));
        const double s = std::chrono::duration<double>(t1 - t0).count();
        r.block_s.push_back(s);
        r.total_s += s;
        if (cb) cb(i + 1, c.blocks);
    }
    ggml_backend_sched_reset(sched_);
    return true;
}

bool runner::plan(const model & m, const build_options & o, int blk, plan_info & p, std::string & err) {
    const fusion_scope fusion(o.fusion);
    block_graph g;
    if (!make_graph(m, o, blk, backend_, g, err, &p.rope_ext)) return false;
    ggml_backend_sched_reset(sched_);
    if (!ggml_backend_sched_alloc_graph(sched_, g.gf)) {
        err = "the scheduler could not allocate the block graph (out of memory?)";
        return false;
    }
    const int n = ggml_graph_n_nodes(g.gf);
    p.nodes.assign((size_t) n, node_row{});
    for (int i = 0; i < n; ++i) {
        ggml_tensor * t = ggml_graph_node(g.gf, i);
        node_row &    row = p.nodes[(size_t) i];
        row.index         = i;
        row.op            = sd_node_op_name(t);
        row.name          = t->name;
        ggml_backend_t be = ggml_backend_sched_get_tensor_backend(sched_, t);
        row.device        = be ? ggml_backend_name(be) : "-";
        row.mode          = "native";
        row.step          = -1;
        // the CPU backend's own choice for the ops with interchangeable kernels (which GEMM or
        // flash-attention kernel a native node runs), so a timing names what produced it
        if (be == backend_ && (t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_FLASH_ATTN_EXT)) {
            if (const char * k = sd_cpu_node_kernel(backend_, t)) row.kernel = k;
        }
        if (sd_node_is_quantize_i8_convrot(t)) p.n_quantize++;
    }
    p.n_steps = sd_sched_n_steps(sched_);
    for (int s = 0; s < p.n_steps; ++s) {
        sd_sched_step info{};
        if (!sd_sched_get_step(sched_, s, &info)) continue;
        p.workspace_bytes += info.workspace_bytes;
        p.workspace_max = std::max(p.workspace_max, info.workspace_bytes);
        if (info.kernel) {
            if (info.fused) { p.n_fused++; p.fused_rules.push_back(info.kernel); }
            else p.n_ext++;
        }
        for (int k = info.first_node; k < info.first_node + info.n_nodes && k < n; ++k) {
            node_row & row = p.nodes[(size_t) k];
            row.step       = s;
            row.device     = ggml_backend_name(info.backend);
            if (info.kernel) {
                row.mode   = info.fused ? "fused" : "extension";
                row.kernel = info.kernel;
            }
        }
    }
    p.buffer_bytes = ggml_backend_sched_get_buffer_size(sched_, backend_);
    if (gpu_) p.buffer_bytes += ggml_backend_sched_get_buffer_size(sched_, gpu_);
    ggml_backend_sched_reset(sched_);
    return true;
}

void runner::set_abort_callback(ggml_abort_callback cb, void * data) {
    ggml_backend_cpu_set_abort_callback(backend_, cb, data);
}

bool runner::measure(const model & m, const build_options & o, memory_use & u, std::string & err) {
    const fusion_scope fusion(o.fusion);
    block_graph        g;
    if (!make_graph(m, o, 0, backend_, g, err)) return false;
    // one size per scheduler backend (the CPU, and a GPU first with --device); summed: a
    // conservative host-memory bound (exact where the GPU's memory is host memory, as lavapipe's)
    // on a scratch scheduler: upstream ggml's reserve_size (0.15.3) leaves the allocator with
    // tensor assignments but no buffers, and the next alloc_graph of an equally sized graph on
    // that scheduler then writes through the missing buffer (a crash, seen in sdx run)
    ggml_backend_sched_t scratch = new_scheduler();
    if (!scratch) { err = "cannot create the scheduler"; return false; }
    std::vector<size_t> sizes((size_t) ggml_backend_sched_get_n_backends(scratch), 0);
    ggml_backend_sched_reserve_size(scratch, g.gf, sizes.data());
    ggml_backend_sched_free(scratch);
    u.compute_bytes = 0;
    for (size_t b : sizes) u.compute_bytes += b;
    // The executor's work buffer is internal to the CPU backend; bound it from the graph: the
    // largest mul_mat activation in F32 (what a conversion or packing can take at most) plus
    // room for per-thread weight panels and attention tiles.
    size_t work = 0;
    for (int i = 0; i < ggml_graph_n_nodes(g.gf); ++i) {
        const ggml_tensor * t = ggml_graph_node(g.gf, i);
        if (t->op != GGML_OP_MUL_MAT || !t->src[1]) continue;
        const size_t x = (size_t) ggml_nelements(t->src[1]) * sizeof(float);
        work           = std::max(work, x + x / 32); // + the packing's padding of rows and K

    }
    const size_t per_thread = (size_t) 4 << 20;
    u.cpu_work_bytes        = work + (size_t) std::max(1, sd_cpu_backend_n_threads(backend_)) * per_thread;
    return true;
}

void runner::set_profile(bool on) {
    profile_.clear();
    ggml_backend_sched_set_eval_callback(sched_, on ? &runner::eval_cb : nullptr, on ? this : nullptr);
}

bool runner::eval_cb(ggml_tensor * t, bool ask, void * user) {
    runner *     self = static_cast<runner *>(user);
    const double now  = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    if (ask) {
        // asked before the node runs: observe every node, so each chunk is one node
        self->node_t0_ = now;
        return true;
    }
    const std::string name = sd_node_op_name(t);
    auto it = std::find_if(self->profile_.begin(), self->profile_.end(), [&](const profile_row & r) { return r.op == name; });
    if (it == self->profile_.end()) {
        self->profile_.push_back(profile_row{name, 0, 0});
        it = self->profile_.end() - 1;
    }
    it->count++;
    it->seconds += now - self->node_t0_;
    return true;
}

double rel_rms(const std::vector<float> & a, const std::vector<float> & b) {
    double num = 0, den = 0;
    const size_t n = std::min(a.size(), b.size());
    for (size_t i = 0; i < n; ++i) {
        const double d = (double) a[i] - (double) b[i];
        num += d * d;
        den += (double) b[i] * (double) b[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

double rel_rms_update(const std::vector<float> & a, const std::vector<float> & b, const std::vector<float> & x) {
    double num = 0, den = 0;
    const size_t n = std::min(std::min(a.size(), b.size()), x.size());
    for (size_t i = 0; i < n; ++i) {
        const double d = (double) a[i] - (double) b[i], u = (double) b[i] - (double) x[i];
        num += d * d;
        den += u * u;
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

} // namespace krea2
