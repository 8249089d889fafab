// The API stable-diffusion.cpp's pinned ggml adds to ggml.h / gguf.h, called the way sd.cpp calls
// it: plain ggml only (this binary links ggml alone, not sd-core, and never calls
// sd_ggml_register_extensions), so it proves the library itself carries the sd INT8 operators and
// kernels and registers them on first use.
//
//  * ggml_quantize_i8_convrot: packed bytes and row scales bit-identical to a plain reference
//    written here from the semantics (int8-convrot-facts.md, sd.cpp's docs/int8_convrot.md); the
//    reference's rotation is itself checked against the dense normalised H4 Kronecker matrix.
//  * ggml_mul_mat_i8_tensorwise: F32 and pre-packed input, with and without weight_scale and
//    bias, odd K, every ConvRot group size up to K = 16384, 2-D and 4-D activations: bit-identical
//    to the reference epilogue ((float(acc) * s_x) * s_w) + b over an exact integer sum.
//  * the sd CPU kernels ran (the scheduler's step report names them), not a fallback.
//  * gguf_write_to_file_ptr: the same bytes as gguf_write_to_file, read back.
//
// -ffp-contract=off (CMake): the reference rounds after every float operation like the kernels.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"
#include "gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

// ---------------------------------------------------------------------------------------------
// Plain reference

// The rotation of one group of G values as specified: scale by 1/sqrt(G) first, then log4(G)
// butterfly stages (stride 1, 4, 16, ...), each quartet (a, b, c, d) -> (a+b+c-d, a+b-c+d,
// a-b+c+d, -a+b+c+d) summed left to right.
void ref_rotate_group(float * v, int G) {
    if (G <= 1) return;
    const float c = 1.0f / sqrtf((float) G);
    for (int i = 0; i < G; ++i) v[i] = v[i] * c;
    for (int s = 1; s < G; s *= 4) {
        for (int blk = 0; blk < G; blk += 4 * s) {
            for (int j = 0; j < s; ++j) {
                float &     a0 = v[blk + j], &b0 = v[blk + j + s], &c0 = v[blk + j + 2 * s], &d0 = v[blk + j + 3 * s];
                const float a = a0, b = b0, cc = c0, d = d0;
                a0            = ((a + b) + cc) - d;
                b0            = ((a + b) - cc) + d;
                c0            = ((a - b) + cc) + d;
                d0            = ((-a + b) + cc) + d;
            }
        }
    }
}

// One row: rotate per group (G <= 1: none), s = amax / 127, q = clamp(rint(v * (1/s)), +-127).
float ref_quantize_row(const float * x, int64_t K, int G, int8_t * q) {
    std::vector<float> r(x, x + K);
    if (G > 1) {
        for (int64_t g = 0; g < K; g += G) ref_rotate_group(r.data() + g, G);
    }
    float amax = 0.0f;
    for (float v : r) amax = std::max(amax, std::fabs(v));
    const float s   = amax / 127.0f;
    const float inv = s == 0.0f ? 0.0f : 1.0f / s;
    for (int64_t i = 0; i < K; ++i) {
        const float f = nearbyintf(r[i] * inv); // round half to even (default rounding mode)
        q[i]          = (int8_t) std::max(-127.0f, std::min(127.0f, f));
    }
    return s;
}

// The packed tensor: rows of K bytes, zero rows to pad4(rows), then rows F32 scales at K*pad4.
std::vector<uint8_t> ref_pack(const std::vector<float> & x, int64_t K, int64_t rows, int G) {
    const int64_t        rows4 = (rows + 3) / 4 * 4;
    const int64_t        ne1   = rows4 + (rows * 4 + K - 1) / K;
    std::vector<uint8_t> out((size_t) (K * ne1), 0);
    for (int64_t r = 0; r < rows; ++r) {
        const float s = ref_quantize_row(x.data() + r * K, K, G, (int8_t *) out.data() + r * K);
        memcpy(out.data() + K * rows4 + r * 4, &s, 4);
    }
    return out;
}

