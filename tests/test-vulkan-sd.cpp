// test-vulkan-sd.cpp — the sd Vulkan kernels (src/core/vulkan) against the sd CPU kernels on the
// same inputs, in ONE process (lavapipe compiles each pipeline once per process):
// * sd.quantize_i8_convrot.v1: packed bytes, zero padding rows and F32 row scales bit-identical
//   to the CPU quantizer (every power-of-4 group: 1..256 in registers, 1024 / 4096 / 16384
//   through scratch rows; odd row counts, zero / non-finite / extreme rows, views);
// * sd.linear_i8.v1 on packed ConvRot activations, plain I8 + input_scale, and F32 activations
//   quantized in the workspace: outputs bit-identical to the CPU (the int32 sums are exact and
//   the epilogue runs the same steps in the same order);
// * every node of the graph runs on the Vulkan device (the plan's steps say so), unsupported
//   layouts are declined (supports() false) and run on the CPU through the scheduler;
// * outputs placed over their inputs (allocator-style aliasing) give the non-aliased result.
// The Khronos validation layer is on (GGML_VK_VALIDATE=1, set by main); any message it reports
// fails the running test. No Vulkan device is a failure, never a skip.

#include "ggml_extensions.h"
#include "vulkan/int8.h"
#include "vulkan/norm_quant.h"
#include "vulkan/rope.h"
#include "vulkan/vk_service.h"

#include "model/krea2.h"
#include "model/runner.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml-vulkan.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

// ---------------------------------------------------------------------------------------------
// Backends (one of each for the whole process)

struct backends {
    ggml_backend_t cpu = nullptr, vk = nullptr;
    static backends & get() {
        static backends b;
        return b;
    }
    backends() {
        EXPECT_TRUE(sd_ggml_register_extensions());
        cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, 2);
        if (ggml_backend_vk_get_device_count() > 0) {
            vk = ggml_backend_vk_init(0);
            // the registration entry point covers this device when the Vulkan registrar is in
            // SD_BACKEND_EXTENSIONS; calling it directly is idempotent
            EXPECT_TRUE(sd_vulkan_register_int8(ggml_backend_get_device(vk)));
            EXPECT_TRUE(sd_vulkan_register_rope(ggml_backend_get_device(vk)));
            EXPECT_TRUE(sd_vulkan_register_norm_quant(ggml_backend_get_device(vk)));
        }
    }
    void release() {
        if (vk) ggml_backend_free(vk);
        if (cpu) ggml_backend_free(cpu);
        vk = cpu = nullptr;
    }
};

class BackendsFreer : public ::testing::Environment {
  public:
    void TearDown() override { backends::get().release(); }
};

class VulkanSd : public ::testing::Test {
  protected:
    size_t msgs_before = 0;
    void   SetUp() override {
        ASSERT_NE(backends::get().vk, nullptr) << "no Vulkan device";
        ASSERT_TRUE(ggml_backend_vk_validation_enabled()) << "the Khronos validation layer is not active";
        msgs_before = ggml_backend_vk_validation_message_count();
    }
    void TearDown() override {
        EXPECT_EQ(ggml_backend_vk_validation_message_count(), msgs_before) << "Vulkan validation reported messages";
    }
};

// ---------------------------------------------------------------------------------------------
// Graphs: a builder creates named input tensors and returns the output; input values are a
// function of the tensor's name and size, so the CPU and the Vulkan runs see the same bytes.

enum class fill { normal, special_rows, positive, int8, int8_weight };

struct input_spec {
    ggml_tensor * t;
    fill          kind;
};

