// test-sdx-vulkan.cpp — `sdx --device vulkan`: the Krea2 stack on the Vulkan device (lavapipe in
// CI) with the CPU as fallback, its deviation from native F32 on the CPU, and clear errors for
// devices that do not exist. Runs the sdx binary (SDX_BIN) like a user would.

#include "support/run-tool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using sd_test::tool_result;

tool_result sdx(const std::string & args) {
    const tool_result r = sd_test::run_tool(SDX_BIN, args, "sdx-vk-test-");
    // the ctest entry sets GGML_VK_VALIDATE=1: any validation message is a failure
    EXPECT_EQ(r.err.find("vulkan validation"), std::string::npos) << r.err;
    return r;
}

// "check: relative RMS deviation from native F32: A of the output, B of the stack's update"
bool deviation(const std::string & out, double & of_output, double & of_update) {
    std::smatch m;
    const std::regex re("deviation from native F32: ([0-9.e+-]+) of the output, ([0-9.e+-]+) of the stack");
    if (!std::regex_search(out, m, re)) return false;
    of_output = std::stod(m[1]);
    of_update = std::stod(m[2]);
    return true;
}

const char * const SMALL = "--hidden 512 --heads 4 --kv-heads 1 --mlp 1024 --tokens 128 --blocks 1";

TEST(SdxVulkan, RunF32OnVulkanMatchesCpu) {
    const tool_result r = sdx(std::string("run --device vulkan --dtype f32 ") + SMALL);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("device: vulkan"), std::string::npos) << r.out;
    double o = 0, u = 0;
    ASSERT_TRUE(deviation(r.out, o, u)) << r.out;
    // F32 on both devices: only summation order and transcendental rounding differ
    EXPECT_LT(u, 5e-3) << r.out;
    EXPECT_GT(u, 0.0) << "identical bits: did anything run on Vulkan?\n" << r.out;
}

TEST(SdxVulkan, RunBf16OnVulkan) {
    const tool_result r = sdx(std::string("run --device vulkan --dtype bf16 ") + SMALL);
    ASSERT_EQ(r.rc, 0) << r.err;
    double o = 0, u = 0;
    ASSERT_TRUE(deviation(r.out, o, u)) << r.out;
    EXPECT_LT(u, 2e-2) << r.out; // BF16 weights
}

TEST(SdxVulkan, Int8OnVulkan) {
    const tool_result r = sdx(std::string("run --device vulkan --dtype int8 ") + SMALL);
    ASSERT_EQ(r.rc, 0) << r.err;
    double o = 0, u = 0;
    ASSERT_TRUE(deviation(r.out, o, u)) << r.out;
    EXPECT_LT(u, 1e-1) << r.out; // INT8 ConvRot weights
}

// The real width (hidden 6144, 48 / 12 heads, MLP 16384: sdx's defaults) with a handful of
// tokens and synthetic INT8 ConvRot weights. lavapipe silently stops a shader invocation's loops
// after 65,535 iterations in total; before the ConvRot quantizer and the modulation-quantize
// fusion split each row over a subgroup, rows of 8192 and more were left partly unwritten and
// this deviation was 0.97 of the update, fusion on or off (issue 25). Now 2.235e-2, the CPU INT8
// run's deviation at this width (2.2e-2); the bound leaves room for the device's float rounding
// in the native ops, not for a wrong kernel. Fusion off runs the same quantizer shader
// (test-vulkan-sd covers both paths at these widths); one run keeps this test near 20 s.
TEST(SdxVulkan, Int8OnVulkanAtTheRealWidth) {
    const tool_result r = sdx("run --device vulkan --dtype int8 --tokens 8 --blocks 1");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("hidden 6144"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("mlp 16384"), std::string::npos) << r.out;
    double o = 0, u = 0;
    ASSERT_TRUE(deviation(r.out, o, u)) << r.out;
    printf("sdx run --device vulkan --dtype int8 at hidden 6144 / mlp 16384, 8 tokens: %.3e of the update\n", u);
    EXPECT_LT(u, 3e-2) << r.out;
    EXPECT_GT(u, 0.0) << r.out;
}