// y[r, o] = ((float(sum_i q_x * q_w) * s_x[r]) * s_w[o]) + b[o] from a packed activation.
std::vector<float> ref_linear(const std::vector<uint8_t> & packed, int64_t K, int64_t rows, const std::vector<int8_t> & w,
                              int64_t N, const float * ws, const float * b) {
    const int64_t      rows4 = (rows + 3) / 4 * 4;
    std::vector<float> y((size_t) (rows * N));
    for (int64_t r = 0; r < rows; ++r) {
        const int8_t * q = (const int8_t *) packed.data() + r * K;
        float          sx;
        memcpy(&sx, packed.data() + K * rows4 + r * 4, 4);
        for (int64_t o = 0; o < N; ++o) {
            int64_t acc = 0;
            for (int64_t i = 0; i < K; ++i) acc += (int64_t) q[i] * w[(size_t) (o * K + i)];
            float v = (float) (int32_t) acc * sx;
            if (ws) v = v * ws[o];
            if (b) v = v + b[o];
            y[(size_t) (r * N + o)] = v;
        }
    }
    return y;
}

// The dense normalised Kronecker power of H4 (sd.cpp's docs/int8_convrot.md), entry (i, j).
double dense_h(int64_t i, int64_t j, int G) {
    static const int h4[4][4] = {
        { 1,  1,  1, -1},
        { 1,  1, -1,  1},
        { 1, -1,  1,  1},
        {-1,  1,  1,  1},
    };
    int sign = 1;
    for (int g = G; g > 1; g /= 4, i /= 4, j /= 4) sign *= h4[i % 4][j % 4];
    return sign / std::sqrt((double) G);
}

// ---------------------------------------------------------------------------------------------
// Running a graph on the CPU backend through plain ggml

struct cpu_env {
    ggml_backend_t backend = nullptr;
    cpu_env() {
        backend = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(backend, 2);
    }
    ~cpu_env() { ggml_backend_free(backend); }
};

struct graph_ctx {
    ggml_context * ctx = nullptr;
    graph_ctx() {
        ggml_init_params p = {64 * 1024 * 1024, nullptr, true};
        ctx                = ggml_init(p);
    }
    ~graph_ctx() { ggml_free(ctx); }
};

struct linear_case {
    int64_t K, N;
    int64_t ne1, ne2, ne3; // activation row shape
    int     group;         // ConvRot group of the quantizer / GEMM (0 = none for F32 input)
    bool    packed;        // input pre-packed with ggml_quantize_i8_convrot
    bool    weight_scale, bias;
    bool    column_scale;  // weight_scale with ne [1, N] (ComfyUI's PyTorch [N, 1]) instead of [N]
};

std::string name_of(const linear_case & c) {
    char buf[160];
    snprintf(buf, sizeof(buf), "K%lld_N%lld_rows%lldx%lldx%lld_G%d_%s%s%s", (long long) c.K, (long long) c.N,
             (long long) c.ne1, (long long) c.ne2, (long long) c.ne3, c.group, c.packed ? "packed" : "f32",
             c.weight_scale ? (c.column_scale ? "_wsNx1" : "_ws") : "", c.bias ? "_bias" : "");
    return buf;
}