// Inputs live in their own context, allocated on the backend under test before scheduling (so
// the scheduler places the nodes next to their data, as model weights do); the graph's own
// tensors are allocated by the scheduler.
struct graph_case {
    ggml_context *          ctx = nullptr, *ctx_in = nullptr;
    ggml_backend_buffer_t   buf = nullptr;
    std::vector<input_spec> inputs;
    std::vector<ggml_tensor *> expand_first; // added to the graph before the output (node order)
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
    const size_t         n = ggml_nelements(t);
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    if (t->type == GGML_TYPE_I32) { // positions 0, 1, ..., 255, 0, ...
        for (size_t i = 0; i < n; ++i) ((int32_t *) bytes.data())[i] = (int32_t) (i % 256);
        return bytes;
    }
    if (t->type == GGML_TYPE_I8) {
        std::uniform_int_distribution<int> d(kind == fill::int8_weight ? -127 : -128, 127);
        for (size_t i = 0; i < n; ++i) bytes[i] = (uint8_t) (int8_t) d(rng);
        return bytes;
    }
    std::vector<float>               v(n);
    std::normal_distribution<float>  nd(0.0f, 1.0f);
    std::uniform_real_distribution<float> ud(0.001f, 0.1f);
    for (size_t i = 0; i < n; ++i) v[i] = kind == fill::positive ? ud(rng) : nd(rng);
    if (kind == fill::special_rows) {
        // rows: 1 zeros, 2 one +Inf, 3 one NaN, 4 huge, 5 tiny (normal) values, 6 a single value
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

// Builds and runs the graph with the scheduler on {Vulkan, CPU} (on_vk) or {CPU}; returns the
// output's bytes and the plan's steps.
run_result run(bool on_vk, const builder & build) {
    backends & be = backends::get();
    run_result res;
    graph_case g;
    ggml_init_params ip{};
    ip.mem_size   = 64 * ggml_tensor_overhead() + ggml_graph_overhead();
    ip.no_alloc   = true;
    g.ctx         = ggml_init(ip);
    g.ctx_in      = ggml_init(ip);
    ggml_tensor * out = build(g);
    if (!out) {
        ADD_FAILURE() << "graph construction failed: " << ggml_ext_last_error();
        return res;
    }
    ggml_set_output(out);
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    for (ggml_tensor * t : g.expand_first) ggml_build_forward_expand(gf, t);
    ggml_build_forward_expand(gf, out);

    g.buf = ggml_backend_alloc_ctx_tensors(g.ctx_in, on_vk ? be.vk : be.cpu);
    if (!g.buf) {
        ADD_FAILURE() << "input allocation failed";
        return res;
    }
    for (const input_spec & in : g.inputs) {
        const std::vector<uint8_t> b = input_bytes(in.t, in.kind);
        ggml_backend_tensor_set(in.t, b.data(), 0, b.size());
    }
    ggml_backend_t       list[2] = {be.vk, be.cpu};
    ggml_backend_t *     bl      = on_vk ? list : list + 1;
    const int            nb      = on_vk ? 2 : 1;
    ggml_backend_sched_t sched   = ggml_backend_sched_new(bl, nullptr, nb, 256, false, true);
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
    const int n = ggml_ext_sched_n_steps(sched);
    for (int i = 0; i < n; ++i) {
        ggml_ext_step_info info{};
        if (ggml_ext_sched_get_step(sched, i, &info)) res.steps.push_back(info);
    }
    ggml_backend_sched_free(sched);
    return res;
}

// Every step of the plan ran on the Vulkan backend; `kernels` are the extension kernels expected
// among them (in any order).
void expect_all_on_vulkan(const run_result & r, std::vector<std::string> kernels) {
    ASSERT_FALSE(r.steps.empty());
    for (const ggml_ext_step_info & s : r.steps) {
        EXPECT_EQ(s.backend, backends::get().vk) << "a step (kernel " << (s.kernel ? s.kernel : "native")
                                                 << ") did not run on Vulkan";
        if (s.kernel) {
            for (size_t i = 0; i < kernels.size(); ++i) {
                if (kernels[i] == s.kernel) {
                    kernels.erase(kernels.begin() + (long) i);
                    break;
                }
            }
        }
    }
    EXPECT_TRUE(kernels.empty()) << "expected kernel not in the plan: " << (kernels.empty() ? "" : kernels[0]);
}

int64_t pad4(int64_t x) { return (x + 3) / 4 * 4; }

void expect_same_bytes(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, size_t from, size_t to,
                       const char * what) {
    ASSERT_LE(to, a.size());
    ASSERT_LE(to, b.size());
    size_t bad = 0, first = 0;
    for (size_t i = from; i < to; ++i) {
        if (a[i] != b[i] && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " bytes differ, first at byte " << first << " (cpu "
                       << (int) (int8_t) a[first] << ", vulkan " << (int) (int8_t) b[first] << ")";
}

// ---------------------------------------------------------------------------------------------
// sd.quantize_i8_convrot.v1

struct quant_param {
    int64_t K, rows;
    int     group;
    bool    special; // zero / non-finite / extreme rows
};

// The quantized rows, the zero padding rows and the row scales (the bytes after the scales in
// the last packed row are not part of the layout).
void expect_packed_equal(const std::vector<uint8_t> & cpu, const std::vector<uint8_t> & vk, int64_t K, int64_t rows) {
    expect_same_bytes(cpu, vk, 0, (size_t) (K * rows), "quantized rows");
    expect_same_bytes(cpu, vk, (size_t) (K * rows), (size_t) (K * pad4(rows)), "padding rows");
    expect_same_bytes(cpu, vk, (size_t) (K * pad4(rows)), (size_t) (K * pad4(rows) + 4 * rows), "row scales");
    for (int64_t r = (int64_t) K * rows; r < K * pad4(rows); ++r) ASSERT_EQ(vk[(size_t) r], 0) << "padding not zero";
}

TEST_F(VulkanSd, QuantizeConvRotBitIdenticalToCpu) {
    const quant_param cases[] = {
        {256, 1, 256, false}, {256, 5, 256, false},  {768, 7, 256, true},  {512, 128, 256, true},
        {1024, 3, 256, false}, {4, 3, 1, false},     {12, 9, 1, true},      {4, 1, 4, false},
        {20, 6, 4, true},      {48, 11, 16, true},   {192, 9, 64, true},    {256, 13, 64, false},
        {256, 2, 16, false},
    };
    for (const quant_param & p : cases) {
        SCOPED_TRACE("K " + std::to_string(p.K) + " rows " + std::to_string(p.rows) + " group " + std::to_string(p.group));
        const builder b = [&](graph_case & g) {
            ggml_tensor * x = g.input("x", GGML_TYPE_F32, {p.K, p.rows}, p.special ? fill::special_rows : fill::normal);
            return ggml_quantize_i8_convrot(g.ctx, x, p.group);
        };
        const run_result cpu = run(false, b), vk = run(true, b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        expect_all_on_vulkan(vk, {SD_VK_KERNEL_QUANTIZE_I8});
        expect_packed_equal(cpu.out, vk.out, p.K, p.rows);
    }
}

// The real model widths (Krea2: hidden 3072 / 6144, MLP 8192 / 16384, and 16384 + 256, which
// leaves a ragged last round of groups across the lanes of a row). lavapipe's LLVM back end
// stops every loop of a shader invocation once the invocation's loops have run 65,535
// iterations in total (gallivm's loop limiter), silently; the former one-row-per-invocation
// quantizer lost the tail of rows from K = 8192 on (left unwritten: garbage that changed from run
// to run). A handful of rows keeps these cheap; the special rows (zeros, Inf, NaN, huge, tiny)
// are in every case.
const int64_t k_real_widths[] = {3072, 6144, 8192, 16384, 16640};

TEST_F(VulkanSd, QuantizeConvRotRealWidthsBitIdenticalToCpu) {
    for (const int64_t K : k_real_widths) {
        for (const int group : {256, 64, 16, 4, 1}) {
            // every group at 16384 + 256 (the longest loops), G = 256 (the model's) at every width
            if (group != 256 && K != 16640) continue;
            const int64_t rows = K == 16640 ? 7 : 9;
            SCOPED_TRACE("K " + std::to_string(K) + " rows " + std::to_string(rows) + " group " + std::to_string(group));
            const builder b = [&](graph_case & g) {
                ggml_tensor * x = g.input("xw", GGML_TYPE_F32, {K, rows}, fill::special_rows);
                return ggml_quantize_i8_convrot(g.ctx, x, group);
            };
            const run_result cpu = run(false, b), vk = run(true, b);
            ASSERT_TRUE(cpu.ok && vk.ok);
            expect_all_on_vulkan(vk, {SD_VK_KERNEL_QUANTIZE_I8});
            expect_packed_equal(cpu.out, vk.out, K, rows);
        }
    }
}

// A 3-D input (rows = ne1 * ne2) and an input that is a view at an offset into a larger tensor.
TEST_F(VulkanSd, QuantizeConvRotViewAnd3dInput) {
    const builder b3 = [](graph_case & g) {
        ggml_tensor * x = g.input("x3", GGML_TYPE_F32, {256, 3, 5}, fill::normal);
        return ggml_quantize_i8_convrot(g.ctx, x, 256);
    };
    run_result cpu = run(false, b3), vk = run(true, b3);
    ASSERT_TRUE(cpu.ok && vk.ok);
    expect_all_on_vulkan(vk, {SD_VK_KERNEL_QUANTIZE_I8});
    expect_packed_equal(cpu.out, vk.out, 256, 15);

    const builder bv = [](graph_case & g) {
        ggml_tensor * big = g.input("big", GGML_TYPE_F32, {256 * 9 + 1}, fill::normal);
        ggml_tensor * x   = ggml_view_2d(g.ctx, big, 256, 9, 256 * sizeof(float), sizeof(float)); // offset 4 bytes
        return ggml_quantize_i8_convrot(g.ctx, x, 256);
    };
    cpu = run(false, bv);
    vk  = run(true, bv);
    ASSERT_TRUE(cpu.ok && vk.ok);
    expect_packed_equal(cpu.out, vk.out, 256, 9);
}

// ---------------------------------------------------------------------------------------------
// sd.linear_i8.v1

struct linear_param {
    int64_t K, N, rows;
    int     kind; // enum sd_linear_i8_input_kind
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
            ggml_tensor * q = ggml_quantize_i8_convrot(g.ctx, x, p.group);
            return ggml_mul_mat_i8_tensorwise(g.ctx, w, q, sw, b, p.group);
        }
        default: {
            ggml_tensor * x  = g.input("xi", GGML_TYPE_I8, {p.K, p.rows}, fill::int8);
            ggml_tensor * sx = g.input("sx", GGML_TYPE_F32, {p.rows}, fill::positive);
            return ggml_mul_mat_i8_tensorwise(g.ctx, w, x, sw, b, 0, sx);
        }
    }
}

TEST_F(VulkanSd, LinearI8BitIdenticalToCpu) {
    const linear_param cases[] = {
        {256, 64, 16, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {512, 67, 13, SD_LINEAR_I8_INPUT_PACKED, 256, true, false},
        {768, 33, 7, SD_LINEAR_I8_INPUT_PACKED, 256, false, true},
        {256, 5, 1, SD_LINEAR_I8_INPUT_PACKED, 64, false, false},
        {64, 9, 6, SD_LINEAR_I8_INPUT_PACKED, 16, true, true},
        {512, 130, 128, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {256, 31, 9, SD_LINEAR_I8_INPUT_F32, 256, true, true},
        {100, 7, 5, SD_LINEAR_I8_INPUT_F32, 4, true, false},
        {12, 3, 7, SD_LINEAR_I8_INPUT_F32, 0, false, true},
        {256, 19, 11, SD_LINEAR_I8_INPUT_I8, 0, true, true},
        {36, 5, 3, SD_LINEAR_I8_INPUT_I8, 0, false, false},
        {1024, 16, 4, SD_LINEAR_I8_INPUT_I8, 0, true, false},
    };
    for (const linear_param & p : cases) {
        SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + " rows " + std::to_string(p.rows) +
                     " kind " + std::to_string(p.kind) + " group " + std::to_string(p.group));
        const builder    b   = [&](graph_case & g) { return build_linear(g, p); };
        const run_result cpu = run(false, b), vk = run(true, b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        std::vector<std::string> want = {SD_VK_KERNEL_LINEAR_I8};
        if (p.kind == SD_LINEAR_I8_INPUT_PACKED) want.push_back(SD_VK_KERNEL_QUANTIZE_I8);
        expect_all_on_vulkan(vk, want);
        // bit-identical: exact int32 sums, the same epilogue steps in the same order (NaN rows
        // compare by bits too: both produce the same quiet NaN from NaN scales)
        expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "linear output");
    }
}

// Real widths through every GEMM loop of linear_i8.comp (on lavapipe: MODE 1, the subgroup
// broadcast kernel, int32 by default and F32 chunks with SD_VK_LINEAR_I8=sg-f32; MODE 0
// with SD_VK_LINEAR_I8=tile4): K up to 16640 (the loop budget: K / 16 iterations of the outer
// loop; F32 chunks of 1024 k values, so several chunk flushes), hidden 6144, and row / channel
// counts that are not multiples of the 16 x 16 block. All bit-identical to the CPU.
TEST_F(VulkanSd, LinearI8RealWidthsBothKernelsBitIdenticalToCpu) {
    const linear_param cases[] = {
        {3072, 40, 19, SD_LINEAR_I8_INPUT_I8, 0, true, true},
        {6144, 33, 17, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {16384, 18, 9, SD_LINEAR_I8_INPUT_I8, 0, true, false},
        {16640, 7, 3, SD_LINEAR_I8_INPUT_PACKED, 256, false, true},
        {48, 17, 33, SD_LINEAR_I8_INPUT_I8, 0, false, false}, // one block and one row / channel
        {40, 9, 5, SD_LINEAR_I8_INPUT_I8, 0, true, true},     // K % 16 != 0: MODE 0 only
    };
    for (const char * mode : {"", "tile4", "sg-f32"}) {
        if (*mode) setenv("SD_VK_LINEAR_I8", mode, 1);
        else unsetenv("SD_VK_LINEAR_I8");
        for (const linear_param & p : cases) {
            SCOPED_TRACE(std::string("kernel ") + (*mode ? mode : "default") + " K " + std::to_string(p.K) + " N " +
                         std::to_string(p.N) + " rows " + std::to_string(p.rows) + " kind " + std::to_string(p.kind));
            const builder    b   = [&](graph_case & g) { return build_linear(g, p); };
            const run_result cpu = run(false, b), vk = run(true, b);
            ASSERT_TRUE(cpu.ok && vk.ok);
            std::vector<std::string> want = {SD_VK_KERNEL_LINEAR_I8};
            if (p.kind == SD_LINEAR_I8_INPUT_PACKED) want.push_back(SD_VK_KERNEL_QUANTIZE_I8);
            expect_all_on_vulkan(vk, want);
            expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "linear output");
        }
    }
    unsetenv("SD_VK_LINEAR_I8");
}

// K not a multiple of 4: declined, runs on the CPU, same result.
TEST_F(VulkanSd, LinearOddKFallsBackToCpu) {
    const linear_param p   = {13, 5, 3, SD_LINEAR_I8_INPUT_I8, 0, true, true};
    const builder      b   = [&](graph_case & g) { return build_linear(g, p); };
    const run_result   cpu = run(false, b), vk = run(true, b);
    ASSERT_TRUE(cpu.ok && vk.ok);
    bool on_cpu = false;
    for (const ggml_ext_step_info & s : vk.steps) on_cpu = on_cpu || s.backend == backends::get().cpu;
    EXPECT_TRUE(on_cpu);
    expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "linear output");
}

// ---------------------------------------------------------------------------------------------
// sd.rope_apply.v1 and RMS_NORM -> MUL -> RoPE

struct rope_param {
    int64_t d, H, L, N, n_freq;
    int     mode;
    bool    permuted; // x is a permuted view ([d, L, H, N] storage): strided rows
};

std::string rope_name(const rope_param & p) {
    return "d " + std::to_string(p.d) + " H " + std::to_string(p.H) + " L " + std::to_string(p.L) + " N " +
           std::to_string(p.N) + " nf " + std::to_string(p.n_freq) + (p.mode ? " split" : " interleaved") +
           (p.permuted ? " permuted" : "");
}

ggml_tensor * rope_input(graph_case & g, const rope_param & p) {
    if (!p.permuted) return g.input("rx", GGML_TYPE_F32, {p.d, p.H, p.L, p.N}, fill::normal);
    ggml_tensor * t = g.input("rxp", GGML_TYPE_F32, {p.d, p.L, p.H, p.N}, fill::normal);
    return ggml_permute(g.ctx, t, 0, 2, 1, 3); // [d, H, L, N] with nb1 > nb2
}

ggml_tensor * rope_pe(graph_case & g, const rope_param & p) {
    return g.input("pe", GGML_TYPE_F32, {2, 2, p.n_freq, p.L}, fill::normal);
}

const rope_param k_rope_cases[] = {
    {64, 4, 7, 1, 32, SD_ROPE_INTERLEAVED, false}, {64, 4, 7, 1, 32, SD_ROPE_SPLIT_HALF, false},
    {64, 3, 5, 2, 16, SD_ROPE_INTERLEAVED, false}, {64, 3, 5, 2, 16, SD_ROPE_SPLIT_HALF, false},
    {10, 2, 9, 1, 3, SD_ROPE_INTERLEAVED, true},   {10, 2, 9, 1, 3, SD_ROPE_SPLIT_HALF, true},
    {128, 2, 13, 1, 64, SD_ROPE_INTERLEAVED, true}, {6, 1, 1, 1, 1, SD_ROPE_SPLIT_HALF, false},
};

TEST_F(VulkanSd, RopeApplyBitIdenticalToCpu) {
    for (const rope_param & p : k_rope_cases) {
        SCOPED_TRACE(rope_name(p));
        const builder b = [&](graph_case & g) {
            return sd_rope_apply(g.ctx, rope_input(g, p), rope_pe(g, p), p.mode);
        };
        const run_result cpu = run(false, b), vk = run(true, b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        expect_all_on_vulkan(vk, {SD_VK_KERNEL_ROPE_APPLY});
        expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "rope output");
    }
}

// RMS_NORM -> MUL(w) -> RoPE; also_output: the product is a graph output too (an external use
// of an intermediate: the fusion must decline).
// tail: 0 none, 1 -> SCALE(0.125), 2 -> CPY to F16, 3 -> SCALE -> CPY to F16
ggml_tensor * build_norm_rope(graph_case & g, const rope_param & p, bool also_output, int tail = 0) {
    ggml_tensor * x    = rope_input(g, p);
    ggml_tensor * w    = g.input("nw", GGML_TYPE_F32, {p.d}, fill::normal);
    ggml_tensor * norm = ggml_rms_norm(g.ctx, x, 1e-6f);
    ggml_tensor * mul  = ggml_mul(g.ctx, norm, w);
    if (also_output) ggml_set_output(mul);
    ggml_tensor * r = sd_rope_apply(g.ctx, mul, rope_pe(g, p), p.mode);
    if (tail & 1) r = ggml_scale(g.ctx, r, 0.125f);
    if (tail & 2) r = ggml_cast(g.ctx, r, GGML_TYPE_F16);
    return r;
}

bool has_step(const run_result & r, const char * kernel) {
    for (const ggml_ext_step_info & s : r.steps)
        if (s.kernel && strcmp(s.kernel, kernel) == 0) return true;
    return false;
}

struct fusion_off_scope {
    fusion_off_scope() { sd_ggml_set_fusion_enabled(false); }
    ~fusion_off_scope() { sd_ggml_set_fusion_enabled(true); }
};

float max_abs_diff(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b, float * max_ref) {
    const float * x = (const float *) a.data();
    const float * y = (const float *) b.data();
    float         m = 0.0f, r = 0.0f;
    for (size_t i = 0; i < a.size() / 4; ++i) {
        m = std::max(m, std::fabs(x[i] - y[i]));
        r = std::max(r, std::fabs(x[i]));
    }
    *max_ref = r;
    return m;
}

// Fusion on == fusion off on the device (bit for bit), the fused step is in the plan, and the
// result is within float rounding of the CPU chain (whose RMS_NORM reduces in double).
TEST_F(VulkanSd, RmsNormMulRopeFusionEqualsUnfused) {
    for (const rope_param & p : k_rope_cases) {
        SCOPED_TRACE(rope_name(p));
        const builder b = [&](graph_case & g) { return build_norm_rope(g, p, false); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        const run_result cpu = run(false, b);
        ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_RMS_NORM_MUL_ROPE});
        expect_all_on_vulkan(plain, {SD_VK_KERNEL_ROPE_APPLY});
        EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_RMS_NORM_MUL_ROPE));
        expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
        float ref = 0.0f;
        const float diff = max_abs_diff(cpu.out, fused.out, &ref);
        EXPECT_LE(diff, 1e-5f * std::max(ref, 1.0f)) << "fused Vulkan vs CPU chain";
    }
}

