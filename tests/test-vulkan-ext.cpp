// test-vulkan-ext.cpp — the Vulkan execution services (ggml-ext-vulkan.h, ggml_ext_vulkan_v1) on
// the first Vulkan device (Mesa lavapipe in CI), through public headers only, as an application
// would use them:
//
// * device capabilities, buffer_info, binding resolution (descriptor offset rounded down to the
//   device alignment, shader_offset the rest);
// * an application shader (tests/vulkan-ext/axpb.comp, compiled by glslc at build time)
//   dispatched on tensor, buffer and workspace bindings at unaligned offsets, specialization and
//   push constants honoured, results exact; copies exact;
// * every rejection returns an error and records nothing (counters unchanged, memory untouched);
// * the pipeline cache (created on the first execution, never in prepare; hit afterwards);
// * a custom operator whose Vulkan kernel copies into the plan workspace and dispatches from it,
//   between two native ops in one graph (native -> extension -> native), exact;
// * batching: a scheduled plan is one submission (or one per threshold), while evaluation
//   callbacks and direct backend calls keep one submission per fragment.
// The Khronos validation layer is on (GGML_VK_VALIDATE=1, set by main) and any message it
// reports fails the test that was running. No Vulkan device is a failure, never a skip.

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext-vulkan.h"
#include "ggml-ext.h"
#include "ggml-vulkan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace {

const uint32_t k_axpb_spv[] = {
#include "axpb.spv.inc"
};

const ggml_ext_vulkan_v1 * api() {
    static const ggml_ext_vulkan_v1 * p =
        (const ggml_ext_vulkan_v1 *) ggml_backend_reg_get_proc_address(ggml_backend_vk_reg(), GGML_EXT_VULKAN_V1);
    return p;
}

ggml_backend_t g_vk  = nullptr;
ggml_backend_t g_cpu = nullptr;

ggml_ext_vulkan_stats stats() {
    ggml_ext_vulkan_stats s{};
    s.size = sizeof(s);
    EXPECT_TRUE(api()->get_stats(g_vk, &s));
    return s;
}

ggml_ext_vulkan_device_info dev_info() {
    ggml_ext_vulkan_device_info i{};
    i.size = sizeof(i);
    EXPECT_TRUE(api()->device_info(ggml_backend_get_device(g_vk), &i));
    return i;
}

uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

ggml_ext_vulkan_binding tensor_binding(const ggml_tensor * t, uint64_t offset, uint64_t size, uint32_t access = 0) {
    ggml_ext_vulkan_binding b{};
    b.tensor = t;
    b.offset = offset;
    b.size   = size;
    b.access = access;
    return b;
}

ggml_ext_vulkan_binding base_binding(const void * base, uint64_t offset, uint64_t size, uint32_t access = 0) {
    ggml_ext_vulkan_binding b{};
    b.base   = base;
    b.offset = offset;
    b.size   = size;
    b.access = access;
    return b;
}

// y = x * a + b over n floats: x and y are bindings of at least n * 4 bytes.
ggml_status run_axpb(ggml_backend_t be, ggml_ext_vulkan_binding x, ggml_ext_vulkan_binding y, uint32_t n, float a,
                     float b, uint32_t wg = 64) {
    ggml_ext_vulkan_resolved rx{}, ry{};
    ggml_status st = api()->resolve(be, &x, &rx);
    if (st != GGML_STATUS_SUCCESS) return st;
    if ((st = api()->resolve(be, &y, &ry)) != GGML_STATUS_SUCCESS) return st;
    x.access = GGML_EXT_VULKAN_READ;
    y.access = GGML_EXT_VULKAN_WRITE;
    const ggml_ext_vulkan_binding bindings[2] = {x, y};
    const uint32_t                spec[2]     = {wg, float_bits(a)};
    struct {
        uint32_t n, x_off, y_off;
        float    b;
    } pc = {n, (uint32_t) (rx.shader_offset / 4), (uint32_t) (ry.shader_offset / 4), b};
    ggml_ext_vulkan_dispatch d{};
    d.name                = "test.axpb";
    d.spirv               = k_axpb_spv;
    d.spirv_size          = sizeof(k_axpb_spv);
    d.bindings            = bindings;
    d.n_bindings          = 2;
    d.spec_constants      = spec;
    d.n_spec_constants    = 2;
    d.push_constants      = &pc;
    d.push_constants_size = sizeof(pc);
    d.workgroups[0]       = (n + wg - 1) / wg;
    d.workgroups[1]       = 1;
    d.workgroups[2]       = 1;
    return api()->dispatch(be, &d);
}

// Tensors of a context allocated in one Vulkan buffer.
struct vk_tensors {
    ggml_context *        ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    explicit vk_tensors(ggml_backend_t be = nullptr) {
        ggml_init_params p = {64 * ggml_tensor_overhead(), nullptr, true};
        ctx                = ggml_init(p);
        (void) be;
    }
    ggml_tensor * f32(int64_t n) { return ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n); }
    void          alloc(ggml_backend_t be) { buf = ggml_backend_alloc_ctx_tensors(ctx, be); }
    ~vk_tensors() {
        if (buf) ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
};

std::vector<float> iota(int64_t n, float start) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; i++) v[i] = start + (float) i;
    return v;
}

std::vector<float> get(const ggml_tensor * t) {
    std::vector<float> v(ggml_nelements(t));
    ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
    return v;
}

class VulkanExt : public ::testing::Test {
  protected:
    size_t msgs_before = 0;
    void   SetUp() override {
        ASSERT_NE(api(), nullptr) << "the Vulkan registry does not offer " GGML_EXT_VULKAN_V1;
        ASSERT_NE(g_vk, nullptr) << "no Vulkan device";
        ASSERT_TRUE(ggml_backend_vk_validation_enabled()) << "the Khronos validation layer is not installed";
        msgs_before = ggml_backend_vk_validation_message_count();
    }
    void TearDown() override {
        EXPECT_EQ(ggml_backend_vk_validation_message_count(), msgs_before) << "Vulkan validation reported messages";
    }
};

// ---------------------------------------------------------------------------------------------