void run_linear_case(const linear_case & c, ggml_backend_t backend) {
    SCOPED_TRACE(name_of(c));
    const int64_t rows = c.ne1 * c.ne2 * c.ne3;
    std::mt19937  rng((uint32_t) (c.K * 131 + c.N * 7 + rows + c.group));
    std::normal_distribution<float>   nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> wi(-127, 127);

    std::vector<float> x((size_t) (c.K * rows));
    for (float & v : x) v = nd(rng);
    // an outlier column (what the rotation is for) and an all-zero row (scale 0)
    for (int64_t r = 0; r < rows; ++r) x[(size_t) (r * c.K + (c.K / 3))] *= 40.0f;
    if (rows > 2) std::fill(x.begin() + c.K, x.begin() + 2 * c.K, 0.0f);
    std::vector<int8_t> w((size_t) (c.K * c.N));
    for (int8_t & v : w) v = (int8_t) wi(rng);
    std::vector<float> ws((size_t) c.N), b((size_t) c.N);
    for (float & v : ws) v = 0.001f + std::fabs(nd(rng)) * 0.01f;
    for (float & v : b) v = nd(rng);

    graph_ctx     g;
    ggml_tensor * tx = ggml_new_tensor_4d(g.ctx, GGML_TYPE_F32, c.K, c.ne1, c.ne2, c.ne3);
    ggml_tensor * tw = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I8, c.K, c.N);
    ggml_tensor * ts = c.weight_scale ? (c.column_scale ? ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 1, c.N)
                                                        : ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, c.N))
                                      : nullptr;
    ggml_tensor * tb = c.bias ? ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, c.N) : nullptr;
    ggml_tensor * tq = nullptr;
    ggml_tensor * in = tx;
    if (c.packed) {
        tq = ggml_quantize_i8_convrot(g.ctx, tx, c.group);
        ASSERT_NE(tq, nullptr) << ggml_ext_last_error();
        in = tq;
    }
    ggml_tensor * ty = ggml_mul_mat_i8_tensorwise(g.ctx, tw, in, ts, tb, c.group);
    ASSERT_NE(ty, nullptr) << ggml_ext_last_error();
    ASSERT_EQ(ty->type, GGML_TYPE_F32);
    EXPECT_EQ(ty->ne[0], c.N);
    EXPECT_EQ(ty->ne[1], c.ne1);
    EXPECT_EQ(ty->ne[2], c.ne2);
    EXPECT_EQ(ty->ne[3], c.ne3);
    if (tq) {
        EXPECT_EQ(tq->type, GGML_TYPE_I8);
        EXPECT_EQ(tq->ne[0], c.K);
        EXPECT_EQ(tq->ne[1], (rows + 3) / 4 * 4 + (rows * 4 + c.K - 1) / c.K);
        EXPECT_EQ(tq->ne[2] * tq->ne[3], 1);
    }

    // the kernels exist on the CPU device although nobody registered anything by hand
    ggml_backend_dev_t cpu_dev = ggml_backend_get_device(backend);
    EXPECT_TRUE(ggml_backend_dev_supports_op(cpu_dev, ty));
    if (tq) {
        EXPECT_TRUE(ggml_backend_dev_supports_op(cpu_dev, tq));
    }

    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    if (tq) ggml_set_output(tq);
    ggml_set_output(ty);
    ggml_build_forward_expand(gf, ty);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(g.ctx, backend);
    ASSERT_NE(buf, nullptr);
    ggml_backend_tensor_set(tx, x.data(), 0, ggml_nbytes(tx));
    ggml_backend_tensor_set(tw, w.data(), 0, ggml_nbytes(tw));
    if (ts) ggml_backend_tensor_set(ts, ws.data(), 0, ggml_nbytes(ts));
    if (tb) ggml_backend_tensor_set(tb, b.data(), 0, ggml_nbytes(tb));
    ASSERT_EQ(ggml_backend_graph_compute(backend, gf), GGML_STATUS_SUCCESS);

    const int rot = c.group > 1 ? c.group : 1;
    const std::vector<uint8_t> want_packed = ref_pack(x, c.K, rows, rot);
    if (tq) {
        std::vector<uint8_t> got(ggml_nbytes(tq));
        ggml_backend_tensor_get(tq, got.data(), 0, got.size());
        ASSERT_EQ(got.size(), want_packed.size());
        // quantized rows and the scales (the zero padding rows are never read: not compared)
        const int64_t rows4 = (rows + 3) / 4 * 4;
        EXPECT_EQ(0, memcmp(got.data(), want_packed.data(), (size_t) (rows * c.K))) << "quantized rows differ";
        EXPECT_EQ(0, memcmp(got.data() + c.K * rows4, want_packed.data() + c.K * rows4, (size_t) rows * 4))
            << "row scales differ";
    }
    const std::vector<float> want = ref_linear(want_packed, c.K, rows, w, c.N, ts ? ws.data() : nullptr,
                                               tb ? b.data() : nullptr);
    std::vector<float>       got((size_t) ggml_nelements(ty));
    ggml_backend_tensor_get(ty, got.data(), 0, ggml_nbytes(ty));
    int64_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (memcmp(&got[i], &want[i], 4) != 0 && bad++ < 5) {
            ADD_FAILURE() << "y[" << i << "] = " << got[i] << ", reference " << want[i];
        }
    }
    EXPECT_EQ(bad, 0) << "outputs differing from the reference (bit for bit)";
    ggml_backend_buffer_free(buf);
}

