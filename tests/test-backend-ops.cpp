// Every op of ggml.h over many shapes, layouts and types, on every device of the backend
// registry (CPU with 1 and 2 threads), checked against the double-precision references in
// reference/. One gtest per (device, case, thread count). Non-CPU devices additionally get a
// "<case>_vs_CPU" test comparing their output with the CPU backend's.

#include "backend-ops-cases.h"

#include "ggml-cpu.h"
#include "support/isa_levels.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace {

struct param {
    size_t      case_idx;
    size_t      dev_idx;
    int         n_threads; // 0: backend default (non-CPU)
    bool        vs_cpu;
    bool        use_ref;   // CPU: force the portable kernels (the SIMD paths are the default)
    std::string name;
    std::string kernel;    // CPU: ggml_cpu_set_kernel_override spec for this run ("": the table's choice)
    std::string isa;       // CPU: instruction-set level cap for this run ("": the process's level)
};

// Cases of an op family with interchangeable kernels (kernel-choice.h): each runs once more with
// every kernel this CPU can run forced, whatever the kernel table picks here.
bool has_kernel_choice(const std::string & case_name) {
    return case_name.rfind("flash_attn_ext", 0) == 0 || case_name.rfind("mul_mat_a_bf16", 0) == 0;
}

// Cases whose kernels differ per instruction-set level (the x86 GEMMs: ops-mul-mat-x86.cpp,
// ops-mul-mat-avx2.cpp, and the quantized tiles; flash attention: ops-flash-attn-avx512.cpp,
// ops-flash-attn-avx2.cpp): each runs once more at every level this CPU can run below its own (its
// own level is the plain runs, portable the _ref run), so an AVX-512 machine checks the AVX2
// kernels too.
bool has_isa_levels(const std::string & case_name) {
    return case_name.rfind("mul_mat_a_", 0) == 0 || case_name.rfind("flash_attn_ext", 0) == 0;
}

std::vector<std::string> lower_isa_levels() {
    std::vector<std::string> ls = test_isa::runnable_levels();
    if (!ls.empty()) ls.pop_back();                      // the process's own level: the plain runs
    if (!ls.empty() && ls.front() == "portable") ls.erase(ls.begin()); // the _ref run
    return ls;
}

std::vector<std::string> runnable_kernels() {
    std::vector<std::string> ks;
    if (ggml_cpu_has_avx512()) ks.push_back("f32fma");
    if (ggml_cpu_has_avx512_bf16()) ks.push_back("bf16dot");
    return ks;
}

// Restores the environment's (or the table's) kernel choice when a forced run ends.
struct kernel_override_guard {
    bool active = false;
    explicit kernel_override_guard(const std::string & spec) : active(!spec.empty()) {}
    ~kernel_override_guard() {
        if (active && !ggml_cpu_set_kernel_override(getenv("GGML_CPU_KERNEL"))) ggml_cpu_set_kernel_override(nullptr);
    }
};

// keeps gtest from dumping the raw bytes of a param in failure lines
void PrintTo(const param & p, std::ostream * os) { *os << p.name; }

std::vector<param> make_params() {
    std::vector<param> ps;
    const auto &       cases = bops::all_cases();
    for (size_t d = 0; d < ggml_backend_dev_count(); d++) {
        ggml_backend_dev_t dev  = ggml_backend_dev_get(d);
        // Vulkan devices run these cases in test-vulkan, one process for all (pipelines compile
        // once per process; one ctest process per case would recompile them every time)
        if (strcmp(ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev)), "Vulkan") == 0) continue;
        const bool         cpu  = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_CPU;
        const std::string  dn   = bops::sanitize_name(ggml_backend_dev_name(dev));
        for (size_t i = 0; i < cases.size(); i++) {
            if (cpu) {
                for (int nt : {1, 2}) {
                    ps.push_back({i, d, nt, false, false, dn + "_" + cases[i].name + "_t" + std::to_string(nt), "", ""});
                }
                ps.push_back({i, d, 2, false, true, dn + "_" + cases[i].name + "_ref_t2", "", ""});
                if (has_kernel_choice(cases[i].name)) {
                    for (const std::string & k : runnable_kernels())
                        ps.push_back({i, d, 2, false, false, dn + "_" + cases[i].name + "_k" + k + "_t2", k, ""});
                }
                if (has_isa_levels(cases[i].name)) {
                    for (const std::string & lv : lower_isa_levels())
                        ps.push_back({i, d, 2, false, false, dn + "_" + cases[i].name + "_isa" + lv + "_t2", "", lv});
                }
            } else {
                ps.push_back({i, d, 0, false, false, dn + "_" + cases[i].name, "", ""});
                ps.push_back({i, d, 0, true, false, dn + "_" + cases[i].name + "_vs_CPU", "", ""});
            }
        }
    }
    return ps;
}

// The one table of cases a device is expected to decline (ggml_backend_supports_op false). A case
// declined but not listed fails, and so does a listed case that the device runs: the table always
// states exactly what each device lacks. The CPU backend runs every case. `device` is a device
// name, or "" for every device except the CPU.
struct expected_decline_row {
    const char * device;
    const char * case_prefix; // matched against the start of the case name
    const char * why;
};
const expected_decline_row k_expected_declines[] = {
    {"", "custom_", "ggml_custom_* callbacks are host functions: only the CPU backend runs them"},
};

const char * expected_decline(const std::string & device, const std::string & case_name) {
    const bool cpu = device == "CPU";
    for (const auto & row : k_expected_declines) {
        const bool dev_match = row.device[0] ? device == row.device : !cpu;
        if (dev_match && case_name.rfind(row.case_prefix, 0) == 0) return row.why;
    }
    return nullptr;
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
        std::unique_ptr<test_isa::scoped_cap> cap;
        if (!p.isa.empty()) cap = std::make_unique<test_isa::scoped_cap>(p.isa.c_str());
        if (!p.isa.empty()) {
            ASSERT_STREQ(ggml_cpu_get_isa(), p.isa.c_str()) << "cannot cap the level at " << p.isa;
        }
        kernel_override_guard guard(p.kernel);
        if (!p.kernel.empty()) {
            ASSERT_TRUE(ggml_cpu_set_kernel_override(p.kernel.c_str())) << "cannot force kernel " << p.kernel;
        }
        r = bops::run_case(c, be, p.n_threads);
    }
    ggml_backend_free(be);
    const char * why = expected_decline(ggml_backend_dev_name(dev), c.name);
    if (r.status == bops::result::declined) {
        EXPECT_NE(why, nullptr) << "declined, and not in the expected-decline table: " << r.message;
        return;
    }
    EXPECT_EQ(why, nullptr) << c.desc << " on " << ggml_backend_dev_name(dev)
                            << " is listed as an expected decline (" << why << ") but ran: remove it from the table";
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
        test_isa::note_skipped_levels();
    }
};

} // namespace

int main(int argc, char ** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    ::testing::AddGlobalTestEnvironment(new CountReporter);
    return RUN_ALL_TESTS();
}
