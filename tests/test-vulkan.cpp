// test-vulkan.cpp — the Vulkan backend on every Vulkan device (Mesa lavapipe in CI), in ONE
// process: the driver compiles each pipeline once per process (seconds for the big shaders on
// lavapipe), so the whole suite shares one device and its pipeline cache.
//
// * Every backend-ops case (tests/backend-ops-cases-*.cpp) against the same double-precision
//   references as the CPU, and against the CPU backend; a case the device declines must be in
//   the expected-decline list below (and a listed case must really be declined).
// * Memory: sub-allocation, a tensor larger than maxStorageBufferRange, pinned host buffers,
//   device-to-device copies; run a second time with GGML_VK_FORCE_STAGING=1 (staging copies).
// * The scheduler on CPU + Vulkan graphs: splits, input copies, CPU fallback of a node the device
//   declines, results equal to a CPU-only run.
// The Khronos validation layer is on (GGML_VK_VALIDATE=1, set by main) and any message it
// reports fails the test that was running. No Vulkan device at all is a failure, never a skip.

#include "backend-ops-cases.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-vulkan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <dlfcn.h>
#include <cstdlib>
#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <vector>

namespace {

// Cases the Vulkan device declines on purpose (substring of the case name), with the reason.
struct expected_decline {
    const char * name_part;
    const char * why;
};
const expected_decline k_expected_declines[] = {
    {"custom", "CPU callbacks (GGML_OP_CUSTOM) run only on the CPU"},
    // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K run (vk-ops-quant.cpp) except as a copy
    // destination (quantized_destination below)
    {"q2_K", "Q2_K has no Vulkan decoder (rarely used for DiT weights)"},
    {"q3_K", "Q3_K has no Vulkan decoder (rarely used for DiT weights)"},
};

// F32/F16/BF16 -> block-quantized copies (the quantizers) run on the CPU: "cpy_<float>_..._<qtype>_..."
// and "cast_<float>_<qtype>..." case names
bool quantized_destination(const std::string & name) {
    static const std::regex re("^(cpy|cast|dup|cont)_(f32|f16|bf16)_.*(q4_0|q4_1|q5_0|q5_1|q8_0|q4_K|q5_K|q6_K)");
    return std::regex_search(name, re);
}

// Ops the Vulkan backend has no shader for (or only some modes of), by the op of the node the
// device declined (ggml_op_desc, as the harness reports it).
const expected_decline k_declined_ops[] = {
    {"IM2COL", "no Vulkan shader yet"}, {"IM2COL_3D", "no Vulkan shader yet"},
    {"CONV_2D", "no Vulkan shader yet"}, {"CONV_2D_DW", "no Vulkan shader yet"},
    {"CONV_3D", "no Vulkan shader yet"}, {"CONV_TRANSPOSE_1D", "no Vulkan shader yet"},
    {"CONV_TRANSPOSE_2D", "no Vulkan shader yet"}, {"POOL_1D", "no Vulkan shader yet"},
    {"POOL_2D", "no Vulkan shader yet"}, {"UPSCALE", "no Vulkan shader yet"},
    {"ARGSORT", "no Vulkan shader yet"}, {"TOP_K", "no Vulkan shader yet"}, {"ARGMAX", "no Vulkan shader yet"},
    {"GROUP_NORM", "no Vulkan shader yet"}, {"L2_NORM", "no Vulkan shader yet"},
    {"DIAG_MASK_INF", "no Vulkan shader yet"}, {"LEAKY_RELU", "no Vulkan shader yet"},
    {"SIN", "no Vulkan shader yet"}, {"COS", "no Vulkan shader yet"}, {"LOG", "no Vulkan shader yet"},
    {"CLAMP", "no Vulkan shader yet"}, {"SUM", "no Vulkan shader yet"}, {"SUM_ROWS", "no Vulkan shader yet"},
    {"MEAN", "no Vulkan shader yet"}, {"SET_ROWS", "no Vulkan shader yet"}, {"SET", "no Vulkan shader yet"},
    {"ACC", "no Vulkan shader yet"}, {"ROLL", "no Vulkan shader yet"}, {"GET_REL_POS", "no Vulkan shader yet"},
    {"ADD_REL_POS", "no Vulkan shader yet"}, {"WIN_PART", "no Vulkan shader yet"},
    {"WIN_UNPART", "no Vulkan shader yet"}, {"MUL_MAT_ID", "no Vulkan shader yet"}, {"ADD_ID", "no Vulkan shader yet"},
    {"PAD", "circular padding is not implemented (zero padding is)"},
    {"ROPE", "multi-section / vision rope modes are not implemented (NORMAL and NEOX are)"},
};

const char * expected_decline_reason(const std::string & name, const std::string & message) {
    for (const auto & e : k_expected_declines) {
        if (name.find(e.name_part) != std::string::npos) return e.why;
    }
    if (quantized_destination(name)) return "float -> block-quantized copies (the quantizers) run on the CPU";
    const std::string key = "does not support node ";
    const size_t      at  = message.find(key);
    if (at == std::string::npos) return nullptr;
    const std::string rest = message.substr(at + key.size());
    const std::string op   = rest.substr(0, rest.find(' '));
    for (const auto & e : k_declined_ops) {
        if (op == e.name_part) return e.why;
    }
    return nullptr;
}

// one backend per device and one CPU backend for the whole process, freed by BackendsFreer
std::vector<ggml_backend_t> & vk_backends() {
    static std::vector<ggml_backend_t> backends;
    return backends;
}

ggml_backend_t vk_backend(size_t dev) {
    std::vector<ggml_backend_t> & backends = vk_backends();
    if (backends.empty()) {
        for (int i = 0; i < ggml_backend_vk_get_device_count(); i++) backends.push_back(ggml_backend_vk_init(i));
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
        for (ggml_backend_t b : vk_backends()) ggml_backend_free(b);
        vk_backends().clear();
        if (cpu_backend_slot()) ggml_backend_free(cpu_backend_slot());
        cpu_backend_slot() = nullptr;
    }
};

// Any validation message reported while a test runs fails that test.
class VulkanTest : public ::testing::Test {
  protected:
    size_t msgs_before = 0;
    void   SetUp() override {
        ASSERT_GT(ggml_backend_vk_get_device_count(), 0) << "the Vulkan backend is built but no Vulkan device was found";
        ASSERT_TRUE(ggml_backend_vk_validation_enabled()) << "the Khronos validation layer is not active";
        msgs_before = ggml_backend_vk_validation_message_count();
    }
    void TearDown() override {
        EXPECT_EQ(ggml_backend_vk_validation_message_count(), msgs_before) << "Vulkan validation reported messages";
    }
};

// ---------------------------------------------------------------------------------------------
// Device and registry

TEST_F(VulkanTest, DevicesAreRegisteredBeforeTheCpu) {
    const int n = ggml_backend_vk_get_device_count();
    ggml_backend_reg_t reg = ggml_backend_reg_by_name(GGML_VK_NAME);
    ASSERT_NE(reg, nullptr);
    EXPECT_EQ(ggml_backend_reg_dev_count(reg), (size_t) n);
    ASSERT_GE(ggml_backend_dev_count(), (size_t) n + 1);
    for (int i = 0; i < n; i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        EXPECT_EQ(ggml_backend_dev_backend_reg(dev), reg);
        EXPECT_EQ(std::string(ggml_backend_dev_name(dev)), std::string(GGML_VK_NAME) + std::to_string(i));
        char desc[256];
        ggml_backend_vk_get_device_description(i, desc, sizeof(desc));
        EXPECT_STREQ(desc, ggml_backend_dev_description(dev));
        size_t free_mem = 0, total = 0;
        ggml_backend_vk_get_device_memory(i, &free_mem, &total);
        EXPECT_GT(total, 0u);
        EXPECT_EQ(ggml_backend_dev_buffer_type(dev), ggml_backend_vk_buffer_type(i));
        EXPECT_TRUE(ggml_backend_dev_supports_buft(dev, ggml_backend_vk_buffer_type(i)));
        EXPECT_FALSE(ggml_backend_dev_supports_buft(dev, ggml_backend_cpu_buffer_type()));
        EXPECT_FALSE(ggml_backend_buft_is_host(ggml_backend_vk_buffer_type(i)));
    }
    EXPECT_EQ(ggml_backend_dev_type(ggml_backend_dev_get(ggml_backend_dev_count() - 1)), GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_t be = vk_backend(0);
    ASSERT_NE(be, nullptr);
    EXPECT_TRUE(ggml_backend_is_vk(be));
    EXPECT_FALSE(ggml_backend_is_vk(cpu_backend()));
}

// ---------------------------------------------------------------------------------------------
// Memory

struct ctx_guard {
    ggml_context * ctx;
    ~ctx_guard() { ggml_free(ctx); }
};
struct buf_guard {
    ggml_backend_buffer_t buf;
    ~buf_guard() { if (buf) ggml_backend_buffer_free(buf); }
};

TEST_F(VulkanTest, ManyBuffersRoundTrip) {
    // hundreds of small buffers come from a few large VkDeviceMemory blocks; data stays separate
    ggml_backend_buffer_type_t buft = ggml_backend_vk_buffer_type(0);
    std::vector<ggml_backend_buffer_t> bufs;
    for (int i = 0; i < 300; i++) {
        ggml_backend_buffer_t b = ggml_backend_buft_alloc_buffer(buft, 1000 + 7 * i);
        ASSERT_NE(b, nullptr);
        bufs.push_back(b);
    }
    ctx_guard ctx{ggml_init({300 * ggml_tensor_overhead(), nullptr, true})};
    std::vector<ggml_tensor *> ts;
    for (int i = 0; i < 300; i++) {
        ggml_tensor * t = ggml_new_tensor_1d(ctx.ctx, GGML_TYPE_I32, 200);
        ASSERT_EQ(ggml_backend_tensor_alloc(bufs[i], t, ggml_backend_buffer_get_base(bufs[i])), GGML_STATUS_SUCCESS);
        std::vector<int32_t> v(200);
        for (int j = 0; j < 200; j++) v[j] = i * 1000 + j;
        ggml_backend_tensor_set(t, v.data(), 0, sizeof(int32_t) * 200);
        ts.push_back(t);
    }
    for (int i = 0; i < 300; i += 2) {
        ggml_backend_buffer_free(bufs[i]); // holes in the blocks
        bufs[i] = nullptr;
    }
    for (int i = 1; i < 300; i += 2) {
        std::vector<int32_t> v(200);
        ggml_backend_tensor_get(ts[i], v.data(), 0, sizeof(int32_t) * 200);
        for (int j = 0; j < 200; j++) ASSERT_EQ(v[j], i * 1000 + j);
        ggml_backend_buffer_free(bufs[i]);
    }
}

// A tensor larger than maxStorageBufferRange (128 MiB on lavapipe): buffer device addresses
// have no binding-range limit. 40 M floats = 160 MiB, scaled and offset on the device.
TEST_F(VulkanTest, TensorLargerThanMaxStorageBufferRange) {
    const int64_t n = 40 * 1024 * 1024;
    ctx_guard     ctx{ggml_init({8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true})};
    ggml_tensor * x = ggml_new_tensor_1d(ctx.ctx, GGML_TYPE_F32, n);
    ggml_tensor * y = ggml_scale_bias(ctx.ctx, x, 2.0f, 1.0f);
    ggml_cgraph * g = ggml_new_graph(ctx.ctx);
    ggml_build_forward_expand(g, y);
    buf_guard buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, vk_backend(0))};
    ASSERT_NE(buf.buf, nullptr);
    std::vector<float> v((size_t) n);
    for (int64_t i = 0; i < n; i++) v[i] = (float) (i % 1000);
    ggml_backend_tensor_set(x, v.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(vk_backend(0), g), GGML_STATUS_SUCCESS);
    std::vector<float> out((size_t) n);
    ggml_backend_tensor_get(y, out.data(), 0, ggml_nbytes(y));
    for (int64_t i : {(int64_t) 0, (int64_t) 1, n / 2, (int64_t) 33554431, (int64_t) 33554432, n - 1}) {
        EXPECT_EQ(out[i], 2.0f * (float) (i % 1000) + 1.0f) << "element " << i;
    }
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += out[i] != 2.0f * v[i] + 1.0f;
    EXPECT_EQ(bad, 0);
}