// Independent nodes between the chain's nodes (another value after the norm, the PE table
// produced after the product): the graph-delay rule gathers RMS_NORM, MUL, RoPE, SCALE.
ggml_tensor * build_norm_rope_apart(graph_case & g, const rope_param & p) {
    ggml_tensor * x    = rope_input(g, p);
    ggml_tensor * w    = g.input("nw", GGML_TYPE_F32, {p.d}, fill::normal);
    ggml_tensor * norm = ggml_rms_norm(g.ctx, x, 1e-6f);
    ggml_tensor * o1   = ggml_scale(g.ctx, g.input("o1", GGML_TYPE_F32, {p.d, 3}, fill::normal), 0.5f);
    ggml_tensor * mul  = ggml_mul(g.ctx, norm, w);
    ggml_tensor * pe   = ggml_scale(g.ctx, rope_pe(g, p), 1.0f);
    g.expand_first     = {norm, o1, mul, pe}; // node order: norm, o1, MUL, pe, RoPE, SCALE
    return ggml_scale(g.ctx, sd_rope_apply(g.ctx, mul, pe, p.mode), 0.125f);
}

TEST_F(VulkanSd, RmsNormMulRopeFusesWhenProducersAreInBetween) {
    for (const rope_param & p : {k_rope_cases[0], k_rope_cases[5]}) {
        SCOPED_TRACE(rope_name(p));
        const builder    b     = [&](graph_case & g) { return build_norm_rope_apart(g, p); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        ASSERT_TRUE(fused.ok && plain.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_RMS_NORM_MUL_ROPE});
        EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_RMS_NORM_MUL_ROPE));
        bool scale_fused = false; // the SCALE is part of the fused step (4 nodes)
        for (const ggml_ext_step_info & st : fused.steps) {
            if (st.kernel && strcmp(st.kernel, SD_VK_KERNEL_RMS_NORM_MUL_ROPE) == 0) scale_fused = st.n_nodes == 4;
        }
        EXPECT_TRUE(scale_fused);
        expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
    }
}

TEST_F(VulkanSd, RmsNormMulRopeFusionDeclines) {
    const rope_param p = {64, 4, 7, 1, 32, SD_ROPE_INTERLEAVED, false};
    // the product is also a graph output: the plain operators run
    const builder    b_ext = [&](graph_case & g) { return build_norm_rope(g, p, true); };
    const run_result ext   = run(true, b_ext);
    ASSERT_TRUE(ext.ok);
    EXPECT_FALSE(has_step(ext, SD_VK_KERNEL_RMS_NORM_MUL_ROPE)) << "fused although an intermediate is an output";
    const builder b     = [&](graph_case & g) { return build_norm_rope(g, p, false); };
    const run_result fz = run(true, b);
    expect_same_bytes(fz.out, ext.out, 0, fz.out.size(), "declined vs fused");
    // GGML_VK_DISABLE_FUSION
    setenv("GGML_VK_DISABLE_FUSION", "1", 1);
    const run_result off = run(true, b);
    unsetenv("GGML_VK_DISABLE_FUSION");
    ASSERT_TRUE(off.ok);
    EXPECT_FALSE(has_step(off, SD_VK_KERNEL_RMS_NORM_MUL_ROPE)) << "GGML_VK_DISABLE_FUSION not honoured";
    expect_same_bytes(fz.out, off.out, 0, fz.out.size(), "GGML_VK_DISABLE_FUSION vs fused");
}

// ---------------------------------------------------------------------------------------------
// sd.linear_i8.v1 -> MUL(gate) -> ADD(residual)

// residual_kind: 0 an input tensor, 1 an intermediate (x * 0.5, computed on the device) that the
// allocator may overwrite in place with the ADD's result
ggml_tensor * build_epilogue(graph_case & g, const linear_param & p, bool with_gate, int residual_kind,
                             bool lin_is_output) {
    ggml_tensor * lin = build_linear(g, p);
    if (lin_is_output) ggml_set_output(lin);
    ggml_tensor * v = lin;
    if (with_gate) v = ggml_mul(g.ctx, lin, g.input("gate", GGML_TYPE_F32, {p.N, 1, 1}, fill::normal));
    ggml_tensor * res = g.input("res", GGML_TYPE_F32, {p.N, p.rows}, fill::normal);
    if (residual_kind == 1) res = ggml_scale(g.ctx, res, 0.5f);
    return ggml_add(g.ctx, res, v);
}

TEST_F(VulkanSd, LinearGateResidualFusionEqualsUnfusedAndCpu) {
    const linear_param cases[] = {
        {256, 64, 16, SD_LINEAR_I8_INPUT_PACKED, 256, true, false},
        {512, 67, 13, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {256, 19, 11, SD_LINEAR_I8_INPUT_I8, 0, true, true},
        {100, 7, 5, SD_LINEAR_I8_INPUT_F32, 4, false, true},
    };
    for (const linear_param & p : cases) {
        for (int with_gate = 0; with_gate < 2; ++with_gate) {
            for (int rk = 0; rk < 2; ++rk) {
                SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + " kind " +
                             std::to_string(p.kind) + " gate " + std::to_string(with_gate) + " residual " +
                             std::to_string(rk));
                const builder b = [&](graph_case & g) { return build_epilogue(g, p, with_gate, rk, false); };
                const run_result fused = run(true, b);
                run_result       plain;
                {
                    fusion_off_scope off;
                    plain = run(true, b);
                }
                const run_result cpu = run(false, b);
                ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
                expect_all_on_vulkan(fused, {SD_VK_KERNEL_LINEAR_I8_GATE_RES});
                EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_LINEAR_I8_GATE_RES));
                expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
                expect_same_bytes(cpu.out, fused.out, 0, cpu.out.size(), "fused Vulkan vs CPU");
            }
        }
    }
}

TEST_F(VulkanSd, LinearGateResidualFusionDeclinesExternalUse) {
    const linear_param p = {256, 64, 16, SD_LINEAR_I8_INPUT_PACKED, 256, true, false};
    const builder b_ext  = [&](graph_case & g) { return build_epilogue(g, p, true, 0, true); };
    const run_result ext = run(true, b_ext);
    ASSERT_TRUE(ext.ok);
    EXPECT_FALSE(has_step(ext, SD_VK_KERNEL_LINEAR_I8_GATE_RES)) << "fused although the linear is an output";
    const builder b = [&](graph_case & g) { return build_epilogue(g, p, true, 0, false); };
    const run_result fz = run(true, b);
    ASSERT_TRUE(fz.ok);
    EXPECT_TRUE(has_step(fz, SD_VK_KERNEL_LINEAR_I8_GATE_RES));
    expect_same_bytes(fz.out, ext.out, 0, fz.out.size(), "declined vs fused");
}

// The gate is produced after the linear and the residual after the gated product (independent
// nodes between the chain's nodes): the graph-delay rule brings the chain together so it still
// fuses, with the same bytes as the unfused graph.
ggml_tensor * build_epilogue_apart(graph_case & g, const linear_param & p) {
    ggml_tensor * lin  = build_linear(g, p);
    ggml_tensor * gate = ggml_scale(g.ctx, g.input("gate", GGML_TYPE_F32, {p.N, 1, 1}, fill::normal), 0.5f);
    ggml_tensor * v    = ggml_mul(g.ctx, lin, gate);
    ggml_tensor * res  = ggml_scale(g.ctx, g.input("res", GGML_TYPE_F32, {p.N, p.rows}, fill::normal), 0.5f);
    g.expand_first     = {lin, gate, v, res}; // node order: lin, gate, MUL, res, ADD
    return ggml_add(g.ctx, res, v);
}

TEST_F(VulkanSd, LinearGateResidualFusesWhenProducersAreInBetween) {
    const linear_param cases[] = {
        {256, 64, 16, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {256, 19, 11, SD_LINEAR_I8_INPUT_I8, 0, true, false},
    };
    for (const linear_param & p : cases) {
        SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + " kind " + std::to_string(p.kind));
        const builder    b     = [&](graph_case & g) { return build_epilogue_apart(g, p); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        const run_result cpu = run(false, b);
        ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_LINEAR_I8_GATE_RES});
        EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_LINEAR_I8_GATE_RES));
        expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
        expect_same_bytes(cpu.out, fused.out, 0, cpu.out.size(), "fused Vulkan vs CPU");
    }
}

// ---------------------------------------------------------------------------------------------
// Outputs placed over their inputs (as an allocator may): the kernels compute into the workspace
// and copy, so the result equals the non-overlapping one. The tensors are placed by hand in one
// Vulkan buffer and the graph runs through the direct backend call (single-node extensions).

// Runs the graph of `build` on the Vulkan backend with the output placed `offset` bytes after
// the start of input `over`; the other inputs get their own space after both.
std::vector<uint8_t> run_aliased(const builder & build, const char * over, size_t offset) {
    backends & be = backends::get();
    graph_case g;
    ggml_init_params ip{};
    ip.mem_size = 64 * ggml_tensor_overhead() + ggml_graph_overhead();
    ip.no_alloc = true;
    g.ctx       = ggml_init(ip);
    g.ctx_in    = ggml_init(ip);
    ggml_tensor * out = build(g);
    EXPECT_NE(out, nullptr);
    if (!out) return {};
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, out);
    EXPECT_EQ(ggml_graph_n_nodes(gf), 1) << "one node per aliasing case";
    ggml_tensor * shared = nullptr;
    size_t        total  = 0;
    for (const input_spec & in : g.inputs) {
        if (strcmp(in.t->name, over) == 0) shared = in.t;
        total += ggml_nbytes(in.t) + 256;
    }
    EXPECT_NE(shared, nullptr);
    if (!shared) return {};
    const size_t head = std::max(ggml_nbytes(shared), offset + ggml_nbytes(out)) + 256;
    g.buf             = ggml_backend_buft_alloc_buffer(ggml_backend_get_default_buffer_type(be.vk), head + total);
    char * base       = (char *) ggml_backend_buffer_get_base(g.buf);
    size_t next       = head;
    for (const input_spec & in : g.inputs) {
        char * at = in.t == shared ? base : base + next;
        if (in.t != shared) next += (ggml_nbytes(in.t) + 255) / 256 * 256;
        EXPECT_EQ(ggml_backend_tensor_alloc(g.buf, in.t, at), GGML_STATUS_SUCCESS);
        const std::vector<uint8_t> b = input_bytes(in.t, in.kind);
        ggml_backend_tensor_set(in.t, b.data(), 0, b.size());
    }
    EXPECT_EQ(ggml_backend_tensor_alloc(g.buf, out, base + offset), GGML_STATUS_SUCCESS);
    EXPECT_EQ(ggml_backend_graph_compute(be.vk, gf), GGML_STATUS_SUCCESS);
    std::vector<uint8_t> r(ggml_nbytes(out));
    ggml_backend_tensor_get(out, r.data(), 0, r.size());
    return r;
}