// ---------------------------------------------------------------------------------------------

TEST(SdcppApi, reference_rotation_is_the_dense_h4_kronecker_power) {
    for (int G : {4, 16, 64, 256, 1024}) {
        std::mt19937                    rng((uint32_t) G);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float>              v((size_t) G);
        for (float & e : v) e = nd(rng);
        std::vector<float> r = v;
        ref_rotate_group(r.data(), G);
        double err = 0, norm = 0;
        for (int i = 0; i < G; ++i) {
            double d = 0;
            for (int j = 0; j < G; ++j) d += dense_h(i, j, G) * v[(size_t) j];
            err  = std::max(err, std::fabs(d - r[(size_t) i]));
            norm = std::max(norm, std::fabs(d));
        }
        EXPECT_LT(err, 1e-5 * norm * std::log2((double) G)) << "G = " << G;
    }
}

TEST(SdcppApi, quantize_and_linear_match_the_reference_without_registration) {
    cpu_env                        env;
    const std::vector<linear_case> cases = {
        // odd K: no power of 4 > 1 divides it, so group 1 (packed) / 0 (F32)
        {7, 3, 5, 1, 1, 1, true, true, true, false},
        {7, 3, 5, 1, 1, 0, false, true, true, false},
        {13, 5, 3, 2, 1, 1, true, false, false, false},
        // 4-D activations
        {12, 6, 3, 2, 2, 4, true, true, false, true},
        {48, 9, 2, 3, 1, 16, false, false, true, false},
        {320, 17, 9, 1, 1, 64, true, true, true, false},
        {320, 17, 9, 1, 1, 64, false, true, true, false},
        {768, 33, 13, 1, 1, 256, true, true, true, true},
        {768, 33, 13, 1, 1, 256, false, false, false, false},
        {3072, 40, 6, 1, 1, 256, true, true, true, false},
        // K up to 16384 with large groups (a power of 4 dividing K; the whole row at 16384)
        {16384, 8, 3, 1, 1, 1024, true, true, true, false},
        {16384, 8, 3, 1, 1, 4096, false, true, false, false},
        {16384, 5, 2, 1, 1, 16384, true, false, true, false},
        {16384, 5, 2, 1, 1, 0, false, true, true, false},
    };
    for (const linear_case & c : cases) run_linear_case(c, env.backend);
}

