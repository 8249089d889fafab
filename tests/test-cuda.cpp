// test-cuda.cpp — the CUDA backend (ggml/src/ggml-cuda), in one process.
//
// * Registry (runs everywhere, GPU or not): the "CUDA" family exists in a GGML_CUDA build, with
//   zero devices on a machine without a GPU; out-of-range queries answer "nothing"; devices are
//   named like upstream's and listed before the CPU; `sdx run --device cuda` without a device
//   is a clear error.
// * On a CUDA device (each test prints "no CUDA device" and is skipped without one): memory
//   (device buffers, pinned host buffers, device-to-device copies, async transfers and events),
//   mul_mat through cuBLAS at model-like sizes, the scheduler on CPU + CUDA graphs, and every
//   backend-ops case (tests/backend-ops-cases-*.cpp, the CPU's and Vulkan's cases) against the
//   double-precision references and against the CPU backend.

#include "backend-ops-cases.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-cuda.h"
#include "ggml-cuda/dequant-block.cuh" // the device decoders, compiled here for the host
#include "ggml-cuda/mul-mat-plan.h"      // mul_mat's cuBLAS call plan, executed here on the host

#ifdef SDX_BIN
#include "support/run-tool.h"
#endif

#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <sys/stat.h>
#include <vector>

// the types convert.cu decodes (declared in ggml/src/ggml-cuda/common.cuh, which needs the CUDA
// headers; the library exports it)
bool ggml_cuda_can_convert(enum ggml_type type);

namespace {

bool have_device() { return ggml_backend_cuda_get_device_count() > 0; }

#define SKIP_WITHOUT_CUDA_DEVICE()                               \
    do {                                                         \
        if (!have_device()) GTEST_SKIP() << "no CUDA device";    \
    } while (0)

// The NVIDIA driver's control node: without it no CUDA device can exist on this machine.
bool nvidia_driver_present() {
    struct stat st;
    return stat("/dev/nvidiactl", &st) == 0;
}

// one backend per device and one CPU backend for the whole process, freed by BackendsFreer
std::vector<ggml_backend_t> & cuda_backends() {
    static std::vector<ggml_backend_t> backends;
    return backends;
}

ggml_backend_t cuda_backend(size_t dev) {
    std::vector<ggml_backend_t> & backends = cuda_backends();
    if (backends.empty()) {
        for (int i = 0; i < ggml_backend_cuda_get_device_count(); i++) backends.push_back(ggml_backend_cuda_init(i));
    }
    return dev < backends.size() ? backends[dev] : nullptr;
}

ggml_backend_t & cpu_backend_slot() {
    static ggml_backend_t cpu = nullptr;
    return cpu;
}

ggml_backend_t cpu_backend() {
    if (!cpu_backend_slot()) cpu_backend_slot() = ggml_backend_cpu_init();
    return cpu_backend_slot();
}

class BackendsFreer : public ::testing::Environment {
  public:
    void TearDown() override {
        for (ggml_backend_t b : cuda_backends()) ggml_backend_free(b);
        cuda_backends().clear();
        if (cpu_backend_slot()) ggml_backend_free(cpu_backend_slot());
        cpu_backend_slot() = nullptr;
    }
};

struct ctx_guard {
    ggml_context * ctx;
    ~ctx_guard() { ggml_free(ctx); }
};
struct buf_guard {
    ggml_backend_buffer_t buf;
    ~buf_guard() {
        if (buf) ggml_backend_buffer_free(buf);
    }
};

// ---------------------------------------------------------------------------------------------
// Registry (no GPU needed)

TEST(CudaRegistry, FamilyIsRegisteredAsCuda) {
    ggml_backend_reg_t reg = ggml_backend_reg_by_name(GGML_CUDA_NAME);
    ASSERT_NE(reg, nullptr) << "a GGML_CUDA build registers the CUDA family";
    EXPECT_EQ(reg, ggml_backend_cuda_reg());
    EXPECT_STREQ(ggml_backend_reg_name(reg), "CUDA");
    EXPECT_EQ(ggml_backend_reg_dev_count(reg), (size_t) ggml_backend_cuda_get_device_count());
}

TEST(CudaRegistry, NoGpuMeansZeroDevices) {
    if (nvidia_driver_present()) GTEST_SKIP() << "an NVIDIA driver is present: devices may exist";
    EXPECT_EQ(ggml_backend_cuda_get_device_count(), 0);
    EXPECT_EQ(ggml_backend_reg_dev_count(ggml_backend_cuda_reg()), 0u);
    EXPECT_EQ(ggml_backend_cuda_host_buffer_type(), nullptr);
    EXPECT_EQ(ggml_backend_cuda_init(0), nullptr);
    EXPECT_EQ(ggml_backend_dev_by_name("CUDA0"), nullptr);
    // the CPU still works as the only device of its kind
    EXPECT_NE(ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU), nullptr);
}