TEST_F(VulkanExt, TableIsVersioned) {
    EXPECT_EQ(api()->version, 1u);
    EXPECT_GE(api()->size, sizeof(ggml_ext_vulkan_v1));
    EXPECT_EQ(ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), GGML_EXT_VULKAN_V1), nullptr);
}

TEST_F(VulkanExt, DeviceInfo) {
    const ggml_ext_vulkan_device_info i = dev_info();
    EXPECT_GT(strlen(i.name), 0u);
    EXPECT_GE(i.max_compute_shared_memory_size, 16384u); // Vulkan's required minimum
    EXPECT_GE(i.max_workgroup_invocations, 128u);
    for (int d = 0; d < 3; d++) EXPECT_GE(i.max_workgroup_count[d], 65535u);
    EXPECT_GE(i.max_storage_buffer_range, (uint64_t) 1 << 27);
    EXPECT_GT(i.min_storage_buffer_offset_alignment, 0u);
    EXPECT_EQ(i.min_storage_buffer_offset_alignment & (i.min_storage_buffer_offset_alignment - 1), 0u);
    EXPECT_GE(i.max_push_constants_size, 128u);
    EXPECT_GE(i.max_bindings, 4u);
    EXPECT_LE(i.max_bindings, (uint32_t) GGML_EXT_VULKAN_MAX_BINDINGS);
    EXPECT_GT(i.subgroup_size, 0u);
    EXPECT_LE(i.subgroup_min_size, i.subgroup_size);
    EXPECT_GE(i.subgroup_max_size, i.subgroup_size);
    EXPECT_TRUE(i.subgroup_basic && i.subgroup_arithmetic); // the backend requires them
    EXPECT_TRUE(i.storage_buffer_16bit && i.shader_int64);
    EXPECT_LE(i.n_coopmat, (uint32_t) GGML_EXT_VULKAN_MAX_COOPMAT);
    if (i.is_cpu) {
        EXPECT_EQ(i.n_coopmat, 0u) << "lavapipe has no cooperative matrices";
    }
    printf("[ device ] %s: subgroup %u (%u..%u), shared %u B, push %u B, storage range %llu, align %llu, "
           "8-bit storage %d, int8 %d, fp16 %d, integer dot %d (4x8 signed accelerated %d), coopmat %u\n",
           i.name, i.subgroup_size, i.subgroup_min_size, i.subgroup_max_size, i.max_compute_shared_memory_size,
           i.max_push_constants_size, (unsigned long long) i.max_storage_buffer_range,
           (unsigned long long) i.min_storage_buffer_offset_alignment, i.storage_buffer_8bit, i.shader_int8,
           i.shader_float16, i.integer_dot_product, i.integer_dot_product_4x8_packed_signed_accelerated, i.n_coopmat);

    // a smaller (older) struct gets only what fits; not a Vulkan device: false
    struct {
        uint32_t size;
        char     name[8];
    } small{};
    small.size = sizeof(small);
    EXPECT_TRUE(api()->device_info(ggml_backend_get_device(g_vk), (ggml_ext_vulkan_device_info *) &small));
    EXPECT_EQ(small.size, sizeof(small));
    ggml_ext_vulkan_device_info j{};
    j.size = sizeof(j);
    EXPECT_FALSE(api()->device_info(ggml_backend_get_device(g_cpu), &j));
}

TEST_F(VulkanExt, BufferInfoAndResolve) {
    vk_tensors t;
    ggml_tensor * a = t.f32(100);
    ggml_tensor * b = t.f32(100);
    t.alloc(g_vk);
    ASSERT_NE(t.buf, nullptr);
    ggml_backend_buffer_t other = ggml_backend_alloc_buffer(g_vk, 4096);
    ASSERT_NE(other, nullptr);

    ggml_ext_vulkan_storage s1{}, s2{};
    ASSERT_TRUE(api()->buffer_info(t.buf, &s1));
    ASSERT_TRUE(api()->buffer_info(other, &s2));
    EXPECT_EQ(s1.size, ggml_backend_buffer_get_size(t.buf));
    EXPECT_EQ(s2.size, 4096u);
    // two live buffers never overlap in storage
    EXPECT_TRUE(s1.storage_id != s2.storage_id || s1.offset + s1.size <= s2.offset || s2.offset + s2.size <= s1.offset);

    const uint64_t align = dev_info().min_storage_buffer_offset_alignment;
    for (uint64_t off : {0ull, 4ull, 20ull, 36ull, 396ull}) {
        ggml_ext_vulkan_binding  bb = tensor_binding(b, off, 0);
        ggml_ext_vulkan_resolved r{};
        ASSERT_EQ(api()->resolve(g_vk, &bb, &r), GGML_STATUS_SUCCESS) << api()->last_error();
        EXPECT_EQ(r.storage.storage_id, s1.storage_id);
        // the tensor's bytes inside its buffer's storage
        const uint64_t in_buf = (uint64_t) ((const char *) b->data - (const char *) ggml_backend_buffer_get_base(t.buf));
        EXPECT_EQ(r.storage.offset, s1.offset + in_buf + off);
        EXPECT_EQ(r.storage.size, ggml_nbytes(b) - off); // size 0: to the end of the tensor
        EXPECT_EQ(r.descriptor_offset % align, 0u);
        EXPECT_LT(r.shader_offset, align);
        EXPECT_EQ(r.descriptor_offset + r.shader_offset, r.storage.offset);
        EXPECT_EQ(r.descriptor_range, r.shader_offset + r.storage.size);
    }
    // the same bytes by buffer and by base pointer
    ggml_ext_vulkan_binding  by_buf = {};
    by_buf.buffer                   = t.buf;
    by_buf.offset                   = (uint64_t) ((const char *) a->data - (const char *) ggml_backend_buffer_get_base(t.buf)) + 8;
    by_buf.size                     = 12;
    ggml_ext_vulkan_binding  by_ptr = base_binding(a->data, 8, 12);
    ggml_ext_vulkan_binding  by_t   = tensor_binding(a, 8, 12);
    ggml_ext_vulkan_resolved r1{}, r2{}, r3{};
    ASSERT_EQ(api()->resolve(g_vk, &by_buf, &r1), GGML_STATUS_SUCCESS) << api()->last_error();
    ASSERT_EQ(api()->resolve(g_vk, &by_ptr, &r2), GGML_STATUS_SUCCESS) << api()->last_error();
    ASSERT_EQ(api()->resolve(g_vk, &by_t, &r3), GGML_STATUS_SUCCESS) << api()->last_error();
    EXPECT_EQ(r1.storage.offset, r3.storage.offset);
    EXPECT_EQ(r2.storage.offset, r3.storage.offset);
    EXPECT_EQ(r1.storage.size, 12u);
    EXPECT_TRUE(ggml_ext_vulkan_storage_overlaps(&r1.storage, &r2.storage));
    ggml_ext_vulkan_binding  next = tensor_binding(a, 20, 4), prev = tensor_binding(a, 4, 4);
    ggml_ext_vulkan_resolved rn{}, rp{};
    ASSERT_EQ(api()->resolve(g_vk, &next, &rn), GGML_STATUS_SUCCESS);
    ASSERT_EQ(api()->resolve(g_vk, &prev, &rp), GGML_STATUS_SUCCESS);
    EXPECT_FALSE(ggml_ext_vulkan_storage_overlaps(&r1.storage, &rn.storage)) << "[8, 20) and [20, 24) touch only";
    EXPECT_FALSE(ggml_ext_vulkan_storage_overlaps(&r1.storage, &rp.storage)) << "[4, 8) and [8, 20) touch only";
    EXPECT_FALSE(ggml_ext_vulkan_storage_overlaps(&r1.storage, &s2)) << "another buffer";

    // not Vulkan: false / error
    ggml_backend_buffer_t cpu_buf = ggml_backend_alloc_buffer(g_cpu, 256);
    EXPECT_FALSE(api()->buffer_info(cpu_buf, &s1));
    ggml_ext_vulkan_binding  nb = tensor_binding(a, 0, 0);
    ggml_ext_vulkan_resolved r{};
    EXPECT_NE(api()->resolve(g_cpu, &nb, &r), GGML_STATUS_SUCCESS);
    ggml_backend_buffer_free(cpu_buf);
    ggml_backend_buffer_free(other);
}

