// test-upstream-model.cpp — src/ built against an upstream ggml (SD_USE_UPSTREAM_GGML; run by
// scripts/test-upstream.sh): the compatibility layer has no extensions, the Krea2 stack runs on
// upstream's own ops (RoPE as the plain op chain, flash attention, mul_mat) and matches the plain
// double reference, BF16 stays close to F32, INT8 is refused with a message naming the build, and
// the sdx program does the same from the command line.

#include "ggml_extensions.h"
#include "model/krea2.h"
#include "model/runner.h"
#include "../reference-sd/krea2-ref.h"
#include "../support/run-tool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace {

krea2::config small_config() {
    krea2::config c;
    c.hidden      = 256;
    c.heads       = 2;
    c.kv_heads    = 1;
    c.mlp         = 512;
    c.blocks      = 2;
    c.tokens      = 40;
    c.text_tokens = 8;
    return c;
}

constexpr uint64_t SEED = 7;

struct graph_run {
    bool                     ok = false;
    std::string              err;
    std::vector<float>       out;
    krea2::runner::plan_info plan;
};

graph_run run_graph(const krea2::config & c, krea2::wtype type) {
    graph_run     g;
    krea2::runner r;
    if (!r.init(2, g.err)) return g;
    krea2::synthetic_source src(SEED);
    krea2::model            m;
    if (!m.load(c, type, &src, g.err)) return g;
    krea2::build_options o; // rope_ext asked for: the runner must fall back to the chain itself
    krea2::runner::result res;
    if (!r.forward(m, o, krea2::synthetic_input(c, SEED), krea2::synthetic_tvec(c, SEED), res, g.err)) return g;
    if (!r.plan(m, o, 0, g.plan, g.err)) return g;
    g.out = std::move(res.out);
    g.ok  = true;
    return g;
}

TEST(UpstreamGgml, NoExtensionInterface) {
    EXPECT_FALSE(sd_ggml_have_extensions());
    EXPECT_TRUE(sd_ggml_register_extensions()) << sd_ggml_last_error(); // GGML_MAX_NAME agrees
    EXPECT_EQ(sd_rope_apply(nullptr, nullptr, nullptr, SD_ROPE_INTERLEAVED), nullptr);
    EXPECT_NE(std::string(sd_ggml_last_error()).find("ggml-ext.h"), std::string::npos) << sd_ggml_last_error();
}

// Bound: the update (out - x) of 2 blocks within 5e-3 relative RMS of the double reference.
// Upstream's CPU flash attention with F16 K/V rounds Q to F16 before the dot products (the
// reference rounds only K and V, as the graph's casts do); the rest (F32 mul_mat, rms_norm, the
// RoPE op chain) is F32 rounding. Measured 3.9e-4 (this repository's ggml: 3.0e-6 on the portable
// kernels, 6.4e-6 on the fast ones, test-model); the number is printed.
TEST(UpstreamKrea2, F32MatchesPlainReference) {
    const krea2::config c = small_config();
    std::vector<float>  ref;
    std::string         err;
    ASSERT_TRUE(krea2_ref::forward(c, SEED, ref, err)) << err;
    graph_run g = run_graph(c, krea2::wtype::f32);
    ASSERT_TRUE(g.ok) << g.err;
    ASSERT_EQ(g.out.size(), ref.size());
    for (float v : g.out) ASSERT_TRUE(std::isfinite(v));
    const double e = krea2::rel_rms_update(g.out, ref, krea2::synthetic_input(c, SEED));
    std::printf("F32 stack on upstream ggml vs double reference: relative RMS of the update %.3e\n", e);
    EXPECT_LT(e, 5e-3);
    // plain ggml ops only: the RoPE chain, no extension node, no extension step
    EXPECT_FALSE(g.plan.rope_ext);
    EXPECT_EQ(g.plan.n_steps, 0);
    EXPECT_EQ(g.plan.n_ext + g.plan.n_fused + g.plan.n_quantize, 0);
    int n_flash = 0;
    for (const auto & row : g.plan.nodes) {
        EXPECT_EQ(row.op.rfind("sd.", 0), std::string::npos) << row.op;
        n_flash += row.op == "FLASH_ATTN_EXT";
    }
    EXPECT_EQ(n_flash, 1);
}