TEST_F(VulkanSd, OutputsOverlappingInputsUseWorkspace) {
    const builder quant = [](graph_case & g) {
        return ggml_quantize_i8_convrot(g.ctx, g.input("xq", GGML_TYPE_F32, {256, 7}, fill::normal), 256);
    };
    const linear_param lp  = {256, 19, 11, SD_LINEAR_I8_INPUT_I8, 0, true, true};
    const builder      lin = [&](graph_case & g) { return build_linear(g, lp); };
    const rope_param   rp  = {64, 3, 5, 1, 16, SD_ROPE_SPLIT_HALF, false};
    const builder      rope = [&](graph_case & g) { return sd_rope_apply(g.ctx, rope_input(g, rp), rope_pe(g, rp), rp.mode); };
    struct alias_case {
        const char *    name;
        const builder * b;
        const char *    over;
    };
    const alias_case cases[] = {{"quantize", &quant, "xq"}, {"linear (over the I8 input)", &lin, "xi"},
                                {"linear (over the weight)", &lin, "w"}, {"rope", &rope, "rx"}};
    for (const alias_case & c : cases) {
        const run_result ref = run(false, *c.b);
        ASSERT_TRUE(ref.ok);
        for (size_t offset : {(size_t) 0, (size_t) 64, (size_t) 1028}) {
            SCOPED_TRACE(std::string(c.name) + " offset " + std::to_string(offset));
            const std::vector<uint8_t> got = run_aliased(*c.b, c.over, offset);
            ASSERT_EQ(got.size(), ref.out.size());
            if (c.b == &quant) {
                expect_packed_equal(ref.out, got, 256, 7);
            } else {
                expect_same_bytes(ref.out, got, 0, got.size(), "aliased output");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RMS_NORM -> MUL(w1) -> MUL(mod_scale) -> ADD -> ADD(shift) -> ConvRot (Krea2's modulated norm)

// external: 0 none, 1 the normalised product is also a graph output, 2 the final ADD is
ggml_tensor * build_modulation(graph_case & g, int64_t K, int64_t rows, int group, int external) {
    ggml_tensor * x  = g.input("mx", GGML_TYPE_F32, {K, rows}, fill::special_rows);
    ggml_tensor * w1 = g.input("mw1", GGML_TYPE_F32, {K}, fill::normal);
    ggml_tensor * ms = g.input("mms", GGML_TYPE_F32, {K, 1, 1}, fill::normal);
    ggml_tensor * sh = g.input("msh", GGML_TYPE_F32, {K, 1, 1}, fill::normal);
    ggml_tensor * h  = ggml_mul(g.ctx, ggml_rms_norm(g.ctx, x, 1e-6f), w1);
    ggml_tensor * t  = ggml_mul(g.ctx, h, ms);
    ggml_tensor * y  = ggml_add(g.ctx, ggml_add(g.ctx, h, t), sh);
    if (external == 1) ggml_set_output(h);
    if (external == 2) ggml_set_output(y);
    return ggml_quantize_i8_convrot(g.ctx, y, group);
}

TEST_F(VulkanSd, ModulationQuantizeFusionEqualsUnfused) {
    struct mcase {
        int64_t K, rows;
        int     group;
    };
    for (const mcase & c : {mcase{512, 128, 256}, mcase{256, 7, 256}, mcase{768, 5, 64}, mcase{20, 9, 4}, mcase{12, 3, 1}}) {
        SCOPED_TRACE("K " + std::to_string(c.K) + " rows " + std::to_string(c.rows) + " group " + std::to_string(c.group));
        const builder    b     = [&](graph_case & g) { return build_modulation(g, c.K, c.rows, c.group, 0); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        ASSERT_TRUE(fused.ok && plain.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_MODULATION_QUANTIZE});
        EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_MODULATION_QUANTIZE));
        expect_packed_equal(plain.out, fused.out, c.K, c.rows);
        // against the CPU chain (its RMS_NORM reduces in double): bytes at most 1 apart where a
        // value sits near a rounding boundary. Rows 4 and 5 (values ~1e30 and ~1e-30) are left
        // out: the native Vulkan RMS_NORM's float sum of squares overflows / underflows there
        // (the device's semantics, which the fusion reproduces), the CPU's double sum does not.
        const run_result cpu = run(false, b);
        ASSERT_TRUE(cpu.ok);
        size_t off_by_more = 0;
        for (size_t i = 0; i < (size_t) (c.K * c.rows); ++i) {
            const int64_t r = (int64_t) i / c.K;
            if (r == 4 || r == 5) continue;
            off_by_more += std::abs((int) (int8_t) cpu.out[i] - (int) (int8_t) fused.out[i]) > 1;
        }
        EXPECT_EQ(off_by_more, 0u) << "quantized values more than 1 apart from the CPU chain";
    }
}

// The modulation vectors are produced inside the chain (after the norm's product and after the
// first ADD): the graph-delay rule gathers the six nodes.
ggml_tensor * build_modulation_apart(graph_case & g, int64_t K, int64_t rows, int group) {
    ggml_tensor * x  = g.input("mx", GGML_TYPE_F32, {K, rows}, fill::special_rows);
    ggml_tensor * w1 = g.input("mw1", GGML_TYPE_F32, {K}, fill::normal);
    ggml_tensor * nm = ggml_rms_norm(g.ctx, x, 1e-6f);
    ggml_tensor * h  = ggml_mul(g.ctx, nm, w1);
    ggml_tensor * ms = ggml_scale(g.ctx, g.input("mms", GGML_TYPE_F32, {K, 1, 1}, fill::normal), 0.5f);
    ggml_tensor * t  = ggml_mul(g.ctx, h, ms);
    ggml_tensor * a1 = ggml_add(g.ctx, h, t);
    ggml_tensor * sh = ggml_scale(g.ctx, g.input("msh", GGML_TYPE_F32, {K, 1, 1}, fill::normal), 2.0f);
    g.expand_first   = {nm, h, ms, t, a1, sh};
    return ggml_quantize_i8_convrot(g.ctx, ggml_add(g.ctx, a1, sh), group);
}

TEST_F(VulkanSd, ModulationQuantizeFusesWhenProducersAreInBetween) {
    const builder    b     = [&](graph_case & g) { return build_modulation_apart(g, 256, 7, 256); };
    const run_result fused = run(true, b);
    run_result       plain;
    {
        fusion_off_scope off;
        plain = run(true, b);
    }
    ASSERT_TRUE(fused.ok && plain.ok);
    expect_all_on_vulkan(fused, {SD_VK_KERNEL_MODULATION_QUANTIZE});
    EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_MODULATION_QUANTIZE));
    expect_packed_equal(plain.out, fused.out, 256, 7);
}

TEST_F(VulkanSd, ModulationQuantizeFusionDeclinesExternalUse) {
    for (int external : {1, 2}) {
        SCOPED_TRACE("external " + std::to_string(external));
        const builder    b   = [&](graph_case & g) { return build_modulation(g, 256, 7, 256, external); };
        const run_result ext = run(true, b);
        ASSERT_TRUE(ext.ok);
        EXPECT_FALSE(has_step(ext, SD_VK_KERNEL_MODULATION_QUANTIZE)) << "fused although an intermediate is an output";
        const builder    b0 = [&](graph_case & g) { return build_modulation(g, 256, 7, 256, 0); };
        const run_result fz = run(true, b0);
        ASSERT_TRUE(fz.ok);
        expect_packed_equal(fz.out, ext.out, 256, 7);
    }
}

// ---------------------------------------------------------------------------------------------
// GEMM -> SwiGLU [-> ConvRot]: linear(gate), linear(up) on one packed input, SILU(gate), MUL(., up)

// order 0: gate, up, SILU, MUL (sd.cpp's Krea2 order); 1: gate, SILU, up, MUL. with_quant: the
// product is quantized; external: the up projection is also a graph output (must decline)
ggml_tensor * build_swiglu(graph_case & g, const linear_param & p, int order, bool with_quant, bool external) {
    ggml_tensor * x    = g.input("x", GGML_TYPE_F32, {p.K, p.rows}, fill::special_rows);
    ggml_tensor * wg   = g.input("wg", GGML_TYPE_I8, {p.K, p.N}, fill::int8_weight);
    ggml_tensor * wu   = g.input("wu", GGML_TYPE_I8, {p.K, p.N}, fill::int8_weight);
    ggml_tensor * sg   = p.wscale ? g.input("sg", GGML_TYPE_F32, {p.N}, fill::positive) : nullptr;
    ggml_tensor * su   = p.wscale ? g.input("su", GGML_TYPE_F32, {p.N}, fill::positive) : nullptr;
    ggml_tensor * bg   = p.bias ? g.input("bg", GGML_TYPE_F32, {p.N}, fill::normal) : nullptr;
    ggml_tensor * bu   = p.bias ? g.input("bu", GGML_TYPE_F32, {p.N}, fill::normal) : nullptr;
    ggml_tensor * q    = ggml_quantize_i8_convrot(g.ctx, x, p.group);
    ggml_tensor * gate = ggml_mul_mat_i8_tensorwise(g.ctx, wg, q, sg, bg, p.group);
    ggml_tensor * up   = ggml_mul_mat_i8_tensorwise(g.ctx, wu, q, su, bu, p.group);
    ggml_tensor * s    = ggml_silu(g.ctx, gate);
    if (external) ggml_set_output(up);
    g.expand_first = order == 0 ? std::vector<ggml_tensor *>{gate, up} : std::vector<ggml_tensor *>{s, up};
    ggml_tensor * y = ggml_mul(g.ctx, s, up);
    return with_quant ? ggml_quantize_i8_convrot(g.ctx, y, 256) : y;
}

TEST_F(VulkanSd, SwigluFusionEqualsUnfused) {
    const linear_param cases[] = {
        {256, 256, 16, SD_LINEAR_I8_INPUT_PACKED, 256, true, false},
        {512, 512, 13, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {256, 260, 7, SD_LINEAR_I8_INPUT_PACKED, 64, false, true},
    };
    for (const linear_param & p : cases) {
        for (int order = 0; order < 2; ++order) {
            for (int wq = 0; wq < 2; ++wq) {
                if (wq && p.N % 256 != 0) continue; // the product is quantized with G = 256
                SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + " rows " +
                             std::to_string(p.rows) + " order " + std::to_string(order) + " quant " + std::to_string(wq));
                const builder    b     = [&](graph_case & g) { return build_swiglu(g, p, order, wq, false); };
                const run_result fused = run(true, b);
                run_result       plain;
                {
                    fusion_off_scope off;
                    plain = run(true, b);
                }
                ASSERT_TRUE(fused.ok && plain.ok);
                expect_all_on_vulkan(fused, {SD_VK_KERNEL_LINEAR_I8_SWIGLU});
                EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_LINEAR_I8_SWIGLU));
                if (wq) expect_packed_equal(plain.out, fused.out, p.N, p.rows);
                else expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
            }
        }
    }
}

// Independent nodes between the gate linear, its SiLU and the up linear (gate, o1, SILU, o2, up,
// MUL [, quantize]): the graph-delay rule brings the chain together so it still fuses.
ggml_tensor * build_swiglu_apart(graph_case & g, const linear_param & p, bool with_quant) {
    ggml_tensor * x    = g.input("x", GGML_TYPE_F32, {p.K, p.rows}, fill::special_rows);
    ggml_tensor * wg   = g.input("wg", GGML_TYPE_I8, {p.K, p.N}, fill::int8_weight);
    ggml_tensor * wu   = g.input("wu", GGML_TYPE_I8, {p.K, p.N}, fill::int8_weight);
    ggml_tensor * sg   = g.input("sg", GGML_TYPE_F32, {p.N}, fill::positive);
    ggml_tensor * su   = g.input("su", GGML_TYPE_F32, {p.N}, fill::positive);
    ggml_tensor * q    = ggml_quantize_i8_convrot(g.ctx, x, p.group);
    ggml_tensor * gate = ggml_mul_mat_i8_tensorwise(g.ctx, wg, q, sg, nullptr, p.group);
    ggml_tensor * s    = ggml_silu(g.ctx, gate);
    ggml_tensor * up   = ggml_mul_mat_i8_tensorwise(g.ctx, wu, q, su, nullptr, p.group);
    ggml_tensor * o1   = ggml_scale(g.ctx, g.input("o1", GGML_TYPE_F32, {p.N, p.rows}, fill::normal), 0.5f);
    ggml_tensor * o2   = ggml_scale(g.ctx, g.input("o2", GGML_TYPE_F32, {p.N, p.rows}, fill::normal), 2.0f);
    g.expand_first     = {gate, o1, s, o2, up};
    ggml_tensor * y    = ggml_mul(g.ctx, s, up);
    return with_quant ? ggml_quantize_i8_convrot(g.ctx, y, 256) : y;
}

TEST_F(VulkanSd, SwigluFusesWhenProducersAreInBetween) {
    const linear_param p = {256, 256, 13, SD_LINEAR_I8_INPUT_PACKED, 256, true, false};
    for (int wq = 0; wq < 2; ++wq) {
        SCOPED_TRACE("quant " + std::to_string(wq));
        const builder    b     = [&](graph_case & g) { return build_swiglu_apart(g, p, wq); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        ASSERT_TRUE(fused.ok && plain.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_LINEAR_I8_SWIGLU});
        EXPECT_FALSE(has_step(plain, SD_VK_KERNEL_LINEAR_I8_SWIGLU));
        if (wq) expect_packed_equal(plain.out, fused.out, p.N, p.rows);
        else expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
    }
}

