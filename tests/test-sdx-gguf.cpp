// test-sdx-gguf.cpp — sdx with GGUF checkpoints: `sdx run --weights model.gguf` on a file the
// Python gguf package wrote (tests/gguf_crosscheck.py model: 2 Krea2 blocks at hidden 256,
// linears mixed F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q5_0/Q5_1, norms F32), `sdx inspect FILE`, `sdx quantize --to` (GGUF
// written atomically, read back by us and by gguf.GGUFReader), and hostile GGUF inputs (one-line
// errors naming the problem, exit 1/2, no output left behind). Fails when the gguf package is
// missing.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

struct result {
    int         code = -1;
    std::string out, err;
};

std::string slurp(const std::string & p) {
    std::ifstream     f(p, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

const std::string & dir() {
    static std::string d;
    if (d.empty()) {
        char t[] = "/tmp/test-sdx-gguf-XXXXXX";
        if (!mkdtemp(t)) abort();
        d = t;
        // removed when the process ends (a plain buffer: the string may be destroyed first)
        static char path[256];
        snprintf(path, sizeof path, "%s", t);
        std::atexit([] { if (std::system((std::string("rm -rf '") + path + "'").c_str()) != 0) {} });
    }
    return d;
}

// Runs a shell command line (arguments quoted by the caller).
result sh(const std::string & cmd) {
    const std::string o = dir() + "/stdout", e = dir() + "/stderr";
    const int         st = std::system((cmd + " >" + o + " 2>" + e).c_str());
    result            r;
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.out  = slurp(o);
    r.err  = slurp(e);
    return r;
}

result sdx(const std::string & args) {
    return sh(std::string("'") + SDX_BIN + "' " + args);
}

bool exists(const std::string & p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0;
}

// the model file, written once by the gguf package
const std::string & model() {
    static std::string m;
    if (m.empty()) {
        const result r = sh("python3 '" SD_GGUF_CROSSCHECK_PY "' model '" + dir() + "'");
        EXPECT_EQ(r.code, 0) << r.out << r.err << "(is the Python gguf package installed? scripts/install-deps.sh)";
        m = dir() + "/model.gguf";
    }
    return m;
}

// "relative RMS deviation from native F32: X of the output" -> X (negative when absent)
double deviation(const std::string & out) {
    const std::string key = "relative RMS deviation from native F32: ";
    const size_t      p   = out.find(key);
    if (p == std::string::npos) return -1;
    return std::atof(out.c_str() + p + key.size());
}

} // namespace

TEST(SdxGGUF, RunsAFileWrittenByThePythonPackage) {
    const std::string m = model();
    ASSERT_TRUE(exists(m));
    // F32 stack: the dequantized weights computed in F32 against the same weights in the
    // double-checked F32 graph (identical weights: the deviation is the graph's own, ~0)
    result r = sdx("run --weights '" + m + "' --blocks 2 --tokens 64 --dtype f32");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("hidden 256"), std::string::npos) << r.out;
    double d = deviation(r.out);
    EXPECT_GE(d, 0.0) << r.out;
    EXPECT_LT(d, 1e-5) << r.out;
    // INT8 ConvRot stack from the same file: its quantization error, bounded as in test-model
    r = sdx("run --weights '" + m + "' --blocks 2 --tokens 64 --dtype int8");
    ASSERT_EQ(r.code, 0) << r.err;
    d = deviation(r.out);
    EXPECT_GT(d, 0.0) << r.out;
    EXPECT_LT(d, 3e-2) << r.out;
}