// BF16 weights (upstream rounds the activations to BF16 too): within 3% of the F32 update, the
// bound test-model uses for this build.
TEST(UpstreamKrea2, Bf16CloseToF32) {
    const krea2::config c  = small_config();
    graph_run           f  = run_graph(c, krea2::wtype::f32);
    graph_run           bf = run_graph(c, krea2::wtype::bf16);
    ASSERT_TRUE(f.ok) << f.err;
    ASSERT_TRUE(bf.ok) << bf.err;
    const double e = krea2::rel_rms_update(bf.out, f.out, krea2::synthetic_input(c, SEED));
    std::printf("BF16 stack on upstream ggml vs F32: relative RMS of the update %.3e\n", e);
    EXPECT_LT(e, 0.03);
}

TEST(UpstreamKrea2, Int8IsRefusedWithTheReason) {
    graph_run g = run_graph(small_config(), krea2::wtype::int8);
    EXPECT_FALSE(g.ok);
    EXPECT_NE(g.err.find("sd.quantize_i8_convrot.v1: INT8 ConvRot"), std::string::npos) << g.err;
    EXPECT_NE(g.err.find("SD_USE_UPSTREAM_GGML"), std::string::npos) << g.err;
}

// sdx's order: the memory estimate (ggml_backend_sched_reserve_size) and then the run on the same
// runner. Upstream 0.15.3's reserve_size leaves its allocator planned but without buffers, and
// the next alloc_graph of the same graph crashed (runner::measure now uses a scratch scheduler).
TEST(UpstreamKrea2, MeasureThenForwardOnOneRunner) {
    const krea2::config c = small_config();
    krea2::runner       r;
    std::string         err;
    ASSERT_TRUE(r.init(2, err)) << err;
    krea2::synthetic_source src(SEED);
    krea2::model            m;
    ASSERT_TRUE(m.load(c, krea2::wtype::f32, &src, err)) << err;
    krea2::runner::memory_use u;
    ASSERT_TRUE(r.measure(m, krea2::build_options{}, u, err)) << err;
    EXPECT_GT(u.compute_bytes, 0u);
    krea2::runner::result res;
    ASSERT_TRUE(r.forward(m, krea2::build_options{}, krea2::synthetic_input(c, SEED), krea2::synthetic_tvec(c, SEED), res,
                          err)) << err;
    EXPECT_EQ(res.out.size(), (size_t) (c.hidden * c.tokens));
}

// ---------------------------------------------------------------------------------------------
// sdx

sd_test::tool_result sdx(const std::string & args) { return sd_test::run_tool(SDX_BIN, args, "sdx-upstream-"); }

const std::string SMALL = " --hidden 256 --heads 2 --kv-heads 1 --mlp 512 --tokens 40 --blocks 1 --threads 2";

TEST(UpstreamSdx, F32AndBf16Run) {
    for (const char * dtype : {"f32", "bf16"}) {
        sd_test::tool_result r = sdx(std::string("run --dtype ") + dtype + SMALL);
        EXPECT_EQ(r.rc, 0) << dtype << ": " << r.err;
        EXPECT_NE(r.out.find("check: relative RMS"), std::string::npos) << r.out;
    }
    sd_test::tool_result r = sdx("inspect --json --dtype f32 --hidden 256 --heads 2 --kv-heads 1 --mlp 512 --tokens 40");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("\"fused_steps\": 0"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\"rope\": \"chain\""), std::string::npos) << r.out;
}

// INT8 (sdx's default dtype): one error line before any weight is loaded, exit 1.
TEST(UpstreamSdx, Int8IsAOneLineError) {
    sd_test::tool_result r = sdx("run" + SMALL);
    EXPECT_EQ(r.rc, 1) << r.err;
    EXPECT_EQ(r.err.rfind("sdx: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find("use --dtype f32 or bf16"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

} // namespace