// The shader on tensor bindings at offsets that are not multiples of the descriptor alignment:
// the shader must add shader_offset; only the given range is written.
TEST_F(VulkanExt, DispatchOnTensorsAtUnalignedOffsets) {
    vk_tensors t;
    ggml_tensor * x = t.f32(300);
    ggml_tensor * y = t.f32(300);
    t.alloc(g_vk);
    const std::vector<float> xv = iota(300, -40.0f);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    const std::vector<float> fill(300, -1.0f);

    const uint64_t align = dev_info().min_storage_buffer_offset_alignment;
    struct cfg {
        uint32_t x0, y0, n;
        float    a, b;
        uint32_t wg;
    };
    for (const cfg c : {cfg{5, 7, 101, 3.0f, 0.5f, 64}, cfg{0, 0, 300, -2.0f, 7.0f, 32}, cfg{13, 2, 1, 1.0f, -3.0f, 64},
                        cfg{1, 9, 257, 0.25f, 1.0f, 128}}) {
        ggml_backend_tensor_set(y, fill.data(), 0, ggml_nbytes(y));
        ggml_ext_vulkan_binding bx = tensor_binding(x, c.x0 * 4ull, c.n * 4ull);
        ggml_ext_vulkan_binding by = tensor_binding(y, c.y0 * 4ull, c.n * 4ull);
        if (align > 4 && c.x0 == 5) {
            ggml_ext_vulkan_resolved r{};
            ASSERT_EQ(api()->resolve(g_vk, &bx, &r), GGML_STATUS_SUCCESS);
            EXPECT_GT(r.shader_offset, 0u) << "the case must exercise shader_offset";
        }
        ASSERT_EQ(run_axpb(g_vk, bx, by, c.n, c.a, c.b, c.wg), GGML_STATUS_SUCCESS) << api()->last_error();
        ggml_backend_synchronize(g_vk);
        const std::vector<float> yv = get(y);
        for (uint32_t i = 0; i < 300; i++) {
            const bool  inside = i >= c.y0 && i < c.y0 + c.n;
            const float want   = inside ? xv[c.x0 + (i - c.y0)] * c.a + c.b : -1.0f;
            ASSERT_EQ(yv[i], want) << "element " << i << " (x0 " << c.x0 << ", y0 " << c.y0 << ", n " << c.n << ")";
        }
    }
}

// The same through a plain buffer and a base pointer (the form a kernel's workspace arrives in).
TEST_F(VulkanExt, DispatchOnBufferAndBaseBindings) {
    ggml_backend_buffer_t ws = ggml_backend_alloc_buffer(g_vk, 8192);
    ASSERT_NE(ws, nullptr);
    vk_tensors t;
    ggml_tensor * x = t.f32(64);
    t.alloc(g_vk);
    const std::vector<float> xv = iota(64, 1.0f);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));

    // x -> ws[36 ..] by buffer; ws[36 ..] -> ws[1000 ..] by base pointer
    ggml_ext_vulkan_binding to_ws{};
    to_ws.buffer = ws;
    to_ws.offset = 36;
    to_ws.size   = 64 * 4;
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(x, 0, 0), to_ws, 64, 2.0f, 0.0f), GGML_STATUS_SUCCESS) << api()->last_error();
    void * base = ggml_backend_buffer_get_base(ws);
    ASSERT_EQ(run_axpb(g_vk, base_binding(base, 36, 256), base_binding(base, 1000, 256), 64, 1.0f, 1.0f),
              GGML_STATUS_SUCCESS)
        << api()->last_error();
    // back into a tensor to read it
    vk_tensors o;
    ggml_tensor * y = o.f32(64);
    o.alloc(g_vk);
    ggml_ext_vulkan_binding src = base_binding(base, 1000, 256);
    ggml_ext_vulkan_binding dst = tensor_binding(y, 0, 0);
    ASSERT_EQ(api()->copy(g_vk, &dst, &src), GGML_STATUS_SUCCESS) << api()->last_error();
    ggml_backend_synchronize(g_vk);
    const std::vector<float> yv = get(y);
    for (int i = 0; i < 64; i++) ASSERT_EQ(yv[i], xv[i] * 2.0f + 1.0f) << i;
    ggml_backend_buffer_free(ws);
}

