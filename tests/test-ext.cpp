// test-ext.cpp — operator definitions, kernel registration and selection, plans, workspace,
// error propagation and direct compute of the extension interface (ggml-ext.h). Each test is
// named after the rule of ../shared/spec/ggml_extensions.md it checks. Fusion legality and
// graph_delay live in test-ext-rules.cpp.

#include "test-ext-common.h"

#include <cmath>
#include <cstdint>

using namespace ext_test;

namespace {

// A CPU backend, a fresh fake device wrapping the CPU device, and a backend on it.
class ExtEnv : public ::testing::Test {
  protected:
    ggml_backend_t     cpu     = nullptr;
    ggml_backend_dev_t dev     = nullptr;
    ggml_backend_t     backend = nullptr;
    graph_ctx          gc;
    std::vector<ggml_backend_buffer_t> bufs;

    void SetUp() override {
        cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, 2);
        dev     = new_fake_dev();
        backend = new_fake_backend(cpu, dev);
        g_log() = call_log();
    }
    void TearDown() override {
        for (auto b : bufs) ggml_backend_buffer_free(b);
        free_fake_backend(backend);
        ggml_backend_free(cpu);
    }
    void alloc() {
        ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors(gc.ctx, cpu);
        ASSERT_NE(b, nullptr);
        bufs.push_back(b);
        fill_inputs(gc.ctx);
    }
    ggml_backend_t backend_on(ggml_backend_dev_t d) {
        ggml_backend_t b = new_fake_backend(cpu, d);
        extra.push_back(b);
        return b;
    }
    std::vector<ggml_backend_t> extra;
    ~ExtEnv() override {
        for (auto b : extra) free_fake_backend(b);
    }
};

// suites named after the spec area each test belongs to
class Compute : public ExtEnv {};
class Plans : public ExtEnv {};
class Workspace : public ExtEnv {};
class Errors : public ExtEnv {};
class Direct : public ExtEnv {};

// ==============================================================================================
// Operator definitions

TEST(Ops, registration_is_unique_and_duplicate_fails) {
    ggml_ext_op_desc d{};
    d.name      = "test.unique.v1";
    d.attr_size = 4;
    d.infer     = axpb_infer;
    const ggml_ext_op_t id = ggml_ext_register_op(&d);
    ASSERT_NE(id, 0);
    EXPECT_EQ(ggml_ext_find_op("test.unique.v1"), id);
    EXPECT_STREQ(ggml_ext_op_name(id), "test.unique.v1");

    ggml_ext_op_desc d2 = d;
    d2.attr_size        = 8; // a different definition under the same name must not replace the live one
    EXPECT_EQ(ggml_ext_register_op(&d2), 0);
    EXPECT_NE(std::string(ggml_ext_last_error()).find("test.unique.v1"), std::string::npos);
    EXPECT_EQ(ggml_ext_find_op("test.unique.v1"), id);
    EXPECT_EQ(ggml_ext_find_op("test.unknown.v1"), 0);
    EXPECT_EQ(ggml_ext_op_name(0), nullptr);
    EXPECT_EQ(ggml_ext_op_name(id + 1000), nullptr);
}

TEST(Ops, registration_validates_desc) {
    ggml_ext_op_desc d{};
    d.infer = axpb_infer;
    EXPECT_EQ(ggml_ext_register_op(&d), 0); // no name
    EXPECT_EQ(ggml_ext_register_op(nullptr), 0);
    d.name      = "test.too_big.v1";
    d.attr_size = GGML_EXT_MAX_ATTR_SIZE + 1;
    EXPECT_EQ(ggml_ext_register_op(&d), 0);
    EXPECT_NE(std::string(ggml_ext_last_error()).find("attr_size"), std::string::npos);
    d.name      = "test.no_infer.v1";
    d.attr_size = 0;
    d.infer     = nullptr;
    EXPECT_EQ(ggml_ext_register_op(&d), 0);
    d.name      = "test.max_attrs.v1";
    d.attr_size = GGML_EXT_MAX_ATTR_SIZE;
    d.infer     = axpb_infer;
    EXPECT_NE(ggml_ext_register_op(&d), 0);
}

TEST(Ops, op_create_makes_ordinary_custom_node_with_marker) {
    graph_ctx            gc;
    struct ggml_tensor * x = gc.f32(8, 3);
    struct ggml_tensor * y = axpb(gc.ctx, x, 2.0f, 1.0f);
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(y->op, GGML_OP_CUSTOM);
    EXPECT_EQ(y->src[0], x);
    EXPECT_EQ(y->src[1], nullptr);
    EXPECT_EQ(y->type, GGML_TYPE_F32);
    EXPECT_TRUE(ggml_are_same_shape(x, y));
    EXPECT_TRUE(ggml_is_contiguous(y));
    EXPECT_EQ(y->view_src, nullptr);
    EXPECT_EQ(ggml_ext_get_op(y), axpb_op());
    EXPECT_TRUE(ggml_ext_is_ext_node(y));

    ggml_custom_op_params p;
    memcpy(&p, y->op_params, sizeof(p));
    EXPECT_NE(p.fun, nullptr);
    EXPECT_EQ(p.n_tasks, 0);
    EXPECT_EQ((intptr_t) p.userdata, (intptr_t) axpb_op());
}