TEST_F(VulkanTest, PinnedHostBufferIsUsableByTheCpu) {
    ggml_backend_buffer_type_t hb = ggml_backend_vk_host_buffer_type();
    ASSERT_NE(hb, nullptr);
    EXPECT_TRUE(ggml_backend_buft_is_host(hb));
    ctx_guard     ctx{ggml_init({8 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true})};
    ggml_tensor * a = ggml_new_tensor_1d(ctx.ctx, GGML_TYPE_F32, 1000);
    ggml_tensor * b = ggml_sqr(ctx.ctx, a);
    ggml_cgraph * g = ggml_new_graph(ctx.ctx);
    ggml_build_forward_expand(g, b);
    buf_guard buf{ggml_backend_alloc_ctx_tensors_from_buft(ctx.ctx, hb)};
    ASSERT_NE(buf.buf, nullptr);
    EXPECT_TRUE(ggml_backend_buffer_is_host(buf.buf));
    for (int i = 0; i < 1000; i++) ((float *) a->data)[i] = (float) i; // the host writes it directly
    ASSERT_EQ(ggml_backend_graph_compute(cpu_backend(), g), GGML_STATUS_SUCCESS);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(((float *) b->data)[i], (float) i * (float) i);
}

TEST_F(VulkanTest, DeviceToDeviceTensorCopy) {
    ctx_guard     ctx{ggml_init({4 * ggml_tensor_overhead(), nullptr, true})};
    ggml_tensor * a = ggml_new_tensor_2d(ctx.ctx, GGML_TYPE_F16, 33, 7);
    ggml_tensor * b = ggml_new_tensor_2d(ctx.ctx, GGML_TYPE_F16, 33, 7);
    buf_guard     buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, vk_backend(0))};
    ASSERT_NE(buf.buf, nullptr);
    std::vector<uint16_t> v(33 * 7), out(33 * 7, 0);
    for (size_t i = 0; i < v.size(); i++) v[i] = (uint16_t) (i * 31 + 5);
    ggml_backend_tensor_set(a, v.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_memset(b, 0xAB, 0, ggml_nbytes(b));
    ggml_backend_tensor_memset(b, 0x12, 2, 4); // unaligned range: through the host
    ggml_backend_tensor_get(b, out.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(out[0], 0xABABu);
    EXPECT_EQ(out[1], 0x1212u);
    EXPECT_EQ(out[2], 0x1212u);
    EXPECT_EQ(out[3], 0xABABu);
    EXPECT_EQ(out[33 * 7 - 1], 0xABABu);
    ggml_backend_tensor_copy(a, b);
    ggml_backend_tensor_get(b, out.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(out, v);
    ggml_backend_buffer_clear(buf.buf, 0);
    ggml_backend_tensor_get(b, out.data(), 0, ggml_nbytes(b));
    EXPECT_EQ(out, std::vector<uint16_t>(33 * 7, 0));
}

// Barriers: a chain where each node reads the previous one's output, in place and not, with a
// node that overwrites (in place) a tensor an earlier dispatch still reads.
TEST_F(VulkanTest, DependentChainInOneSubmission) {
    ctx_guard     ctx{ggml_init({64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true})};
    ggml_tensor * x = ggml_new_tensor_2d(ctx.ctx, GGML_TYPE_F32, 257, 9);
    ggml_set_input(x);
    ggml_tensor * y = ggml_scale(ctx.ctx, x, 3.0f);     // reads x
    ggml_tensor * z = ggml_add(ctx.ctx, y, x);          // reads y (just written) and x
    ggml_tensor * w = ggml_sqr_inplace(ctx.ctx, z);     // writes what it reads
    ggml_tensor * u = ggml_sub(ctx.ctx, w, y);          // reads y again
    ggml_tensor * s = ggml_scale_inplace(ctx.ctx, y, 0.5f); // overwrites y after u read it
    ggml_tensor * r = ggml_add(ctx.ctx, u, s);
    ggml_set_output(r);
    ggml_cgraph * g = ggml_new_graph(ctx.ctx);
    ggml_build_forward_expand(g, r);
    buf_guard buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, vk_backend(0))};
    ASSERT_NE(buf.buf, nullptr);
    std::vector<float> v(257 * 9);
    for (size_t i = 0; i < v.size(); i++) v[i] = (float) ((int) (i % 17) - 8) * 0.25f;
    ggml_backend_tensor_set(x, v.data(), 0, ggml_nbytes(x));
    ASSERT_EQ(ggml_backend_graph_compute(vk_backend(0), g), GGML_STATUS_SUCCESS);
    std::vector<float> out(v.size());
    ggml_backend_tensor_get(r, out.data(), 0, ggml_nbytes(r));
    for (size_t i = 0; i < v.size(); i++) {
        const float yy = 3.0f * v[i], zz = yy + v[i], ww = zz * zz, uu = ww - yy, ss = yy * 0.5f;
        ASSERT_EQ(out[i], uu + ss) << i;
    }
}

