// Instruction-set dispatch (issue 22; ggml-cpu.h "Instruction-set level", cpu-isa.h): the levels a
// CPU can run, the cap (GGML_CPU_ISA / ggml_cpu_set_isa) that keeps every level above it from
// running, the service the sd kernels choose through, and kernel names that never name a level
// above the cap. The kernels of each level are checked against their references by the op
// harnesses (tests/support/isa_levels.h runs them once per level).

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml-ext.h"
#include "ggml.h"
#include "support/isa_levels.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int rank_of(const std::string & level) {
    const std::vector<std::string> all = test_isa::all_levels();
    for (size_t i = 0; i < all.size(); ++i) {
        if (all[i] == level) return (int) i;
    }
    return -1;
}

struct restore_cap {
    ~restore_cap() { ggml_cpu_set_isa(nullptr); }
};

TEST(CpuIsa, levels_run_from_portable_up_to_the_cpu_level) {
    ASSERT_GE(ggml_cpu_isa_count(), 1);
    EXPECT_STREQ(ggml_cpu_isa_level(0), "portable");
    int prev = -1;
    for (int i = 0; i < ggml_cpu_isa_count(); ++i) {
        const int r = rank_of(ggml_cpu_isa_level(i));
        EXPECT_GT(r, prev) << ggml_cpu_isa_level(i);
        prev = r;
    }
    EXPECT_STREQ(ggml_cpu_isa_level(ggml_cpu_isa_count() - 1), ggml_cpu_get_isa_detected());
    EXPECT_EQ(ggml_cpu_isa_level(ggml_cpu_isa_count()), nullptr);
    // the CPU's level agrees with the feature queries
#if defined(__aarch64__)
    EXPECT_EQ(ggml_cpu_has_neon(), 1); // every AArch64 Linux/macOS CPU has Advanced SIMD
    const int want = ggml_cpu_has_dotprod() ? (ggml_cpu_has_matmul_int8() ? rank_of("i8mm") : rank_of("dotprod"))
                                            : rank_of("neon");
    EXPECT_EQ(rank_of(ggml_cpu_get_isa_detected()), want);
#else
    if (ggml_cpu_has_avx2() && ggml_cpu_has_fma() && ggml_cpu_has_f16c()) {
        EXPECT_GE(rank_of(ggml_cpu_get_isa_detected()), rank_of("avx2"));
    } else {
        EXPECT_EQ(std::string(ggml_cpu_get_isa_detected()), "portable");
    }
    if (!ggml_cpu_has_avx512()) {
        EXPECT_LT(rank_of(ggml_cpu_get_isa_detected()), rank_of("avx512"));
    }
#endif
    test_isa::note_skipped_levels();
}

// Under emulation (scripts/test-qemu-avx2.sh sets SD_EXPECT_ISA_DETECTED=avx2) the pass is only
// meaningful if the library really sees the emulated CPU.
TEST(CpuIsa, the_detected_level_is_the_expected_one_where_the_runner_states_it) {
    const char * want = getenv("SD_EXPECT_ISA_DETECTED");
    if (!want || !*want) GTEST_SKIP() << "SD_EXPECT_ISA_DETECTED not set (only the emulated pass sets it)";
    EXPECT_STREQ(ggml_cpu_get_isa_detected(), want);
    if (std::string(want) == "avx2") {
        EXPECT_EQ(ggml_cpu_has_avx512(), 0);
    }
    if (std::string(want) == "neon") {
        EXPECT_EQ(ggml_cpu_has_dotprod() + ggml_cpu_has_matmul_int8(), 0);
    }
}

// The ggml_cpu_has_* queries and the backend's feature list tell the truth on each architecture
// (upstream's answers), never another architecture's flags.
TEST(CpuIsa, the_cpu_queries_tell_the_truth_on_every_architecture) {
    auto listed = [](const char * name) {
        auto get = (ggml_backend_get_features_t) ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(),
                                                                                   "ggml_backend_get_features");
        if (!get) return false;
        for (ggml_backend_feature * f = get(ggml_backend_cpu_reg()); f->name; ++f) {
            if (!strcmp(f->name, name)) return true;
        }
        return false;
    };