TEST(Ops, attributes_round_trip_through_op_params) {
    struct attrs {
        float   f;
        int32_t i;
        double  d;
        char    s[8];
    };
    ggml_ext_op_desc desc{};
    desc.name      = "test.attrs.v1";
    desc.attr_size = sizeof(attrs);
    desc.infer     = axpb_infer;
    const ggml_ext_op_t id = ggml_ext_register_op(&desc);
    ASSERT_NE(id, 0);

    graph_ctx            gc;
    struct ggml_tensor * x  = gc.f32(4);
    attrs                in = {1.5f, -7, 3.25, "abcdefg"};
    struct ggml_tensor * y  = ggml_ext_op_create(gc.ctx, id, &x, 1, &in);
    ASSERT_NE(y, nullptr);
    EXPECT_EQ(memcmp((const char *) y->op_params + GGML_EXT_ATTR_OFFSET, &in, sizeof(in)), 0);

    attrs out;
    memset(&out, 0, sizeof(out));
    ggml_ext_get_attrs(y, &out, sizeof(out));
    EXPECT_EQ(out.f, 1.5f);
    EXPECT_EQ(out.i, -7);
    EXPECT_EQ(out.d, 3.25);
    EXPECT_STREQ(out.s, "abcdefg");

    // a prefix may be read on its own
    float f = 0;
    ggml_ext_get_attrs(y, &f, sizeof(f));
    EXPECT_EQ(f, 1.5f);
}

TEST(Ops, infer_rejection_reported_at_build_time) {
    graph_ctx            gc;
    struct ggml_tensor * xi = ggml_new_tensor_1d(gc.ctx, GGML_TYPE_I32, 4);
    axpb_attrs           at{1, 2};
    EXPECT_EQ(ggml_ext_op_create(gc.ctx, axpb_op(), &xi, 1, &at), nullptr);
    EXPECT_STREQ(ggml_ext_last_error(), "test.axpb.v1: expects one F32 input");

    struct ggml_tensor * two[2] = {gc.f32(4), gc.f32(4)};
    EXPECT_EQ(ggml_ext_op_create(gc.ctx, axpb_op(), two, 2, &at), nullptr);
    EXPECT_STREQ(ggml_ext_last_error(), "test.axpb.v1: expects one F32 input");

    // too many inputs for src[]
    std::vector<struct ggml_tensor *> many(GGML_MAX_SRC, two[0]);
    EXPECT_EQ(ggml_ext_op_create(gc.ctx, axpb_op(), many.data(), GGML_MAX_SRC, &at), nullptr);
    EXPECT_NE(std::string(ggml_ext_last_error()).find("test.axpb.v1"), std::string::npos);
}

TEST(Ops, user_custom_callbacks_are_not_extension_nodes) {
    graph_ctx            gc;
    struct ggml_tensor * x = gc.f32(4);
    auto fn = [](struct ggml_tensor *, int, int, void *) {};
    struct ggml_tensor * c = ggml_custom_4d(gc.ctx, GGML_TYPE_F32, 4, 1, 1, 1, &x, 1, fn, 1, (void *) (intptr_t) 1);
    EXPECT_EQ(ggml_ext_get_op(c), 0);
    EXPECT_FALSE(ggml_ext_is_ext_node(c));
    EXPECT_EQ(ggml_ext_get_op(x), 0);
}

TEST(Ops, ext_nodes_not_supported_natively_by_cpu) {
    graph_ctx            gc;
    struct ggml_tensor * y = axpb(gc.ctx, gc.f32(4), 1, 0);
    ggml_backend_dev_t   cpu_dev = ggml_backend_reg_dev_get(ggml_backend_cpu_reg(), 0);
    EXPECT_FALSE(ggml_ext_dev_supports_native_op(cpu_dev, y));
    // nothing is registered on the real CPU device by these tests
    EXPECT_FALSE(ggml_backend_dev_supports_op(cpu_dev, y));
}

TEST(OpsDeathTest, ext_nodes_are_not_run_as_cpu_callbacks) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_DEATH(
        {
            graph_ctx            gc;
            struct ggml_tensor * y = axpb(gc.ctx, gc.f32(4), 1, 0);
            struct ggml_cgraph * g = gc.graph();
            ggml_build_forward_expand(g, y);
            ggml_backend_t        cpu = ggml_backend_cpu_init();
            ggml_backend_buffer_t b   = ggml_backend_alloc_ctx_tensors(gc.ctx, cpu);
            (void) b;
            ggml_backend_graph_compute(cpu, g);
        },
        "extension node test.axpb.v1");
    // the marker itself refuses to run as a callback
    EXPECT_DEATH(
        {
            graph_ctx            gc;
            struct ggml_tensor * y = axpb(gc.ctx, gc.f32(4), 1, 0);
            ggml_custom_op_params p;
            memcpy(&p, y->op_params, sizeof(p));
            p.fun(y, 0, 1, p.userdata);
        },
        "extension node test.axpb.v1 .*executed as a CPU callback");
}