// Barrier placement, observed through the recorded counts (lavapipe runs dispatches in order, so
// a missing barrier would not show in the results there): independent nodes share no barrier,
// each read of a just-written tensor gets one.
TEST_F(VulkanTest, BarriersOnlyWhereANodeReadsAPendingWrite) {
    ctx_guard     ctx{ggml_init({32 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true})};
    ggml_tensor * x[3];
    for (ggml_tensor *& t : x) {
        t = ggml_new_tensor_1d(ctx.ctx, GGML_TYPE_F32, 1000);
        ggml_set_input(t);
    }
    ggml_tensor * y1 = ggml_sqr(ctx.ctx, x[0]);
    ggml_tensor * y2 = ggml_sqr(ctx.ctx, x[1]);
    ggml_tensor * y3 = ggml_neg(ctx.ctx, x[2]);   // three independent dispatches: no barrier
    ggml_tensor * t  = ggml_add(ctx.ctx, y1, y2); // reads y1, y2: barrier 1
    ggml_tensor * o  = ggml_add(ctx.ctx, t, y3);  // reads t: barrier 2
    ggml_set_output(o);
    ggml_cgraph * g = ggml_new_graph(ctx.ctx);
    ggml_build_forward_expand(g, o);
    buf_guard buf{ggml_backend_alloc_ctx_tensors(ctx.ctx, vk_backend(0))};
    ASSERT_NE(buf.buf, nullptr);
    ggml_backend_buffer_clear(buf.buf, 0);
    ASSERT_EQ(ggml_backend_graph_compute(vk_backend(0), g), GGML_STATUS_SUCCESS);
    size_t dispatches = 0, barriers = 0;
    ggml_backend_vk_get_graph_stats(vk_backend(0), &dispatches, &barriers);
    EXPECT_EQ(dispatches, 5u);
    EXPECT_EQ(barriers, 2u);
}