TEST_F(VulkanExt, CopyExact) {
    vk_tensors t;
    ggml_tensor * a = t.f32(1000);
    ggml_tensor * b = t.f32(1000);
    t.alloc(g_vk);
    const std::vector<float> av = iota(1000, 0.5f);
    const std::vector<float> fill(1000, 9.0f);
    ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_set(b, fill.data(), 0, ggml_nbytes(b));
    // a[3 .. 3+517) -> b[11 ..); then within a: a[600 .. 700) -> a[0 .. 100) (same storage, disjoint)
    ggml_ext_vulkan_binding d1 = tensor_binding(b, 11 * 4, 517 * 4), s1 = tensor_binding(a, 3 * 4, 517 * 4);
    ASSERT_EQ(api()->copy(g_vk, &d1, &s1), GGML_STATUS_SUCCESS) << api()->last_error();
    ggml_ext_vulkan_binding d2 = tensor_binding(a, 0, 400), s2 = tensor_binding(a, 600 * 4, 400);
    ASSERT_EQ(api()->copy(g_vk, &d2, &s2), GGML_STATUS_SUCCESS) << api()->last_error();
    ggml_backend_synchronize(g_vk);
    const std::vector<float> bv = get(b), a2 = get(a);
    for (int i = 0; i < 1000; i++) {
        ASSERT_EQ(bv[i], (i >= 11 && i < 11 + 517) ? av[i - 11 + 3] : 9.0f) << i;
        ASSERT_EQ(a2[i], i < 100 ? av[600 + i] : av[i]) << i;
    }
}

// Every invalid request fails with a message and records nothing: no command, no barrier, no
// submission afterwards, memory untouched.
TEST_F(VulkanExt, RejectionsRecordNothing) {
    vk_tensors t;
    ggml_tensor * a = t.f32(256);
    ggml_tensor * b = t.f32(256);
    t.alloc(g_vk);
    const std::vector<float> av = iota(256, 1.0f), bv = iota(256, 1000.0f);
    ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_set(b, bv.data(), 0, ggml_nbytes(b));
    ggml_backend_synchronize(g_vk);

    // a tensor of another device (the CPU: the only other device here)
    vk_tensors c;
    ggml_tensor * cpu_t = c.f32(256);
    c.alloc(g_cpu);

    const ggml_ext_vulkan_device_info info   = dev_info();
    const ggml_ext_vulkan_stats       before = stats();
    const auto expect_fail = [&](ggml_status st, const char * what) {
        EXPECT_NE(st, GGML_STATUS_SUCCESS) << what << " was accepted";
        EXPECT_GT(strlen(api()->last_error()), 0u) << what << ": no message";
        printf("[ rejected ] %s: %s\n", what, api()->last_error());
    };
    const auto copy = [&](ggml_ext_vulkan_binding d, ggml_ext_vulkan_binding s) { return api()->copy(g_vk, &d, &s); };

    expect_fail(copy(tensor_binding(b, 2, 64), tensor_binding(a, 0, 64)), "copy misaligned dst offset");
    expect_fail(copy(tensor_binding(b, 0, 64), tensor_binding(a, 6, 64)), "copy misaligned src offset");
    expect_fail(copy(tensor_binding(b, 0, 62), tensor_binding(a, 0, 62)), "copy size not a multiple of 4");
    expect_fail(copy(tensor_binding(a, 32, 64), tensor_binding(a, 0, 64)), "copy overlapping ranges");
    expect_fail(copy(tensor_binding(b, 0, 64), tensor_binding(a, 0, 128)), "copy sizes differ");
    expect_fail(copy(tensor_binding(b, 1020, 8), tensor_binding(a, 0, 8)), "copy dst out of range");
    expect_fail(copy(tensor_binding(b, 0, 8), tensor_binding(a, 1028, 0)), "copy src offset past the end");
    expect_fail(copy(tensor_binding(b, 0, 64), tensor_binding(cpu_t, 0, 64)), "copy from a foreign device");
    {
        ggml_ext_vulkan_binding two = tensor_binding(a, 0, 64);
        two.buffer                  = t.buf;
        expect_fail(copy(tensor_binding(b, 0, 64), two), "binding with tensor and buffer");
        expect_fail(copy(tensor_binding(b, 0, 64), ggml_ext_vulkan_binding{}), "binding with nothing");
        int host_var = 0;
        expect_fail(copy(tensor_binding(b, 0, 4), base_binding(&host_var, 0, 4)), "base pointer in no buffer");
    }

    // dispatches
    expect_fail(run_axpb(g_vk, tensor_binding(a, 0, 1028), tensor_binding(b, 0, 1024), 256, 1, 0), "binding out of range");
    expect_fail(run_axpb(g_vk, tensor_binding(cpu_t, 0, 0), tensor_binding(b, 0, 0), 256, 1, 0), "foreign-device binding");
    {
        const ggml_ext_vulkan_binding bindings[2] = {tensor_binding(a, 0, 0, GGML_EXT_VULKAN_READ),
                                                     tensor_binding(b, 0, 0, GGML_EXT_VULKAN_WRITE)};
        const uint32_t                spec[2]     = {64, float_bits(1.0f)};
        std::vector<uint8_t>          push(info.max_push_constants_size + 64, 0);
        const auto base = [&] {
            ggml_ext_vulkan_dispatch d{};
            d.spirv               = k_axpb_spv;
            d.spirv_size          = sizeof(k_axpb_spv);
            d.bindings            = bindings;
            d.n_bindings          = 2;
            d.spec_constants      = spec;
            d.n_spec_constants    = 2;
            d.push_constants      = push.data();
            d.push_constants_size = 16;
            d.workgroups[0] = d.workgroups[1] = d.workgroups[2] = 1;
            return d;
        };
        ggml_ext_vulkan_dispatch d = base();
        if (info.max_workgroup_count[0] < UINT32_MAX) {
            d.workgroups[0] = info.max_workgroup_count[0] + 1;
            expect_fail(api()->dispatch(g_vk, &d), "too many workgroups (x)");
        }
        d = base();
        if (info.max_workgroup_count[2] < UINT32_MAX) {
            d.workgroups[2] = info.max_workgroup_count[2] + 1;
            expect_fail(api()->dispatch(g_vk, &d), "too many workgroups (z)");
        }
        d                     = base();
        d.push_constants_size = info.max_push_constants_size + 4;
        expect_fail(api()->dispatch(g_vk, &d), "too-large push constants");
        d                     = base();
        d.push_constants_size = 14;
        expect_fail(api()->dispatch(g_vk, &d), "push constants not a multiple of 4");
        d            = base();
        d.n_bindings = GGML_EXT_VULKAN_MAX_BINDINGS + 1;
        expect_fail(api()->dispatch(g_vk, &d), "too many bindings");
        d                  = base();
        d.n_spec_constants = GGML_EXT_VULKAN_MAX_SPEC_CONSTANTS + 1;
        expect_fail(api()->dispatch(g_vk, &d), "too many specialization constants");
        d                     = base();
        const uint32_t junk[] = {0xdeadbeefu, 1, 2, 3};
        d.spirv               = junk;
        d.spirv_size          = sizeof(junk);
        expect_fail(api()->dispatch(g_vk, &d), "not SPIR-V");
        d            = base();
        d.spirv_size = 6;
        expect_fail(api()->dispatch(g_vk, &d), "SPIR-V size not a multiple of 4");
        expect_fail(api()->dispatch(g_cpu, &d), "not a Vulkan backend");
    }
    // a window wider than maxStorageBufferRange (a buffer just past it)
    if (info.max_storage_buffer_range < ((uint64_t) 1 << 30)) {
        ggml_backend_buffer_t big = ggml_backend_alloc_buffer(g_vk, info.max_storage_buffer_range + 4096);
        ASSERT_NE(big, nullptr);
        ggml_ext_vulkan_binding wide{};
        wide.buffer = big;
        // offset 4: the descriptor starts 4 bytes lower, so the window is the range + 4 bytes
        wide.offset = 4;
        wide.size   = info.max_storage_buffer_range;
        expect_fail(run_axpb(g_vk, wide, tensor_binding(b, 0, 0), 256, 1, 0), "window above maxStorageBufferRange");
        // the same range is fine for a copy (no descriptor)
        ggml_backend_buffer_free(big);
    }

    // nothing was recorded: counters unchanged, and a synchronize has nothing to submit
    ggml_backend_synchronize(g_vk);
    const ggml_ext_vulkan_stats after = stats();
    EXPECT_EQ(after.dispatches, before.dispatches);
    EXPECT_EQ(after.ext_dispatches, before.ext_dispatches);
    EXPECT_EQ(after.ext_copies, before.ext_copies);
    EXPECT_EQ(after.barriers, before.barriers);
    EXPECT_EQ(after.submissions, before.submissions);
    EXPECT_EQ(after.pipelines_created, before.pipelines_created);
    EXPECT_EQ(get(a), av);
    EXPECT_EQ(get(b), bv);
}