// cuBLAS is loaded when the backend first calls it (ggml-cuda/cublas-lazy.cpp), not at program
// load: linking it costs every process ~210 MiB of resident memory, GPU or not.
namespace {
bool cublas_is_mapped() {
    std::ifstream maps("/proc/self/maps");
    std::string   line;
    while (std::getline(maps, line)) {
        if (line.find("libcublas") != std::string::npos) return true;
    }
    return false;
}
} // namespace

TEST(CudaCublas, NotLoadedByRegistryQueries) {
    // a fresh process (re-executed for this test alone), so no earlier test has used a device
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            ggml_backend_reg_t reg = ggml_backend_cuda_reg();
            const size_t       n   = reg ? ggml_backend_reg_dev_count(reg) : 0;
            char               desc[128];
            if (n > 0) ggml_backend_cuda_get_device_description(0, desc, sizeof(desc));
            std::exit(cublas_is_mapped() ? 1 : 0);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(CudaCublas, FirstCallLoadsTheLibrary) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            const char * s = cublasGetStatusString(CUBLAS_STATUS_SUCCESS);
            // loaded and answered by the library, or a message naming the missing library
            const bool ok = s != nullptr && (cublas_is_mapped() ? std::strstr(s, "could not be loaded") == nullptr
                                                                : std::strstr(s, "libcublas") != nullptr);
            std::exit(ok ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(CudaRegistry, OutOfRangeQueriesAnswerNothing) {
    const int n = ggml_backend_cuda_get_device_count();
    for (int bad : {-1, n, GGML_CUDA_MAX_DEVICES}) {
        EXPECT_EQ(ggml_backend_cuda_init(bad), nullptr) << bad;
        EXPECT_EQ(ggml_backend_cuda_buffer_type(bad), nullptr) << bad;
        char desc[64] = "unchanged";
        ggml_backend_cuda_get_device_description(bad, desc, sizeof(desc));
        EXPECT_STREQ(desc, "") << bad;
        size_t free_mem = 1, total = 1;
        ggml_backend_cuda_get_device_memory(bad, &free_mem, &total);
        EXPECT_EQ(free_mem, 0u);
        EXPECT_EQ(total, 0u);
    }
    ggml_backend_cuda_get_device_description(0, nullptr, 0); // no buffer: nothing written, no crash
    EXPECT_FALSE(ggml_backend_cuda_register_host_buffer(nullptr, 4096));
    ggml_backend_cuda_unregister_host_buffer(nullptr);
    EXPECT_FALSE(ggml_backend_is_cuda(nullptr));
    EXPECT_FALSE(ggml_backend_is_cuda(cpu_backend()));
}

TEST(CudaRegistry, UnknownProcAddressIsNull) {
    EXPECT_EQ(ggml_backend_reg_get_proc_address(ggml_backend_cuda_reg(), "ggml_no_such_function"), nullptr);
    EXPECT_EQ(ggml_backend_reg_get_proc_address(ggml_backend_cuda_reg(), "ggml_backend_register_host_buffer"),
              (void *) ggml_backend_cuda_register_host_buffer);
}

TEST(CudaRegistry, DevicesNamedLikeUpstreamAndListedBeforeTheCpu) {
    ggml_backend_reg_t reg = ggml_backend_cuda_reg();
    const size_t       n   = ggml_backend_reg_dev_count(reg);
    for (size_t i = 0; i < n; i++) {
        ggml_backend_dev_t dev = ggml_backend_reg_dev_get(reg, i);
        EXPECT_EQ(std::string(ggml_backend_dev_name(dev)), "CUDA" + std::to_string(i));
        EXPECT_EQ(ggml_backend_dev_backend_reg(dev), reg);
        EXPECT_EQ(ggml_backend_dev_by_name(ggml_backend_dev_name(dev)), dev);
    }
    ASSERT_GE(ggml_backend_dev_count(), n + 1);
    EXPECT_EQ(ggml_backend_dev_type(ggml_backend_dev_get(ggml_backend_dev_count() - 1)), GGML_BACKEND_DEVICE_TYPE_CPU);
}

#ifdef SDX_BIN
// `sdx run --device cuda` where the build has CUDA but the machine no device: a clear error
// naming the devices there are, not a crash or a silent CPU run.
TEST(CudaRegistry, SdxDeviceCudaWithoutADeviceIsAnError) {
    if (have_device()) GTEST_SKIP() << "a CUDA device exists";
    const sd_test::tool_result r = sd_test::run_tool(
        SDX_BIN, "run --device cuda --hidden 256 --heads 2 --kv-heads 1 --mlp 512 --tokens 16 --blocks 1",
        "sdx-cuda-test-");
    EXPECT_NE(r.rc, 0) << r.out;
    EXPECT_NE(r.err.find("no such CUDA device (0 found"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("CPU"), std::string::npos) << "the devices there are are listed: " << r.err;
}
#endif

// ---------------------------------------------------------------------------------------------
// The block decoders of the device conversions (ggml/src/ggml-cuda/dequant-block.cuh), on the host

template <typename Block> void decode_all(const void * q, float * out, int64_t n, int64_t qk) {
    const Block * blocks = static_cast<const Block *>(q);
    for (int64_t i = 0; i < n; i++) out[i] = ggml_cuda_dq::decode(blocks[i / qk], (int) (i % qk));
}

void decode_type(ggml_type t, const void * q, float * out, int64_t n) {
    switch (t) {
        case GGML_TYPE_Q8_0: decode_all<block_q8_0>(q, out, n, QK8_0); break;
        case GGML_TYPE_Q4_0: decode_all<block_q4_0>(q, out, n, QK4_0); break;
        case GGML_TYPE_Q4_1: decode_all<block_q4_1>(q, out, n, QK4_1); break;
        case GGML_TYPE_Q5_0: decode_all<block_q5_0>(q, out, n, QK5_0); break;
        case GGML_TYPE_Q5_1: decode_all<block_q5_1>(q, out, n, QK5_1); break;
        case GGML_TYPE_Q4_K: decode_all<block_q4_K>(q, out, n, QK_K); break;
        case GGML_TYPE_Q5_K: decode_all<block_q5_K>(q, out, n, QK_K); break;
        case GGML_TYPE_Q6_K: decode_all<block_q6_K>(q, out, n, QK_K); break;
        default: FAIL() << "no decoder for " << ggml_type_name(t);
    }
}

// Every block type mul_mat dequantizes on the device decodes to the CPU dequantizer's floats,
// bit for bit (runs without a GPU: the same decoder source the kernels use)
TEST(CudaDequant, DecodersMatchTheCpuDequantizersBitForBit) {
    const ggml_type types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
                               GGML_TYPE_Q5_1, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    const int64_t   per_row = 1024, rows = 6;
    std::mt19937    rng(5);
    std::vector<float> src((size_t) (per_row * rows));
    for (int64_t r = 0; r < rows; r++) {
        // rows of different scales, one all-zero row, one with a large outlier
        const float scale = r == 0 ? 0.0f : std::ldexp(1.0f, (int) r * 3 - 8);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (int64_t i = 0; i < per_row; i++) src[(size_t) (r * per_row + i)] = scale * nd(rng);
        if (r == 5) src[(size_t) (r * per_row + 17)] = 1000.0f;
    }
    for (ggml_type t : types) {
        ASSERT_TRUE(ggml_cuda_can_convert(t)) << ggml_type_name(t);
        std::vector<uint8_t> q(ggml_row_size(t, per_row) * (size_t) rows);
        ggml_quantize_chunk(t, src.data(), q.data(), 0, rows, per_row, nullptr);
        std::vector<float> ref(src.size()), dec(src.size());
        ggml_get_type_traits(t)->to_float(q.data(), ref.data(), per_row * rows);
        decode_type(t, q.data(), dec.data(), per_row * rows);
        for (size_t i = 0; i < ref.size(); i++) {
            uint32_t a, b;
            memcpy(&a, &ref[i], 4);
            memcpy(&b, &dec[i], 4);
            ASSERT_EQ(a, b) << ggml_type_name(t) << " element " << i << ": " << ref[i] << " vs " << dec[i];
        }
    }
    for (ggml_type t : {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_I32}) EXPECT_FALSE(ggml_cuda_can_convert(t));
}

// ---------------------------------------------------------------------------------------------
// mul_mat's cuBLAS call plan (mul-mat-plan.h), executed on the host with cuBLAS's column-major
// semantics (C = A^T B, leading dimensions, strided batches) against the CPU backend: the
// broadcast and stride mapping is checked without a GPU

// One case: src0 [K, M, ne02, ne03] (optionally with padded rows), src1 [K, N, ne12, ne13]
// (optionally a dims-1/2 or dims-2/3 permutation of a packed tensor)
struct plan_case {
    int64_t k, m, n, ne02, ne03, ne12, ne13;
    int     src0_pad;   // extra floats per src0 row (a view of a wider tensor)
    int     src1_perm;  // 0: packed, 1: dims 1 and 2 swapped, 2: dims 2 and 3 swapped
};

void run_plan_case(const plan_case & pc) {
    ctx_guard ctx{ggml_init({16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true})};
    ggml_tensor * w0 = ggml_new_tensor_4d(ctx.ctx, GGML_TYPE_F32, pc.k + pc.src0_pad, pc.m, pc.ne02, pc.ne03);
    ggml_tensor * a  = ggml_view_4d(ctx.ctx, w0, pc.k, pc.m, pc.ne02, pc.ne03, w0->nb[1], w0->nb[2], w0->nb[3], 0);
    ggml_tensor * b  = nullptr, * x = nullptr;
    if (pc.src1_perm == 1) {
        x = ggml_new_tensor_4d(ctx.ctx, GGML_TYPE_F32, pc.k, pc.ne12, pc.n, pc.ne13);
        b = ggml_permute(ctx.ctx, x, 0, 2, 1, 3);
    } else if (pc.src1_perm == 2) {
        x = ggml_new_tensor_4d(ctx.ctx, GGML_TYPE_F32, pc.k, pc.n, pc.ne13, pc.ne12);
        b = ggml_permute(ctx.ctx, x, 0, 1, 3, 2);
    } else {
        x = b = ggml_new_tensor_4d(ctx.ctx, GGML_TYPE_F32, pc.k, pc.n, pc.ne12, pc.ne13);
    }
    ggml_tensor * y = ggml_mul_mat(ctx.ctx, a, b);
    ggml_cgraph * g = ggml_new_graph(ctx.ctx);
    ggml_build_forward_expand(g, y);
    buf_guard buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, cpu_backend())};
    ASSERT_NE(buf.buf, nullptr);
    std::mt19937                          rng(3);
    std::uniform_real_distribution<float> u(-1, 1);
    for (ggml_tensor * t : {w0, x}) {
        std::vector<float> v((size_t) ggml_nelements(t));
        for (float & f : v) f = u(rng);
        ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
    }
    ASSERT_EQ(ggml_backend_graph_compute(cpu_backend(), g), GGML_STATUS_SUCCESS);

    // the operands in place, as mul-mat.cu uses F32 tensors with packed rows
    auto layout = [](const ggml_tensor * t) {
        ggml_cuda_gemm_operand o;
        o.ld = (int64_t) (t->nb[1] / 4), o.s2 = (int64_t) (t->nb[2] / 4), o.s3 = (int64_t) (t->nb[3] / 4);
        return o;
    };
    const ggml_cuda_gemm_operand la = layout(a), lb = layout(b), lc = layout(y);
    ASSERT_GE(la.ld, pc.k);
    ASSERT_GE(lb.ld, pc.k);
    const ggml_cuda_gemm_plan plan = ggml_cuda_plan_mul_mat(a->ne, b->ne, la, lb, lc);
    EXPECT_EQ(plan.m, (int) pc.m);
    EXPECT_EQ(plan.n, (int) pc.n);
    EXPECT_EQ(plan.k, (int) pc.k);
    const float *      A = (const float *) a->data;
    const float *      B = (const float *) b->data;
    std::vector<float> C((size_t) ggml_nelements(y), std::nanf(""));
    int64_t            written = 0;
    for (const ggml_cuda_gemm_call & call : plan.calls) {
        for (int j = 0; j < call.count; j++) {
            for (int col = 0; col < plan.n; col++) {
                for (int row = 0; row < plan.m; row++) {
                    double acc = 0;
                    for (int kk = 0; kk < plan.k; kk++) {
                        acc += (double) A[call.a_offset + j * call.stride_a + row * la.ld + kk] *
                               (double) B[call.b_offset + j * call.stride_b + col * lb.ld + kk];
                    }
                    C[(size_t) (call.c_offset + j * call.stride_c + col * lc.ld + row)] = (float) acc;
                    written++;
                }
            }
        }
    }
    EXPECT_EQ(written, ggml_nelements(y)) << "every dst element once";
    std::vector<float> ref((size_t) ggml_nelements(y));
    ggml_backend_tensor_get(y, ref.data(), 0, ggml_nbytes(y));
    for (size_t i = 0; i < ref.size(); i++) ASSERT_NEAR(C[i], ref[i], 1e-5f + 1e-5f * std::fabs(ref[i])) << i;
}

TEST(CudaMulMatPlan, BatchesBroadcastAndStridesMatchTheCpu) {
    const plan_case cases[] = {
        {8, 5, 4, 1, 1, 1, 1, 0, 0},   // one matrix
        {8, 5, 4, 3, 2, 3, 2, 0, 0},   // batches in both dims, no broadcast: one call per dim-3 index
        {8, 5, 4, 2, 3, 6, 6, 0, 0},   // src0 broadcast 3x over dim 2 and 2x over dim 3
        {16, 7, 3, 1, 1, 4, 1, 3, 0},  // one src0 for all batches, padded src0 rows
        {8, 5, 4, 2, 1, 4, 1, 0, 1},   // src1 dims 1/2 permuted (attention-like)
        {8, 5, 4, 1, 2, 3, 2, 2, 2},   // src1 dims 2/3 permuted, src0 broadcast over dim 2
    };
    for (const plan_case & pc : cases) {
        SCOPED_TRACE(testing::Message() << "K " << pc.k << " M " << pc.m << " N " << pc.n << " src0 batch " << pc.ne02
                                        << "x" << pc.ne03 << " src1 batch " << pc.ne12 << "x" << pc.ne13);
        run_plan_case(pc);
    }
}

// ---------------------------------------------------------------------------------------------
// Device and memory

TEST(CudaDevice, PropertiesAndBufferTypes) {
    SKIP_WITHOUT_CUDA_DEVICE();
    for (int i = 0; i < ggml_backend_cuda_get_device_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_reg_dev_get(ggml_backend_cuda_reg(), (size_t) i);
        char               desc[256];
        ggml_backend_cuda_get_device_description(i, desc, sizeof(desc));
        EXPECT_STREQ(desc, ggml_backend_dev_description(dev));
        EXPECT_GT(strlen(desc), 0u);
        size_t free_mem = 0, total = 0;
        ggml_backend_cuda_get_device_memory(i, &free_mem, &total);
        EXPECT_GT(total, 0u);
        EXPECT_LE(free_mem, total);
        EXPECT_EQ(ggml_backend_dev_buffer_type(dev), ggml_backend_cuda_buffer_type(i));
        EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, ggml_backend_cuda_buffer_type(i)));
        EXPECT_FALSE(ggml_backend_dev_supports_buft(dev, ggml_backend_cpu_buffer_type()));
        EXPECT_FALSE(ggml_backend_buft_is_host(ggml_backend_cuda_buffer_type(i)));
        ggml_backend_dev_props props;
        ggml_backend_dev_get_props(dev, &props);
        EXPECT_TRUE(props.caps.async);
        EXPECT_TRUE(props.caps.events);
    }
    ggml_backend_t be = cuda_backend(0);
    ASSERT_NE(be, nullptr);
    EXPECT_TRUE(ggml_backend_is_cuda(be));
    EXPECT_STREQ(ggml_backend_name(be), "CUDA0");
}