// ==============================================================================================
// Kernel registration

TEST(Kernels, registration_duplicate_fails_and_keeps_live) {
    ggml_backend_dev_t   dev = new_fake_dev({GGML_OP_ADD});
    kernel_counters      c1, c2;
    ggml_ext_kernel_desc d1 = add_kernel("test.add", &c1);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d1));
    ggml_ext_kernel_desc d2 = add_kernel("test.add", &c2, 100);
    EXPECT_FALSE(ggml_ext_register_kernel(dev, &d2));
    EXPECT_NE(std::string(ggml_ext_last_error()).find("test.add"), std::string::npos);

    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    const ggml_ext_kernel * k = ggml_ext_select_kernel(dev, y);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(ggml_ext_kernel_get_desc(k)->user_data, &c1);
    EXPECT_EQ(c2.supports, 0);
}

TEST(Kernels, registrations_are_per_device) {
    ggml_backend_dev_t a = new_fake_dev({GGML_OP_ADD});
    ggml_backend_dev_t b = new_fake_dev({GGML_OP_ADD});
    kernel_counters    c;
    ggml_ext_kernel_desc d = add_kernel("test.add.per_device", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(a, &d));
    EXPECT_TRUE(ggml_ext_dev_has_kernels(a));
    EXPECT_FALSE(ggml_ext_dev_has_kernels(b));

    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    EXPECT_TRUE(ggml_backend_dev_supports_op(a, y));
    EXPECT_FALSE(ggml_backend_dev_supports_op(b, y));
    EXPECT_EQ(ggml_ext_select_kernel(b, y), nullptr);
    // the same name is free on another device
    EXPECT_TRUE(ggml_ext_register_kernel(b, &d));
    EXPECT_TRUE(ggml_backend_dev_supports_op(b, y));
}

TEST(Kernels, flags_validated) {
    ggml_backend_dev_t   dev = new_fake_dev();
    kernel_counters      c;
    ggml_ext_kernel_desc d   = add_kernel("test.flags.unknown", &c);
    EXPECT_FALSE(ggml_ext_register_kernel_ex(dev, &d, 1u << 7));
    EXPECT_NE(std::string(ggml_ext_last_error()).find("unknown flag"), std::string::npos);
    d.name = "test.flags.replay_only";
    EXPECT_FALSE(ggml_ext_register_kernel_ex(dev, &d, GGML_EXT_KERNEL_REPLAY_REUSABLE));
    EXPECT_NE(std::string(ggml_ext_last_error()).find("CAPTURE_SAFE"), std::string::npos);
    EXPECT_FALSE(ggml_ext_dev_has_kernels(dev));

    d.name = "test.flags.both";
    ASSERT_TRUE(ggml_ext_register_kernel_ex(dev, &d, GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE));
    d.name = "test.flags.capture";
    ASSERT_TRUE(ggml_ext_register_kernel_ex(dev, &d, GGML_EXT_KERNEL_CAPTURE_SAFE));
    d.name = "test.flags.none";
    d.priority = -1;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));

    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    const ggml_ext_kernel * k = ggml_ext_select_kernel(dev, y); // first registered of priority 0
    ASSERT_NE(k, nullptr);
    EXPECT_STREQ(ggml_ext_kernel_get_desc(k)->name, "test.flags.both");
    EXPECT_EQ(ggml_ext_kernel_get_flags(k), (uint32_t) (GGML_EXT_KERNEL_CAPTURE_SAFE | GGML_EXT_KERNEL_REPLAY_REUSABLE));
}

TEST(Kernels, desc_validated) {
    ggml_backend_dev_t   dev = new_fake_dev();
    kernel_counters      c;
    ggml_ext_kernel_desc d   = add_kernel("test.desc.no_execute", &c);
    d.execute                = nullptr;
    EXPECT_FALSE(ggml_ext_register_kernel(dev, &d));
    d         = add_kernel("test.desc.no_supports", &c);
    d.supports = nullptr;
    EXPECT_FALSE(ggml_ext_register_kernel(dev, &d));
    d       = mul_add_rule("test.desc.fusion_no_match", &c);
    d.match = nullptr;
    EXPECT_FALSE(ggml_ext_register_kernel(dev, &d));
    d           = axpb_kernel("test.desc.bad_custom", &c);
    d.custom_op = 987654;
    EXPECT_FALSE(ggml_ext_register_kernel(dev, &d));
    d    = add_kernel("test.desc.view", &c);
    d.op = GGML_OP_RESHAPE;
    EXPECT_FALSE(ggml_ext_register_kernel(dev, &d));
    d      = add_kernel("", &c);
    EXPECT_FALSE(ggml_ext_register_kernel(dev, &d));
    d = add_kernel("test.desc.ok", &c);
    EXPECT_FALSE(ggml_ext_register_kernel(nullptr, &d));
    EXPECT_FALSE(ggml_ext_register_kernel(dev, nullptr));
    EXPECT_FALSE(ggml_ext_dev_has_kernels(dev));
    EXPECT_TRUE(ggml_ext_register_kernel(dev, &d));
    // a fusion rule may also carry single-node support
    d       = axpb_kernel("test.desc.both", &c);
    d.match = k_match_mul_add;
    EXPECT_TRUE(ggml_ext_register_kernel(dev, &d));
}

