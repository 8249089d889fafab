// Fuzzes the ComfyUI module reader (src/io/comfy_int8.*): any bytes as a safetensors file, then
// read_linear on every "<m>.weight" module and read_floats on every tensor; results must match
// the declared shapes. Small files also go through the offline quantizer, whose output must
// read back as modules.

#include "fuzz-support.h"
#include "io/comfy_int8.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

#define CHECK(c) FUZZ_CHECK("fuzz-comfy", c, #c)

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string path = fuzz::as_file(data, size);
    std::string       err;
    auto              r = sdio::reader::open(path, err);
    if (!r) return 0;
    std::vector<std::string> modules;
    for (const auto & t : r->tensors()) {
        const std::string suffix = ".weight";
        if (t.name.size() > suffix.size() && t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0)
            modules.push_back(t.name.substr(0, t.name.size() - suffix.size()));
        std::vector<float>   f;
        std::vector<int64_t> shape;
        if (sdio::read_floats(*r, t.name, f, &shape, err)) CHECK(shape == t.shape);
    }
    std::vector<std::string> float_modules; // read fine as float: must read fine once quantized
    for (const auto & m : modules) {
        sdio::linear_module lm;
        if (!sdio::read_linear(*r, m, lm, err)) {
            CHECK(!err.empty());
            continue;
        }
        if (!lm.int8) float_modules.push_back(m);
        const size_t n = (size_t) (lm.in * lm.out);
        if (lm.int8) {
            CHECK(lm.weight_i8.size() == n);
            for (float s : lm.weight_scale) CHECK(std::isfinite(s) && s > 0.0f);
        } else {
            CHECK(lm.weight_f32.size() == n);
        }
        CHECK(lm.bias.empty() || lm.bias.size() == (size_t) lm.out);
        CHECK(lm.group == 0 || (lm.in % lm.group == 0 && sdio::is_power_of_4(lm.group)));
    }
    if (size <= 4096) {
        const std::string o = fuzz::scratch_dir() + "/q.safetensors";
        if (sdio::quantize_file(path, o, (size & 1) ? 4 : 0, err, nullptr)) {
            auto q = sdio::reader::open(o, err);
            CHECK(q);
            for (const auto & m : float_modules) {
                sdio::linear_module lm;
                CHECK(sdio::read_linear(*q, m, lm, err));
            }
            unlink(o.c_str());
        }
    }
    return 0;
}