TEST(CudaDevice, BuffersRoundTripMemsetCopyClear) {
    SKIP_WITHOUT_CUDA_DEVICE();
    ctx_guard     ctx{ggml_init({4 * ggml_tensor_overhead(), nullptr, true})};
    ggml_tensor * a = ggml_new_tensor_2d(ctx.ctx, GGML_TYPE_F16, 33, 7);
    ggml_tensor * b = ggml_new_tensor_2d(ctx.ctx, GGML_TYPE_F16, 33, 7);
    buf_guard     buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, cuda_backend(0))};
    ASSERT_NE(buf.buf, nullptr);
    std::vector<uint16_t> v(33 * 7), out(33 * 7, 0);
    for (size_t i = 0; i < v.size(); i++) v[i] = (uint16_t) (i * 31 + 5);
    ggml_backend_tensor_set(a, v.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_memset(b, 0xAB, 0, ggml_nbytes(b));
    ggml_backend_tensor_memset(b, 0x12, 2, 4);
    ggml_backend_tensor_get(b, out.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(out[0], 0xABABu);
    EXPECT_EQ(out[1], 0x1212u);
    EXPECT_EQ(out[2], 0x1212u);
    EXPECT_EQ(out[3], 0xABABu);
    ggml_backend_tensor_copy(a, b); // device to device
    ggml_backend_tensor_get(b, out.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(out, v);
    ggml_backend_buffer_clear(buf.buf, 0);
    ggml_backend_tensor_get(b, out.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(out, std::vector<uint16_t>(33 * 7, 0));
}

// More memory than the device has: NULL and a logged error, never an abort; the device stays usable
TEST(CudaDevice, ImpossibleAllocationFailsCleanly) {
    SKIP_WITHOUT_CUDA_DEVICE();
    size_t free_mem = 0, total = 0;
    ggml_backend_cuda_get_device_memory(0, &free_mem, &total);
    ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(ggml_backend_cuda_buffer_type(0), total * 2);
    EXPECT_EQ(b, nullptr);
    if (b) ggml_backend_buffer_free(b);
    ggml_backend_buffer_t ok = ggml_backend_buft_alloc_buffer(ggml_backend_cuda_buffer_type(0), 1 << 20);
    EXPECT_NE(ok, nullptr);
    if (ok) ggml_backend_buffer_free(ok);
}

TEST(CudaDevice, PinnedHostBufferIsUsableByTheCpu) {
    SKIP_WITHOUT_CUDA_DEVICE();
    ggml_backend_buffer_type_t hb = ggml_backend_cuda_host_buffer_type();
    ASSERT_NE(hb, nullptr);
    EXPECT_TRUE(ggml_backend_buft_is_host(hb));
    ctx_guard     ctx{ggml_init({8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true})};
    ggml_tensor * a = ggml_new_tensor_1d(ctx.ctx, GGML_TYPE_F32, 1000);
    ggml_tensor * b = ggml_sqr(ctx.ctx, a);
    ggml_cgraph * g = ggml_new_graph(ctx.ctx);
    ggml_build_forward_expand(g, b);
    buf_guard buf{ggml_backend_alloc_ctx_tensors_from_buft(ctx.ctx, hb)};
    ASSERT_NE(buf.buf, nullptr);
    for (int i = 0; i < 1000; i++) ((float *) a->data)[i] = (float) i;
    ASSERT_EQ(ggml_backend_graph_compute(cpu_backend(), g), GGML_STATUS_SUCCESS);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(((float *) b->data)[i], (float) i * (float) i);
}

TEST(CudaDevice, RegisteredHostMemoryStaysUsable) {
    SKIP_WITHOUT_CUDA_DEVICE();
    std::vector<float> host(1 << 16, 1.5f);
    EXPECT_TRUE(ggml_backend_cuda_register_host_buffer(host.data(), host.size() * sizeof(float)));
    host[7] = 2.5f;
    EXPECT_EQ(host[7], 2.5f);
    ggml_backend_cuda_unregister_host_buffer(host.data());
}

TEST(CudaDevice, AsyncTransfersAndEventsOrderWork) {
    SKIP_WITHOUT_CUDA_DEVICE();
    ggml_backend_t be = cuda_backend(0);
    ctx_guard      ctx{ggml_init({8 * ggml_tensor_overhead(), nullptr, true})};
    ggml_tensor *  a = ggml_new_tensor_1d(ctx.ctx, GGML_TYPE_F32, 4096);
    ggml_tensor *  b = ggml_new_tensor_1d(ctx.ctx, GGML_TYPE_F32, 4096);
    buf_guard      buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, be)};
    ASSERT_NE(buf.buf, nullptr);
    std::vector<float> v(4096), out(4096, 0.0f);
    for (size_t i = 0; i < v.size(); i++) v[i] = (float) i * 0.5f;
    ggml_backend_tensor_set_async(be, a, v.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_copy_async(be, be, a, b); // device to device on the stream
    ggml_backend_event_t ev = ggml_backend_event_new(ggml_backend_get_device(be));
    ASSERT_NE(ev, nullptr);
    ggml_backend_tensor_get_async(be, b, out.data(), 0, ggml_nbytes(b));
    ggml_backend_event_record(ev, be);
    ggml_backend_event_synchronize(ev);
    EXPECT_EQ(out, v);
    ggml_backend_event_free(ev);
}

// ---------------------------------------------------------------------------------------------
// mul_mat through cuBLAS at sizes the small backend-ops cases do not reach

TEST(CudaMulMat, LargeWithBroadcastMatchesTheCpu) {
    SKIP_WITHOUT_CUDA_DEVICE();
    for (ggml_type wt : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
        // K 1024, M 384, N 77, weights broadcast over 2 x 3 activation batches (ne02 = 1)
        const int64_t                         K = 1024, M = 384, N = 77;
        std::mt19937                          rng(11);
        std::uniform_real_distribution<float> u(-1, 1);
        std::vector<float>                    wf((size_t) (K * M)), xf((size_t) (K * N * 6));
        for (float & f : wf) f = u(rng);
        for (float & f : xf) f = u(rng);
        std::vector<uint8_t> wq(ggml_row_size(wt, K) * (size_t) M);
        if (wt == GGML_TYPE_F32) {
            memcpy(wq.data(), wf.data(), wq.size());
        } else {
            ggml_quantize_chunk(wt, wf.data(), wq.data(), 0, M, K, nullptr);
        }
        std::vector<float> results[2];
        ggml_backend_t     bes[2] = {cuda_backend(0), cpu_backend()};
        for (int k = 0; k < 2; k++) { // one context per backend: its tensors are allocated once
            ctx_guard     ctx{ggml_init({8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true})};
            ggml_tensor * w = ggml_new_tensor_4d(ctx.ctx, wt, K, M, 1, 1);
            ggml_tensor * x = ggml_new_tensor_4d(ctx.ctx, GGML_TYPE_F32, K, N, 2, 3);
            ggml_tensor * y = ggml_mul_mat(ctx.ctx, w, x);
            ggml_cgraph * g = ggml_new_graph(ctx.ctx);
            ggml_build_forward_expand(g, y);
            buf_guard buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, bes[k])};
            ASSERT_NE(buf.buf, nullptr);
            ggml_backend_tensor_set(w, wq.data(), 0, wq.size());
            ggml_backend_tensor_set(x, xf.data(), 0, ggml_nbytes(x));
            ASSERT_EQ(ggml_backend_graph_compute(bes[k], g), GGML_STATUS_SUCCESS) << ggml_type_name(wt);
            results[k].resize((size_t) ggml_nelements(y));
            ggml_backend_tensor_get(y, results[k].data(), 0, ggml_nbytes(y));
        }
        if (wt == GGML_TYPE_F32 || wt == GGML_TYPE_F16) {
            // exact weights, F32 activations and accumulation on both: summation order only
            for (size_t i = 0; i < results[0].size(); i++) {
                ASSERT_NEAR(results[0][i], results[1][i], 1e-3) << ggml_type_name(wt) << " element " << i;
            }
        } else {
            // the CPU quantizes activations to the block type's dot type (CUDA multiplies them
            // unrounded); BF16: both round them, the summation differs. Relative RMS difference:
            double d2 = 0, r2 = 0;
            for (size_t i = 0; i < results[0].size(); i++) {
                const double d = (double) results[0][i] - (double) results[1][i];
                d2 += d * d;
                r2 += (double) results[1][i] * (double) results[1][i];
            }
            EXPECT_LT(std::sqrt(d2 / r2), 2e-2) << ggml_type_name(wt);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Scheduler: CPU + CUDA

void cpu_tanh_rows(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * a = dst->src[0];
    const int64_t       n = ggml_nelements(dst);
    for (int64_t i = ith; i < n; i += nth) ((float *) dst->data)[i] = std::tanh(((const float *) a->data)[i]);
}

// x -> mul_mat(w1) -> custom tanh (CPU only) -> mul_mat(w2, F16) -> out
std::vector<float> run_sched(std::vector<ggml_backend_t> backends, int * n_splits, ggml_backend_t * mm_backend) {
    ggml_context * wctx = ggml_init({4 * ggml_tensor_overhead(), nullptr, true});
    ggml_context * ctx  = ggml_init({64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    ggml_tensor *  x    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 48, 40);
    ggml_tensor *  w1   = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 48, 64);
    ggml_tensor *  w2   = ggml_new_tensor_2d(wctx, GGML_TYPE_F16, 64, 24);
    ggml_set_input(x);
    ggml_tensor * h       = ggml_mul_mat(ctx, w1, x);
    ggml_tensor * args[1] = {h};
    ggml_tensor * c       = ggml_custom_4d(ctx, GGML_TYPE_F32, 64, 40, 1, 1, args, 1, cpu_tanh_rows, 1, nullptr);
    ggml_tensor * out     = ggml_mul_mat(ctx, w2, c);
    ggml_set_output(out);
    ggml_cgraph * g = ggml_new_graph(ctx);
    ggml_build_forward_expand(g, out);

    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, backends[0]);
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::mt19937                          rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float>                    w1v(48 * 64), xv(48 * 40);
    for (float & f : w1v) f = u(rng);
    for (float & f : xv) f = u(rng);
    std::vector<uint16_t> w2v(64 * 24);
    for (uint16_t & hv : w2v) hv = ggml_fp32_to_fp16(u(rng));
    ggml_backend_tensor_set(w1, w1v.data(), 0, ggml_nbytes(w1));
    ggml_backend_tensor_set(w2, w2v.data(), 0, ggml_nbytes(w2));

    ggml_backend_sched_t sched = ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 256, false, true);
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(sched, g));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    EXPECT_EQ(ggml_backend_sched_graph_compute(sched, g), GGML_STATUS_SUCCESS);
    std::vector<float> res((size_t) ggml_nelements(out));
    ggml_backend_tensor_get(out, res.data(), 0, ggml_nbytes(out));
    if (n_splits) *n_splits = ggml_backend_sched_get_n_splits(sched);
    if (mm_backend) *mm_backend = ggml_backend_sched_get_tensor_backend(sched, out);
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_free(ctx);
    return res;
}