// ---------------------------------------------------------------------------------------------
// Scheduler: CPU + Vulkan

void cpu_tanh_rows(ggml_tensor * dst, int ith, int nth, void *) {
    const ggml_tensor * a = dst->src[0];
    const int64_t       n = ggml_nelements(dst);
    for (int64_t i = ith; i < n; i += nth) ((float *) dst->data)[i] = std::tanh(((const float *) a->data)[i]);
}

struct sched_graph {
    ggml_context * ctx = nullptr;
    ggml_tensor *  x = nullptr, * w1 = nullptr, * w2 = nullptr, * out = nullptr, * custom = nullptr;
    ggml_cgraph *  g = nullptr;
};

// x -> mul_mat(w1) -> silu -> custom tanh (CPU only) -> mul_mat(w2, F16) -> soft_max -> out
// (F16 weights: both devices widen them exactly, so the results agree to F32 rounding)
sched_graph build_sched_graph(ggml_context * wctx) {
    sched_graph s;
    s.ctx = ggml_init({64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true});
    s.x   = ggml_new_tensor_2d(s.ctx, GGML_TYPE_F32, 48, 40);
    s.w1  = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, 48, 64);
    s.w2  = ggml_new_tensor_2d(wctx, GGML_TYPE_F16, 64, 24);
    ggml_set_name(s.x, "x");
    ggml_set_name(s.w1, "w1");
    ggml_set_name(s.w2, "w2");
    ggml_set_input(s.x);
    ggml_tensor * h  = ggml_silu(s.ctx, ggml_mul_mat(s.ctx, s.w1, s.x));
    ggml_tensor * args[1] = {h};
    s.custom = ggml_custom_4d(s.ctx, GGML_TYPE_F32, 64, 40, 1, 1, args, 1, cpu_tanh_rows, 1, nullptr);
    s.out    = ggml_soft_max(s.ctx, ggml_mul_mat(s.ctx, s.w2, s.custom));
    ggml_set_output(s.out);
    s.g = ggml_new_graph(s.ctx);
    ggml_build_forward_expand(s.g, s.out);
    return s;
}