// sd.cpp builds one packed tensor per (input, group) and feeds it to several linears; the
// scheduler's step report shows the sd CPU kernels (with their fused scale/bias epilogue) ran.
TEST(SdcppApi, shared_packed_input_runs_the_sd_kernels) {
    cpu_env       env;
    graph_ctx     g;
    const int64_t K = 256, N1 = 24, N2 = 40, rows = 10;
    ggml_tensor * x  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, K, rows);
    ggml_tensor * w1 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I8, K, N1);
    ggml_tensor * w2 = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I8, K, N2);
    ggml_tensor * s1 = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, N1);
    ggml_tensor * b2 = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, N2);
    ggml_tensor * q  = ggml_quantize_i8_convrot(g.ctx, x, 64);
    ggml_tensor * y1 = ggml_mul_mat_i8_tensorwise(g.ctx, w1, q, s1, nullptr, 64);
    ggml_tensor * y2 = ggml_mul_mat_i8_tensorwise(g.ctx, w2, q, nullptr, b2, 64);
    ASSERT_TRUE(q && y1 && y2) << ggml_ext_last_error();
    ggml_set_output(y1);
    ggml_set_output(y2);
    ggml_cgraph * gf = ggml_new_graph(g.ctx);
    ggml_build_forward_expand(gf, y1);
    ggml_build_forward_expand(gf, y2);

    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(g.ctx, env.backend);
    std::mt19937          rng(5);
    std::normal_distribution<float>    nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> wi(-127, 127);
    std::vector<float>                 xv((size_t) (K * rows)), s1v((size_t) N1), b2v((size_t) N2);
    std::vector<int8_t>                w1v((size_t) (K * N1)), w2v((size_t) (K * N2));
    for (float & v : xv) v = nd(rng);
    for (float & v : s1v) v = 0.02f + std::fabs(nd(rng)) * 0.01f;
    for (float & v : b2v) v = nd(rng);
    for (int8_t & v : w1v) v = (int8_t) wi(rng);
    for (int8_t & v : w2v) v = (int8_t) wi(rng);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(w1, w1v.data(), 0, ggml_nbytes(w1));
    ggml_backend_tensor_set(w2, w2v.data(), 0, ggml_nbytes(w2));
    ggml_backend_tensor_set(s1, s1v.data(), 0, ggml_nbytes(s1));
    ggml_backend_tensor_set(b2, b2v.data(), 0, ggml_nbytes(b2));

    ggml_backend_t       backends[1] = {env.backend};
    ggml_backend_sched_t sched       = ggml_backend_sched_new(backends, nullptr, 1, GGML_DEFAULT_GRAPH_SIZE, false, true);
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
    ASSERT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);
    int n_quant = 0, n_linear = 0, n_native = 0;
    for (int i = 0; i < ggml_ext_sched_n_steps(sched); ++i) {
        ggml_ext_step_info info{};
        ASSERT_TRUE(ggml_ext_sched_get_step(sched, i, &info));
        if (info.kernel == nullptr) {
            ++n_native;
        } else if (strcmp(info.kernel, "sd.cpu.quantize_i8_convrot") == 0) {
            ++n_quant;
        } else if (strcmp(info.kernel, "sd.cpu.linear_i8") == 0) {
            ++n_linear;
        }
    }
    EXPECT_EQ(n_quant, 1) << "the packed input is computed once";
    EXPECT_EQ(n_linear, 2);
    EXPECT_EQ(n_native, 0) << "no INT8 node fell back to a native range";

    const std::vector<uint8_t> packed = ref_pack(xv, K, rows, 64);
    const std::vector<float>   want1  = ref_linear(packed, K, rows, w1v, N1, s1v.data(), nullptr);
    const std::vector<float>   want2  = ref_linear(packed, K, rows, w2v, N2, nullptr, b2v.data());
    std::vector<float>         got1((size_t) (N1 * rows)), got2((size_t) (N2 * rows));
    ggml_backend_tensor_get(y1, got1.data(), 0, ggml_nbytes(y1));
    ggml_backend_tensor_get(y2, got2.data(), 0, ggml_nbytes(y2));
    EXPECT_EQ(0, memcmp(got1.data(), want1.data(), got1.size() * 4));
    EXPECT_EQ(0, memcmp(got2.data(), want2.data(), got2.size() * 4));
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(wbuf);
}

