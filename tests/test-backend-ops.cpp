// Every op of ggml.h over many shapes, layouts and types, on every device of the backend
// registry (CPU with 1 and 2 threads), checked against the double-precision references in
// reference/. One gtest per (device, case, thread count). Non-CPU devices additionally get a
// "<case>_vs_CPU" test comparing their output with the CPU backend's.

#include "backend-ops-cases.h"

#include "ggml-cpu.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace bops {

const std::vector<op_case> & all_cases() {
    static const std::vector<op_case> cases = [] {
        case_list cl;
        add_elementwise_cases(cl);
        add_norm_cases(cl);
        add_matmul_cases(cl);
        add_copy_cases(cl);
        add_rope_cases(cl);
        add_attention_cases(cl);
        add_layout_cases(cl);
        add_conv_cases(cl);
        add_client_cases(cl);
        return std::move(cl.v);
    }();
    return cases;
}

} // namespace bops

namespace {

struct param {
    size_t      case_idx;
    size_t      dev_idx;
    int         n_threads; // 0: backend default (non-CPU)
    bool        vs_cpu;
    bool        use_ref;   // CPU: force the portable kernels (the SIMD paths are the default)
    std::string name;
};

// keeps gtest from dumping the raw bytes of a param in failure lines
void PrintTo(const param & p, std::ostream * os) { *os << p.name; }

std::vector<param> make_params() {
    std::vector<param> ps;
    const auto &       cases = bops::all_cases();
    for (size_t d = 0; d < ggml_backend_dev_count(); d++) {
        ggml_backend_dev_t dev  = ggml_backend_dev_get(d);
        const bool         cpu  = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
        const std::string  dn   = bops::sanitize_name(ggml_backend_dev_name(dev));
        for (size_t i = 0; i < cases.size(); i++) {
            if (cpu) {
                for (int nt : {1, 2}) {
                    ps.push_back({i, d, nt, false, false, dn + "_" + cases[i].name + "_t" + std::to_string(nt)});
                }
                ps.push_back({i, d, 2, false, true, dn + "_" + cases[i].name + "_ref_t2"});
            } else {
                ps.push_back({i, d, 0, false, false, dn + "_" + cases[i].name});
                ps.push_back({i, d, 0, true, false, dn + "_" + cases[i].name + "_vs_CPU"});
            }
        }
    }
    return ps;
}

class BackendOps : public ::testing::TestWithParam<param> {};

TEST_P(BackendOps, MatchesReference) {
    const param &         p   = GetParam();
    const bops::op_case & c   = bops::all_cases()[p.case_idx];
    ggml_backend_dev_t    dev = ggml_backend_dev_get(p.dev_idx);
    ggml_backend_t        be  = ggml_backend_dev_init(dev, nullptr);
    ASSERT_NE(be, nullptr) << "cannot init device " << ggml_backend_dev_name(dev);
    bops::result r;
    if (p.vs_cpu) {
        ggml_backend_t cpu = ggml_backend_cpu_init();
        r                  = bops::run_case_vs_cpu(c, be, cpu);
        ggml_backend_free(cpu);
    } else {
        if (p.use_ref) ggml_backend_cpu_set_use_ref(be, true);
        r = bops::run_case(c, be, p.n_threads);
    }
    ggml_backend_free(be);
    if (r.status == bops::result::skip) GTEST_SKIP() << r.message;
    EXPECT_EQ(r.status, bops::result::pass) << r.message;
}

INSTANTIATE_TEST_SUITE_P(All, BackendOps, ::testing::ValuesIn(make_params()),
                         [](const ::testing::TestParamInfo<param> & info) { return info.param.name; });

// Printed when tests run (not while gtest only lists them for ctest discovery).
class CountReporter : public ::testing::Environment {
  public:
    void SetUp() override {
        fprintf(stderr, "test-backend-ops: %zu cases x %zu device(s)\n", bops::all_cases().size(),
                (size_t) ggml_backend_dev_count());
    }
};

} // namespace

int main(int argc, char ** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new CountReporter);
    return RUN_ALL_TESTS();
}