TEST(CudaSched, CpuFallbackSplitsMatchCpuOnly) {
    SKIP_WITHOUT_CUDA_DEVICE();
    int            n_splits = 0;
    ggml_backend_t mm_be    = nullptr;
    const std::vector<float> mixed = run_sched({cuda_backend(0), cpu_backend()}, &n_splits, &mm_be);
    const std::vector<float> ref   = run_sched({cpu_backend()}, nullptr, nullptr);
    EXPECT_EQ(mm_be, cuda_backend(0)) << "the mul_mat after the CPU-only node goes back to CUDA";
    EXPECT_GE(n_splits, 3) << "CUDA -> CPU -> CUDA";
    ASSERT_EQ(mixed.size(), ref.size());
    for (size_t i = 0; i < ref.size(); i++) ASSERT_NEAR(mixed[i], ref[i], 1e-5f + 1e-4f * std::fabs(ref[i])) << i;
}

// ---------------------------------------------------------------------------------------------
// Backend-ops cases

// Cases the CUDA device may decline (substring of the case name), with the reason; any other
// decline is reported in the summary and fails only for mul_mat (this backend's own op).
struct expected_decline {
    const char * name_part;
    const char * why;
};
const expected_decline k_mul_mat_declines[] = {
    {"q2_K", "Q2_K has no CUDA decoder (rarely used for DiT weights)"},
    {"q3_K", "Q3_K has no CUDA decoder (rarely used for DiT weights)"},
};