TEST(SdxVulkan, InspectF32OnVulkan) {
    const tool_result r = sdx(std::string("inspect --device vulkan --dtype f32 ") + SMALL);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(std::regex_search(r.out, std::regex("MUL_MAT +b0.wq +Vulkan0"))) << r.out;
    // the sd Vulkan RoPE fusion (src/core/vulkan/rope.cpp)
    EXPECT_TRUE(std::regex_search(r.out, std::regex("sd.rope_apply.v1 +b0.q_rope +Vulkan0 +fused +sd.vulkan.rms_norm_mul_rope")))
        << r.out;
    // the weights are in Vulkan memory (sdx place_weights): the parameter preparation runs there too
    EXPECT_TRUE(std::regex_search(r.out, std::regex("ADD +b0.mods +Vulkan0"))) << r.out;
}

// Every node of the INT8 block (ConvRot, INT8 GEMM, RoPE, their fused chains, and the native
// ops) runs on Vulkan (src/core/vulkan): zero CPU nodes.
TEST(SdxVulkan, InspectInt8AllNodesOnVulkan) {
    const tool_result r = sdx(std::string("inspect --device vulkan --dtype int8 ") + SMALL);
    ASSERT_EQ(r.rc, 0) << r.err;
    std::istringstream in(r.out);
    std::string        line;
    int                nodes = 0, sd_nodes = 0;
    const std::regex   row("^ +[0-9]+ +\\S+ +.* (Vulkan0|CPU) +(native|extension|fused)");
    while (std::getline(in, line)) {
        std::smatch m;
        if (!std::regex_search(line, m, row)) continue;
        ++nodes;
        if (line.find(" sd.") != std::string::npos) ++sd_nodes;
        EXPECT_EQ(m[1], "Vulkan0") << line;
    }
    EXPECT_GE(nodes, 60) << r.out;
    EXPECT_GE(sd_nodes, 14) << r.out;
    for (const char * rule : {"sd.vulkan.modulation_quantize", "sd.vulkan.rms_norm_mul_rope", "sd.vulkan.linear_i8_gate_residual",
                              "sd.vulkan.linear_i8_swiglu"})
        EXPECT_NE(r.out.find(rule), std::string::npos) << rule << "\n" << r.out;
}

// A GGUF checkpoint with block-quantized linears (the gguf package's model, requantized by
// `sdx quantize --to`): on --device vulkan the weights stay quantized in device memory and every
// mul_mat runs on the Vulkan quantized kernels (vk-ops-quant.cpp, mul_mat_q*.comp); the output
// matches the CPU run of the same file within the activation quantization the CPU adds.
TEST(SdxVulkan, GgufQuantizedWeightsRunOnVulkan) {
    const std::string dir = ::testing::TempDir() + "sdx-vk-gguf-" + std::to_string((long) getpid());
    ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
    const std::string py = "python3 '" SD_GGUF_CROSSCHECK_PY "' model '" + dir + "' >/dev/null";
    ASSERT_EQ(std::system(py.c_str()), 0) << "the gguf Python package writes the model (scripts/install-deps.sh)";
    for (const char * t : {"q4_k", "q8_0"}) {
        const std::string q = dir + "/" + t + ".gguf";
        tool_result       r = sdx("quantize '" + dir + "/model.gguf' '" + q + "' --to " + t);
        ASSERT_EQ(r.rc, 0) << r.err;
        const std::string run = std::string("run --weights '") + q + "' --dtype " + t + " --blocks 2 --tokens 64";
        const tool_result vk = sdx(run + " --device vulkan"), cpu = sdx(run + " --device cpu");
        ASSERT_EQ(vk.rc, 0) << vk.err;
        ASSERT_EQ(cpu.rc, 0) << cpu.err;
        double ov = 0, uv = 0, oc = 0, uc = 0;
        ASSERT_TRUE(deviation(vk.out, ov, uv)) << vk.out;
        ASSERT_TRUE(deviation(cpu.out, oc, uc)) << cpu.out;
        // both within the weights' quantization error of the same native F32 stack, so within
        // ov + oc of each other; Vulkan no further from F32 than the CPU (its GEMM uses the
        // activations unquantized, the CPU's Q8 ones: q8_0 measured 2.0e-4 vs 4.2e-4, q4_k 2.8e-3
        // vs 2.9e-3)
        EXPECT_LT(ov, 2e-2) << t << "\n" << vk.out;
        EXPECT_GT(ov, 0.0) << t << "\n" << vk.out;
        EXPECT_LT(ov, 1.25 * oc) << t << ": vulkan " << ov << ", cpu " << oc;
        // every node of the quantized block on Vulkan0 (before the quantized kernels the mul_mats fell back to the CPU)
        r = sdx(std::string("inspect --device vulkan --dtype ") + t + " " + SMALL);
        ASSERT_EQ(r.rc, 0) << r.err;
        EXPECT_TRUE(std::regex_search(r.out, std::regex("MUL_MAT +b0.wq +Vulkan0"))) << r.out;
        EXPECT_TRUE(std::regex_search(r.out, std::regex("MUL_MAT +b0.mlp_down +Vulkan0"))) << r.out;
        EXPECT_FALSE(std::regex_search(r.out, std::regex("MUL_MAT +\\S+ +CPU"))) << r.out;
    }
    EXPECT_EQ(std::system(("rm -rf '" + dir + "'").c_str()), 0);
}