// On a Vulkan device (lavapipe in CI) the same calls run the sd Vulkan kernels, which are
// bit-identical to the CPU ones, through a scheduler [Vulkan, CPU] exactly as sd.cpp schedules:
// still no registration by hand. Shapes the Vulkan kernels decline (K % 4 != 0) fall back to the
// CPU kernel through the scheduler.
TEST(SdcppApi, vulkan_device_runs_the_sd_vulkan_kernels) {
    ggml_backend_dev_t gpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
    if (gpu == nullptr) GTEST_SKIP() << "no GPU device in this build / machine";
    struct vk_case {
        int64_t K, N, rows;
        int     G;
        bool    packed, on_gpu;
    };
    for (const vk_case c : {vk_case{768, 33, 9, 256, true, true}, vk_case{768, 33, 9, 256, false, true},
                            vk_case{320, 20, 5, 64, true, true}, vk_case{7, 3, 5, 1, true, false}}) {
        SCOPED_TRACE("K " + std::to_string(c.K) + " G " + std::to_string(c.G) + (c.packed ? " packed" : " f32"));
        ggml_backend_t vk  = ggml_backend_dev_init(gpu, nullptr);
        ggml_backend_t cpu = ggml_backend_cpu_init();
        ASSERT_TRUE(vk && cpu);
        graph_ctx     g;
        ggml_tensor * x  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, c.K, c.rows);
        ggml_tensor * w  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I8, c.K, c.N);
        ggml_tensor * ws = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, c.N);
        ggml_tensor * b  = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, c.N);
        ggml_tensor * in = c.packed ? ggml_quantize_i8_convrot(g.ctx, x, c.G) : x;
        ggml_tensor * y  = ggml_mul_mat_i8_tensorwise(g.ctx, w, in, ws, b, c.G);
        ASSERT_NE(y, nullptr) << ggml_ext_last_error();
        EXPECT_EQ(ggml_backend_dev_supports_op(gpu, y), c.on_gpu);
        ggml_set_output(y);
        ggml_cgraph * gf = ggml_new_graph(g.ctx);
        ggml_build_forward_expand(gf, y);

        std::mt19937                       rng((uint32_t) c.K);
        std::normal_distribution<float>    nd(0.0f, 1.0f);
        std::uniform_int_distribution<int> wi(-127, 127);
        std::vector<float>                 xv((size_t) (c.K * c.rows)), wsv((size_t) c.N), bv((size_t) c.N);
        std::vector<int8_t>                wv((size_t) (c.K * c.N));
        for (float & v : xv) v = nd(rng);
        for (float & v : wsv) v = 0.003f + std::fabs(nd(rng)) * 0.01f;
        for (float & v : bv) v = nd(rng);
        for (int8_t & v : wv) v = (int8_t) wi(rng);

        ggml_backend_t       backends[2] = {vk, cpu};
        ggml_backend_sched_t sched = ggml_backend_sched_new(backends, nullptr, 2, GGML_DEFAULT_GRAPH_SIZE, false, true);
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(sched, gf));
        ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
        ggml_backend_tensor_set(w, wv.data(), 0, ggml_nbytes(w));
        ggml_backend_tensor_set(ws, wsv.data(), 0, ggml_nbytes(ws));
        ggml_backend_tensor_set(b, bv.data(), 0, ggml_nbytes(b));
        ASSERT_EQ(ggml_backend_sched_graph_compute(sched, gf), GGML_STATUS_SUCCESS);
        int n_vk = 0, n_cpu = 0;
        for (int i = 0; i < ggml_ext_sched_n_steps(sched); ++i) {
            ggml_ext_step_info info{};
            ASSERT_TRUE(ggml_ext_sched_get_step(sched, i, &info));
            if (info.kernel && strncmp(info.kernel, "sd.vulkan.", 10) == 0) ++n_vk;
            if (info.kernel && strncmp(info.kernel, "sd.cpu.", 7) == 0) ++n_cpu;
        }
        if (c.on_gpu) {
            EXPECT_EQ(n_vk, c.packed ? 2 : 1) << "the INT8 nodes ran as sd Vulkan kernels";
        } else {
            EXPECT_EQ(n_cpu, c.packed ? 2 : 1) << "declined shapes fall back to the sd CPU kernels";
        }
        const int                rot  = c.G > 1 ? c.G : 1;
        const std::vector<float> want = ref_linear(ref_pack(xv, c.K, c.rows, rot), c.K, c.rows, wv, c.N, wsv.data(), bv.data());
        std::vector<float>       got(want.size());
        ggml_backend_tensor_get(y, got.data(), 0, ggml_nbytes(y));
        EXPECT_EQ(0, memcmp(got.data(), want.data(), got.size() * 4)) << "bit-identical to the reference";
        ggml_backend_sched_free(sched);
        ggml_backend_free(cpu);
        ggml_backend_free(vk);
    }
}

// ggml_graph_compute_with_ctx (a temporary CPU backend over host tensors) runs them too.
TEST(SdcppApi, graph_compute_with_ctx_runs_the_int8_nodes) {
    ggml_init_params p   = {16 * 1024 * 1024, nullptr, false};
    ggml_context *   ctx = ggml_init(p);
    const int64_t    K = 64, N = 5, rows = 3;
    ggml_tensor *    x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, rows);
    ggml_tensor *    w = ggml_new_tensor_2d(ctx, GGML_TYPE_I8, K, N);
    ggml_tensor *    s = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
    std::vector<float>  xv((size_t) (K * rows)), sv((size_t) N, 0.5f);
    std::vector<int8_t> wv((size_t) (K * N));
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = (float) ((int) (i * 37 % 23) - 11) / 3.0f;
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = (int8_t) ((int) (i * 53 % 255) - 127);
    memcpy(x->data, xv.data(), ggml_nbytes(x));
    memcpy(w->data, wv.data(), ggml_nbytes(w));
    memcpy(s->data, sv.data(), ggml_nbytes(s));
    ggml_tensor * y = ggml_mul_mat_i8_tensorwise(ctx, w, ggml_quantize_i8_convrot(ctx, x, 16), s, nullptr, 16);
    ASSERT_NE(y, nullptr) << ggml_ext_last_error();
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ASSERT_EQ(ggml_graph_compute_with_ctx(ctx, gf, 2), GGML_STATUS_SUCCESS);
    const std::vector<float> want = ref_linear(ref_pack(xv, K, rows, 16), K, rows, wv, N, sv.data(), nullptr);
    EXPECT_EQ(0, memcmp(y->data, want.data(), want.size() * 4));
    ggml_free(ctx);
}

