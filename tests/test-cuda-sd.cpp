// test-cuda-sd.cpp — the sd CUDA kernels (src/core/cuda) against the sd CPU kernels: every graph
// is run once on {CPU} and once on {CUDA, CPU} with the same input bytes, and the outputs are
// compared (bit for bit where the kernels promise it, else within the stated tolerance); the plan
// must show the CUDA kernel. Device tests print "no CUDA device" and are skipped without one.
//
// Host tests (no device needed): a GGML_CUDA build on a machine without a GPU registers the sd
// extensions cleanly (no crash, a clear status) and the CPU kernels still run.

#include "ggml_extensions.h"
#include "cuda/cuda_kernels.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml-ext.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h> // _exit in the death test

namespace {

// ---------------------------------------------------------------------------------------------
// Backends (one of each for the whole process)

struct backends {
    ggml_backend_t cpu = nullptr, cuda = nullptr;
    static backends & get() {
        static backends b;
        return b;
    }
    backends() {
        EXPECT_TRUE(sd_ggml_register_extensions());
        cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, 2);
        if (ggml_backend_cuda_get_device_count() > 0) cuda = ggml_backend_cuda_init(0);
    }
    void release() {
        if (cuda) ggml_backend_free(cuda);
        if (cpu) ggml_backend_free(cpu);
        cuda = cpu = nullptr;
    }
};

class BackendsFreer : public ::testing::Environment {
  public:
    void TearDown() override { backends::get().release(); }
};

class CudaSd : public ::testing::Test {
  protected:
    void SetUp() override {
        if (backends::get().cuda == nullptr) GTEST_SKIP() << "no CUDA device";
    }
};

// ---------------------------------------------------------------------------------------------
// Graphs: inputs are a function of their name and size, so both runs see the same bytes

enum class fill { normal, special_rows, positive, int8, int8_weight };

struct input_spec {
    ggml_tensor * t;
    fill          kind;
};

struct graph_case {
    ggml_context *             ctx = nullptr, *ctx_in = nullptr;
    ggml_backend_buffer_t      buf = nullptr;
    std::vector<input_spec>    inputs;
    ~graph_case() {
        if (ctx) ggml_free(ctx);
        if (ctx_in) ggml_free(ctx_in);
        if (buf) ggml_backend_buffer_free(buf);
    }
    ggml_tensor * input(const char * name, ggml_type type, std::vector<int64_t> ne, fill kind) {
        ggml_tensor * t = ggml_new_tensor(ctx_in, type, (int) ne.size(), ne.data());
        ggml_set_name(t, name);
        ggml_set_input(t);
        inputs.push_back({t, kind});
        return t;
    }
};

std::vector<uint8_t> input_bytes(const ggml_tensor * t, fill kind) {
    std::seed_seq        seed(t->name, t->name + strlen(t->name));
    std::mt19937         rng(seed);
    const size_t         n = (size_t) ggml_nelements(t);
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    if (t->type == GGML_TYPE_I8) {
        std::uniform_int_distribution<int> d(kind == fill::int8_weight ? -127 : -128, 127);
        for (size_t i = 0; i < n; ++i) bytes[i] = (uint8_t) (int8_t) d(rng);
        return bytes;
    }
    std::vector<float>                    v(n);
    std::normal_distribution<float>       nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.001f, 0.1f);
    for (size_t i = 0; i < n; ++i) v[i] = kind == fill::positive ? ud(rng) : nd(rng);
    if (kind == fill::special_rows) {
        // rows: 1 zeros, 2 one +Inf, 3 one NaN, 4 huge, 5 tiny values, 6 a single value
        const int64_t K = t->ne[0], rows = (int64_t) n / K;
        auto          row = [&](int64_t r) { return v.data() + r * K; };
        if (rows > 1) std::fill(row(1), row(1) + K, 0.0f);
        if (rows > 2) row(2)[K / 2] = INFINITY;
        if (rows > 3) row(3)[K - 1] = NAN;
        if (rows > 4) for (int64_t i = 0; i < K; ++i) row(4)[i] *= 1e30f;
        if (rows > 5) for (int64_t i = 0; i < K; ++i) row(5)[i] *= 1e-30f;
        if (rows > 6) {
            std::fill(row(6), row(6) + K, 0.0f);
            row(6)[0] = -3.0f;
        }
    }
    memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
}

struct run_result {
    std::vector<uint8_t>            out;
    std::vector<ggml_ext_step_info> steps;
    bool                            ok = false;
};

using builder = std::function<ggml_tensor *(graph_case &)>;