// ==============================================================================================
// Kernel selection

TEST(Kernels, priority_order) {
    ggml_backend_dev_t dev = new_fake_dev();
    kernel_counters    lo, hi, tie1, tie2;
    auto               d_lo = add_kernel("test.prio.lo", &lo, 1);
    auto               d_hi = add_kernel("test.prio.hi", &hi, 5);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d_lo));
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d_hi));
    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    EXPECT_STREQ(ggml_ext_kernel_get_desc(ggml_ext_select_kernel(dev, y))->name, "test.prio.hi");

    // the higher one declines: the next one is considered
    ggml_backend_dev_t dev2 = new_fake_dev();
    auto               d_no = add_kernel("test.prio.declines", &hi, 9);
    d_no.supports           = k_supports_none;
    ASSERT_TRUE(ggml_ext_register_kernel(dev2, &d_lo));
    ASSERT_TRUE(ggml_ext_register_kernel(dev2, &d_no));
    EXPECT_STREQ(ggml_ext_kernel_get_desc(ggml_ext_select_kernel(dev2, y))->name, "test.prio.lo");

    // ties keep registration order
    ggml_backend_dev_t dev3 = new_fake_dev();
    auto               t1   = add_kernel("test.prio.tie1", &tie1, 3);
    auto               t2   = add_kernel("test.prio.tie2", &tie2, 3);
    ASSERT_TRUE(ggml_ext_register_kernel(dev3, &t1));
    ASSERT_TRUE(ggml_ext_register_kernel(dev3, &t2));
    EXPECT_STREQ(ggml_ext_kernel_get_desc(ggml_ext_select_kernel(dev3, y))->name, "test.prio.tie1");
}

TEST(Kernels, preferred_decides_only_when_native_available) {
    kernel_counters c;
    c.prefer = false;
    auto d   = add_kernel("test.pref.no", &c);
    d.preferred = k_preferred;

    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));

    ggml_backend_dev_t native = new_fake_dev();
    ASSERT_TRUE(ggml_ext_register_kernel(native, &d));
    EXPECT_EQ(ggml_ext_select_kernel(native, y), nullptr); // native available, kernel not preferred
    EXPECT_GT(c.preferred, 0);
    c.prefer = true;
    EXPECT_NE(ggml_ext_select_kernel(native, y), nullptr);
}

TEST(Kernels, unsupported_native_runs_supported_extension_regardless_of_preference) {
    kernel_counters c;
    c.prefer    = false;
    auto d      = add_kernel("test.pref.forced", &c);
    d.preferred = k_preferred;
    ggml_backend_dev_t no_native = new_fake_dev({GGML_OP_ADD});
    ASSERT_TRUE(ggml_ext_register_kernel(no_native, &d));

    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    const ggml_ext_kernel * k = ggml_ext_select_kernel(no_native, y);
    ASSERT_NE(k, nullptr);
    EXPECT_STREQ(ggml_ext_kernel_get_desc(k)->name, "test.pref.forced");
    // and supports() still gates it
    struct ggml_tensor * bc = ggml_add(gc.ctx, gc.f32(4, 2), gc.f32(4)); // broadcast: toy kernel declines
    EXPECT_EQ(ggml_ext_select_kernel(no_native, bc), nullptr);
}

TEST(Kernels, custom_op_kernel_runs_regardless_of_preference) {
    ggml_backend_dev_t dev = new_fake_dev();
    kernel_counters    c;
    c.prefer    = false;
    auto d      = axpb_kernel("test.pref.custom", &c);
    d.preferred = k_preferred;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    graph_ctx            gc;
    struct ggml_tensor * y = axpb(gc.ctx, gc.f32(4), 1, 0);
    EXPECT_NE(ggml_ext_select_kernel(dev, y), nullptr); // nothing native can run an extension node
}

TEST(Kernels, preferred_absent_overrides_native) {
    ggml_backend_dev_t dev = new_fake_dev();
    kernel_counters    c;
    auto               d = add_kernel("test.pref.absent", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    EXPECT_TRUE(ggml_ext_dev_supports_native_op(dev, y));
    EXPECT_NE(ggml_ext_select_kernel(dev, y), nullptr);
}

TEST(Kernels, capability_queries_include_single_node_extensions) {
    ggml_backend_dev_t dev = new_fake_dev({GGML_OP_ADD});
    graph_ctx          gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    struct ggml_tensor * z = axpb(gc.ctx, gc.f32(4), 1, 1);
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, y));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, z));

    kernel_counters c1, c2;
    auto            d1 = add_kernel("test.cap.add", &c1);
    auto            d2 = axpb_kernel("test.cap.axpb", &c2);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d1));
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d2));
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, y));
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, z));

    ggml_backend_t b = new_fake_backend(ggml_backend_cpu_init(), dev);
    EXPECT_TRUE(ggml_backend_supports_op(b, y));
    ggml_backend_t real = fake_backends().at(b);
    free_fake_backend(b);
    ggml_backend_free(real);
}