const char * mul_mat_decline_reason(const std::string & name) {
    for (const auto & e : k_mul_mat_declines) {
        if (name.find(e.name_part) != std::string::npos) return e.why;
    }
    return nullptr;
}

struct param {
    size_t      case_idx;
    size_t      dev;
    bool        vs_cpu;
    std::string name;
};
void PrintTo(const param & p, std::ostream * os) { *os << p.name; }

bool cpu_supports(const bops::op_case & c) {
    ggml_init_params ip = {1024 * ggml_tensor_overhead() + ggml_graph_overhead_custom(1024, false), nullptr, true};
    ggml_context * ctx_in = ggml_init(ip);
    ggml_context * ctx    = ggml_init(ip);
    bops::builder  b;
    b.ctx_in = ctx_in;
    b.ctx    = ctx;
    c.build(b);
    ggml_cgraph * g = ggml_new_graph_custom(ctx, 1024, false);
    ggml_build_forward_expand(g, b.out);
    ggml_backend_dev_t cpu = ggml_backend_get_device(cpu_backend());
    bool               ok  = true;
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) ok = ok && ggml_backend_dev_supports_op(cpu, ggml_graph_node(g, i));
    ggml_free(ctx);
    ggml_free(ctx_in);
    return ok;
}

// every case against the reference, and against the CPU where the CPU runs it; none without a device
std::vector<param> make_params() {
    std::vector<param> ps;
    const int          ndev = ggml_backend_cuda_get_device_count();
    for (int d = 0; d < ndev; d++) {
        for (size_t i = 0; i < bops::all_cases().size(); i++) {
            const std::string base = std::string(GGML_CUDA_NAME) + std::to_string(d) + "_" + bops::all_cases()[i].name;
            ps.push_back({i, (size_t) d, false, base});
            if (cpu_supports(bops::all_cases()[i])) ps.push_back({i, (size_t) d, true, base + "_vs_CPU"});
        }
    }
    return ps;
}