std::vector<float> run_sched(std::vector<ggml_backend_t> backends, bool weights_on_first, int * n_splits,
                             ggml_backend_t * custom_backend, ggml_backend_t * mm_backend) {
    // weights in their own buffer, on the first or the last backend (as a model loader puts them)
    ggml_context * wctx = ggml_init({4 * ggml_tensor_overhead(), nullptr, true});
    sched_graph    s    = build_sched_graph(wctx);
    ggml_tensor *  w1   = s.w1;
    ggml_tensor *  w2   = s.w2;
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, weights_on_first ? backends[0] : backends.back());
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    std::vector<float> w1v(48 * 64), xv(48 * 40);
    for (float & f : w1v) f = u(rng);
    for (float & f : xv) f = u(rng);
    std::vector<uint16_t> w2v(64 * 24);
    for (uint16_t & h : w2v) h = ggml_fp32_to_fp16(u(rng));
    ggml_backend_tensor_set(w1, w1v.data(), 0, ggml_nbytes(w1));
    ggml_backend_tensor_set(w2, w2v.data(), 0, ggml_nbytes(w2));

    ggml_backend_sched_t sched = ggml_backend_sched_new(backends.data(), nullptr, (int) backends.size(), 256, false, true);
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(sched, s.g));
    ggml_backend_tensor_set(s.x, xv.data(), 0, ggml_nbytes(s.x));
    EXPECT_EQ(ggml_backend_sched_graph_compute(sched, s.g), GGML_STATUS_SUCCESS);
    std::vector<float> out((size_t) ggml_nelements(s.out));
    ggml_backend_tensor_get(s.out, out.data(), 0, ggml_nbytes(s.out));
    if (n_splits) *n_splits = ggml_backend_sched_get_n_splits(sched);
    if (custom_backend) *custom_backend = ggml_backend_sched_get_tensor_backend(sched, s.custom);
    if (mm_backend) *mm_backend = ggml_backend_sched_get_tensor_backend(sched, s.out->src[0]);
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_free(s.ctx);
    return out;
}