// Builds and runs the graph with the scheduler on {CUDA, CPU} (on_cuda) or {CPU}.
run_result run(bool on_cuda, const builder & build) {
    backends &       be = backends::get();
    run_result       res;
    graph_case       g;
    ggml_init_params ip{};
    ip.mem_size       = 64 * ggml_tensor_overhead() + ggml_graph_overhead();
    ip.no_alloc       = true;
    g.ctx             = ggml_init(ip);
    g.ctx_in          = ggml_init(ip);
    ggml_tensor * out = build(g);
    if (!out) {
        ADD_FAILURE() << "graph construction failed: " << ggml_ext_last_error();
        return res;
    }
    ggml_set_output(out);
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, out);
    g.buf = ggml_backend_alloc_ctx_tensors(g.ctx_in, on_cuda ? be.cuda : be.cpu);
    if (!g.buf) {
        ADD_FAILURE() << "input allocation failed";
        return res;
    }
    for (const input_spec & in : g.inputs) {
        const std::vector<uint8_t> b = input_bytes(in.t, in.kind);
        ggml_backend_tensor_set(in.t, b.data(), 0, b.size());
    }
    ggml_backend_t       list[2] = {be.cuda, be.cpu};
    ggml_backend_t *     bl      = on_cuda ? list : list + 1;
    ggml_backend_sched_t sched   = ggml_backend_sched_new(bl, nullptr, on_cuda ? 2 : 1, 256, false, true);
    if (!ggml_backend_sched_alloc_graph(sched, gf)) {
        ADD_FAILURE() << "sched_alloc_graph failed";
        ggml_backend_sched_free(sched);
        return res;
    }
    const ggml_status st = ggml_backend_sched_graph_compute(sched, gf);
    EXPECT_EQ(st, GGML_STATUS_SUCCESS);
    res.ok = st == GGML_STATUS_SUCCESS;
    res.out.resize(ggml_nbytes(out));
    ggml_backend_tensor_get(out, res.out.data(), 0, res.out.size());
    for (int i = 0; i < ggml_ext_sched_n_steps(sched); ++i) {
        ggml_ext_step_info info{};
        if (ggml_ext_sched_get_step(sched, i, &info)) res.steps.push_back(info);
    }
    ggml_backend_sched_free(sched);
    return res;
}

// `kernels` ran on the CUDA backend (each at least once).
void expect_cuda_kernels(const run_result & r, std::vector<std::string> kernels) {
    for (const ggml_ext_step_info & s : r.steps) {
        if (!s.kernel || s.backend != backends::get().cuda) continue;
        auto it = std::find(kernels.begin(), kernels.end(), std::string(s.kernel));
        if (it != kernels.end()) kernels.erase(it);
    }
    EXPECT_TRUE(kernels.empty()) << "expected CUDA kernel not in the plan: " << (kernels.empty() ? "" : kernels[0]);
}

void expect_same_bytes(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, size_t from, size_t to,
                       const char * what) {
    ASSERT_LE(to, a.size());
    ASSERT_LE(to, b.size());
    size_t bad = 0, first = 0;
    for (size_t i = from; i < to; ++i)
        if (a[i] != b[i] && bad++ == 0) first = i;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " bytes differ, first at byte " << first;
}