class CudaOps : public ::testing::TestWithParam<param> {};

struct tally {
    int                      ran = 0, declined = 0;
    std::vector<std::string> declined_names;
};
tally & case_tally() {
    static tally t;
    return t;
}

bool is_mul_mat_case(const std::string & name) { return name.rfind("mul_mat", 0) == 0; }

TEST_P(CudaOps, MatchesReference) {
    const param &         p  = GetParam();
    const bops::op_case & c  = bops::all_cases()[p.case_idx];
    ggml_backend_t        be = cuda_backend(p.dev);
    ASSERT_NE(be, nullptr);
    // quantized weights: cuBLAS multiplies the activations unquantized (dequantized weights), so
    // the case's unquantized-activation reference and CPU gap apply
    const bool         f32a = (bool) c.f32_act_ref;
    const bops::result r    = p.vs_cpu ? (f32a ? bops::run_case_vs_cpu_f32_act(c, be, cpu_backend())
                                                : bops::run_case_vs_cpu(c, be, cpu_backend()))
                                       : (f32a ? bops::run_case_f32_act(c, be) : bops::run_case(c, be, 0));
    if (r.status == bops::result::declined) {
        if (is_mul_mat_case(c.name)) {
            EXPECT_NE(mul_mat_decline_reason(c.name), nullptr) << "unexpected mul_mat decline: " << r.message;
        }
        if (!p.vs_cpu) {
            case_tally().declined++;
            case_tally().declined_names.push_back(c.name + " (" + r.message + ")");
        }
        return;
    }
    if (!p.vs_cpu) case_tally().ran++;
    EXPECT_EQ(r.status, bops::result::pass) << r.message;
}