#if defined(__aarch64__)
    EXPECT_EQ(ggml_cpu_has_neon(), 1);
    EXPECT_EQ(ggml_cpu_has_arm_fma(), 1);
    EXPECT_TRUE(listed("NEON"));
    EXPECT_EQ(listed("DOTPROD"), ggml_cpu_has_dotprod() == 1);
    EXPECT_EQ(listed("MATMUL_INT8"), ggml_cpu_has_matmul_int8() == 1);
    EXPECT_EQ(ggml_cpu_has_sve() == 1, ggml_cpu_get_sve_cnt() > 0);
    EXPECT_EQ(ggml_cpu_has_avx2() + ggml_cpu_has_avx512() + ggml_cpu_has_sse3() + ggml_cpu_has_fma(), 0);
    EXPECT_FALSE(listed("AVX2"));
#elif defined(__x86_64__)
    EXPECT_EQ(ggml_cpu_has_sse3(), 1); // every x86-64 CPU
    EXPECT_EQ(ggml_cpu_has_neon() + ggml_cpu_has_dotprod() + ggml_cpu_has_matmul_int8() + ggml_cpu_has_sve(), 0);
    EXPECT_EQ(ggml_cpu_get_sve_cnt(), 0);
    EXPECT_FALSE(listed("NEON"));
    EXPECT_EQ(listed("AVX2"), ggml_cpu_has_avx2() == 1);
#endif
}

// A level of the other architecture is refused (not silently taken as "no cap") and changes nothing,
// from the API and from GGML_CPU_ISA alike.
TEST(CpuIsa, a_level_of_the_other_architecture_is_refused) {
    restore_cap r;
    ASSERT_TRUE(ggml_cpu_set_isa("portable"));
    for (const std::string & lv : test_isa::foreign_levels()) {
        EXPECT_FALSE(ggml_cpu_set_isa(lv.c_str())) << lv;
        EXPECT_STREQ(ggml_cpu_get_isa(), "portable") << lv;
        EXPECT_FALSE(ggml_cpu_isa_can_use(lv.c_str())) << lv;
    }
    ASSERT_TRUE(ggml_cpu_set_isa(nullptr));
    for (const std::string & lv : test_isa::foreign_levels()) EXPECT_FALSE(ggml_cpu_isa_can_use(lv.c_str())) << lv;
}

TEST(CpuIsa, the_cap_lowers_the_active_level_and_null_restores_it) {
    restore_cap r;
    const std::string dflt = ggml_cpu_get_isa();
    for (const std::string & lv : test_isa::runnable_levels()) {
        ASSERT_TRUE(ggml_cpu_set_isa(lv.c_str()));
        EXPECT_EQ(lv, ggml_cpu_get_isa());
        EXPECT_TRUE(ggml_cpu_isa_can_use(lv.c_str()));
    }
    // a cap above the CPU is no cap
    const std::string top = test_isa::all_levels().back() == "amx" ? "avx512" : test_isa::all_levels().back();
    ASSERT_TRUE(ggml_cpu_set_isa(top.c_str()));
    EXPECT_LE(rank_of(ggml_cpu_get_isa()), rank_of(top));
    EXPECT_LE(rank_of(ggml_cpu_get_isa()), rank_of(ggml_cpu_get_isa_detected()));
    ASSERT_TRUE(ggml_cpu_set_isa(nullptr));
    EXPECT_EQ(dflt, ggml_cpu_get_isa());
    ASSERT_TRUE(ggml_cpu_set_isa("native"));
    EXPECT_EQ(dflt, ggml_cpu_get_isa());
}