TEST_F(VulkanTest, SchedulerSplitsFallsBackAndMatchesCpuOnly) {
    ggml_backend_t vk = vk_backend(0), cpu = cpu_backend();
    int            n_splits = 0;
    ggml_backend_t custom_be = nullptr, mm_be = nullptr;
    const std::vector<float> mixed = run_sched({vk, cpu}, true, &n_splits, &custom_be, &mm_be);
    const std::vector<float> ref   = run_sched({cpu}, true, nullptr, nullptr, nullptr);
    EXPECT_EQ(custom_be, cpu) << "the custom CPU callback must fall back to the CPU";
    EXPECT_EQ(mm_be, vk) << "the mul_mat after the fallback node goes back to Vulkan";
    EXPECT_GE(n_splits, 3) << "Vulkan -> CPU -> Vulkan";
    ASSERT_EQ(mixed.size(), ref.size());
    for (size_t i = 0; i < ref.size(); i++) ASSERT_NEAR(mixed[i], ref[i], 1e-5f + 1e-4f * std::fabs(ref[i])) << i;
}

TEST_F(VulkanTest, SchedulerCopiesCpuWeightsToVulkan) {
    // weights in CPU memory: op offload moves the batched mul_mats to Vulkan with input copies
    ggml_backend_t vk = vk_backend(0), cpu = cpu_backend();
    int            n_splits = 0;
    const std::vector<float> mixed = run_sched({vk, cpu}, false, &n_splits, nullptr, nullptr);
    const std::vector<float> ref   = run_sched({cpu}, true, nullptr, nullptr, nullptr);
    EXPECT_GE(n_splits, 2);
    ASSERT_EQ(mixed.size(), ref.size());
    for (size_t i = 0; i < ref.size(); i++) ASSERT_NEAR(mixed[i], ref[i], 1e-5f + 1e-4f * std::fabs(ref[i])) << i;
}