// Barriers follow the declared accesses: none between independent dispatches, one before a
// dispatch that reads what a pending one wrote, one before a write over what a pending one reads.
TEST_F(VulkanExt, BarriersFollowDataFlow) {
    vk_tensors t;
    ggml_tensor * a = t.f32(64);
    ggml_tensor * b = t.f32(64);
    ggml_tensor * c = t.f32(64);
    ggml_tensor * d = t.f32(64);
    t.alloc(g_vk);
    const std::vector<float> av = iota(64, 1.0f);
    ggml_backend_tensor_set(a, av.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_set(c, av.data(), 0, ggml_nbytes(c));
    ggml_backend_synchronize(g_vk);
    const uint64_t b0 = stats().barriers;
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(a, 0, 0), tensor_binding(b, 0, 0), 64, 2.0f, 0.0f), GGML_STATUS_SUCCESS);
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(c, 0, 0), tensor_binding(d, 0, 0), 64, 3.0f, 0.0f), GGML_STATUS_SUCCESS);
    EXPECT_EQ(stats().barriers, b0) << "independent dispatches need no barrier";
    // reads b (pending write): barrier
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(b, 0, 0), tensor_binding(a, 0, 0), 64, 1.0f, 1.0f), GGML_STATUS_SUCCESS);
    EXPECT_EQ(stats().barriers, b0 + 1) << "read after write";
    // writes b, which the pending dispatch just read: barrier (write after read)
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(d, 0, 0), tensor_binding(b, 0, 0), 64, 1.0f, 0.0f), GGML_STATUS_SUCCESS);
    EXPECT_EQ(stats().barriers, b0 + 2) << "write after read";
    ggml_backend_synchronize(g_vk);
    const std::vector<float> av2 = get(a), bv = get(b);
    for (int i = 0; i < 64; i++) {
        ASSERT_EQ(av2[i], av[i] * 2.0f + 1.0f) << i;
        ASSERT_EQ(bv[i], av[i] * 3.0f) << i;
    }
}

TEST_F(VulkanExt, PipelineCachedPerConfiguration) {
    vk_tensors t;
    ggml_tensor * x = t.f32(16);
    ggml_tensor * y = t.f32(16);
    t.alloc(g_vk);
    const std::vector<float> xv = iota(16, 0.0f);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    const ggml_ext_vulkan_stats s0 = stats();
    // a configuration no other test uses: a = 5.5, workgroup 16
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(x, 0, 0), tensor_binding(y, 0, 0), 16, 5.5f, 0.0f, 16), GGML_STATUS_SUCCESS);
    const ggml_ext_vulkan_stats s1 = stats();
    EXPECT_EQ(s1.pipelines_created, s0.pipelines_created + 1);
    EXPECT_EQ(s1.pipeline_hits, s0.pipeline_hits);
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(x, 0, 0), tensor_binding(y, 0, 0), 16, 5.5f, 2.0f, 16), GGML_STATUS_SUCCESS);
    const ggml_ext_vulkan_stats s2 = stats();
    EXPECT_EQ(s2.pipelines_created, s1.pipelines_created) << "same shader and configuration: cached";
    EXPECT_EQ(s2.pipeline_hits, s1.pipeline_hits + 1);
    // another specialization value is another pipeline
    ASSERT_EQ(run_axpb(g_vk, tensor_binding(x, 0, 0), tensor_binding(y, 0, 0), 16, 6.5f, 2.0f, 16), GGML_STATUS_SUCCESS);
    EXPECT_EQ(stats().pipelines_created, s2.pipelines_created + 1);
    ggml_backend_synchronize(g_vk);
    const std::vector<float> yv = get(y);
    for (int i = 0; i < 16; i++) ASSERT_EQ(yv[i], xv[i] * 6.5f + 2.0f);
}