TEST_F(VulkanSd, SwigluFusionDeclinesExternalUse) {
    const linear_param p   = {256, 256, 16, SD_LINEAR_I8_INPUT_PACKED, 256, true, false};
    const builder      b   = [&](graph_case & g) { return build_swiglu(g, p, 0, true, true); };
    const run_result   ext = run(true, b);
    ASSERT_TRUE(ext.ok);
    EXPECT_FALSE(has_step(ext, SD_VK_KERNEL_LINEAR_I8_SWIGLU)) << "fused although the up projection is an output";
    const builder    b0 = [&](graph_case & g) { return build_swiglu(g, p, 0, true, false); };
    const run_result fz = run(true, b0);
    ASSERT_TRUE(fz.ok);
    expect_packed_equal(fz.out, ext.out, p.N, p.rows);
}

// ---------------------------------------------------------------------------------------------
// The Krea2 INT8 block at a small width (hidden 512, 4 heads / 1 KV head, MLP 1024, 128 tokens,
// 2 blocks) through krea2::runner on the Vulkan device vs the same model on the CPU.

struct small_krea2 {
    krea2::config      cfg;
    krea2::model       m;
    std::vector<float> x, tvec;
    small_krea2() {
        cfg.hidden   = 512;
        cfg.heads    = 4;
        cfg.kv_heads = 1;
        cfg.mlp      = 1024;
        cfg.tokens   = 128;
        cfg.blocks   = 2;
        krea2::synthetic_source src(42);
        std::string             err;
        EXPECT_TRUE(m.load(cfg, krea2::wtype::int8, &src, err)) << err;
        x    = krea2::synthetic_input(cfg, 42);
        tvec = krea2::synthetic_tvec(cfg, 42);
    }
};

TEST_F(VulkanSd, Krea2Int8BlockOnVulkanMatchesCpu) {
    small_krea2           k;
    krea2::build_options  bo;
    krea2::runner         cpu, vk;
    std::string           err;
    ASSERT_TRUE(cpu.init(2, err, "cpu")) << err;
    ASSERT_TRUE(vk.init(2, err, "vulkan")) << err;

    // the same model with its weights in Vulkan memory (as sdx places them): every node runs on
    // Vulkan, the sd ones on the kernels of src/core/vulkan
    small_krea2 kv;
    ASSERT_TRUE(kv.m.move_to(vk.weight_buffer_type(), err)) << err;
    krea2::runner::plan_info p;
    ASSERT_TRUE(vk.plan(kv.m, bo, 0, p, err)) << err;
    for (const krea2::runner::node_row & r : p.nodes) EXPECT_EQ(r.device, "Vulkan0") << r.op << " " << r.name;
    EXPECT_GE(p.n_fused, 7) << "modulation x2, RoPE x2, gate-residual x2, SwiGLU";

    krea2::runner::result rc, rv;
    ASSERT_TRUE(cpu.forward(k.m, bo, k.x, k.tvec, rc, err)) << err;
    ASSERT_TRUE(vk.forward(kv.m, bo, k.x, k.tvec, rv, err)) << err;
    ASSERT_EQ(rc.out.size(), rv.out.size());
    // the update (out - x) of the stack, relative: the INT8 parts agree bit for bit given equal
    // inputs, the native Vulkan ops (RMS_NORM in float, softmax / SiLU exp, flash attention's
    // summation order) differ from the CPU's by float rounding, which the INT8 quantization of
    // later layers can amplify to one quantization step on a few values. Measured on lavapipe:
    // 2.5e-3 of the update (the INT8 quantization itself deviates 1.9e-2 from F32); bound 1e-2.
    std::vector<float> uc(rc.out.size()), uv(rv.out.size());
    for (size_t i = 0; i < uc.size(); ++i) {
        uc[i] = rc.out[i] - k.x[i];
        uv[i] = rv.out[i] - k.x[i];
    }
    const double dev_out = krea2::rel_rms(rv.out, rc.out), dev_upd = krea2::rel_rms(uv, uc);
    printf("Krea2 INT8 block x2 on Vulkan vs CPU INT8: relative RMS deviation %.3e of the output, %.3e of the update\n",
           dev_out, dev_upd);
    EXPECT_LT(dev_upd, 1e-2);
    EXPECT_GT(dev_upd, 0.0) << "identical bits: did anything run on Vulkan?";
}

// ---------------------------------------------------------------------------------------------
// Real widths (issue 25): every sd Vulkan kernel and fusion at the model's row widths
// (k_real_widths) with a handful of rows, and the native row ops the Krea2 block runs at real
// sizes. lavapipe silently stops an invocation's loops after 65,535 iterations in total, so a
// kernel that loops over a whole long row in one invocation is wrong only at these widths.

// The quantizer at the longest rows its loop budget admits on this device (the host estimate of
// a lane's loop iterations, sd_vulkan_quant_lane_iterations, at or just under
// sd_vk::kLoopBudget): still bit-identical, so the estimate keeps clear of the driver's cap; one
// step longer is declined and the node runs on the CPU with the same result.
TEST_F(VulkanSd, QuantizeConvRotAtTheLoopBudget) {
    ggml_backend_dev_t dev = ggml_backend_get_device(backends::get().vk);
    for (const int group : {256, 1}) {
        const int64_t step = group < 16 ? 16 : group;
        int64_t       K    = step;
        while (sd_vulkan_quant_lane_iterations(dev, K + step, group, false) <= sd_vk::kLoopBudget) K += step;
        for (const int64_t k : {K, K + step}) {
            SCOPED_TRACE("K " + std::to_string(k) + " group " + std::to_string(group));
            const builder b = [&](graph_case & g) {
                ggml_tensor * x = g.input("xb", GGML_TYPE_F32, {k, 3}, fill::normal);
                return ggml_quantize_i8_convrot(g.ctx, x, group);
            };
            const run_result cpu = run(false, b), vk = run(true, b);
            ASSERT_TRUE(cpu.ok && vk.ok);
            bool on_cpu = false;
            for (const ggml_ext_step_info & s : vk.steps) on_cpu = on_cpu || s.backend == backends::get().cpu;
            EXPECT_EQ(on_cpu, k > K) << "the budget's boundary";
            expect_packed_equal(cpu.out, vk.out, k, 3);
        }
    }
}

// Quantized bytes of two packed tensors at most 1 apart (rows 4 and 5 of fill::special_rows
// skipped: see ModulationQuantizeFusionEqualsUnfused).
void expect_within_one_step(const std::vector<uint8_t> & cpu, const std::vector<uint8_t> & vk, int64_t K, int64_t rows,
                            bool skip_extreme_rows) {
    size_t off_by_more = 0;
    for (size_t i = 0; i < (size_t) (K * rows); ++i) {
        const int64_t r = (int64_t) i / K;
        if (skip_extreme_rows && (r == 4 || r == 5)) continue;
        off_by_more += std::abs((int) (int8_t) cpu[i] - (int) (int8_t) vk[i]) > 1;
    }
    EXPECT_EQ(off_by_more, 0u) << "quantized values more than 1 apart from the CPU chain";
}

TEST_F(VulkanSd, ModulationQuantizeRealWidths) {
    for (const int64_t K : k_real_widths) {
        SCOPED_TRACE("K " + std::to_string(K));
        const int64_t    rows  = 7;
        const builder    b     = [&](graph_case & g) { return build_modulation(g, K, rows, 256, 0); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        const run_result cpu = run(false, b);
        ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_MODULATION_QUANTIZE});
        expect_packed_equal(plain.out, fused.out, K, rows);
        expect_within_one_step(cpu.out, fused.out, K, rows, true);
    }
    // the small groups at the longest width (ragged last step per lane)
    for (const int group : {1, 4, 16, 64}) {
        SCOPED_TRACE("K 16640 group " + std::to_string(group));
        const builder    b     = [&](graph_case & g) { return build_modulation(g, 16640, 5, group, 0); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        ASSERT_TRUE(fused.ok && plain.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_MODULATION_QUANTIZE});
        expect_packed_equal(plain.out, fused.out, 16640, 5);
    }
}

// The INT8 linear at the real input widths: F32 activations quantized in the workspace, the
// packed ConvRot input, and the gate / residual epilogue; bit-identical to the CPU.
TEST_F(VulkanSd, LinearI8RealWidthsBitIdenticalToCpu) {
    for (const int64_t K : k_real_widths) {
        for (const int kind : {SD_LINEAR_I8_INPUT_F32, SD_LINEAR_I8_INPUT_PACKED}) {
            const linear_param p = {K, 67, 5, kind, 256, true, true};
            SCOPED_TRACE("K " + std::to_string(K) + " kind " + std::to_string(kind));
            const builder    b   = [&](graph_case & g) { return build_epilogue(g, p, true, 0, false); };
            const run_result cpu = run(false, b), vk = run(true, b);
            ASSERT_TRUE(cpu.ok && vk.ok);
            std::vector<std::string> want = {SD_VK_KERNEL_LINEAR_I8_GATE_RES};
            if (kind == SD_LINEAR_I8_INPUT_PACKED) want.push_back(SD_VK_KERNEL_QUANTIZE_I8);
            expect_all_on_vulkan(vk, want);
            expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "gate-residual linear output");
        }
    }
}

// GEMM -> SwiGLU -> ConvRot with the product at the real MLP widths (the quantizer then runs on
// rows of N), and the GEMM at the longest K: fused == unfused on the device, and within one
// quantization step of the CPU chain (the native SILU's exp rounds differently).
TEST_F(VulkanSd, SwigluQuantRealWidths) {
    const linear_param cases[] = {
        {256, 8192, 5, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
        {256, 16640, 5, SD_LINEAR_I8_INPUT_PACKED, 256, true, false},
        {16640, 256, 5, SD_LINEAR_I8_INPUT_PACKED, 256, true, true},
    };
    for (const linear_param & p : cases) {
        SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N));
        const builder    b     = [&](graph_case & g) { return build_swiglu(g, p, 0, true, false); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        const run_result cpu = run(false, b);
        ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_LINEAR_I8_SWIGLU});
        expect_packed_equal(plain.out, fused.out, p.N, p.rows);
        // rows 1.. of fill::special_rows make non-finite / zero products whose rows agree anyway
        expect_within_one_step(cpu.out, fused.out, p.N, p.rows, true);
    }
}

// sd.rope_apply.v1 and the RMS_NORM -> MUL -> RoPE fusion at the real block size: head dim 128,
// 48 heads (hidden 6144), 1024 tokens: standalone bit-identical to the CPU, fused == unfused.
TEST_F(VulkanSd, RopeRealSize) {
    const rope_param p = {128, 48, 1024, 1, 64, SD_ROPE_SPLIT_HALF, true};
    const builder    b = [&](graph_case & g) { return sd_rope_apply(g.ctx, rope_input(g, p), rope_pe(g, p), p.mode); };
    const run_result cpu = run(false, b), vk = run(true, b);
    ASSERT_TRUE(cpu.ok && vk.ok);
    expect_all_on_vulkan(vk, {SD_VK_KERNEL_ROPE_APPLY});
    expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "rope output");
    const builder    bn    = [&](graph_case & g) { return build_norm_rope(g, p, false); };
    const run_result fused = run(true, bn);
    run_result       plain;
    {
        fusion_off_scope off;
        plain = run(true, bn);
    }
    ASSERT_TRUE(fused.ok && plain.ok);
    expect_all_on_vulkan(fused, {SD_VK_KERNEL_RMS_NORM_MUL_ROPE});
    expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
}

// max |a - b| / max(1, max |a|) over two F32 outputs (NaN anywhere: infinity)
double rel_max_diff(const std::vector<uint8_t> & a, const std::vector<uint8_t> & b) {
    const float * x = (const float *) a.data();
    const float * y = (const float *) b.data();
    double        m = 0.0, r = 1.0;
    for (size_t i = 0; i < a.size() / 4; ++i) {
        const double d = std::fabs((double) x[i] - (double) y[i]);
        if (!(d == d)) return INFINITY;
        m = std::max(m, d);
        r = std::max(r, (double) std::fabs(x[i]));
    }
    return m / r;
}