// ---------------------------------------------------------------------------------------------
// Backend-ops cases

struct param {
    size_t      case_idx;
    size_t      dev;
    bool        vs_cpu;
    std::string name;
};
void PrintTo(const param & p, std::ostream * os) { *os << p.name; }

// Whether the CPU device runs every node of a case (some optional cases exceed what the CPU
// kernels accept); decided from the graph alone, nothing is allocated.
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
    bool ok = true;
    for (int i = 0; i < ggml_graph_n_nodes(g); i++) ok = ok && ggml_backend_dev_supports_op(cpu, ggml_graph_node(g, i));
    ggml_free(ctx);
    ggml_free(ctx_in);
    return ok;
}

// every case against the reference; against the CPU too where the CPU runs the case
std::vector<param> make_params() {
    std::vector<param> ps;
    const int          ndev = ggml_backend_vk_get_device_count();
    for (int d = 0; d < ndev; d++) {
        for (size_t i = 0; i < bops::all_cases().size(); i++) {
            const std::string base = std::string(GGML_VK_NAME) + std::to_string(d) + "_" + bops::all_cases()[i].name;
            ps.push_back({i, (size_t) d, false, base});
            if (cpu_supports(bops::all_cases()[i])) ps.push_back({i, (size_t) d, true, base + "_vs_CPU"});
        }
    }
    return ps;
}

class VulkanOps : public VulkanTest, public ::testing::WithParamInterface<param> {};

// tallies for the summary printed at exit (reference comparisons only, not the _vs_CPU runs)
struct tally {
    int                      ran = 0, declined = 0;
    std::vector<std::string> declined_names;
};
tally & case_tally() {
    static tally t;
    return t;
}

TEST_P(VulkanOps, MatchesReference) {
    const param &         p = GetParam();
    const bops::op_case & c = bops::all_cases()[p.case_idx];
    ggml_backend_t        be = vk_backend(p.dev);
    ASSERT_NE(be, nullptr);
    // quantized-weight mul_mat: Vulkan multiplies the activations unquantized (mul_mat_q.comp), so
    // the case's unquantized-activation reference and CPU gap apply
    const bool         f32a = (bool) c.f32_act_ref;
    const bops::result r    = p.vs_cpu ? (f32a ? bops::run_case_vs_cpu_f32_act(c, be, cpu_backend())
                                                : bops::run_case_vs_cpu(c, be, cpu_backend()))
                                       : (f32a ? bops::run_case_f32_act(c, be) : bops::run_case(c, be, 0));
    const char * why = expected_decline_reason(c.name, r.message);
    if (r.status == bops::result::declined) {
        // an expected decline passes (it is listed, with its reason, in k_expected_declines)
        EXPECT_NE(why, nullptr) << "unexpected decline: " << r.message;
        if (!p.vs_cpu) {
            case_tally().declined++;
            case_tally().declined_names.push_back(c.name + " (" + (why ? why : "?") + ")");
        }
        return;
    }
    if (!p.vs_cpu) case_tally().ran++;
    EXPECT_EQ(why, nullptr) << "listed as an expected decline but the device ran it: " << c.desc;
    EXPECT_EQ(r.status, bops::result::pass) << r.message;
}