// F32 outputs bit for bit, except that any NaN equals any NaN: the GPU's arithmetic returns its
// canonical NaN where x86 propagates the operand's (rows whose scale is NaN: non-finite input).
void expect_same_f32(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, const char * what) {
    ASSERT_EQ(a.size(), b.size());
    const size_t n = a.size() / 4;
    size_t       bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i) {
        uint32_t x, y;
        memcpy(&x, a.data() + 4 * i, 4);
        memcpy(&y, b.data() + 4 * i, 4);
        const bool nan_x = (x & 0x7fffffffu) > 0x7f800000u, nan_y = (y & 0x7fffffffu) > 0x7f800000u;
        if (x != y && !(nan_x && nan_y) && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << n << " values differ, first at " << first;
}

// |a - b| <= tol * max(1, |a|) elementwise (F32), NaN where the other is NaN
void expect_close_f32(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, float tol, const char * what) {
    ASSERT_EQ(a.size(), b.size());
    const size_t n = a.size() / 4;
    size_t       bad = 0, first = 0;
    for (size_t i = 0; i < n; ++i) {
        float x, y;
        memcpy(&x, a.data() + 4 * i, 4);
        memcpy(&y, b.data() + 4 * i, 4);
        const bool ok = (std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= tol * std::max(1.0f, std::fabs(x));
        if (!ok && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << n << " values differ beyond " << tol << ", first at " << first;
}

int64_t pad4(int64_t x) { return (x + 3) / 4 * 4; }

// ---------------------------------------------------------------------------------------------
// Host: registration without a device

TEST(CudaSdHost, RegistrationWithoutDeviceSucceedsAndSaysSo) {
    ASSERT_TRUE(sd_ggml_register_extensions());
    ASSERT_TRUE(sd_ggml_register_extensions()); // idempotent
    const std::string status = sd_cuda_extensions_status();
    if (ggml_backend_cuda_get_device_count() == 0) {
        EXPECT_EQ(status, "no CUDA device");
    } else {
        EXPECT_EQ(status.rfind("registered on", 0), 0u) << status;
    }
    // other device kinds and no device: nothing to do, success
    EXPECT_TRUE(sd_register_cuda_extensions(nullptr));
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ASSERT_NE(cpu, nullptr);
    EXPECT_TRUE(sd_register_cuda_extensions(cpu));
    EXPECT_NE(ggml_backend_cuda_reg(), nullptr);
}

TEST(CudaSdHost, CpuKernelsRunInCudaBuildWithoutDevice) {
    const builder b = [](graph_case & g) {
        ggml_tensor * x  = g.input("x", GGML_TYPE_F32, {64, 2, 3, 1}, fill::normal);
        ggml_tensor * pe = g.input("pe", GGML_TYPE_F32, {2, 2, 32, 3}, fill::normal);
        return sd_rope_apply(g.ctx, x, pe, SD_ROPE_INTERLEAVED);
    };
    const run_result cpu = run(false, b);
    ASSERT_TRUE(cpu.ok);
    bool rope_kernel = false;
    for (const auto & s : cpu.steps) rope_kernel = rope_kernel || (s.kernel && std::string(s.kernel) == "sd.cpu.rope_apply");
    EXPECT_TRUE(rope_kernel);
}

// ---------------------------------------------------------------------------------------------
// sd.rope_apply.v1 (bit-identical) and the RMSNorm -> Mul -> RoPE [-> Scale -> F16] fusion

struct rope_param {
    int64_t d, H, L, N, n_freq;
    int     mode;
    bool    strided; // x is a permuted view (rows at a stride that is not d)
};

ggml_tensor * rope_input(graph_case & g, const rope_param & p) {
    if (!p.strided) return g.input("x", GGML_TYPE_F32, {p.d, p.H, p.L, p.N}, fill::normal);
    // [d, L, H, N] permuted to [d, H, L, N]: nb1 and nb2 swap (float-aligned, not contiguous)
    ggml_tensor * base = g.input("xb", GGML_TYPE_F32, {p.d, p.L, p.H, p.N}, fill::normal);
    return ggml_permute(g.ctx, base, 0, 2, 1, 3);
}

TEST_F(CudaSd, RopeApplyBitIdenticalToCpu) {
    const rope_param cases[] = {
        {128, 4, 8, 1, 64, SD_ROPE_INTERLEAVED, false}, {128, 4, 8, 1, 64, SD_ROPE_SPLIT_HALF, false},
        {128, 3, 5, 2, 40, SD_ROPE_INTERLEAVED, true},  {96, 3, 5, 2, 17, SD_ROPE_SPLIT_HALF, true},
        {128, 48, 4, 1, 64, SD_ROPE_INTERLEAVED, false}, // hidden 6144 = 48 heads x 128, a few tokens
        {6, 1, 3, 1, 1, SD_ROPE_INTERLEAVED, false},
    };
    for (const rope_param & p : cases) {
        SCOPED_TRACE("d " + std::to_string(p.d) + " H " + std::to_string(p.H) + " n_freq " + std::to_string(p.n_freq) +
                     " mode " + std::to_string(p.mode) + (p.strided ? " strided" : ""));
        const builder b = [&](graph_case & g) {
            ggml_tensor * x  = rope_input(g, p);
            ggml_tensor * pe = g.input("pe", GGML_TYPE_F32, {2, 2, p.n_freq, p.L}, fill::normal);
            return sd_rope_apply(g.ctx, x, pe, p.mode);
        };
        const run_result cpu = run(false, b), cu = run(true, b);
        ASSERT_TRUE(cpu.ok && cu.ok);
        expect_cuda_kernels(cu, {SD_CUDA_KERNEL_ROPE_APPLY});
        expect_same_f32(cpu.out, cu.out, "rope output");
    }
}

// Against the CPU chain: the double sum of squares in another order (and, on the CPU's fast path,
// a float scale), so a relative tolerance of a few ulps.
TEST_F(CudaSd, RmsNormMulRopeFusionMatchesCpu) {
    for (const bool scale : {false, true}) {
        for (const bool f16 : {false, true}) {
            for (const int mode : {SD_ROPE_INTERLEAVED, SD_ROPE_SPLIT_HALF}) {
                const rope_param p = {128, 48, 4, 1, 64, mode, true};
                SCOPED_TRACE(std::string("scale ") + (scale ? "1" : "0") + " f16 " + (f16 ? "1" : "0") + " mode " +
                             std::to_string(mode));
                const builder b = [&](graph_case & g) {
                    ggml_tensor * x  = rope_input(g, p);
                    ggml_tensor * w  = g.input("w", GGML_TYPE_F32, {p.d}, fill::normal);
                    ggml_tensor * pe = g.input("pe", GGML_TYPE_F32, {2, 2, p.n_freq, p.L}, fill::normal);
                    ggml_tensor * y  = sd_rope_apply(g.ctx, ggml_mul(g.ctx, ggml_rms_norm(g.ctx, x, 1e-6f), w), pe, mode);
                    if (scale) y = ggml_scale(g.ctx, y, 0.125f);
                    if (f16) y = ggml_cpy(g.ctx, y, ggml_new_tensor(g.ctx, GGML_TYPE_F16, 4, y->ne));
                    return f16 ? ggml_cast(g.ctx, y, GGML_TYPE_F32) : y; // compare as F32
                };
                const run_result cpu = run(false, b), cu = run(true, b);
                ASSERT_TRUE(cpu.ok && cu.ok);
                expect_cuda_kernels(cu, {SD_CUDA_KERNEL_RMS_NORM_MUL_ROPE});
                expect_close_f32(cpu.out, cu.out, f16 ? 1e-3f : 1e-5f, "fused rope output");
            }
        }
    }
}

// On the device itself the fusion reproduces the native RMS_NORM -> MUL -> RoPE [-> SCALE -> CPY]
// chain bit for bit: fusion on equals fusion off.
TEST_F(CudaSd, RmsNormMulRopeFusionEqualsUnfusedOnDevice) {
    for (const bool tail : {false, true}) {
        for (const bool strided : {false, true}) {
            const rope_param p = {128, 48, 4, 1, 56, SD_ROPE_SPLIT_HALF, strided};
            SCOPED_TRACE(std::string(tail ? "scale + f16" : "plain") + (strided ? " strided" : ""));
            const builder b = [&](graph_case & g) {
                ggml_tensor * x  = rope_input(g, p);
                ggml_tensor * w  = g.input("w", GGML_TYPE_F32, {p.d}, fill::normal);
                ggml_tensor * pe = g.input("pe", GGML_TYPE_F32, {2, 2, p.n_freq, p.L}, fill::normal);
                ggml_tensor * y  = sd_rope_apply(g.ctx, ggml_mul(g.ctx, ggml_rms_norm(g.ctx, x, 1e-6f), w), pe, p.mode);
                if (!tail) return y;
                y = ggml_scale(g.ctx, y, 0.125f);
                return ggml_cpy(g.ctx, y, ggml_new_tensor(g.ctx, GGML_TYPE_F16, 4, y->ne));
            };
            const run_result fused = run(true, b);
            sd_ggml_set_fusion_enabled(false);
            const run_result plain = run(true, b);
            sd_ggml_set_fusion_enabled(true);
            ASSERT_TRUE(fused.ok && plain.ok);
            expect_cuda_kernels(fused, {SD_CUDA_KERNEL_RMS_NORM_MUL_ROPE});
            for (const auto & s : plain.steps)
                EXPECT_FALSE(s.kernel && std::string(s.kernel) == SD_CUDA_KERNEL_RMS_NORM_MUL_ROPE);
            expect_same_bytes(fused.out, plain.out, 0, fused.out.size(), "fusion on vs off");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// sd.quantize_i8_convrot.v1 (bit-identical, including zero / non-finite / extreme rows)

void expect_packed_equal(const std::vector<uint8_t> & cpu, const std::vector<uint8_t> & cu, int64_t K, int64_t rows) {
    expect_same_bytes(cpu, cu, 0, (size_t) (K * rows), "quantized rows");
    expect_same_bytes(cpu, cu, (size_t) (K * rows), (size_t) (K * pad4(rows)), "padding rows");
    expect_same_bytes(cpu, cu, (size_t) (K * pad4(rows)), (size_t) (K * pad4(rows) + 4 * rows), "row scales");
}

TEST_F(CudaSd, QuantizeConvRotBitIdenticalToCpu) {
    struct qp {
        int64_t K, rows;
        int     group;
    };
    const qp cases[] = {
        {4, 3, 1},       {20, 6, 4},       {48, 11, 16},    {192, 9, 64},     {256, 13, 256},   {768, 7, 256},
        {1024, 5, 1024}, {3072, 9, 256},   {6144, 9, 256},  {16384, 7, 256},  {16384, 7, 4096}, {16384, 3, 16384},
        {3072, 7, 1},    {16640, 7, 256},
    };
    for (const qp & p : cases) {
        SCOPED_TRACE("K " + std::to_string(p.K) + " rows " + std::to_string(p.rows) + " group " + std::to_string(p.group));
        const builder b = [&](graph_case & g) {
            ggml_tensor * x = g.input("x", GGML_TYPE_F32, {p.K, p.rows}, fill::special_rows);
            return ggml_quantize_i8_convrot(g.ctx, x, p.group);
        };
        const run_result cpu = run(false, b), cu = run(true, b);
        ASSERT_TRUE(cpu.ok && cu.ok);
        expect_cuda_kernels(cu, {SD_CUDA_KERNEL_QUANTIZE_I8});
        expect_packed_equal(cpu.out, cu.out, p.K, p.rows);
    }
}

// ---------------------------------------------------------------------------------------------
// sd.linear_i8.v1 (bit-identical: exact int32 sums, the same epilogue order)

struct linear_param {
    int64_t K, N, rows;
    int     kind;
    int     group;
    bool    wscale, bias;
};

ggml_tensor * build_linear(graph_case & g, const linear_param & p) {
    ggml_tensor * w  = g.input("w", GGML_TYPE_I8, {p.K, p.N}, fill::int8_weight);
    ggml_tensor * sw = p.wscale ? g.input("sw", GGML_TYPE_F32, {p.N}, fill::positive) : nullptr;
    ggml_tensor * b  = p.bias ? g.input("b", GGML_TYPE_F32, {p.N}, fill::normal) : nullptr;
    switch (p.kind) {
        case SD_LINEAR_I8_INPUT_F32: {
            ggml_tensor * x = g.input("x", GGML_TYPE_F32, {p.K, p.rows}, fill::special_rows);
            return ggml_mul_mat_i8_tensorwise(g.ctx, w, x, sw, b, p.group);
        }
        case SD_LINEAR_I8_INPUT_PACKED: {
            ggml_tensor * x = g.input("x", GGML_TYPE_F32, {p.K, p.rows}, fill::special_rows);
            return ggml_mul_mat_i8_tensorwise(g.ctx, w, ggml_quantize_i8_convrot(g.ctx, x, p.group), sw, b, p.group);
        }
        default: {
            ggml_tensor * x  = g.input("xi", GGML_TYPE_I8, {p.K, p.rows}, fill::int8);
            ggml_tensor * sx = g.input("sx", GGML_TYPE_F32, {p.rows}, fill::positive);
            return ggml_mul_mat_i8_tensorwise(g.ctx, w, x, sw, b, 0, sx);
        }
    }
}

TEST_F(CudaSd, LinearI8BitIdenticalToCpu) {
    const linear_param cases[] = {
        {256, 64, 16, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {256, 32, 9, SD_LINEAR_I8_INPUT_F32, 256, true, true},
        {64, 8, 6, SD_LINEAR_I8_INPUT_F32, 16, false, true},
        {256, 20, 11, SD_LINEAR_I8_INPUT_I8, 0, true, true},
        {36, 4, 3, SD_LINEAR_I8_INPUT_I8, 0, false, false},
        // real widths: hidden 6144, MLP 16384, a few tokens
        {3072, 6144, 5, SD_LINEAR_I8_INPUT_F32, 256, true, true},
        {6144, 6144, 7, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {16384, 6144, 4, SD_LINEAR_I8_INPUT_PACKED, 256, true, false},
        {6144, 3072, 3, SD_LINEAR_I8_INPUT_I8, 0, true, true},
    };
    for (const linear_param & p : cases) {
        SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + " rows " + std::to_string(p.rows) +
                     " kind " + std::to_string(p.kind));
        const builder    b   = [&](graph_case & g) { return build_linear(g, p); };
        const run_result cpu = run(false, b), cu = run(true, b);
        ASSERT_TRUE(cpu.ok && cu.ok);
        expect_cuda_kernels(cu, {SD_CUDA_KERNEL_LINEAR_I8});
        expect_same_f32(cpu.out, cu.out, "linear output");
    }
}

// K or N not a multiple of 4: the CUDA kernel declines and the CPU runs the node (same bytes).
TEST_F(CudaSd, LinearI8UnsupportedShapeFallsBackToCpu) {
    const linear_param p   = {36, 5, 3, SD_LINEAR_I8_INPUT_I8, 0, true, false};
    const builder      b   = [&](graph_case & g) { return build_linear(g, p); };
    const run_result   cpu = run(false, b), cu = run(true, b);
    ASSERT_TRUE(cpu.ok && cu.ok);
    for (const auto & s : cu.steps) EXPECT_FALSE(s.kernel && std::string(s.kernel) == SD_CUDA_KERNEL_LINEAR_I8);
    expect_same_f32(cpu.out, cu.out, "fallback output");
}

// Linear -> Mul(gate) -> Add(residual), and Linear -> Add(residual): separate FP32 rounding
TEST_F(CudaSd, LinearI8GateResidualFusionBitIdenticalToCpu) {
    const linear_param cases[] = {
        {256, 64, 9, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {6144, 6144, 5, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {16384, 6144, 3, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {3072, 3072, 4, SD_LINEAR_I8_INPUT_I8, 0, true, false},
    };
    for (const linear_param & p : cases) {
        for (const bool with_gate : {true, false}) {
            SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + (with_gate ? " gate" : ""));
            const builder b = [&](graph_case & g) {
                ggml_tensor * y    = build_linear(g, p);
                ggml_tensor * gate = g.input("gate", GGML_TYPE_F32, {p.N}, fill::normal);
                ggml_tensor * res  = g.input("res", GGML_TYPE_F32, {p.N, p.rows}, fill::normal);
                if (with_gate) y = ggml_mul(g.ctx, y, gate);
                return ggml_add(g.ctx, res, y);
            };
            const run_result cpu = run(false, b), cu = run(true, b);
            ASSERT_TRUE(cpu.ok && cu.ok);
            expect_cuda_kernels(cu, {SD_CUDA_KERNEL_LINEAR_I8_GATE_RES});
            expect_same_f32(cpu.out, cu.out, "fused output");
        }
    }
}

// The gate computed after the linear (independent work inside the chain): the graph-delay rule
// gathers the chain so it still fuses.
TEST_F(CudaSd, LinearI8GateResidualGraphDelayGathersSplitChain) {
    const linear_param p = {3072, 3072, 4, SD_LINEAR_I8_INPUT_PACKED, 256, true, true};
    const builder      b = [&](graph_case & g) {
        ggml_tensor * y    = build_linear(g, p);
        ggml_tensor * gate = ggml_scale(g.ctx, g.input("gate", GGML_TYPE_F32, {p.N}, fill::normal), 0.5f);
        ggml_tensor * res  = g.input("res", GGML_TYPE_F32, {p.N, p.rows}, fill::normal);
        return ggml_add(g.ctx, res, ggml_mul(g.ctx, y, gate));
    };
    const run_result cpu = run(false, b), cu = run(true, b);
    ASSERT_TRUE(cpu.ok && cu.ok);
    expect_cuda_kernels(cu, {SD_CUDA_KERNEL_LINEAR_I8_GATE_RES});
    expect_same_f32(cpu.out, cu.out, "fused output");
}

// ---------------------------------------------------------------------------------------------
// FP32 Mul(gate) -> Add(residual) (affine.cu): the native MUL and ADD roundings

TEST_F(CudaSd, MulGateAddResidualFusionBitIdenticalToCpu) {
    const std::vector<int64_t> gate_shapes[] = {{6144, 1, 1}, {6144, 5, 1}, {1, 5, 1}, {6144, 5, 2}};
    for (const auto & gs : gate_shapes) {
        SCOPED_TRACE("gate [" + std::to_string(gs[0]) + ", " + std::to_string(gs[1]) + ", " + std::to_string(gs[2]) + "]");
        const builder b = [&](graph_case & g) {
            ggml_tensor * x    = g.input("x", GGML_TYPE_F32, {6144, 5, 2}, fill::normal);
            ggml_tensor * gate = g.input("gate", GGML_TYPE_F32, {gs[0], gs[1], gs[2]}, fill::normal);
            ggml_tensor * res  = g.input("res", GGML_TYPE_F32, {6144, 5, 2}, fill::normal);
            return ggml_add(g.ctx, res, ggml_mul(g.ctx, x, gate));
        };
        const run_result cpu = run(false, b), cu = run(true, b);
        ASSERT_TRUE(cpu.ok && cu.ok);
        expect_cuda_kernels(cu, {SD_CUDA_KERNEL_MUL_ADD});
        expect_same_f32(cpu.out, cu.out, "mul/add output");
    }
}

// ---------------------------------------------------------------------------------------------
// Scale / Norm -> Mul / modulation / SwiGLU / SiLU|Sigmoid -> Mul -> ConvRot (convrot_fusion.cu)

enum class act_chain { scale, scale_bias, rms_norm_mul, norm_mul, modulation, swiglu_packed, swiglu_swapped,
                       swiglu_split, silu_mul, sigmoid_mul };

const char * chain_name(act_chain c) {
    switch (c) {
        case act_chain::scale: return "scale";
        case act_chain::scale_bias: return "scale_bias";
        case act_chain::rms_norm_mul: return "rms_norm_mul";
        case act_chain::norm_mul: return "norm_mul";
        case act_chain::modulation: return "modulation";
        case act_chain::swiglu_packed: return "swiglu_packed";
        case act_chain::swiglu_swapped: return "swiglu_swapped";
        case act_chain::swiglu_split: return "swiglu_split";
        case act_chain::silu_mul: return "silu_mul";
        default: return "sigmoid_mul";
    }
}

const char * chain_kernel(act_chain c) {
    switch (c) {
        case act_chain::scale:
        case act_chain::scale_bias: return SD_CUDA_KERNEL_SCALE_QUANTIZE;
        case act_chain::rms_norm_mul:
        case act_chain::norm_mul:
        case act_chain::modulation: return SD_CUDA_KERNEL_NORM_QUANTIZE;
        case act_chain::swiglu_packed:
        case act_chain::swiglu_swapped:
        case act_chain::swiglu_split: return SD_CUDA_KERNEL_SWIGLU_QUANTIZE;
        default: return SD_CUDA_KERNEL_GATE_MUL_QUANTIZE;
    }
}

// The chain's F32 row values [K, rows] built in ctx from inputs made by `in` (name, ne).
ggml_tensor * build_act_chain(ggml_context * ctx, act_chain c, int64_t K, int64_t rows,
                              const std::function<ggml_tensor *(const char *, std::vector<int64_t>)> & in) {
    switch (c) {
        case act_chain::scale: return ggml_scale(ctx, in("x", {K, rows}), 0.125f);
        case act_chain::scale_bias: return ggml_scale_bias(ctx, in("x", {K, rows}), 0.75f, 0.25f);
        case act_chain::rms_norm_mul: return ggml_mul(ctx, ggml_rms_norm(ctx, in("x", {K, rows}), 1e-6f), in("w", {K}));
        case act_chain::norm_mul: return ggml_mul(ctx, ggml_norm(ctx, in("x", {K, rows}), 1e-6f), in("w", {K}));
        case act_chain::modulation: {
            ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, in("x", {K, rows}), 1e-6f), in("w", {K}));
            ggml_tensor * t = ggml_mul(ctx, h, in("ms", {K}));
            return ggml_add(ctx, ggml_add(ctx, h, t), in("sh", {K}));
        }
        case act_chain::swiglu_packed: return ggml_swiglu(ctx, in("gu", {2 * K, rows}));
        case act_chain::swiglu_swapped: return ggml_swiglu_swapped(ctx, in("gu", {2 * K, rows}));
        case act_chain::swiglu_split: return ggml_swiglu_split(ctx, in("g", {K, rows}), in("up", {K, rows}));
        case act_chain::silu_mul: return ggml_mul(ctx, ggml_silu(ctx, in("g", {K, rows})), in("up", {K, rows}));
        default: return ggml_mul(ctx, in("a", {K, rows}), ggml_sigmoid(ctx, in("g", {K, rows})));
    }
}

const act_chain kAllChains[] = {act_chain::scale,         act_chain::scale_bias,     act_chain::rms_norm_mul,
                                act_chain::norm_mul,      act_chain::modulation,     act_chain::swiglu_packed,
                                act_chain::swiglu_swapped, act_chain::swiglu_split,  act_chain::silu_mul,
                                act_chain::sigmoid_mul};

// Packed ConvRot outputs within one quantization step: every I8 value within 1, the row scales
// within a relative 1e-4 (NaN where the other is NaN), the padding rows identical.
void expect_packed_within_one_step(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, int64_t K,
                                   int64_t rows) {
    ASSERT_EQ(a.size(), b.size());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < (size_t) (K * rows); ++i) {
        if (std::abs((int) (int8_t) a[i] - (int) (int8_t) b[i]) > 1 && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << "quantized values more than one step apart: " << bad << ", first at " << first;
    expect_same_bytes(a, b, (size_t) (K * rows), (size_t) (K * pad4(rows)), "padding rows");
    for (int64_t r = 0; r < rows; ++r) {
        float x, y;
        memcpy(&x, a.data() + K * pad4(rows) + 4 * r, 4);
        memcpy(&y, b.data() + K * pad4(rows) + 4 * r, 4);
        const bool ok = (std::isnan(x) && std::isnan(y)) || std::fabs(x - y) <= 1e-4f * std::fabs(x);
        EXPECT_TRUE(ok) << "row " << r << " scale " << x << " vs " << y;
    }
}

// Every fusion on the device equals the unfused chain on the device (fusion off: the native
// operators, then sd.cuda.quantize_i8_convrot) bit for bit, and is within one quantization step
// of the CPU chain; hidden 3072 and MLP 16384 rows, groups 256 and 1024.
TEST_F(CudaSd, ConvRotFusionsEqualUnfusedOnDeviceAndMatchCpu) {
    const int64_t rows = 5;
    for (const act_chain c : kAllChains) {
        for (const int64_t K : {3072, 16384}) {
            for (const int group : {256, 1024}) {
                SCOPED_TRACE(std::string(chain_name(c)) + " K " + std::to_string(K) + " group " +
                             std::to_string(group));
                const builder b = [&](graph_case & g) {
                    const auto in = [&](const char * name, std::vector<int64_t> ne) {
                        return g.input(name, GGML_TYPE_F32, ne, fill::normal);
                    };
                    ggml_tensor * a = build_act_chain(g.ctx, c, K, rows, in);
                    return ggml_quantize_i8_convrot(g.ctx, a, group);
                };
                const run_result fused = run(true, b);
                sd_ggml_set_fusion_enabled(false);
                const run_result plain = run(true, b);
                sd_ggml_set_fusion_enabled(true);
                const run_result cpu = run(false, b);
                ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
                expect_cuda_kernels(fused, {chain_kernel(c)});
                expect_cuda_kernels(plain, {SD_CUDA_KERNEL_QUANTIZE_I8});
                expect_same_bytes(fused.out, plain.out, 0, fused.out.size(), "fusion on vs off");
                expect_packed_within_one_step(cpu.out, fused.out, K, rows);
            }
        }
    }
}

// Group 16384 (one group per MLP row: the quantizer's 64 KiB shared-memory chunk) through the norm
// and SwiGLU fusions.
TEST_F(CudaSd, ConvRotFusionsWholeRowGroupEqualUnfusedOnDevice) {
    for (const act_chain c : {act_chain::modulation, act_chain::swiglu_packed}) {
        SCOPED_TRACE(chain_name(c));
        const builder b = [&](graph_case & g) {
            ggml_tensor * a = build_act_chain(g.ctx, c, 16384, 3, [&](const char * name, std::vector<int64_t> ne) {
                return g.input(name, GGML_TYPE_F32, ne, fill::normal);
            });
            return ggml_quantize_i8_convrot(g.ctx, a, 16384);
        };
        const run_result fused = run(true, b);
        sd_ggml_set_fusion_enabled(false);
        const run_result plain = run(true, b);
        sd_ggml_set_fusion_enabled(true);
        ASSERT_TRUE(fused.ok && plain.ok);
        expect_cuda_kernels(fused, {chain_kernel(c)});
        expect_same_bytes(fused.out, plain.out, 0, fused.out.size(), "fusion on vs off");
    }
}

// Zero, non-finite, huge and tiny rows through the Scale and modulated-norm chains: the same NaN
// rows and zero rows as the unfused chain.
TEST_F(CudaSd, ConvRotFusionsSpecialRowsEqualUnfusedOnDevice) {
    for (const act_chain c : {act_chain::scale, act_chain::modulation, act_chain::silu_mul}) {
        SCOPED_TRACE(chain_name(c));
        const builder b = [&](graph_case & g) {
            ggml_tensor * a = build_act_chain(g.ctx, c, 3072, 7, [&](const char * name, std::vector<int64_t> ne) {
                return g.input(name, GGML_TYPE_F32, ne, ne.size() > 1 ? fill::special_rows : fill::normal);
            });
            return ggml_quantize_i8_convrot(g.ctx, a, 256);
        };
        const run_result fused = run(true, b);
        sd_ggml_set_fusion_enabled(false);
        const run_result plain = run(true, b);
        sd_ggml_set_fusion_enabled(true);
        ASSERT_TRUE(fused.ok && plain.ok);
        expect_cuda_kernels(fused, {chain_kernel(c)});
        expect_same_bytes(fused.out, plain.out, 0, fused.out.size(), "fusion on vs off");
    }
}

// SwiGLU as SILU(gate) built before the up projection: the graph-delay rule moves the activation
// next to its MUL so the chain fuses (and still equals the unfused chain).
TEST_F(CudaSd, ConvRotGateMulGraphDelayFusesSplitSwiGLU) {
    const builder b = [](graph_case & g) {
        ggml_tensor * s  = ggml_silu(g.ctx, g.input("g", GGML_TYPE_F32, {3072, 4}, fill::normal));
        ggml_tensor * up = ggml_scale(g.ctx, g.input("up", GGML_TYPE_F32, {3072, 4}, fill::normal), 0.5f);
        return ggml_quantize_i8_convrot(g.ctx, ggml_mul(g.ctx, s, up), 256);
    };
    const run_result fused = run(true, b);
    sd_ggml_set_fusion_enabled(false);
    const run_result plain = run(true, b);
    sd_ggml_set_fusion_enabled(true);
    ASSERT_TRUE(fused.ok && plain.ok);
    expect_cuda_kernels(fused, {SD_CUDA_KERNEL_GATE_MUL_QUANTIZE});
    expect_same_bytes(fused.out, plain.out, 0, fused.out.size(), "fusion on vs off");
}

// Host (no device): the rules' matches on graphs built in a CPU context (no allocation).
struct host_graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf  = nullptr;
    host_graph() {
        ggml_init_params ip{};
        ip.mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead();
        ip.no_alloc = true;
        ctx         = ggml_init(ip);
        gf          = ggml_new_graph(ctx);
    }
    ~host_graph() { ggml_free(ctx); }
    ggml_tensor * in(const char * name, std::vector<int64_t> ne) {
        ggml_tensor * t = ggml_new_tensor(ctx, GGML_TYPE_F32, (int) ne.size(), ne.data());
        ggml_set_name(t, name);
        return t;
    }
    int index_of(const ggml_tensor * t) const {
        for (int i = 0; i < ggml_graph_n_nodes(gf); ++i)
            if (ggml_graph_node(gf, i) == t) return i;
        return -1;
    }
};

int expected_length(act_chain c) {
    switch (c) {
        case act_chain::rms_norm_mul:
        case act_chain::norm_mul:
        case act_chain::silu_mul:
        case act_chain::sigmoid_mul: return 3;
        case act_chain::modulation: return 6;
        default: return 2;
    }
}

TEST(CudaSdHost, ConvRotFusionRulesMatchEveryChain) {
    for (const act_chain c : kAllChains) {
        SCOPED_TRACE(chain_name(c));
        host_graph    h;
        ggml_tensor * a =
            build_act_chain(h.ctx, c, 3072, 5, [&](const char * n, std::vector<int64_t> ne) { return h.in(n, ne); });
        ggml_build_forward_expand(h.gf, ggml_quantize_i8_convrot(h.ctx, a, 256));
        const int n = ggml_graph_n_nodes(h.gf);
        ASSERT_EQ(n, expected_length(c));
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, 0), expected_length(c));
        // the sd fusion switch turns every rule off
        sd_ggml_set_fusion_enabled(false);
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, 0), 0);
        sd_ggml_set_fusion_enabled(true);
    }
}

// Rows longer than the fused kernel takes, broadcast operands and chains without the quantizer
// retain ordinary execution (no match).
TEST(CudaSdHost, ConvRotFusionRulesRejectLongRowsAndOtherShapes) {
    {
        host_graph    h; // a long row
        ggml_tensor * a = ggml_scale(h.ctx, h.in("x", {131072, 2}), 0.5f);
        ggml_build_forward_expand(h.gf, ggml_quantize_i8_convrot(h.ctx, a, 256));
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, 0), 0);
    }
    {
        host_graph    h; // a per-row weight is not the channel vector of the norm rule
        ggml_tensor * a = ggml_mul(h.ctx, ggml_rms_norm(h.ctx, h.in("x", {3072, 4}), 1e-6f), h.in("w", {3072, 4}));
        ggml_build_forward_expand(h.gf, ggml_quantize_i8_convrot(h.ctx, a, 256));
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, 0), 0);
    }
    {
        host_graph    h; // a GELU gate is not this rule
        ggml_tensor * a = ggml_mul(h.ctx, ggml_gelu(h.ctx, h.in("g", {3072, 4})), h.in("up", {3072, 4}));
        ggml_build_forward_expand(h.gf, ggml_quantize_i8_convrot(h.ctx, a, 256));
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, 0), 0);
    }
    {
        host_graph    h; // no quantizer after the chain
        ggml_build_forward_expand(h.gf, ggml_mul(h.ctx, ggml_silu(h.ctx, h.in("g", {3072, 4})), h.in("up", {3072, 4})));
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, 0), 0);
    }
}