// The native Vulkan row ops (ggml-vulkan rows.comp: one subgroup per row, lanes looping over the
// row) and RoPE, at the real widths and at the block's full size (4096 tokens x 6144), against
// the CPU backend (float rounding apart: reductions in a different order).
TEST_F(VulkanSd, NativeRowOpsRealWidths) {
    struct rcase {
        int64_t ne0, rows;
        int     ops; // bit i: op i (0 RMS_NORM, 1 NORM, 2 SOFT_MAX with a mask, 3 RoPE NEOX)
    };
    std::vector<rcase> cases;
    for (const int64_t K : k_real_widths) cases.push_back({K, 7, 15});
    cases.push_back({6144, 4096, 1}); // the block's RMS norms: 4096 tokens x hidden 6144
    cases.push_back({4096, 1024, 4}); // attention scores: 4096 keys, 1024 query rows
    for (const rcase & c : cases) {
        for (int op = 0; op < 4; ++op) {
            if (!(c.ops >> op & 1)) continue;
            SCOPED_TRACE("ne0 " + std::to_string(c.ne0) + " rows " + std::to_string(c.rows) + " op " + std::to_string(op));
            const builder b = [&](graph_case & g) -> ggml_tensor * {
                ggml_tensor * x = g.input("nx", GGML_TYPE_F32, {c.ne0, c.rows}, fill::normal);
                switch (op) {
                    case 0: return ggml_rms_norm(g.ctx, x, 1e-6f);
                    case 1: return ggml_norm(g.ctx, x, 1e-6f);
                    case 2: {
                        ggml_tensor * m = g.input("nm", GGML_TYPE_F32, {c.ne0, c.rows}, fill::normal);
                        return ggml_soft_max_ext(g.ctx, x, m, 0.125f, 0.0f);
                    }
                    default: {
                        // NEOX RoPE over heads of 128 (the row split into heads, one position per row)
                        ggml_tensor * x3  = ggml_reshape_3d(g.ctx, x, 128, c.ne0 / 128, c.rows);
                        ggml_tensor * pos = g.input("np", GGML_TYPE_I32, {c.rows}, fill::normal);
                        return ggml_rope_ext(g.ctx, x3, pos, nullptr, 128, GGML_ROPE_TYPE_NEOX, 4096, 10000.0f, 1.0f,
                                             0.0f, 1.0f, 0.0f, 0.0f);
                    }
                }
            };
            const run_result cpu = run(false, b), vk = run(true, b);
            ASSERT_TRUE(cpu.ok && vk.ok);
            expect_all_on_vulkan(vk, {});
            // sin / cos of the device differ more than the reductions' summation order
            EXPECT_LE(rel_max_diff(cpu.out, vk.out), op == 3 ? 1e-4 : 1e-5) << "Vulkan vs CPU";
        }
    }
}

