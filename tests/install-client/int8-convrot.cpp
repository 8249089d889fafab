// The INT8 ConvRot entry points of stable-diffusion.cpp's pinned ggml, called through the
// installed package only (find_package(ggml), ggml::ggml; no sd header, no registration call):
// proves the package carries the sd INT8 operators and kernels. Built by CMakeLists.txt only when
// the package says it has them (ggml_HAS_SD_INT8), so the same client still builds against
// upstream ggml. Checks against a plain reference written here from the semantics in ggml.h:
// rotation per group of G (values * 1/sqrt(G), then H4 butterflies), s = amax / 127,
// q = clamp(round_half_even(v * (1/s)), +-127), y = ((float(sum q_x q_w) * s_x) * s_w) + b.
// Exact comparison: compiled with -ffp-contract=off (CMakeLists.txt).

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

void rotate(float * v, int G) {
    const float c = 1.0f / std::sqrt((float) G);
    for (int i = 0; i < G; ++i) v[i] = v[i] * c;
    for (int s = 1; s < G; s *= 4) {
        for (int blk = 0; blk < G; blk += 4 * s) {
            for (int j = 0; j < s; ++j) {
                const float a = v[blk + j], b = v[blk + j + s], c2 = v[blk + j + 2 * s], d = v[blk + j + 3 * s];
                v[blk + j]         = ((a + b) + c2) - d;
                v[blk + j + s]     = ((a + b) - c2) + d;
                v[blk + j + 2 * s] = ((a - b) + c2) + d;
                v[blk + j + 3 * s] = ((-a + b) + c2) + d;
            }
        }
    }
}

float quantize(const float * x, int K, int G, int8_t * q) {
    std::vector<float> r(x, x + K);
    for (int g = 0; G > 1 && g < K; g += G) rotate(r.data() + g, G);
    float amax = 0.0f;
    for (float v : r) amax = std::max(amax, std::fabs(v));
    const float s   = amax / 127.0f;
    const float inv = s == 0.0f ? 0.0f : 1.0f / s;
    for (int i = 0; i < K; ++i) q[i] = (int8_t) std::max(-127.0f, std::min(127.0f, std::nearbyint(r[i] * inv)));
    return s;
}

int check(int K, int N, int rows, int G, bool prepacked) {
    ggml_init_params p   = {16 * 1024 * 1024, nullptr, true};
    ggml_context *   ctx = ggml_init(p);
    ggml_tensor *    x   = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, rows);
    ggml_tensor *    w   = ggml_new_tensor_2d(ctx, GGML_TYPE_I8, K, N);
    ggml_tensor *    ws  = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
    ggml_tensor *    b   = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, N);
    ggml_tensor *    in  = prepacked ? ggml_quantize_i8_convrot(ctx, x, G) : x;
    ggml_tensor *    y   = in ? ggml_mul_mat_i8_tensorwise(ctx, w, in, ws, b, G) : nullptr;
    if (!y) {
        std::fprintf(stderr, "int8: building the nodes failed\n");
        return 1;
    }
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_backend_t        cpu = ggml_backend_cpu_init();
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);

    std::vector<float>  xv((size_t) K * rows), wsv((size_t) N), bv((size_t) N);
    std::vector<int8_t> wv((size_t) K * N);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.37f * (float) i + 0.11f) * (i % 97 == 5 ? 30.0f : 1.0f);
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = (int8_t) ((int) ((i * 2654435761u) % 255) - 127);
    for (int o = 0; o < N; ++o) wsv[(size_t) o] = 0.001f * (float) (o % 7 + 1), bv[(size_t) o] = 0.5f * (float) (o % 5) - 1.0f;
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(w, wv.data(), 0, ggml_nbytes(w));
    ggml_backend_tensor_set(ws, wsv.data(), 0, ggml_nbytes(ws));
    ggml_backend_tensor_set(b, bv.data(), 0, ggml_nbytes(b));
    const bool computed = ggml_backend_graph_compute(cpu, gf) == GGML_STATUS_SUCCESS;

    int bad = computed ? 0 : 1;
    if (computed) {
        std::vector<float> yv((size_t) N * rows);
        ggml_backend_tensor_get(y, yv.data(), 0, ggml_nbytes(y));
        std::vector<int8_t> q((size_t) K);
        for (int r = 0; r < rows; ++r) {
            const float sx = quantize(xv.data() + (size_t) r * K, K, G, q.data());
            for (int o = 0; o < N; ++o) {
                int32_t acc = 0;
                for (int i = 0; i < K; ++i) acc += (int32_t) q[(size_t) i] * wv[(size_t) o * K + i];
                const float want = (((float) acc * sx) * wsv[(size_t) o]) + bv[(size_t) o];
                if (std::memcmp(&want, &yv[(size_t) r * N + o], 4) != 0 && bad++ < 3) {
                    std::fprintf(stderr, "int8 K %d G %d: y[%d,%d] = %.9g, reference %.9g\n", K, G, r, o,
                                 (double) yv[(size_t) r * N + o], (double) want);
                }
            }
        }
    }
    ggml_backend_buffer_free(buf);
    ggml_backend_free(cpu);
    ggml_free(ctx);
    return bad == 0 ? 0 : 1;
}

} // namespace

int main() {
    int fails = 0;
    fails += check(7, 5, 3, 1, true);        // odd K: no rotation
    fails += check(768, 24, 9, 256, true);   // sd.cpp's usual H256, pre-packed (its Linear path)
    fails += check(768, 24, 9, 256, false);  // F32 input quantized by the GEMM node
    fails += check(3072, 16, 4, 1024, true); // a larger group
    std::printf("install-client-int8: %s\n", fails == 0 ? "ok" : "FAILED");
    return fails == 0 ? 0 : 1;
}