// ---------------------------------------------------------------------------------------------
// A custom operator with a Vulkan kernel: out = x * a + b, computed by copying x into the plan
// workspace at an offset that is 4-byte but not descriptor aligned, then dispatching the shader
// from the workspace to the output.

struct vkaxpb_attrs {
    float a, b;
};

bool vkaxpb_infer(const ggml_tensor * const * src, int n_src, const void *, ggml_type * type, int64_t ne[GGML_MAX_DIMS],
                  char * err, size_t err_size, void *) {
    if (n_src != 1 || src[0]->type != GGML_TYPE_F32 || !ggml_is_contiguous(src[0])) {
        snprintf(err, err_size, "one contiguous F32 input");
        return false;
    }
    *type = GGML_TYPE_F32;
    for (int d = 0; d < GGML_MAX_DIMS; d++) ne[d] = src[0]->ne[d];
    return true;
}

constexpr uint64_t k_ws_offset = 36;

struct kernel_counts {
    int prepares = 0, executes = 0;
    uint64_t pipelines_at_prepare = 0;
};
kernel_counts g_kc;

bool vk_supports(ggml_backend_dev_t, const ggml_tensor *, void *) { return true; }

ggml_status vk_prepare(ggml_backend_dev_t, const ggml_ext_nodes * nodes, void **, size_t * ws, void *) {
    g_kc.prepares++;
    ggml_ext_vulkan_stats s{};
    s.size = sizeof(s);
    api()->get_stats(g_vk, &s);
    g_kc.pipelines_at_prepare = s.pipelines_created;
    *ws = k_ws_offset + ggml_nbytes(nodes->nodes[0]);
    return GGML_STATUS_SUCCESS;
}

ggml_status vk_execute(ggml_backend_t be, const ggml_ext_nodes * nodes, void *, void * workspace, size_t ws_bytes, void *) {
    g_kc.executes++;
    ggml_tensor * out = nodes->nodes[nodes->n_nodes - 1];
    vkaxpb_attrs  at;
    ggml_ext_get_attrs(out, &at, sizeof(at));
    const uint64_t          n   = ggml_nbytes(out);
    if (ws_bytes < k_ws_offset + n) return GGML_STATUS_FAILED;
    ggml_ext_vulkan_binding dst = base_binding(workspace, k_ws_offset, n);
    ggml_ext_vulkan_binding src = tensor_binding(out->src[0], 0, 0);
    ggml_status             st  = api()->copy(be, &dst, &src);
    if (st != GGML_STATUS_SUCCESS) return st;
    return run_axpb(be, base_binding(workspace, k_ws_offset, n), tensor_binding(out, 0, 0), (uint32_t) ggml_nelements(out),
                    at.a, at.b);
}

ggml_ext_op_t vkaxpb_op() {
    static ggml_ext_op_t id = [] {
        ggml_ext_op_desc d{};
        d.name      = "test.vk_axpb.v1";
        d.attr_size = sizeof(vkaxpb_attrs);
        d.infer     = vkaxpb_infer;
        const ggml_ext_op_t op = ggml_ext_register_op(&d);
        ggml_ext_kernel_desc k{};
        k.name      = "test.vk_axpb.kernel";
        k.op        = GGML_OP_CUSTOM;
        k.custom_op = op;
        k.supports  = vk_supports;
        k.prepare   = vk_prepare;
        k.execute   = vk_execute;
        EXPECT_TRUE(ggml_ext_register_kernel(ggml_backend_get_device(g_vk), &k)) << ggml_ext_last_error();
        return op;
    }();
    return id;
}