TEST(Kernels, capability_queries_exclude_fusion_only) {
    ggml_backend_dev_t dev = new_fake_dev({GGML_OP_ADD, GGML_OP_MUL});
    kernel_counters    c;
    auto               d = mul_add_rule("test.cap.fusion_only", &c);
    d.supports           = k_supports_any; // ignored for a fusion-only registration
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    graph_ctx            gc;
    struct ggml_tensor * m = ggml_mul(gc.ctx, gc.f32(4), gc.f32(4));
    struct ggml_tensor * a = ggml_add(gc.ctx, m, gc.f32(4));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, m));
    EXPECT_FALSE(ggml_backend_dev_supports_op(dev, a));
    EXPECT_EQ(ggml_ext_select_kernel(dev, a), nullptr);
    EXPECT_EQ(c.supports, 0);
}

TEST(Kernels, supports_native_op_ignores_extensions) {
    ggml_backend_dev_t dev = new_fake_dev({GGML_OP_ADD});
    kernel_counters    c;
    auto               d = add_kernel("test.native.add", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add(gc.ctx, gc.f32(4), gc.f32(4));
    struct ggml_tensor * m = ggml_mul(gc.ctx, gc.f32(4), gc.f32(4));
    EXPECT_TRUE(ggml_backend_dev_supports_op(dev, y));
    EXPECT_FALSE(ggml_ext_dev_supports_native_op(dev, y));
    EXPECT_TRUE(ggml_ext_dev_supports_native_op(dev, m));
    const int before = c.supports;
    (void) ggml_ext_dev_supports_native_op(dev, y);
    EXPECT_EQ(c.supports, before);
}

TEST(Kernels, views_and_inplace_nodes_not_intercepted) {
    ggml_backend_dev_t dev = new_fake_dev();
    kernel_counters    c;
    auto               d = add_kernel("test.inplace.add", &c);
    d.supports           = k_supports_any;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    graph_ctx            gc;
    struct ggml_tensor * y = ggml_add_inplace(gc.ctx, gc.f32(4), gc.f32(4));
    EXPECT_EQ(ggml_ext_select_kernel(dev, y), nullptr);
    EXPECT_FALSE(ggml_ext_dev_supports_op(dev, y));
}

TEST(Kernels, optimize_callbacks_run_in_priority_order) {
    static std::vector<int> order;
    order.clear();
    ggml_backend_dev_t dev = new_fake_dev();
    kernel_counters    c1, c2;
    auto               d1 = mul_add_rule("test.opt.lo", &c1, 1);
    auto               d2 = mul_add_rule("test.opt.hi", &c2, 2);
    d1.optimize = [](ggml_backend_dev_t, struct ggml_cgraph *, void *) { order.push_back(1); };
    d2.optimize = [](ggml_backend_dev_t, struct ggml_cgraph *, void *) { order.push_back(2); };
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d1));
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d2));
    graph_ctx gc;
    ggml_ext_run_optimizers(dev, gc.graph());
    EXPECT_EQ(order, (std::vector<int>{2, 1}));
}

// ==============================================================================================
// Plans and execution