TEST(SdxVulkan, CpuDriversAreDevicesOnlyWhenNamed) {
    // like upstream ggml-vulkan: without GGML_VK_VISIBLE_DEVICES a CPU driver (lavapipe) is not a
    // device, so clients that take "the first GPU" do not land on it; ctest names index 0
    // (build/vk-test-env.cmake), which is how every other test here reaches lavapipe
    const char *      prev  = getenv("GGML_VK_VISIBLE_DEVICES");
    const std::string saved = prev ? prev : "";
    unsetenv("GGML_VK_VISIBLE_DEVICES");
    const tool_result r = sdx(std::string("run --device vulkan ") + SMALL);
    if (prev) setenv("GGML_VK_VISIBLE_DEVICES", saved.c_str(), 1);
    if (r.rc == 0) {
        // a machine with a real GPU: it must be that GPU, not a CPU driver
        EXPECT_EQ(r.out.find("llvmpipe"), std::string::npos) << r.out;
    } else {
        EXPECT_NE(r.err.find("no such Vulkan device (0 found; a CPU Vulkan driver such as lavapipe is used only "
                             "when GGML_VK_VISIBLE_DEVICES names its index"),
                  std::string::npos)
            << r.err;
    }
}

TEST(SdxVulkan, MissingDeviceIsAClearError) {
    tool_result r = sdx(std::string("run --device vulkan:99 ") + SMALL);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("no such Vulkan device"), std::string::npos) << r.err;
    r = sdx(std::string("run --device tpu ") + SMALL);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("not one of cpu, "), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("vulkan[:N]"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("Vulkan0"), std::string::npos) << "the Vulkan device is not listed: " << r.err;
    r = sdx(std::string("run --device vulkan:x ") + SMALL);
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("not a device index"), std::string::npos) << r.err;
}

// --device takes the registry's family name in any case with an optional index, or the exact
// device name; every spelling lands on the same device (the run line names it).
TEST(SdxVulkan, DeviceByFamilyIndexOrDeviceName) {
    const std::string tiny = " --hidden 256 --heads 2 --kv-heads 1 --mlp 512 --tokens 16 --blocks 1 --no-check";
    for (const char * d : {"vulkan:0", "Vulkan0", "VULKAN", "vulkan0"}) {
        const tool_result r = sdx(std::string("run --device ") + d + tiny);
        ASSERT_EQ(r.rc, 0) << d << "\n" << r.err;
        EXPECT_NE(r.out.find(std::string("device: ") + d + " = Vulkan0"), std::string::npos) << r.out;
    }
}

} // namespace