INSTANTIATE_TEST_SUITE_P(All, CudaOps, ::testing::ValuesIn(make_params()),
                         [](const ::testing::TestParamInfo<param> & info) { return info.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CudaOps); // no device: no cases (CudaOpsSkip says so)

TEST(CudaOpsSkip, BackendOpsCasesNeedADevice) {
    SKIP_WITHOUT_CUDA_DEVICE();
    EXPECT_GT(bops::all_cases().size(), 0u);
}

// Quantized mul_mat at real model sizes (K 4096/16384, N 3072/6144, 1..8 activation rows)
TEST(CudaMulMat, QuantizedAtModelSizes) {
    SKIP_WITHOUT_CUDA_DEVICE();
    const std::vector<bops::op_case> cases = bops::quant_mul_mat_large_cases();
    ASSERT_GE(cases.size(), 3u);
    for (size_t i = 0; i < cases.size(); i++) {
        const bops::result r = bops::run_case_f32_act(cases[i], cuda_backend(0));
        EXPECT_EQ(r.status, bops::result::pass) << cases[i].desc << ": " << r.message;
    }
}

} // namespace

class SummaryPrinter : public ::testing::Environment {
  public:
    void TearDown() override {
        const tally & t = case_tally();
        if (t.ran + t.declined == 0) return;
        fprintf(stderr, "test-cuda: backend-ops cases on CUDA: %d ran, %d declined:\n", t.ran, t.declined);
        for (const std::string & n : t.declined_names) fprintf(stderr, "  declined: %s\n", n.c_str());
    }
};

int main(int argc, char ** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new SummaryPrinter);
    ::testing::AddGlobalTestEnvironment(new BackendsFreer);
    return RUN_ALL_TESTS();
}