// (x + y) -> ext(a, b) -> * z, on inputs of n floats; the graph and its context.
struct chain {
    ggml_context * ctx = nullptr;
    vk_tensors     inputs; // x, y, z live in a Vulkan buffer (like weights): the ops run there
    ggml_cgraph *  gf  = nullptr;
    ggml_tensor *  x = nullptr, *y = nullptr, *z = nullptr, *s = nullptr, *e = nullptr, *out = nullptr;
    chain(int64_t n, float a, float b) {
        ggml_init_params p = {256 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
        ctx                = ggml_init(p);
        x                  = inputs.f32(n);
        y                  = inputs.f32(n);
        z                  = inputs.f32(n);
        inputs.alloc(g_vk);
        s                = ggml_add(ctx, x, y);
        vkaxpb_attrs at  = {a, b};
        ggml_tensor * in = s;
        e                = ggml_ext_op_create(ctx, vkaxpb_op(), &in, 1, &at);
        out              = ggml_mul(ctx, e, z);
        ggml_set_output(out);
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
    }
    ~chain() { ggml_free(ctx); }
};

struct chain_data {
    std::vector<float> x, y, z;
    explicit chain_data(int64_t n) : x(iota(n, -10.0f)), y(iota(n, 3.0f)), z(n) {
        for (int64_t i = 0; i < n; i++) z[i] = (float) (i % 7) - 3.0f;
    }
    // exact in float: small integers times a power of two plus a small integer
    float want(int64_t i, float a, float b) const { return ((x[i] + y[i]) * a + b) * z[i]; }
};

bool eval_every_node(ggml_tensor *, bool, void *) { return true; }

struct sched_run {
    ggml_backend_sched_t sched = nullptr;
    sched_run() {
        ggml_backend_t backends[2] = {g_vk, g_cpu};
        sched                      = ggml_backend_sched_new(backends, nullptr, 2, 1024, false, true);
    }
    ~sched_run() { ggml_backend_sched_free(sched); }
};

// Runs the chain through the scheduler; returns the submissions it took.
uint64_t run_chain_sched(int64_t n, float a, float b, bool observe, std::vector<float> * result) {
    chain      c(n, a, b);
    chain_data d(n);
    sched_run  s;
    if (observe) ggml_backend_sched_set_eval_callback(s.sched, eval_every_node, nullptr);
    EXPECT_TRUE(ggml_backend_sched_alloc_graph(s.sched, c.gf));
    for (ggml_tensor * node : {c.s, c.e, c.out}) {
        EXPECT_EQ(ggml_backend_sched_get_tensor_backend(s.sched, node), g_vk) << node->name << " is not on Vulkan";
    }
    ggml_backend_tensor_set(c.x, d.x.data(), 0, ggml_nbytes(c.x));
    ggml_backend_tensor_set(c.y, d.y.data(), 0, ggml_nbytes(c.y));
    ggml_backend_tensor_set(c.z, d.z.data(), 0, ggml_nbytes(c.z));
    const uint64_t before = stats().submissions;
    EXPECT_EQ(ggml_backend_sched_graph_compute(s.sched, c.gf), GGML_STATUS_SUCCESS);
    const uint64_t submissions = stats().submissions - before;
    *result                    = get(c.out);
    for (int64_t i = 0; i < n; i++) {
        EXPECT_EQ((*result)[i], d.want(i, a, b)) << "element " << i;
        if ((*result)[i] != d.want(i, a, b)) break;
    }
    return submissions;
}

TEST_F(VulkanExt, NativeExtNativeInOneGraphIsOneSubmission) {
    g_kc = {};
    std::vector<float> r;
    const ggml_ext_vulkan_stats s0 = stats();
    const uint64_t submissions = run_chain_sched(1001, 2.0f, -1.0f, false, &r);
    const ggml_ext_vulkan_stats s1 = stats();
    EXPECT_GE(g_kc.prepares, 1);
    EXPECT_EQ(g_kc.executes, 1);
    EXPECT_EQ(s1.ext_dispatches - s0.ext_dispatches, 1u);
    EXPECT_EQ(s1.ext_copies - s0.ext_copies, 1u);
    EXPECT_EQ(s1.dispatches - s0.dispatches, 3u) << "add, the extension dispatch, mul";
    // every step reads what the previous one wrote: add -> copy -> dispatch -> mul, one barrier each
    EXPECT_EQ(s1.barriers - s0.barriers, 3u);
    EXPECT_EQ(submissions, 1u) << "a scheduled plan submits its native fragments and extension work together";
}

TEST_F(VulkanExt, PipelineCreatedOnExecutionNotInPrepare) {
    g_kc = {};
    const uint64_t     created0 = stats().pipelines_created;
    std::vector<float> r;
    // a = 0.125: a configuration only this test uses
    run_chain_sched(64, 0.125f, 8.0f, false, &r);
    EXPECT_GE(g_kc.prepares, 1);
    EXPECT_EQ(g_kc.pipelines_at_prepare, created0) << "prepare saw a pipeline created (host-only prepare must not)";
    EXPECT_EQ(stats().pipelines_created, created0 + 1);
}

TEST_F(VulkanExt, SubmissionThresholdCountsExtensionWork) {
    std::vector<float> r;
    // 4 commands: add, copy + dispatch (extension), mul
    ggml_backend_vk_set_submit_threshold(g_vk, 1);
    EXPECT_EQ(run_chain_sched(300, 1.0f, 2.0f, false, &r), 4u);
    // after add, copy, dispatch (the count carries across the fragment boundary); mul at the end
    ggml_backend_vk_set_submit_threshold(g_vk, 3);
    EXPECT_EQ(run_chain_sched(300, 1.0f, 2.0f, false, &r), 2u);
    ggml_backend_vk_set_submit_threshold(g_vk, 0);
    EXPECT_EQ(run_chain_sched(300, 1.0f, 2.0f, false, &r), 1u);
}

// The FLOP threshold: mul_mat -> extension -> mul_mat with the threshold at one GEMM's FLOPs
// submits after each GEMM (the extension adds commands, no FLOPs); without it, once.
TEST_F(VulkanExt, SubmissionFlopThreshold) {
    const int64_t k = 24, m = 16, n = 5;
    vk_tensors    in;
    ggml_tensor * w1 = ggml_new_tensor_2d(in.ctx, GGML_TYPE_F32, k, m);
    ggml_tensor * w2 = ggml_new_tensor_2d(in.ctx, GGML_TYPE_F32, m, m);
    ggml_tensor * x  = ggml_new_tensor_2d(in.ctx, GGML_TYPE_F32, k, n);
    in.alloc(g_vk);
    std::vector<float> w1v(k * m), w2v(m * m), xv(k * n);
    for (size_t i = 0; i < w1v.size(); i++) w1v[i] = (float) ((int) (i % 5) - 2);
    for (size_t i = 0; i < w2v.size(); i++) w2v[i] = (float) ((int) (i % 3) - 1);
    for (size_t i = 0; i < xv.size(); i++) xv[i] = (float) ((int) (i % 7) - 3);
    ggml_backend_tensor_set(w1, w1v.data(), 0, ggml_nbytes(w1));
    ggml_backend_tensor_set(w2, w2v.data(), 0, ggml_nbytes(w2));
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));

    // exact in float: small integers
    std::vector<float> want(m * n);
    for (int64_t j = 0; j < n; j++) {
        std::vector<float> hv(m);
        for (int64_t i = 0; i < m; i++) {
            float acc = 0;
            for (int64_t l = 0; l < k; l++) acc += w1v[i * k + l] * xv[j * k + l];
            hv[i] = acc * 2.0f + 1.0f;
        }
        for (int64_t i = 0; i < m; i++) {
            float acc = 0;
            for (int64_t l = 0; l < m; l++) acc += w2v[i * m + l] * hv[l];
            want[j * m + i] = acc;
        }
    }
    const uint64_t gemm1_flops = 2ull * m * n * k;
    for (const uint64_t thr : {gemm1_flops, (uint64_t) 0}) {
        // a fresh graph each time: the previous one's memory went with its scheduler
        ggml_init_params p   = {16 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
        ggml_context *   ctx = ggml_init(p);
        ggml_tensor *    h   = ggml_mul_mat(ctx, w1, x); // [m, n]
        vkaxpb_attrs     at  = {2.0f, 1.0f};
        ggml_tensor *    e   = ggml_ext_op_create(ctx, vkaxpb_op(), &h, 1, &at);
        ggml_tensor *    out = ggml_mul_mat(ctx, w2, e); // [m, n]
        ggml_set_output(out);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        sched_run s;
        ASSERT_TRUE(ggml_backend_sched_alloc_graph(s.sched, gf));
        ggml_backend_vk_set_submit_flops(g_vk, thr);
        const uint64_t before = stats().submissions;
        ASSERT_EQ(ggml_backend_sched_graph_compute(s.sched, gf), GGML_STATUS_SUCCESS);
        const uint64_t submissions = stats().submissions - before;
        ggml_backend_vk_set_submit_flops(g_vk, 0);
        EXPECT_EQ(submissions, thr ? 2u : 1u) << "FLOP threshold " << thr;
        EXPECT_EQ(get(out), want) << "FLOP threshold " << thr;
        ggml_free(ctx);
    }
}