TEST_F(Compute, extension_override_matches_native) {
    kernel_counters c;
    auto            d = add_kernel("test.run.add", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a = gc.f32(16, 3);
    struct ggml_tensor * b = gc.f32(16, 3);
    struct ggml_tensor * y = ggml_sqr(gc.ctx, ggml_add(gc.ctx, ggml_mul(gc.ctx, a, b), b));
    struct ggml_tensor * ref = ggml_sqr(gc.ctx, ggml_add(gc.ctx, ggml_mul(gc.ctx, a, b), b));
    struct ggml_cgraph * g  = gc.graph();
    struct ggml_cgraph * gr = gc.graph();
    ggml_build_forward_expand(g, y);
    ggml_build_forward_expand(gr, ref);
    alloc();

    ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    ASSERT_EQ(ggml_backend_graph_compute(cpu, gr), GGML_STATUS_SUCCESS);
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(g_log().graph_computes, 2); // native MUL range, native SQR range
    EXPECT_EQ(read_f32(y), read_f32(ref));
}

TEST_F(Compute, custom_op_runs_through_registered_kernel) {
    kernel_counters c;
    auto            d = axpb_kernel("test.run.axpb", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * x = gc.f32(10, 2);
    struct ggml_tensor * y = axpb(gc.ctx, x, 3.0f, -1.0f);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, y);
    alloc();
    ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(g_log().graph_computes, 0);
    auto xv = read_f32(x), yv = read_f32(y);
    for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(yv[i], 3.0f * xv[i] - 1.0f);
}

TEST_F(Plans, plan_merges_native_ranges_and_freezes_selection) {
    kernel_counters c;
    auto            d = add_kernel("test.plan.add", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t1 = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * t2 = ggml_sqr(gc.ctx, t1);
    struct ggml_tensor * t3 = ggml_reshape_2d(gc.ctx, t2, 4, 2);
    struct ggml_tensor * t4 = ggml_reshape_1d(gc.ctx, t3, 8);
    struct ggml_tensor * t5 = ggml_add(gc.ctx, t4, a);
    struct ggml_tensor * t6 = ggml_sqr(gc.ctx, t5);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t6);
    ASSERT_EQ(g->n_nodes, 6);

    ggml_ext_plan * p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
    ASSERT_EQ(ggml_ext_plan_n_steps(p), 3);
    const ggml_ext_plan_step * s0 = ggml_ext_plan_get_step(p, 0);
    const ggml_ext_plan_step * s1 = ggml_ext_plan_get_step(p, 1);
    const ggml_ext_plan_step * s2 = ggml_ext_plan_get_step(p, 2);
    EXPECT_EQ(s0->first, 0);
    EXPECT_EQ(s0->n_nodes, 4);
    EXPECT_EQ(s0->kernel, nullptr);
    EXPECT_EQ(s1->first, 4);
    EXPECT_EQ(s1->n_nodes, 1);
    ASSERT_NE(s1->kernel, nullptr);
    EXPECT_FALSE(s1->fused);
    EXPECT_EQ(s2->first, 5);
    EXPECT_EQ(s2->kernel, nullptr);
    EXPECT_TRUE(ggml_ext_plan_has_extensions(p));
    EXPECT_EQ(ggml_ext_plan_get_step(p, 3), nullptr);
    ggml_ext_plan_free(p);

    // a sub-range plan only covers its nodes
    p = ggml_ext_plan_new(dev, g, 0, 4, true);
    EXPECT_EQ(ggml_ext_plan_n_steps(p), 1);
    EXPECT_FALSE(ggml_ext_plan_has_extensions(p));
    ggml_ext_plan_free(p);
}

TEST_F(Plans, fusion_step_replaces_match_and_matches_native) {
    kernel_counters c;
    auto            d = mul_add_rule("test.plan.mul_add", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a  = gc.f32(16, 2);
    struct ggml_tensor * b  = gc.f32(16, 2);
    struct ggml_tensor * z  = gc.f32(16, 2);
    struct ggml_tensor * y  = ggml_sqr(gc.ctx, ggml_add(gc.ctx, ggml_mul(gc.ctx, a, b), z));
    struct ggml_tensor * yr = ggml_sqr(gc.ctx, ggml_add(gc.ctx, ggml_mul(gc.ctx, a, b), z));
    struct ggml_cgraph * g  = gc.graph();
    struct ggml_cgraph * gr = gc.graph();
    ggml_build_forward_expand(g, y);
    ggml_build_forward_expand(gr, yr);
    alloc();

    ggml_ext_plan * p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
    ASSERT_EQ(ggml_ext_plan_n_steps(p), 2);
    EXPECT_TRUE(ggml_ext_plan_get_step(p, 0)->fused);
    EXPECT_EQ(ggml_ext_plan_get_step(p, 0)->n_nodes, 2);
    size_t ws = 1;
    ASSERT_EQ(ggml_ext_plan_prepare(p, &ws), GGML_STATUS_SUCCESS);
    EXPECT_EQ(ws, 0u);
    ASSERT_EQ(ggml_ext_plan_compute(p, backend, nullptr, 0, -1, -1), GGML_STATUS_SUCCESS);
    // plans are reusable across executions
    ASSERT_EQ(ggml_ext_plan_compute(p, backend, nullptr, 0, -1, -1), GGML_STATUS_SUCCESS);
    ggml_ext_plan_free(p);
    EXPECT_EQ(c.execute, 2);
    ASSERT_EQ(ggml_backend_graph_compute(cpu, gr), GGML_STATUS_SUCCESS);
    EXPECT_EQ(read_f32(y), read_f32(yr));
}

TEST_F(Plans, fusion_rules_tried_in_priority_order_and_illegal_matches_dropped) {
    kernel_counters lo, hi;
    auto            dlo = mul_add_rule("test.plan.rule_lo", &lo, 1);
    auto            dhi = mul_add_rule("test.plan.rule_hi", &hi, 2);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &dlo));
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &dhi));
    struct ggml_tensor * a = gc.f32(4);
    struct ggml_tensor * m = ggml_mul(gc.ctx, a, a);
    struct ggml_tensor * y = ggml_add(gc.ctx, m, a);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, y);
    ggml_ext_plan * p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
    ASSERT_EQ(ggml_ext_plan_n_steps(p), 1);
    EXPECT_STREQ(ggml_ext_kernel_get_desc(ggml_ext_plan_get_step(p, 0)->kernel)->name, "test.plan.rule_hi");
    ggml_ext_plan_free(p);

    // a match past the end of the planned range is not taken
    p = ggml_ext_plan_new(dev, g, 0, 1, true);
    ASSERT_EQ(ggml_ext_plan_n_steps(p), 1);
    EXPECT_EQ(ggml_ext_plan_get_step(p, 0)->kernel, nullptr);
    ggml_ext_plan_free(p);

    // the rule matches, but the MUL result has another consumer: legality refuses
    struct ggml_tensor * other = ggml_sqr(gc.ctx, m);
    ggml_build_forward_expand(g, other);
    p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
    EXPECT_FALSE(ggml_ext_plan_has_extensions(p));
    ggml_ext_plan_free(p);
}