// GGML_CUDA_DISABLE_FUSION turns every rule off. The switch is read once per process, so the
// check runs in a fresh process (a "threadsafe" death test re-executes this binary).
TEST(CudaSdHost, ConvRotFusionHonorsCudaDisableFusion) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            setenv("GGML_CUDA_DISABLE_FUSION", "1", 1);
            host_graph    h;
            ggml_tensor * a = ggml_scale(h.ctx, h.in("x", {3072, 4}), 0.5f);
            ggml_build_forward_expand(h.gf, ggml_quantize_i8_convrot(h.ctx, a, 256));
            _exit(sd_cuda::convrot_fusion_chain_length(h.gf, 0) == 0 ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

// The graph-delay passes: SILU built before the up projection moves next to its MUL; a
// modulation chain whose vectors are computed inside it is gathered.
TEST(CudaSdHost, ConvRotFusionGraphDelayGathersSwiGLUAndModulation) {
    {
        host_graph    h;
        ggml_tensor * s  = ggml_silu(h.ctx, h.in("g", {3072, 4}));
        ggml_tensor * up = ggml_scale(h.ctx, h.in("up", {3072, 4}), 0.5f);
        ggml_build_forward_expand(h.gf, ggml_quantize_i8_convrot(h.ctx, ggml_mul(h.ctx, s, up), 256));
        ASSERT_EQ(h.index_of(s), 0);
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, 0), 0);
        sd_cuda::convrot_fusion_optimize(h.gf);
        EXPECT_EQ(h.index_of(up), 0);
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, h.index_of(s)), 3);
    }
    {
        host_graph    h;
        ggml_tensor * norm = ggml_rms_norm(h.ctx, h.in("x", {3072, 4}), 1e-6f);
        ggml_tensor * hw   = ggml_mul(h.ctx, norm, h.in("w", {3072}));
        ggml_tensor * ms   = ggml_scale(h.ctx, h.in("ms_in", {3072}), 0.5f); // produced inside the chain
        ggml_tensor * t    = ggml_mul(h.ctx, hw, ms);
        ggml_tensor * sh   = ggml_scale(h.ctx, h.in("sh_in", {3072}), 2.0f);
        ggml_tensor * a    = ggml_add(h.ctx, ggml_add(h.ctx, hw, t), sh);
        ggml_build_forward_expand(h.gf, ggml_quantize_i8_convrot(h.ctx, a, 256));
        ASSERT_EQ(h.index_of(norm), 0);
        EXPECT_NE(sd_cuda::convrot_fusion_chain_length(h.gf, 0), 6);
        sd_cuda::convrot_fusion_optimize(h.gf);
        EXPECT_EQ(sd_cuda::convrot_fusion_chain_length(h.gf, h.index_of(norm)), 6);
        EXPECT_LT(h.index_of(ms), h.index_of(norm));
    }
}

} // namespace

int main(int argc, char ** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new BackendsFreer);
    return RUN_ALL_TESTS();
}