INSTANTIATE_TEST_SUITE_P(All, VulkanOps, ::testing::ValuesIn(make_params()),
                         [](const ::testing::TestParamInfo<param> & info) { return info.param.name; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(VulkanOps); // no device: VulkanTest fails instead

// Quantized mul_mat at real model sizes (K 4096/16384, N 3072/6144, 1..8 activation rows):
// mul_mat_q.comp's long rows (F32 rounding over 16384 products) and large grids against the exact
// product; the largest also against the CPU backend's result (activation quantization bounded).
TEST_F(VulkanTest, QuantizedMulMatAtModelSizes) {
    ggml_backend_t be = vk_backend(0);
    ASSERT_NE(be, nullptr);
    const std::vector<bops::op_case> cases = bops::quant_mul_mat_large_cases();
    ASSERT_GE(cases.size(), 3u);
    for (size_t i = 0; i < cases.size(); i++) {
        const bops::result r = bops::run_case_f32_act(cases[i], be);
        EXPECT_EQ(r.status, bops::result::pass) << cases[i].desc << ": " << r.message;
        if (i == 0) {
            const bops::result rc = bops::run_case_vs_cpu_f32_act(cases[i], be, cpu_backend());
            EXPECT_EQ(rc.status, bops::result::pass) << cases[i].desc << " vs CPU: " << rc.message;
        }
    }
}

// The device count check as a test of its own, so a machine without Vulkan fails loudly.
TEST(VulkanDevice, AtLeastOneDeviceFound) {
    EXPECT_GT(ggml_backend_vk_get_device_count(), 0) << "the Vulkan backend is built but no Vulkan device was found";
}

} // namespace

class SummaryPrinter : public ::testing::Environment {
  public:
    void TearDown() override {
        const tally & t = case_tally();
        if (t.ran + t.declined == 0) return;
        fprintf(stderr, "test-vulkan: backend-ops cases on Vulkan: %d ran, %d declined (expected):\n", t.ran, t.declined);
        for (const std::string & n : t.declined_names) fprintf(stderr, "  declined: %s\n", n.c_str());
    }
};

// Leak checking (the sanitizer pass): the Vulkan loader unloads the driver and layer libraries
// at vkDestroyInstance, after which a leak inside them has no symbols to report or suppress.
// Keep them mapped (RTLD_NODELETE) so LeakSanitizer can name them, and suppress leaks that are
// entirely inside the driver/layers/loader: not ours to fix.
void pin_vulkan_libraries() {
    for (const char * lib : {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so", "libVkLayer_MESA_device_select.so"}) {
        dlopen(lib, RTLD_NOW | RTLD_NODELETE | RTLD_LOCAL); // absent (another driver): nothing to pin
    }
}

extern "C" const char * __lsan_default_suppressions() {
    return "leak:libvulkan_lvp.so\nleak:libVkLayer_khronos_validation.so\nleak:libVkLayer_MESA_device_select.so\n"
           "leak:libvulkan.so\nleak:libLLVM\n";
}

int main(int argc, char ** argv) {
    pin_vulkan_libraries();
    // before the first registry use: the instance is created with the validation layer
    setenv("GGML_VK_VALIDATE", "1", 0);
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new SummaryPrinter);
    ::testing::AddGlobalTestEnvironment(new BackendsFreer);
    const int rc = RUN_ALL_TESTS();
    return rc;
}