TEST(SdxGGUF, InspectPrintsEveryTensorWithItsType) {
    const result r = sdx("inspect '" + model() + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("GGUF v3, 26 tensors"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("blocks.0.attn.wq.weight"), std::string::npos);
    for (const char * t : {" q8_0 ", " f16 ", " bf16 ", " f32 ", " q4_0 ", " q4_1 ", " q5_0 ", " q5_1 "}) EXPECT_NE(r.out.find(t), std::string::npos) << t;
    EXPECT_NE(r.out.find("[256, 512]"), std::string::npos) << r.out; // mlp.gate: ne [in, out]
}

TEST(SdxGGUF, QuantizeWritesGGUFThatBothReadersAccept) {
    const std::string out = dir() + "/q8.gguf";
    result            r   = sdx("quantize '" + model() + "' '" + out + "' --to q8_0");
    ASSERT_EQ(r.code, 0) << r.err;
    r = sdx("inspect '" + out + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    // every float linear is q8_0 now (the block-quantized ones are copied), the norms stay f32
    EXPECT_EQ(r.out.find(" f16 "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find(" bf16 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("blocks.1.prenorm.scale                           f32"), std::string::npos) << r.out;
    r = sh("python3 -c \"import gguf,sys; t=gguf.GGUFReader(sys.argv[1]).tensors; "
           "assert sum(x.tensor_type.name=='Q8_0' for x in t)==8, [x.tensor_type.name for x in t]\" '" + out + "'");
    EXPECT_EQ(r.code, 0) << r.err;
    r = sdx("run --weights '" + out + "' --blocks 2 --tokens 64 --dtype f32");
    EXPECT_EQ(r.code, 0) << r.err;
}

TEST(SdxGGUF, HostileInputsGiveOneLineErrors) {
    // truncated GGUF: exit 1, the reader's message (field and offset)
    const std::string whole = slurp(model());
    const std::string cut   = dir() + "/cut.gguf";
    {
        std::ofstream f(cut, std::ios::binary);
        f.write(whole.data(), 1000);
    }
    result r = sdx("run --weights '" + cut + "' --blocks 1 --tokens 64");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("sdx: error: gguf_init_from_file:"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("at byte offset"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one error line, got: " << r.err;
    // the same through quantize: nothing left at the output
    const std::string out = dir() + "/never.gguf";
    r                     = sdx("quantize '" + cut + "' '" + out + "' --to q8_0");
    EXPECT_EQ(r.code, 1);
    EXPECT_FALSE(exists(out));
    // a type this build does not quantize to / not a type
    r = sdx("quantize '" + model() + "' '" + out + "' --to q9_9");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("is not a type this build quantizes to"), std::string::npos) << r.err;
    EXPECT_FALSE(exists(out));
    r = sdx("quantize '" + model() + "' '" + out + "' --to q8_0 --group 16");
    EXPECT_EQ(r.code, 2);
    // more blocks than the file has
    r = sdx("run --weights '" + model() + "' --blocks 3 --tokens 64");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("has 2 blocks"), std::string::npos) << r.err;
}

TEST(SdxGGUF, Q8_0StackRunsAndBenchListsTheQuantizedRows) {
    // the stack computing with Q8_0 weights (mul_mat on block-quantized weights)
    result r = sdx("run --weights '" + model() + "' --blocks 2 --tokens 64 --dtype q8_0");
    ASSERT_EQ(r.code, 0) << r.err;
    const double d = deviation(r.out);
    EXPECT_GT(d, 0.0) << r.out;
    EXPECT_LT(d, 1e-2) << r.out;
    // bench: a q8_0-native row with its deviation from F32; q4_k-native runs where the build has
    // Q4_K and its mul_mat, else it is listed as not run with the reason
    const std::string json = dir() + "/bench.json", html = dir() + "/bench.html";
    r = sdx("bench --weights '" + model() + "' --blocks 1 --tokens 64 --runs 1 --json '" + json + "' --html '" + html + "'");
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_NE(r.out.find("q8_0-native  best"), std::string::npos) << r.out;
    const bool q4k_ran = r.out.find("q4_k-native  best") != std::string::npos;
    const bool q4k_not = r.out.find("q4_k-native  not run: ") != std::string::npos;
    EXPECT_NE(q4k_ran, q4k_not) << r.out;
    const result j = sh("python3 -c \"import json,sys; d=json.load(open(sys.argv[1])); "
                        "q=[x for x in d['results'] if x['name']=='q8_0-native'][0]; assert 0 < q['rel_rms_vs_f32'] < 1e-2, q; "
                        "assert ('q4_k-native' in [x['name'] for x in d['results']]) != ('q4_k-native' in [x['name'] for x in d['not_run']])\" '" +
                        json + "'");
    EXPECT_EQ(j.code, 0) << j.out << j.err;
}

TEST(SdxGGUF, QuantizeToKQuantsReadByThePythonPackage) {
    // our quantizers' blocks in our file, dequantized by gguf.quants: within the stated bound of
    // the original floats (measured on this file: q4_k 5.5e-2, q5_k 2.8e-2, q6_k 1.3e-2,
    // q4_0 6.5e-2), every other tensor copied byte for byte; sdx runs the file (dequantized)
    const struct { const char * to; const char * check; } cases[] = {
        {"q4_k", "Q4_K:0.08"}, {"q5_k", "Q5_K:0.04"}, {"q6_k", "Q6_K:0.02"}, {"q4_0", "Q4_0:0.1"},
        {"q8_0", "Q8_0:0.01"}, // q4_0 / q8_0 blocks also byte-identical to gguf.quants.quantize
    };
    for (const auto & c : cases) {
        const std::string out = dir() + "/" + c.to + ".gguf";
        result            r   = sdx("quantize '" + model() + "' '" + out + "' --to " + c.to);
        ASSERT_EQ(r.code, 0) << c.to << ": " << r.err;
        r = sh("python3 '" SD_GGUF_CROSSCHECK_PY "' requantized '" + out + "' '" + model() + "' " + c.check);
        EXPECT_EQ(r.code, 0) << r.out << r.err;
        r = sdx("run --weights '" + out + "' --blocks 2 --tokens 64 --dtype f32");
        EXPECT_EQ(r.code, 0) << c.to << ": " << r.err;
    }
}

TEST(SdxGGUF, QuantizeInterruptedLeavesTheOldOutput) {
    // SIGINT / SIGTERM raised at the 5th per-tensor poll (by count): exit 130 / 143, the existing
    // output untouched, no temporary left in the directory
    const std::string sub = dir() + "/interrupt";
    mkdir(sub.c_str(), 0700);
    const std::string out = sub + "/out.gguf";
    {
        std::ofstream f(out);
        f << "old output";
    }
    for (const char * hook : {"SDX_TEST_SIGINT_AT_POLL=5", "SDX_TEST_SIGTERM_AT_POLL=5"}) {
        const result r = sh(std::string(hook) + " '" + SDX_BIN + "' quantize '" + model() + "' '" + out + "' --to q8_0");
        EXPECT_EQ(r.code, std::string(hook).find("SIGINT") != std::string::npos ? 130 : 143) << r.err;
        EXPECT_NE(r.err.find("interrupted by"), std::string::npos) << r.err;
        EXPECT_EQ(slurp(out), "old output");
        const result ls = sh("ls -A '" + sub + "'");
        EXPECT_EQ(ls.out, "out.gguf\n") << "left behind: " << ls.out;
    }
}

TEST(SdxGGUF, QuantizeSafetensorsToGGUF) {
    // a safetensors checkpoint (the model dequantized by gguf.quants, written by the safetensors
    // package) to GGUF Q6_K: every linear quantized, the norms copied, readable by both sides
    const std::string st = dir() + "/model.safetensors", out = dir() + "/from-st.gguf";
    result            r  = sh("python3 '" SD_GGUF_CROSSCHECK_PY "' to-safetensors '" + model() + "' '" + st + "'");
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    r = sdx("quantize '" + st + "' '" + out + "' --to q6_k");
    ASSERT_EQ(r.code, 0) << r.err;
    r = sh("python3 '" SD_GGUF_CROSSCHECK_PY "' requantized '" + out + "' '" + model() + "' Q6_K:0.02");
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("requantized 16 tensors"), std::string::npos) << r.out;
    r = sdx("run --weights '" + out + "' --blocks 2 --tokens 64 --dtype bf16");
    EXPECT_EQ(r.code, 0) << r.err;
}

TEST(SdxGGUF, QuantizeUsesItsOwnAlignment) {
    // an 85-byte input declaring general.alignment = 2^29 (found by fuzz-gguf): the output keeps
    // the default alignment instead of padding its meta data to 512 MiB
    const std::string in = std::string(SD_FUZZ_CORPUS_DIR) + "/valid-fuzz-large-alignment", out = dir() + "/align.gguf";
    const result      r  = sdx("quantize '" + in + "' '" + out + "' --to q8_0");
    ASSERT_EQ(r.code, 0) << r.err;
    struct stat st;
    ASSERT_EQ(stat(out.c_str(), &st), 0);
    EXPECT_LT(st.st_size, 4096) << "output padded to the input's alignment";
}