// ==============================================================================================
// Workspace

TEST_F(Workspace, workspace_is_max_not_sum) {
    kernel_counters c1, c2;
    c1.workspace = 100;
    c2.workspace = 300;
    auto d1      = add_kernel("test.ws.add", &c1);
    auto d2      = axpb_kernel("test.ws.axpb", &c2);
    d1.prepare = d2.prepare = k_prepare;
    d1.destroy = d2.destroy = k_destroy;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d1));
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d2));
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_tensor * y = axpb(gc.ctx, ggml_add(gc.ctx, a, a), 2, 0);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, y);
    alloc();

    ggml_ext_plan * p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, false);
    ASSERT_EQ(ggml_ext_plan_n_steps(p), 2);
    size_t ws = 0;
    ASSERT_EQ(ggml_ext_plan_prepare(p, &ws), GGML_STATUS_SUCCESS);
    EXPECT_EQ(ws, 300u);
    EXPECT_EQ(ggml_ext_plan_get_step(p, 0)->workspace, 100u);
    EXPECT_EQ(ggml_ext_plan_get_step(p, 1)->workspace, 300u);
    // preparing again rebuilds the states
    ASSERT_EQ(ggml_ext_plan_prepare(p, &ws), GGML_STATUS_SUCCESS);
    EXPECT_EQ(c1.destroy, 1);
    EXPECT_EQ(c2.destroy, 1);
    ggml_ext_plan_free(p);
    EXPECT_EQ(c1.destroy, 2);
    EXPECT_EQ(c2.destroy, 2);

    // direct compute provides one buffer of at least the max to each step
    ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    ASSERT_EQ(c1.seen_workspace_bytes.size(), 1u);
    ASSERT_EQ(c2.seen_workspace_bytes.size(), 1u);
    EXPECT_GE(c1.seen_workspace_bytes[0], 100u);
    EXPECT_GE(c2.seen_workspace_bytes[0], 300u);
    EXPECT_TRUE(c1.seen_workspace_ptr[0]);
    EXPECT_TRUE(c2.seen_workspace_ptr[0]);
    auto av = read_f32(a), yv = read_f32(y);
    for (size_t i = 0; i < av.size(); ++i) EXPECT_EQ(yv[i], 2.0f * (av[i] + av[i]));
}

TEST_F(Workspace, workspace_null_when_not_requested) {
    kernel_counters c;
    auto            d = add_kernel("test.ws.none", &c);
    d.prepare         = k_prepare;
    d.destroy         = k_destroy;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, ggml_add(gc.ctx, a, a));
    alloc();
    ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    ASSERT_EQ(c.seen_workspace_ptr.size(), 1u);
    EXPECT_FALSE(c.seen_workspace_ptr[0]);
    EXPECT_EQ(c.seen_workspace_bytes[0], 0u);
}

// ==============================================================================================
// Errors

TEST_F(Errors, prepare_error_propagates_and_native_not_run) {
    kernel_counters c;
    c.prepare_status = GGML_STATUS_FAILED;
    auto d           = add_kernel("test.err.prepare", &c);
    d.prepare        = k_prepare;
    d.destroy        = k_destroy;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_tensor * y = ggml_add(gc.ctx, a, a);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, y);
    alloc();
    fill_value(y, -123.0f);
    EXPECT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_FAILED);
    EXPECT_EQ(c.execute, 0);
    EXPECT_EQ(g_log().graph_computes, 0);
    EXPECT_EQ(c.destroy, 1); // the state made before the failure is still released
    for (float v : read_f32(y)) EXPECT_EQ(v, -123.0f);
}

TEST_F(Errors, execute_error_propagates_and_native_not_retried) {
    kernel_counters c;
    c.execute_status = GGML_STATUS_ABORTED;
    auto d           = add_kernel("test.err.execute", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_tensor * y = ggml_add(gc.ctx, a, a);
    struct ggml_tensor * z = ggml_sqr(gc.ctx, y);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, z);
    alloc();
    fill_value(y, -123.0f);
    fill_value(z, -7.0f);
    EXPECT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_ABORTED);
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(g_log().graph_computes, 0); // neither a native retry nor the later steps
    for (float v : read_f32(y)) EXPECT_EQ(v, -123.0f);
    for (float v : read_f32(z)) EXPECT_EQ(v, -7.0f);

    // the same through a plan
    ggml_ext_plan * p = ggml_ext_plan_new(dev, g, 0, g->n_nodes, true);
    EXPECT_EQ(ggml_ext_plan_compute(p, backend, nullptr, 0, -1, -1), GGML_STATUS_ABORTED);
    ggml_ext_plan_free(p);
    EXPECT_EQ(g_log().graph_computes, 0);
}