TEST(CpuIsa, an_unknown_level_is_rejected_and_changes_nothing) {
    restore_cap r;
    ASSERT_TRUE(ggml_cpu_set_isa("portable"));
    EXPECT_FALSE(ggml_cpu_set_isa("avx3"));
    EXPECT_FALSE(ggml_cpu_set_isa("AVX2"));
    EXPECT_STREQ(ggml_cpu_get_isa(), "portable");
}

TEST(CpuIsa, nothing_above_the_cap_is_usable) {
    restore_cap r;
    const char * x86_features[] = {"avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
                                   "avx512dq", "avx512_vnni", "avx512_bf16", "amx_int8", "amx_bf16"};
    ASSERT_TRUE(ggml_cpu_set_isa("portable"));
    for (const char * f : x86_features) EXPECT_FALSE(ggml_cpu_isa_can_use(f)) << f;
    EXPECT_FALSE(ggml_cpu_isa_can_use("avx2"));
    EXPECT_TRUE(ggml_cpu_isa_can_use("portable"));
    for (const char * f : {"neon", "fp16_va", "dotprod", "i8mm", "arm_bf16", "sve"}) EXPECT_FALSE(ggml_cpu_isa_can_use(f)) << f;
    if (ggml_cpu_isa_count() > 2 && std::string(ggml_cpu_isa_level(1)) == "neon") {
        ASSERT_TRUE(ggml_cpu_set_isa("neon"));
        EXPECT_TRUE(ggml_cpu_isa_can_use("neon"));
        EXPECT_FALSE(ggml_cpu_isa_can_use("dotprod")) << "under a cap of neon";
        EXPECT_FALSE(ggml_cpu_isa_can_use("i8mm")) << "under a cap of neon";
    }
    if (ggml_cpu_isa_count() > 1 && std::string(ggml_cpu_isa_level(1)) == "avx2") {
        ASSERT_TRUE(ggml_cpu_set_isa("avx2"));
        EXPECT_TRUE(ggml_cpu_isa_can_use("avx2"));
        EXPECT_TRUE(ggml_cpu_isa_can_use("fma"));
        EXPECT_TRUE(ggml_cpu_isa_can_use("f16c"));
        for (const char * f : {"avx_vnni", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_int8"}) {
            EXPECT_FALSE(ggml_cpu_isa_can_use(f)) << f << " under a cap of avx2";
        }
        EXPECT_FALSE(ggml_cpu_isa_can_use("avx512"));
    }
    // the uncapped CPU queries do not move with the cap
    ASSERT_TRUE(ggml_cpu_set_isa(nullptr));
    const int has_avx2 = ggml_cpu_has_avx2();
    ASSERT_TRUE(ggml_cpu_set_isa("portable"));
    EXPECT_EQ(has_avx2, ggml_cpu_has_avx2());
    EXPECT_EQ(std::string(ggml_cpu_get_isa_detected()), ggml_cpu_isa_level(ggml_cpu_isa_count() - 1));
    EXPECT_FALSE(ggml_cpu_isa_can_use(nullptr));
    EXPECT_FALSE(ggml_cpu_isa_can_use("no_such_feature"));
}

TEST(CpuIsa, the_service_answers_like_the_public_queries) {
    restore_cap r;
    const auto * svc = static_cast<const ggml_ext_cpu_isa_v1 *>(
        ggml_backend_reg_get_proc_address(ggml_backend_cpu_reg(), GGML_EXT_CPU_ISA_V1));
    ASSERT_NE(svc, nullptr);
    EXPECT_EQ(svc->version, 1u);
    for (const std::string & lv : test_isa::runnable_levels()) {
        ASSERT_TRUE(ggml_cpu_set_isa(lv.c_str()));
        EXPECT_STREQ(svc->active_level(), lv.c_str());
        for (const char * f : {"avx2", "fma", "avx512", "avx512_vnni", "avx_vnni", "neon", "dotprod", "i8mm"}) {
            EXPECT_EQ(svc->can_use(f), ggml_cpu_isa_can_use(f)) << f << " at " << lv;
        }
    }
}

// Every node's reported kernel belongs to a level at or below the cap: a name never claims an
// instruction set that is not allowed to run.
TEST(CpuIsa, node_kernel_names_never_name_a_level_above_the_cap) {
    restore_cap r;
    ggml_init_params ip = {64 * 1024 * 1024, nullptr, true};
    ggml_context *   ctx = ggml_init(ip);
    ASSERT_NE(ctx, nullptr);
    const int64_t K = 256, N = 96, M = 64;
    ggml_tensor * w    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    ggml_tensor * wh   = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, K, N);
    ggml_tensor * wq   = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, K, N);
    ggml_tensor * x    = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    ggml_tensor * q    = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 64, M, 2);
    ggml_tensor * kv   = ggml_new_tensor_3d(ctx, GGML_TYPE_F16, 64, M, 2);
    std::vector<ggml_tensor *> nodes = {
        ggml_mul_mat(ctx, w, x),   ggml_mul_mat(ctx, wh, x),  ggml_mul_mat(ctx, wq, x),
        ggml_soft_max(ctx, x),     ggml_rms_norm(ctx, x, 1e-6f), ggml_silu(ctx, x),
        ggml_add(ctx, x, x),       ggml_flash_attn_ext(ctx, q, kv, kv, nullptr, 0.125f, 0.0f, 0.0f),
    };
    ggml_backend_t be = ggml_backend_cpu_init();
    ASSERT_NE(be, nullptr);
    const std::vector<std::string> run = test_isa::runnable_levels();
    for (const std::string & lv : run) {
        ASSERT_TRUE(ggml_cpu_set_isa(lv.c_str()));
        for (ggml_tensor * n : nodes) {
            const std::string k = ggml_backend_cpu_node_kernel(be, n);
            for (const std::string & other : test_isa::all_levels()) {
                if (other == "portable" || rank_of(other) <= rank_of(lv)) continue;
                // "avx2" is a prefix of no other level name, "avx512" of none above it
                EXPECT_EQ(k.find(other), std::string::npos)
                    << ggml_op_desc(n) << " reports '" << k << "' under a cap of " << lv;
            }
            if (lv == "portable") {
                EXPECT_EQ(k.find("avx"), std::string::npos) << ggml_op_desc(n) << " reports '" << k << "'";
            }
        }
    }
    ggml_backend_cpu_set_use_ref(be, true);
    for (ggml_tensor * n : nodes) {
        const std::string k = ggml_backend_cpu_node_kernel(be, n);
        EXPECT_EQ(k.find("avx"), std::string::npos) << ggml_op_desc(n) << " with use_ref reports '" << k << "'";
    }
    ggml_backend_free(be);
    ggml_free(ctx);
}

// GGML_CPU_ISA is read once, at the first query; each check runs in a fresh process ("threadsafe"
// death tests re-execute the binary), where the statement below makes that first query.
TEST(CpuIsaEnv, GGML_CPU_ISA_caps_the_process_and_a_bad_value_is_reported_and_ignored) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            setenv("GGML_CPU_ISA", "portable", 1);
            const bool capped = strcmp(ggml_cpu_get_isa(), "portable") == 0 && !ggml_cpu_isa_can_use("avx2");
            // NULL restores the environment's cap, not the CPU's level
            ggml_cpu_set_isa(nullptr);
            exit(capped && strcmp(ggml_cpu_get_isa(), "portable") == 0 ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
    EXPECT_EXIT(
        {
            setenv("GGML_CPU_ISA", "avx9000", 1);
            exit(strcmp(ggml_cpu_get_isa(), ggml_cpu_get_isa_detected()) == 0 ||
                         !strcmp(ggml_cpu_get_isa_detected(), "amx")
                     ? 0
                     : 1);
        },
        ::testing::ExitedWithCode(0), "GGML_CPU_ISA='avx9000' ignored");
}

} // namespace