// A batched plan whose native fragments need more parameter blocks than the stream's arena holds:
// the pending work is submitted when the next fragment does not fit, and the results stay exact.
TEST_F(VulkanExt, BatchLargerThanTheArenaStaysExact) {
    const int64_t n = 37;
    const int     k = 150; // adds per native fragment: one 512-byte parameter block each
    vk_tensors    in;
    ggml_tensor * x = in.f32(n);
    ggml_tensor * y = in.f32(n);
    in.alloc(g_vk);
    const std::vector<float> xv = iota(n, 1.0f), yv = iota(n, -5.0f);
    ggml_backend_tensor_set(x, xv.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(y, yv.data(), 0, ggml_nbytes(y));

    ggml_init_params p   = {(2 * k + 16) * ggml_tensor_overhead() + ggml_graph_overhead_custom(1024, false), nullptr, true};
    ggml_context *   ctx = ggml_init(p);
    ggml_tensor *    cur = x;
    for (int i = 0; i < k; i++) cur = ggml_add(ctx, cur, y);
    vkaxpb_attrs at = {2.0f, 1.0f};
    cur             = ggml_ext_op_create(ctx, vkaxpb_op(), &cur, 1, &at);
    for (int i = 0; i < k; i++) cur = ggml_add(ctx, cur, y);
    ggml_set_output(cur);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 1024, false);
    ggml_build_forward_expand(gf, cur);

    sched_run s;
    ASSERT_TRUE(ggml_backend_sched_alloc_graph(s.sched, gf));
    // 0: no threshold; 7: a submission every 7 of the 302 commands, each without a host wait
    // (recording continues in the spare command buffer while the last one runs)
    for (const size_t threshold : {(size_t) 0, (size_t) 7}) {
        ggml_backend_vk_set_submit_threshold(g_vk, threshold);
        const uint64_t before = stats().submissions;
        ASSERT_EQ(ggml_backend_sched_graph_compute(s.sched, gf), GGML_STATUS_SUCCESS);
        const uint64_t submissions = stats().submissions - before;
        ggml_backend_vk_set_submit_threshold(g_vk, 0);
        if (threshold == 0) {
            EXPECT_EQ(submissions, 2u) << "the second fragment did not fit the arena: one early submission";
        } else {
            EXPECT_GE(submissions, (uint64_t) ((2 * k + 2) / threshold));
        }
        const std::vector<float> r = get(cur);
        for (int64_t i = 0; i < n; i++) {
            const float want = ((xv[i] + k * yv[i]) * 2.0f + 1.0f) + k * yv[i];
            ASSERT_EQ(r[i], want) << i << " (threshold " << threshold << ")";
        }
    }
    ggml_free(ctx);
}

TEST_F(VulkanExt, EvalCallbackKeepsFragmentExecution) {
    std::vector<float> r;
    EXPECT_EQ(run_chain_sched(300, 4.0f, 1.0f, true, &r), 3u) << "add, extension step, mul: one submission each";
}

TEST_F(VulkanExt, DirectBackendCallKeepsFragmentExecution) {
    const int64_t n = 513;
    chain         c(n, 2.0f, 3.0f);
    chain_data    d(n);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_get_default_buffer_type(g_vk));
    ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc, c.gf));
    ggml_backend_tensor_set(c.x, d.x.data(), 0, ggml_nbytes(c.x));
    ggml_backend_tensor_set(c.y, d.y.data(), 0, ggml_nbytes(c.y));
    ggml_backend_tensor_set(c.z, d.z.data(), 0, ggml_nbytes(c.z));
    const uint64_t before = stats().submissions;
    ASSERT_EQ(ggml_backend_graph_compute(g_vk, c.gf), GGML_STATUS_SUCCESS);
    EXPECT_EQ(stats().submissions - before, 3u) << "add, extension step, mul: one submission each";
    const std::vector<float> r = get(c.out);
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(r[i], d.want(i, 2.0f, 3.0f)) << i;
    ggml_gallocr_free(galloc);
}

TEST(VulkanExtDevice, AtLeastOneDeviceFound) {
    EXPECT_GT(ggml_backend_vk_get_device_count(), 0) << "the Vulkan backend is built but no Vulkan device was found";
}

class BackendsEnv : public ::testing::Environment {
  public:
    void SetUp() override {
        if (ggml_backend_vk_get_device_count() > 0) g_vk = ggml_backend_vk_init(0);
        g_cpu = ggml_backend_cpu_init();
    }
    void TearDown() override {
        if (g_vk) ggml_backend_free(g_vk);
        if (g_cpu) ggml_backend_free(g_cpu);
        g_vk = g_cpu = nullptr;
    }
};

} // namespace

// Leak checking under ASan: keep the driver and layers mapped so LeakSanitizer can name (and the
// suppressions below drop) their own leaks, as test-vulkan.cpp does.
extern "C" const char * __lsan_default_suppressions() {
    return "leak:libvulkan_lvp.so\nleak:libVkLayer_khronos_validation.so\nleak:libVkLayer_MESA_device_select.so\n"
           "leak:libvulkan.so\nleak:libLLVM\n";
}

int main(int argc, char ** argv) {
    for (const char * lib : {"libvulkan_lvp.so", "libVkLayer_khronos_validation.so", "libVkLayer_MESA_device_select.so"}) {
        dlopen(lib, RTLD_NOW | RTLD_NODELETE | RTLD_LOCAL);
    }
    // before the first registry use: the instance is created with the validation layer
    setenv("GGML_VK_VALIDATE", "1", 0);
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new BackendsEnv);
    return RUN_ALL_TESTS();
}