// Bad arguments: NULL and a message naming the problem, never a crash.
TEST(SdcppApi, malformed_arguments_are_refused_with_a_message) {
    graph_ctx     g;
    ggml_tensor * x  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 96, 2);
    ggml_tensor * w  = ggml_new_tensor_2d(g.ctx, GGML_TYPE_I8, 96, 4);
    ggml_tensor * wf = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 96, 4);
    EXPECT_EQ(ggml_quantize_i8_convrot(g.ctx, x, 3), nullptr);
    EXPECT_NE(std::string(ggml_ext_last_error()).find("power of 4"), std::string::npos) << ggml_ext_last_error();
    EXPECT_EQ(ggml_quantize_i8_convrot(g.ctx, x, 64), nullptr); // 64 does not divide 96
    EXPECT_NE(std::string(ggml_ext_last_error()).find("does not divide"), std::string::npos) << ggml_ext_last_error();
    EXPECT_EQ(ggml_mul_mat_i8_tensorwise(g.ctx, wf, x, nullptr, nullptr, 0), nullptr);
    EXPECT_NE(std::string(ggml_ext_last_error()).find("weight must be I8"), std::string::npos) << ggml_ext_last_error();
    ggml_tensor * q = ggml_quantize_i8_convrot(g.ctx, x, 16);
    ASSERT_NE(q, nullptr);
    EXPECT_EQ(ggml_mul_mat_i8_tensorwise(g.ctx, w, q, nullptr, nullptr, 4), nullptr); // group mismatch
    EXPECT_NE(std::string(ggml_ext_last_error()).find("group"), std::string::npos) << ggml_ext_last_error();
    ggml_tensor * bad_scale = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 3);
    EXPECT_EQ(ggml_mul_mat_i8_tensorwise(g.ctx, w, x, bad_scale, nullptr, 0), nullptr);
    EXPECT_NE(std::string(ggml_ext_last_error()).find("weight_scale"), std::string::npos) << ggml_ext_last_error();
}

// ---------------------------------------------------------------------------------------------
// gguf_write_to_file_ptr

std::vector<uint8_t> read_all(FILE * f) {
    std::vector<uint8_t> out;
    uint8_t              buf[4096];
    size_t               n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.insert(out.end(), buf, buf + n);
    return out;
}