// ==============================================================================================
// Direct compute

TEST_F(Direct, direct_compute_never_fuses) {
    kernel_counters c;
    auto            d = mul_add_rule("test.direct.mul_add", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * b  = gc.f32(8);
    struct ggml_tensor * y  = ggml_add(gc.ctx, ggml_mul(gc.ctx, a, b), a);
    struct ggml_tensor * yr = ggml_add(gc.ctx, ggml_mul(gc.ctx, a, b), a);
    struct ggml_cgraph * g  = gc.graph();
    struct ggml_cgraph * gr = gc.graph();
    ggml_build_forward_expand(g, y);
    ggml_build_forward_expand(gr, yr);
    alloc();
    ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    ASSERT_EQ(ggml_backend_graph_compute_async(backend, g), GGML_STATUS_SUCCESS);
    ggml_backend_synchronize(backend);
    EXPECT_EQ(c.match, 0);
    EXPECT_EQ(c.execute, 0);
    EXPECT_EQ(g_log().graph_computes, 2);
    ASSERT_EQ(ggml_backend_graph_compute(cpu, gr), GGML_STATUS_SUCCESS);
    EXPECT_EQ(read_f32(y), read_f32(yr));
}

TEST_F(Direct, direct_compute_runs_single_node_extensions_with_temporary_plan) {
    kernel_counters c;
    c.tag       = "k";
    c.workspace = 64;
    auto d      = add_kernel("test.direct.add", &c);
    d.prepare   = k_prepare;
    d.destroy   = k_destroy;
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_tensor * y = ggml_add(gc.ctx, a, a);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, y);
    alloc();
    ASSERT_EQ(ggml_backend_graph_compute_async(backend, g), GGML_STATUS_SUCCESS);
    EXPECT_EQ(c.prepare, 1);
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(c.destroy, 1);
    const int ip = g_log().index_of("k:prepare");
    const int ie = g_log().index_of("k:execute");
    const int is = g_log().index_of("sync", ie);
    const int id = g_log().index_of("k:destroy");
    ASSERT_GE(ip, 0);
    EXPECT_LT(ip, ie);
    ASSERT_GE(is, 0) << "temporary plans synchronize before release";
    EXPECT_LT(is, id);
    auto av = read_f32(a), yv = read_f32(y);
    for (size_t i = 0; i < av.size(); ++i) EXPECT_EQ(yv[i], av[i] + av[i]);

    // a second call builds a fresh temporary plan
    ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    EXPECT_EQ(c.prepare, 2);
    EXPECT_EQ(c.destroy, 2);
}

TEST_F(Direct, direct_compute_without_kernels_calls_backend_directly) {
    struct ggml_tensor * a = gc.f32(8);
    struct ggml_cgraph * g = gc.graph();
    ggml_build_forward_expand(g, ggml_sqr(gc.ctx, ggml_add(gc.ctx, a, a)));
    alloc();
    ASSERT_EQ(ggml_backend_graph_compute(backend, g), GGML_STATUS_SUCCESS);
    EXPECT_EQ(g_log().graph_computes, 1);
    EXPECT_EQ(g_log().last_graph, g); // the caller's graph itself, not a copy or view
}

TEST_F(Direct, direct_compute_range_uses_plan_boundaries) {
    kernel_counters c;
    auto            d = add_kernel("test.direct.range", &c);
    ASSERT_TRUE(ggml_ext_register_kernel(dev, &d));
    struct ggml_tensor * a  = gc.f32(8);
    struct ggml_tensor * t0 = ggml_sqr(gc.ctx, a);
    struct ggml_tensor * t1 = ggml_add(gc.ctx, t0, a);
    struct ggml_tensor * t2 = ggml_sqr(gc.ctx, t1);
    struct ggml_cgraph * g  = gc.graph();
    ggml_build_forward_expand(g, t2);
    alloc();
    ASSERT_EQ(ggml_ext_compute_direct(backend, g, 0, 2), GGML_STATUS_SUCCESS);
    EXPECT_EQ(c.execute, 1);
    EXPECT_EQ(g_log().graph_computes, 1);
    EXPECT_EQ(g_log().last_n_nodes, 1);
    ASSERT_EQ(ggml_ext_compute_direct(backend, g, 2, 3), GGML_STATUS_SUCCESS);
    EXPECT_EQ(c.execute, 1);
    auto av = read_f32(a), yv = read_f32(t2);
    for (size_t i = 0; i < av.size(); ++i) {
        const float s = av[i] * av[i] + av[i];
        EXPECT_EQ(yv[i], s * s);
    }
}

} // namespace