// Native FLASH_ATTN_EXT (ggml-vulkan flash_attn.comp: one subgroup per few queries, looping over
// every key) with the key counts of real token counts, head dim 128, a few queries.
TEST_F(VulkanSd, NativeFlashAttnLongKv) {
    for (const int64_t n_kv : {1024, 4096, 16384}) {
        SCOPED_TRACE("n_kv " + std::to_string(n_kv));
        const builder b = [&](graph_case & g) {
            ggml_tensor * q = g.input("fq", GGML_TYPE_F32, {128, 5, 2, 1}, fill::normal);
            ggml_tensor * k = g.input("fk", GGML_TYPE_F32, {128, n_kv, 1, 1}, fill::normal);
            ggml_tensor * v = g.input("fv", GGML_TYPE_F32, {128, n_kv, 1, 1}, fill::normal);
            ggml_tensor * o = ggml_flash_attn_ext(g.ctx, q, k, v, nullptr, 0.0884f, 0.0f, 0.0f);
            // F32 precision: at the default one a CPU whose kernel table picks bf16 products for
            // flash attention (Zen 4) is itself ~5e-4 off, and this compares against the CPU
            ggml_flash_attn_ext_set_prec(o, GGML_PREC_F32);
            return o;
        };
        const run_result cpu = run(false, b), vk = run(true, b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        expect_all_on_vulkan(vk, {});
        EXPECT_LE(rel_max_diff(cpu.out, vk.out), 1e-4) << "Vulkan vs CPU";
    }
}

// Past the loop budget of CPU implementations (vk-ops.cpp within_loop_budget): a SOFT_MAX row of
// 180000 and flash attention over 65600 keys came back wrong from lavapipe (the loops cut off);
// on lavapipe they are now declined and run on the CPU, with the CPU's result.
TEST_F(VulkanSd, NativeOpsPastTheLoopBudgetRunOnCpu) {
    const builder sm = [&](graph_case & g) {
        return ggml_soft_max_ext(g.ctx, g.input("sx", GGML_TYPE_F32, {180000, 2}, fill::normal), nullptr, 0.125f, 0.0f);
    };
    const builder fa = [&](graph_case & g) {
        ggml_tensor * q = g.input("fq", GGML_TYPE_F32, {128, 5, 2, 1}, fill::normal);
        ggml_tensor * k = g.input("fk", GGML_TYPE_F32, {128, 65600, 1, 1}, fill::normal);
        ggml_tensor * v = g.input("fv", GGML_TYPE_F32, {128, 65600, 1, 1}, fill::normal);
        return ggml_flash_attn_ext(g.ctx, q, k, v, nullptr, 0.0884f, 0.0f, 0.0f);
    };
    const ggml_ext_vulkan_device_info * info = sd_vk::device_info(ggml_backend_get_device(backends::get().vk));
    ASSERT_NE(info, nullptr);
    const bool cpu_driver = info->is_cpu; // GPUs have no loop cap: no limit there
    for (const builder * b : {&sm, &fa}) {
        const run_result cpu = run(false, *b), vk = run(true, *b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        bool on_cpu = false;
        for (const ggml_ext_step_info & s : vk.steps) on_cpu = on_cpu || s.backend == backends::get().cpu;
        if (cpu_driver) {
            EXPECT_TRUE(on_cpu) << "past the loop budget: should have been declined";
        }
        EXPECT_LE(rel_max_diff(cpu.out, vk.out), 1e-6);
    }
}

// RMS_NORM -> MUL -> RoPE -> [SCALE] -> [CPY to F16]: fusion on == off bit for bit, and the
// fused step covers the tail.
TEST_F(VulkanSd, RmsNormMulRopeScaleF16FusionEqualsUnfused) {
    for (const rope_param & p : k_rope_cases) {
        for (int tail = 1; tail < 4; ++tail) {
            SCOPED_TRACE(rope_name(p) + " tail " + std::to_string(tail));
            const builder    b     = [&](graph_case & g) { return build_norm_rope(g, p, false, tail); };
            const run_result fused = run(true, b);
            run_result       plain;
            {
                fusion_off_scope off;
                plain = run(true, b);
            }
            ASSERT_TRUE(fused.ok && plain.ok);
            expect_all_on_vulkan(fused, {SD_VK_KERNEL_RMS_NORM_MUL_ROPE});
            const int want = 3 + (tail & 1) + (tail >> 1 & 1);
            // odd element counts keep the F16 copy out of the fusion (whole 32-bit words)
            const bool f16_ok = (tail & 2) == 0 || (p.d * p.H * p.L * p.N) % 2 == 0;
            for (const ggml_ext_step_info & st : fused.steps) {
                if (st.kernel && strcmp(st.kernel, SD_VK_KERNEL_RMS_NORM_MUL_ROPE) == 0) {
                    EXPECT_EQ(st.n_nodes, f16_ok ? want : want - 1);
                }
            }
            expect_same_bytes(plain.out, fused.out, 0, plain.out.size(), "fused vs unfused");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ConvRot groups above 256 (1024, 4096, 16384: what convert-to-quant's dynamic mode writes),
// rotated through scratch rows in the workspace (convrot_large.glsl), at the real widths: the
// quantizer, the modulation -> ConvRot and SwiGLU -> ConvRot fusions and the INT8 linear with F32
// input, bit-identical to the CPU kernel where they are today for groups up to 256.

struct large_group_case {
    int64_t K;
    int     group;
};

// Every width of the issue that a group divides (16384 + 256 is a multiple of none), plus a
// ragged one per group below the row (a last round of groups that not every lane has).
std::vector<large_group_case> large_group_cases() {
    std::vector<large_group_case> c;
    for (const int group : {1024, 4096, 16384})
        for (const int64_t K : {(int64_t) 3072, (int64_t) 6144, (int64_t) 16384, (int64_t) 16640, (int64_t) 17408,
                                (int64_t) 20480})
            if (K % group == 0) c.push_back({K, group});
    return c;
}

std::string large_name(const large_group_case & c, int64_t rows) {
    return "K " + std::to_string(c.K) + " group " + std::to_string(c.group) + " rows " + std::to_string(rows);
}

// Sets an environment variable for a scope (the previous value restored).
struct env_scope {
    std::string name, old;
    bool        had = false;
    env_scope(const char * n, const char * v) : name(n) {
        const char * o = getenv(n);
        had            = o != nullptr;
        if (had) old = o;
        setenv(n, v, 1);
    }
    ~env_scope() {
        if (had) setenv(name.c_str(), old.c_str(), 1);
        else unsetenv(name.c_str());
    }
};

TEST_F(VulkanSd, QuantizeConvRotLargeGroupsBitIdenticalToCpu) {
    const std::vector<large_group_case> cases = large_group_cases();
    ASSERT_EQ(cases.size(), 8u); // 1024: 3072 6144 16384 17408 20480; 4096: 16384 20480; 16384: 16384
    for (const large_group_case & c : cases) {
        const int64_t rows = 7; // with fill::special_rows: zeros, Inf, NaN, huge, tiny, one value
        SCOPED_TRACE(large_name(c, rows));
        const builder b = [&](graph_case & g) {
            ggml_tensor * x = g.input("xg", GGML_TYPE_F32, {c.K, rows}, fill::special_rows);
            return ggml_quantize_i8_convrot(g.ctx, x, c.group);
        };
        const run_result cpu = run(false, b), vk = run(true, b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        expect_all_on_vulkan(vk, {SD_VK_KERNEL_QUANTIZE_I8});
        expect_packed_equal(cpu.out, vk.out, c.K, rows);
    }
}

// The rows split over several dispatches (a scratch window of 3 rows: 13 rows + 3 padding rows
// in 6 dispatches), a 3-D input, and normal-valued rows (every quantized value in play).
TEST_F(VulkanSd, QuantizeConvRotLargeGroupRowChunks) {
    for (const large_group_case c : {large_group_case{3072, 1024}, large_group_case{16384, 16384}}) {
        SCOPED_TRACE(large_name(c, 13));
        const std::string bytes = std::to_string(3 * 4 * c.K);
        env_scope         window("SD_VK_CONVROT_SCRATCH_BYTES", bytes.c_str());
        ASSERT_EQ(sd_vulkan_convrot_chunk_rows(ggml_backend_get_device(backends::get().vk), c.K, 13), 3);
        const builder b = [&](graph_case & g) {
            ggml_tensor * x = g.input("xc", GGML_TYPE_F32, {c.K, 13, 1}, fill::normal);
            return ggml_quantize_i8_convrot(g.ctx, ggml_reshape_3d(g.ctx, x, c.K, 1, 13), c.group);
        };
        const run_result cpu = run(false, b), vk = run(true, b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        expect_all_on_vulkan(vk, {SD_VK_KERNEL_QUANTIZE_I8});
        expect_packed_equal(cpu.out, vk.out, c.K, 13);
    }
}

// An output placed over its input (the workspace stages the output; the scratch rows follow it).
TEST_F(VulkanSd, QuantizeConvRotLargeGroupOverlappingOutput) {
    const builder quant = [](graph_case & g) {
        return ggml_quantize_i8_convrot(g.ctx, g.input("xo", GGML_TYPE_F32, {4096, 5}, fill::normal), 4096);
    };
    const run_result ref = run(false, quant);
    ASSERT_TRUE(ref.ok);
    for (size_t offset : {(size_t) 0, (size_t) 1028}) {
        SCOPED_TRACE("offset " + std::to_string(offset));
        const std::vector<uint8_t> got = run_aliased(quant, "xo", offset);
        ASSERT_EQ(got.size(), ref.out.size());
        expect_packed_equal(ref.out, got, 4096, 5);
    }
}

// The loop budget for the scratch-row path: the longest K of group 1024 within it runs on
// Vulkan, one group longer is declined and runs on the CPU; both give the CPU's bytes.
TEST_F(VulkanSd, QuantizeConvRotLargeGroupAtTheLoopBudget) {
    ggml_backend_dev_t dev = ggml_backend_get_device(backends::get().vk);
    const int          group = 1024;
    int64_t            K     = group;
    while (sd_vulkan_quant_lane_iterations(dev, K + group, group, false) <= sd_vk::kLoopBudget) K += group;
    EXPECT_GE(K, (int64_t) 130048) << "every K the INT8 linear admits (SD_LINEAR_I8_MAX_K) should fit";
    for (const int64_t k : {K, K + group}) {
        SCOPED_TRACE("K " + std::to_string(k));
        const builder b = [&](graph_case & g) {
            ggml_tensor * x = g.input("xb", GGML_TYPE_F32, {k, 2}, fill::normal);
            return ggml_quantize_i8_convrot(g.ctx, x, group);
        };
        const run_result cpu = run(false, b), vk = run(true, b);
        ASSERT_TRUE(cpu.ok && vk.ok);
        bool on_cpu = false;
        for (const ggml_ext_step_info & s : vk.steps) on_cpu = on_cpu || s.backend == backends::get().cpu;
        EXPECT_EQ(on_cpu, k > K) << "the budget's boundary";
        expect_packed_equal(cpu.out, vk.out, k, 2);
    }
}

// RMS_NORM -> ... -> ConvRot with a large group: fused == unfused on the device (both on Vulkan
// now) bit for bit, and within one quantization step of the CPU chain (its RMS_NORM sums in
// double), as for the groups up to 256.
TEST_F(VulkanSd, ModulationQuantizeLargeGroups) {
    for (const large_group_case & c : large_group_cases()) {
        if (c.K > 16384) continue; // the ragged widths are the quantizer's (same phases)
        const int64_t rows = 6;
        SCOPED_TRACE(large_name(c, rows));
        const builder    b     = [&](graph_case & g) { return build_modulation(g, c.K, rows, c.group, 0); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        const run_result cpu = run(false, b);
        ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_MODULATION_QUANTIZE});
        expect_all_on_vulkan(plain, {SD_VK_KERNEL_QUANTIZE_I8});
        expect_packed_equal(plain.out, fused.out, c.K, rows);
        expect_within_one_step(cpu.out, fused.out, c.K, rows, true);
    }
}

// The modulation fusion with its rows over several dispatches (scratch window of 2 rows).
TEST_F(VulkanSd, ModulationQuantizeLargeGroupRowChunks) {
    const int64_t K = 4096, rows = 9;
    env_scope     window("SD_VK_CONVROT_SCRATCH_BYTES", std::to_string(2 * 4 * K).c_str());
    const builder b     = [&](graph_case & g) { return build_modulation(g, K, rows, 4096, 0); };
    run_result    fused = run(true, b);
    run_result    plain;
    {
        fusion_off_scope off;
        plain = run(true, b);
    }
    ASSERT_TRUE(fused.ok && plain.ok);
    expect_all_on_vulkan(fused, {SD_VK_KERNEL_MODULATION_QUANTIZE});
    expect_packed_equal(plain.out, fused.out, K, rows);
}

// The INT8 linear with a large ConvRot group: F32 activations quantized in the workspace (the
// scratch rows after the activations) and the packed input from the quantizer node, with the
// gate / residual epilogue; bit-identical to the CPU.
TEST_F(VulkanSd, LinearI8LargeGroupsBitIdenticalToCpu) {
    for (const large_group_case & c : large_group_cases()) {
        if (c.K == 17408 || c.K == 20480) continue; // the quantizer's ragged widths
        for (const int kind : {SD_LINEAR_I8_INPUT_F32, SD_LINEAR_I8_INPUT_PACKED}) {
            const linear_param p = {c.K, 35, 5, kind, c.group, true, true};
            SCOPED_TRACE(large_name(c, p.rows) + " kind " + std::to_string(kind));
            const builder    b   = [&](graph_case & g) { return build_epilogue(g, p, true, 0, false); };
            const run_result cpu = run(false, b), vk = run(true, b);
            ASSERT_TRUE(cpu.ok && vk.ok);
            std::vector<std::string> want = {SD_VK_KERNEL_LINEAR_I8_GATE_RES};
            if (kind == SD_LINEAR_I8_INPUT_PACKED) want.push_back(SD_VK_KERNEL_QUANTIZE_I8);
            expect_all_on_vulkan(vk, want);
            expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "linear output");
        }
    }
    // the plain linear (no epilogue) on F32 input
    const linear_param p = {4096, 19, 3, SD_LINEAR_I8_INPUT_F32, 4096, false, true};
    const builder      b = [&](graph_case & g) { return build_linear(g, p); };
    const run_result cpu = run(false, b), vk = run(true, b);
    ASSERT_TRUE(cpu.ok && vk.ok);
    expect_all_on_vulkan(vk, {SD_VK_KERNEL_LINEAR_I8});
    expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "linear output");
}

// GEMM -> SwiGLU -> ConvRot with the product quantized in a large group (the MLP's hidden width
// N at the quantizer): fused == unfused on the device, within one step of the CPU chain (the
// native SILU's exp rounds differently), as SwigluQuantRealWidths for G = 256.
ggml_tensor * build_swiglu_group(graph_case & g, const linear_param & p, int quant_group) {
    ggml_tensor * x    = g.input("x", GGML_TYPE_F32, {p.K, p.rows}, fill::special_rows);
    ggml_tensor * wg   = g.input("wg", GGML_TYPE_I8, {p.K, p.N}, fill::int8_weight);
    ggml_tensor * wu   = g.input("wu", GGML_TYPE_I8, {p.K, p.N}, fill::int8_weight);
    ggml_tensor * sg   = g.input("sg", GGML_TYPE_F32, {p.N}, fill::positive);
    ggml_tensor * su   = g.input("su", GGML_TYPE_F32, {p.N}, fill::positive);
    ggml_tensor * q    = ggml_quantize_i8_convrot(g.ctx, x, p.group);
    ggml_tensor * gate = ggml_mul_mat_i8_tensorwise(g.ctx, wg, q, sg, nullptr, p.group);
    ggml_tensor * up   = ggml_mul_mat_i8_tensorwise(g.ctx, wu, q, su, nullptr, p.group);
    ggml_tensor * s    = ggml_silu(g.ctx, gate);
    g.expand_first     = {gate, up};
    return ggml_quantize_i8_convrot(g.ctx, ggml_mul(g.ctx, s, up), quant_group);
}

TEST_F(VulkanSd, SwigluQuantLargeGroups) {
    struct scase {
        int64_t K, N;
        int     in_group, quant_group;
    };
    for (const scase c : {scase{256, 3072, 256, 1024}, scase{1024, 16384, 1024, 16384}, scase{256, 16384, 256, 4096}}) {
        const linear_param p = {c.K, c.N, 5, SD_LINEAR_I8_INPUT_PACKED, c.in_group, true, false};
        SCOPED_TRACE("K " + std::to_string(c.K) + " N " + std::to_string(c.N) + " groups " +
                     std::to_string(c.in_group) + " / " + std::to_string(c.quant_group));
        const builder    b     = [&](graph_case & g) { return build_swiglu_group(g, p, c.quant_group); };
        const run_result fused = run(true, b);
        run_result       plain;
        {
            fusion_off_scope off;
            plain = run(true, b);
        }
        const run_result cpu = run(false, b);
        ASSERT_TRUE(fused.ok && plain.ok && cpu.ok);
        expect_all_on_vulkan(fused, {SD_VK_KERNEL_LINEAR_I8_SWIGLU});
        expect_all_on_vulkan(plain, {SD_VK_KERNEL_QUANTIZE_I8});
        expect_packed_equal(plain.out, fused.out, p.N, p.rows);
        expect_within_one_step(cpu.out, fused.out, p.N, p.rows, true);
    }
}

// ---------------------------------------------------------------------------------------------
// Tensors larger than one binding window (issue 25): the row-wise tensors of the sd kernels are
// bound a window of rows per dispatch (vk_service.h: max_binding_bytes, lowered here with
// SD_VK_MAX_BINDING_BYTES to split small shapes into many windows), so the node still runs on
// Vulkan, with the result of one dispatch bit for bit; weights (bound whole) that do not fit one
// window are declined and run on the CPU.

// Extension dispatches the Vulkan backend recorded during `fn`.
uint64_t ext_dispatches_during(const std::function<void()> & fn) {
    ggml_backend_t             vk  = backends::get().vk;
    const ggml_ext_vulkan_v1 * svc = sd_vk::service(ggml_backend_get_device(vk));
    ggml_ext_vulkan_stats      a{}, b{};
    a.size = b.size = sizeof(a);
    EXPECT_TRUE(svc && svc->get_stats(vk, &a));
    fn();
    EXPECT_TRUE(svc && svc->get_stats(vk, &b));
    return b.ext_dispatches - a.ext_dispatches;
}

// Runs b on Vulkan with one binding window of `window` bytes and without a forced window; the
// windowed run must take at least `extra` more extension dispatches (the windows).
struct windowed_runs {
    run_result whole, windowed;
};
windowed_runs run_windowed(const builder & b, uint64_t window, uint64_t extra) {
    windowed_runs r;
    const uint64_t n_whole = ext_dispatches_during([&] { r.whole = run(true, b); });
    uint64_t       n_win   = 0;
    {
        const std::string w = std::to_string(window);
        env_scope         scope("SD_VK_MAX_BINDING_BYTES", w.c_str());
        n_win = ext_dispatches_during([&] { r.windowed = run(true, b); });
    }
    EXPECT_GE(n_win, n_whole + extra) << "the forced window did not split the dispatches";
    return r;
}

TEST_F(VulkanSd, MaxBindingBytesEnvironmentLowersTheWindow) {
    ggml_backend_dev_t dev    = ggml_backend_get_device(backends::get().vk);
    const uint64_t     device = sd_vk::max_binding_bytes(dev);
    ASSERT_GT(device, 0u);
    {
        env_scope w("SD_VK_MAX_BINDING_BYTES", "4096");
        EXPECT_EQ(sd_vk::max_binding_bytes(dev), 4096u);
        EXPECT_EQ(sd_vulkan_quant_window_rows(dev, 256), 4); // 1 KiB F32 rows, in quartets
        EXPECT_EQ(sd_vulkan_quant_window_rows(dev, 512), 0); // a quartet of 2 KiB rows: over
        EXPECT_EQ(sd_vk::window_rows(dev, 100, 4), 40);
    }
    {
        env_scope w("SD_VK_MAX_BINDING_BYTES", "0"); // 0 / unparsable: the device's window
        EXPECT_EQ(sd_vk::max_binding_bytes(dev), device);
    }
    env_scope w("SD_VK_MAX_BINDING_BYTES", std::to_string(device * 2).c_str()); // never raises it
    EXPECT_EQ(sd_vk::max_binding_bytes(dev), device);
}

// The quantizer over 13 rows (3 padding rows in the last quartet) in windows of 4 rows, and a
// ConvRot group above 256 whose 3-row scratch splits quartets (windows 0-3, 3-6, ..., 12-15 and
// 15-16, padding only): bytes, padding and scales equal the CPU's.
TEST_F(VulkanSd, QuantizeConvRotInBindingWindowsBitIdenticalToCpu) {
    struct wcase {
        int64_t K, rows;
        int     group;
        bool    special;
        int64_t scratch_rows; // 0: no scratch limit
    };
    for (const wcase c : {wcase{256, 13, 256, true, 0}, wcase{256, 13, 16, false, 0}, wcase{1024, 13, 1024, true, 3}}) {
        SCOPED_TRACE("K " + std::to_string(c.K) + " rows " + std::to_string(c.rows) + " group " + std::to_string(c.group));
        const builder b = [&](graph_case & g) {
            ggml_tensor * x = g.input("xwin", GGML_TYPE_F32, {c.K, c.rows}, c.special ? fill::special_rows : fill::normal);
            return ggml_quantize_i8_convrot(g.ctx, x, c.group);
        };
        const std::string scratch = std::to_string(c.scratch_rows ? c.scratch_rows * 4 * c.K : 64 << 20);
        env_scope         sw("SD_VK_CONVROT_SCRATCH_BYTES", scratch.c_str());
        const run_result  cpu = run(false, b);
        // 4 rows a window (the 3-row scratch already splits the dispatches: no more of them)
        const windowed_runs r = run_windowed(b, 4 * 4 * (uint64_t) c.K, c.scratch_rows ? 0 : 3);
        ASSERT_TRUE(cpu.ok && r.whole.ok && r.windowed.ok);
        expect_all_on_vulkan(r.windowed, {SD_VK_KERNEL_QUANTIZE_I8});
        expect_packed_equal(cpu.out, r.windowed.out, c.K, c.rows);
        expect_packed_equal(r.whole.out, r.windowed.out, c.K, c.rows);
    }
}

// sd.linear_i8.v1 on F32, packed and plain I8 inputs, alone and with the gate / residual
// epilogue, with 1 KiB windows: the weights (512 bytes) fit whole, the activations, their packed
// copy and scales, the output and the residual go in windows of rows (3+ each). Bit-identical to
// the CPU.
TEST_F(VulkanSd, LinearI8InBindingWindowsBitIdenticalToCpu) {
    const linear_param cases[] = {
        {64, 8, 37, SD_LINEAR_I8_INPUT_F32, 64, true, true},
        {64, 8, 37, SD_LINEAR_I8_INPUT_PACKED, 16, true, false},
        {64, 8, 37, SD_LINEAR_I8_INPUT_I8, 0, false, true},
        {40, 12, 61, SD_LINEAR_I8_INPUT_I8, 0, true, true}, // K % 16 != 0: the 4 x 4 tile kernel
    };
    for (const linear_param & p : cases) {
        for (int epi = 0; epi < 3; ++epi) { // 0 the linear, 1 + residual, 2 + gate + residual
            SCOPED_TRACE("K " + std::to_string(p.K) + " N " + std::to_string(p.N) + " rows " + std::to_string(p.rows) +
                         " kind " + std::to_string(p.kind) + " epilogue " + std::to_string(epi));
            const builder b = [&](graph_case & g) {
                return epi == 0 ? build_linear(g, p) : build_epilogue(g, p, epi == 2, 0, false);
            };
            const run_result    cpu = run(false, b);
            const windowed_runs r   = run_windowed(b, 1024, 2);
            ASSERT_TRUE(cpu.ok && r.whole.ok && r.windowed.ok);
            std::vector<std::string> want = {epi ? SD_VK_KERNEL_LINEAR_I8_GATE_RES : SD_VK_KERNEL_LINEAR_I8};
            if (p.kind == SD_LINEAR_I8_INPUT_PACKED) want.push_back(SD_VK_KERNEL_QUANTIZE_I8);
            expect_all_on_vulkan(r.windowed, want);
            expect_same_bytes(cpu.out, r.windowed.out, 0, cpu.out.size(), "windowed Vulkan vs CPU");
            expect_same_bytes(r.whole.out, r.windowed.out, 0, cpu.out.size(), "windowed vs one dispatch");
        }
    }
}

// A weight over the window is declined (weights are bound whole): the linear runs on the CPU,
// with the CPU's result.
TEST_F(VulkanSd, LinearI8WeightOverTheBindingWindowDeclines) {
    const linear_param p = {64, 32, 9, SD_LINEAR_I8_INPUT_I8, 0, true, true}; // weight 2 KiB
    const builder      b = [&](graph_case & g) { return build_linear(g, p); };
    const run_result   cpu = run(false, b);
    env_scope          w("SD_VK_MAX_BINDING_BYTES", "1024");
    ggml_backend_dev_t dev = ggml_backend_get_device(backends::get().vk);
    const run_result   vk  = run(true, b);
    ASSERT_TRUE(cpu.ok && vk.ok);
    EXPECT_FALSE(has_step(vk, SD_VK_KERNEL_LINEAR_I8)) << "a weight over the window was not declined";
    bool on_cpu = false;
    for (const ggml_ext_step_info & s : vk.steps) on_cpu = on_cpu || s.backend == backends::get().cpu;
    EXPECT_TRUE(on_cpu);
    expect_same_bytes(cpu.out, vk.out, 0, cpu.out.size(), "declined linear");
    EXPECT_TRUE(sd_vk::fits_binding(dev, 1024));
    EXPECT_FALSE(sd_vk::fits_binding(dev, 2048));
}

// RMS_NORM -> MUL -> MUL -> ADD -> ADD -> ConvRot in windows of 4 rows (13 rows; and a group
// above 256 with a 3-row scratch): the fused step runs on Vulkan and equals the one-dispatch
// fused result bit for bit (the fusion reproduces the device's native chain, not the CPU's).
TEST_F(VulkanSd, ModulationQuantizeInBindingWindows) {
    struct mcase {
        int64_t K, rows;
        int     group;
        int64_t scratch_rows;
    };
    for (const mcase c : {mcase{256, 13, 256, 0}, mcase{1024, 13, 1024, 3}}) {
        SCOPED_TRACE("K " + std::to_string(c.K) + " rows " + std::to_string(c.rows) + " group " + std::to_string(c.group));
        const builder       b       = [&](graph_case & g) { return build_modulation(g, c.K, c.rows, c.group, 0); };
        const std::string   scratch = std::to_string(c.scratch_rows ? c.scratch_rows * 4 * c.K : 64 << 20);
        env_scope           sw("SD_VK_CONVROT_SCRATCH_BYTES", scratch.c_str());
        const windowed_runs r = run_windowed(b, 4 * 4 * (uint64_t) c.K, c.scratch_rows ? 0 : 3);
        ASSERT_TRUE(r.whole.ok && r.windowed.ok);
        expect_all_on_vulkan(r.whole, {SD_VK_KERNEL_MODULATION_QUANTIZE});
        expect_all_on_vulkan(r.windowed, {SD_VK_KERNEL_MODULATION_QUANTIZE});
        expect_packed_equal(r.whole.out, r.windowed.out, c.K, c.rows);
    }
}

// GEMM -> SwiGLU [-> ConvRot] with 4 KiB windows: the 4 KiB weights fit whole, the 1 KiB product
// rows go 4 a window (13 rows: 4 GEMM and 4 quantizer windows). Equals the one-dispatch fused
// result bit for bit.
TEST_F(VulkanSd, SwigluInBindingWindows) {
    const linear_param p = {16, 256, 13, SD_LINEAR_I8_INPUT_PACKED, 16, true, true};
    for (int wq = 0; wq < 2; ++wq) {
        SCOPED_TRACE("quant " + std::to_string(wq));
        const builder       b = [&](graph_case & g) { return build_swiglu(g, p, 0, wq, false); };
        const windowed_runs r = run_windowed(b, 4096, 3);
        ASSERT_TRUE(r.whole.ok && r.windowed.ok);
        expect_all_on_vulkan(r.windowed, {SD_VK_KERNEL_LINEAR_I8_SWIGLU});
        if (wq) expect_packed_equal(r.whole.out, r.windowed.out, p.N, p.rows);
        else expect_same_bytes(r.whole.out, r.windowed.out, 0, r.whole.out.size(), "windowed vs one dispatch");
    }
}

// sd.rope_apply.v1 over boxes of rows (contiguous and permuted inputs, both modes): bit-identical
// to the CPU; and RMS_NORM -> MUL -> RoPE [-> SCALE -> CPY F16] equal to the one-dispatch fused
// result. The PE tables (bound whole) fit the window; x and the outputs do not.
TEST_F(VulkanSd, RopeInBindingWindows) {
    const rope_param cases[] = {
        {16, 8, 5, 2, 8, SD_ROPE_INTERLEAVED, false},
        {16, 8, 5, 2, 8, SD_ROPE_SPLIT_HALF, false},
        {10, 6, 9, 1, 3, SD_ROPE_INTERLEAVED, true},
        {10, 6, 9, 1, 3, SD_ROPE_SPLIT_HALF, true},
    };
    for (const rope_param & p : cases) {
        SCOPED_TRACE(rope_name(p));
        const uint64_t window = 700; // pe: at most 640 bytes; x, out: 2160 - 5120 bytes
        const builder  b      = [&](graph_case & g) { return sd_rope_apply(g.ctx, rope_input(g, p), rope_pe(g, p), p.mode); };
        const run_result    cpu = run(false, b);
        const windowed_runs r   = run_windowed(b, window, 3);
        ASSERT_TRUE(cpu.ok && r.windowed.ok);
        expect_all_on_vulkan(r.windowed, {SD_VK_KERNEL_ROPE_APPLY});
        expect_same_bytes(cpu.out, r.windowed.out, 0, cpu.out.size(), "windowed rope vs CPU");
        for (int tail : {0, 3}) {
            SCOPED_TRACE("tail " + std::to_string(tail));
            const builder       bf = [&](graph_case & g) { return build_norm_rope(g, p, false, tail); };
            const windowed_runs f  = run_windowed(bf, window, 3);
            ASSERT_TRUE(f.whole.ok && f.windowed.ok);
            expect_all_on_vulkan(f.windowed, {SD_VK_KERNEL_RMS_NORM_MUL_ROPE});
            expect_same_bytes(f.whole.out, f.windowed.out, 0, f.whole.out.size(), "windowed fused vs one dispatch");
        }
    }
}

// SLOW (lavapipe: a 144 MiB tensor): the ConvRot quantizer over 2304 rows x 16384 F32, more than
// lavapipe's 128 MiB binding range, at the device's own window (no forced window): runs on
// Vulkan (formerly declined to the CPU) and equals the CPU bit for bit.
TEST_F(VulkanSd, QuantizeConvRotOver128MiBSlow) {
    const int64_t K = 16384, rows = 2304;
    ggml_backend_dev_t dev = ggml_backend_get_device(backends::get().vk);
    const builder      b   = [&](graph_case & g) {
        ggml_tensor * x = g.input("xbig", GGML_TYPE_F32, {K, rows}, fill::special_rows);
        return ggml_quantize_i8_convrot(g.ctx, x, 256);
    };
    const bool       one_window = sd_vk::fits_binding(dev, 4 * (uint64_t) K * rows);
    if (one_window) {
        GTEST_LOG_(INFO) << "this device binds " << sd_vk::max_binding_bytes(dev) << " bytes: one window";
    }
    const run_result cpu = run(false, b);
    run_result       vk;
    const uint64_t   n = ext_dispatches_during([&] { vk = run(true, b); });
    ASSERT_TRUE(cpu.ok && vk.ok);
    if (!one_window) {
        EXPECT_GE(n, 2u) << "a tensor over the binding range in one dispatch";
    }
    expect_all_on_vulkan(vk, {SD_VK_KERNEL_QUANTIZE_I8});
    expect_packed_equal(cpu.out, vk.out, K, rows);
}

} // namespace

// Leak checking (the sanitizer pass): keep the driver and layer libraries mapped so LeakSanitizer
// can name leaks inside them, and suppress those (not ours), as test-vulkan does.
void pin_vulkan_libraries() {
    for (const char * lib : {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so", "libVkLayer_MESA_device_select.so"}) {
        dlopen(lib, RTLD_NOW | RTLD_NODELETE | RTLD_LOCAL);
    }
}

extern "C" const char * __lsan_default_suppressions() {
    return "leak:libvulkan_lvp.so\nleak:libVkLayer_khronos_validation.so\nleak:libVkLayer_MESA_device_select.so\n"
           "leak:libvulkan.so\nleak:libLLVM\n";
}

int main(int argc, char ** argv) {
    pin_vulkan_libraries();
    setenv("GGML_VK_VALIDATE", "1", 0); // before the first registry use
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new BackendsFreer);
    return RUN_ALL_TESTS();
}