TEST(SdcppApi, gguf_write_to_file_ptr_round_trips) {
    graph_ctx     g;
    ggml_tensor * a = ggml_new_tensor_2d(g.ctx, GGML_TYPE_F32, 5, 3);
    ggml_tensor * b = ggml_new_tensor_1d(g.ctx, GGML_TYPE_I8, 7);
    ggml_set_name(a, "a");
    ggml_set_name(b, "b");
    std::vector<float>  av(15);
    std::vector<int8_t> bv(7);
    for (int i = 0; i < 15; ++i) av[(size_t) i] = 0.25f * (float) i - 1.0f;
    for (int i = 0; i < 7; ++i) bv[(size_t) i] = (int8_t) (i * 17 - 50);

    gguf_context * ctx = gguf_init_empty();
    gguf_set_val_str(ctx, "general.name", "sdcpp-api");
    gguf_set_val_u32(ctx, "x.count", 42);
    gguf_add_tensor(ctx, a);
    gguf_add_tensor(ctx, b);
    gguf_set_tensor_data(ctx, "a", av.data());
    gguf_set_tensor_data(ctx, "b", bv.data());

    // a stream with bytes before the file: written at the current position
    FILE * f = tmpfile();
    ASSERT_NE(f, nullptr);
    fputs("prefix", f);
    ASSERT_TRUE(gguf_write_to_file_ptr(ctx, f, false));
    fflush(f);
    rewind(f);
    std::vector<uint8_t> streamed = read_all(f);
    fclose(f);
    ASSERT_GT(streamed.size(), 6u);
    EXPECT_EQ(0, memcmp(streamed.data(), "prefix", 6));
    streamed.erase(streamed.begin(), streamed.begin() + 6);

    // the same bytes as gguf_write_to_file, and gguf reads them back
    char path[] = "/tmp/test-sdcpp-api-XXXXXX";
    int  fd     = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    ASSERT_TRUE(gguf_write_to_file(ctx, path, false));
    FILE * pf = fopen(path, "rb");
    ASSERT_NE(pf, nullptr);
    const std::vector<uint8_t> whole = read_all(pf);
    fclose(pf);
    EXPECT_EQ(streamed, whole);

    // only the meta data: gguf_get_meta_size bytes
    FILE * mf = tmpfile();
    ASSERT_TRUE(gguf_write_to_file_ptr(ctx, mf, true));
    EXPECT_EQ((size_t) ftell(mf), gguf_get_meta_size(ctx));
    fclose(mf);

    ggml_context * data_ctx = nullptr;
    gguf_init_params ip     = {false, &data_ctx};
    gguf_context *   back   = gguf_init_from_file(path, ip);
    ASSERT_NE(back, nullptr) << gguf_last_error();
    EXPECT_STREQ(gguf_get_val_str(back, gguf_find_key(back, "general.name")), "sdcpp-api");
    EXPECT_EQ(gguf_get_val_u32(back, gguf_find_key(back, "x.count")), 42u);
    ggml_tensor * ra = ggml_get_tensor(data_ctx, "a");
    ggml_tensor * rb = ggml_get_tensor(data_ctx, "b");
    ASSERT_TRUE(ra && rb);
    EXPECT_EQ(0, memcmp(ra->data, av.data(), av.size() * 4));
    EXPECT_EQ(0, memcmp(rb->data, bv.data(), bv.size()));
    gguf_free(back);
    ggml_free(data_ctx);

    // a NULL stream and a tensor without data are refused, not crashed on
    EXPECT_FALSE(gguf_write_to_file_ptr(ctx, nullptr, false));
    gguf_context * nodata = gguf_init_empty();
    gguf_add_tensor(nodata, a);
    FILE * nf = tmpfile();
    EXPECT_FALSE(gguf_write_to_file_ptr(nodata, nf, false));
    fclose(nf);
    gguf_free(nodata);
    gguf_free(ctx);
    unlink(path);
}

// gguf_write_to_file replaces a path only with a complete file: a refused write keeps the old one.
TEST(SdcppApi, gguf_write_to_file_refusal_keeps_the_old_file) {
    char path[] = "/tmp/test-sdcpp-api-XXXXXX";
    int  fd     = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, "old", 3), 3);
    close(fd);
    graph_ctx      g;
    ggml_tensor *  a   = ggml_new_tensor_1d(g.ctx, GGML_TYPE_F32, 4);
    gguf_context * ctx = gguf_init_empty();
    ggml_set_name(a, "a");
    gguf_add_tensor(ctx, a); // no data: refused before anything is written
    EXPECT_FALSE(gguf_write_to_file(ctx, path, false));
    FILE * f = fopen(path, "rb");
    ASSERT_NE(f, nullptr);
    const std::vector<uint8_t> kept = read_all(f);
    fclose(f);
    EXPECT_EQ(std::string(kept.begin(), kept.end()), "old");
    EXPECT_TRUE(gguf_write_to_file(ctx, path, true)); // meta only: replaces it
    f = fopen(path, "rb");
    const std::vector<uint8_t> meta = read_all(f);
    fclose(f);
    EXPECT_EQ(meta.size(), gguf_get_meta_size(ctx));
    gguf_free(ctx);
    unlink(path);
}

} // namespace
