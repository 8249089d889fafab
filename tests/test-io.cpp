// Checkpoint I/O (src/io): the strict JSON parser, the safetensors reader on valid and malformed
// files, the atomic writer, ComfyUI int8_tensorwise(+convrot) modules, the ConvRot rotation and
// the offline weight quantizer, and interoperability with the Python `safetensors` package
// (tests/io_roundtrip.py), which is the format's reference implementation.

#include "io/comfy_int8.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "support/io-test-files.h"

#ifdef SD_IO_TEST_HAVE_CPU_INT8
#include "cpu/int8-impl.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

// A fresh directory under $TMPDIR (or /tmp), removed at the end of the test.
struct tmp_dir : sd_test::tmp_dir {
    tmp_dir() : sd_test::tmp_dir(sd_test::env_tmpdir() + "/sd-test-io.XXXXXX") {}
};

using sd_test::bytes_of;
using sd_test::bytes_of_string;
using sd_test::raw_file;
using sd_test::slurp;
using sd_test::spit;

// Opens `bytes` written to a file and expects failure whose message names the file and contains
// every one of `needles`.
void expect_open_error(const tmp_dir & d, const std::string & bytes, std::initializer_list<const char *> needles) {
    const std::string path = d.file("bad.safetensors");
    spit(path, bytes);
    std::string err;
    auto        r = sdio::reader::open(path, err);
    EXPECT_EQ(r, nullptr);
    EXPECT_NE(err.find(path), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
    for (const char * n : needles) EXPECT_NE(err.find(n), std::string::npos) << "missing '" << n << "' in: " << err;
}

// The scalar rotation straight from int8-convrot-facts.md, written independently of src/io.
void ref_rotate(std::vector<float> & row, int G) {
    if (G <= 1) return;
    const float c = 1.0f / sqrtf((float) G);
    for (size_t g0 = 0; g0 < row.size(); g0 += (size_t) G) {
        float * v = row.data() + g0;
        for (int i = 0; i < G; ++i) v[i] *= c;
        for (int s = 1; s < G; s *= 4) {
            for (int b = 0; b < G; b += 4 * s) {
                for (int j = 0; j < s; ++j) {
                    const float a = v[b + j], bb = v[b + j + s], cc = v[b + j + 2 * s], dd = v[b + j + 3 * s];
                    v[b + j]         = ((a + bb) + cc) - dd;
                    v[b + j + s]     = ((a + bb) - cc) + dd;
                    v[b + j + 2 * s] = ((a - bb) + cc) + dd;
                    v[b + j + 3 * s] = ((-a + bb) + cc) + dd;
                }
            }
        }
    }
}

// The normalised Kronecker power of H4 as a dense matrix, in double (independent derivation).
std::vector<double> hadamard_matrix(int G) {
    std::vector<double> h = {1.0};
    int                 n = 1;
    const double        h4[4][4] = {{1, 1, 1, -1}, {1, 1, -1, 1}, {1, -1, 1, 1}, {-1, 1, 1, 1}};
    while (n < G) {
        std::vector<double> nh((size_t) (4 * n) * (4 * n));
        // Stage strides grow from 1, so the newest (outer) factor acts on the coarsest index.
        for (int I = 0; I < 4; ++I)
            for (int J = 0; J < 4; ++J)
                for (int i = 0; i < n; ++i)
                    for (int j = 0; j < n; ++j) nh[(size_t) (I * n + i) * (4 * n) + (J * n + j)] = 0.5 * h4[I][J] * h[(size_t) i * n + j];
        h = std::move(nh);
        n *= 4;
    }
    return h;
}

std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937                          rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float>                    v(n);
    for (auto & x : v) x = dist(rng);
    return v;
}

// A one-module int8 checkpoint; pieces can be overridden to make it invalid.
struct int8_module_spec {
    int64_t              out = 4, in = 16;
    std::string          weight_dtype = "I8";
    std::string          comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 16}";
    std::string          comfy_dtype = "U8";
    std::vector<int64_t> scale_shape;     // default [out, 1]
    std::string          scale_dtype = "F32";
    std::vector<float>   scales;          // default 0.5, 0.25, ...
    bool                 with_scale = true;
    bool                 with_bias = true;
};

std::vector<sdio::tensor_out> make_int8_module(const int8_module_spec & s) {
    std::vector<sdio::tensor_out> t;
    std::vector<int8_t>           w((size_t) (s.out * s.in));
    for (size_t i = 0; i < w.size(); ++i) w[i] = (int8_t) ((int) (i * 37 % 255) - 127);
    if (s.weight_dtype == "I8") {
        t.push_back({"m.weight", "I8", {s.out, s.in}, bytes_of(w)});
    } else {
        std::vector<float> wf(w.begin(), w.end());
        t.push_back({"m.weight", "F32", {s.out, s.in}, bytes_of(wf)});
    }
    if (s.with_scale) {
        std::vector<float> sc = s.scales;
        if (sc.empty())
            for (int64_t o = 0; o < s.out; ++o) sc.push_back(0.5f / (float) (o + 1));
        std::vector<int64_t> shape = s.scale_shape.empty() ? std::vector<int64_t>{s.out, 1} : s.scale_shape;
        if (s.scale_dtype == "F32") {
            t.push_back({"m.weight_scale", "F32", shape, bytes_of(sc)});
        } else {
            std::vector<uint16_t> h;
            for (float f : sc) h.push_back(s.scale_dtype == "F16" ? sdio::f32_to_f16(f) : sdio::f32_to_bf16(f));
            t.push_back({"m.weight_scale", s.scale_dtype, shape, bytes_of(h)});
        }
    }
    t.push_back({"m.comfy_quant", s.comfy_dtype, {(int64_t) s.comfy.size()}, bytes_of_string(s.comfy)});
    if (s.with_bias) {
        std::vector<float> b;
        for (int64_t o = 0; o < s.out; ++o) b.push_back((float) o - 1.5f);
        t.push_back({"m.bias", "F32", {s.out}, bytes_of(b)});
    }
    return t;
}

// Writes the module and reads it back; returns the read_linear result and error.
bool load_module(const tmp_dir & d, const std::vector<sdio::tensor_out> & ts, sdio::linear_module & m, std::string & err) {
    const std::string path = d.file("mod.safetensors");
    std::string       werr;
    if (!sdio::write(path, ts, {}, werr)) {
        ADD_FAILURE() << werr;
        return false;
    }
    auto r = sdio::reader::open(path, err);
    if (!r) return false;
    return sdio::read_linear(*r, "m", m, err);
}

void expect_module_error(const int8_module_spec & s, std::initializer_list<const char *> needles) {
    tmp_dir             d;
    sdio::linear_module m;
    std::string         err;
    EXPECT_FALSE(load_module(d, make_int8_module(s), m, err));
    EXPECT_NE(err.find("mod.safetensors"), std::string::npos) << err;
    for (const char * n : needles) EXPECT_NE(err.find(n), std::string::npos) << "missing '" << n << "' in: " << err;
}

// ---------------------------------------------------------------------------------------------
// JSON

TEST(IoJson, ParsesValues) {
    sdio::json::value v;
    std::string       err;
    const std::string text = " {\"a\": [1, -2.5e1, true, false, null, \"x\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\ud83d\\ude00\"],"
                             " \"big\": 9007199254740993, \"o\": {}} ";
    ASSERT_TRUE(sdio::json::parse(text.data(), text.size(), v, err)) << err;
    ASSERT_TRUE(v.is_object());
    const auto * a = v.get("a");
    ASSERT_TRUE(a && a->is_array());
    ASSERT_EQ(a->arr.size(), 6u);
    EXPECT_TRUE(a->arr[0].is_int);
    EXPECT_EQ(a->arr[0].i, 1);
    EXPECT_FALSE(a->arr[1].is_int);
    EXPECT_EQ(a->arr[1].num, -25.0);
    EXPECT_TRUE(a->arr[2].is_bool() && a->arr[2].b);
    EXPECT_TRUE(a->arr[3].is_bool() && !a->arr[3].b);
    EXPECT_TRUE(a->arr[4].is_null());
    EXPECT_EQ(a->arr[5].str, "x\"\\/\b\f\n\r\t\xc3\xa9\xf0\x9f\x98\x80");
    // beyond 2^53: kept exactly
    EXPECT_EQ(v.get("big")->i, 9007199254740993LL);
    EXPECT_TRUE(v.get("o")->is_object());
    EXPECT_EQ(v.get("missing"), nullptr);

    std::string q;
    sdio::json::append_quoted(q, std::string("a\"b\\c\n\x01\xc3\xa9", 9));
    sdio::json::value back;
    ASSERT_TRUE(sdio::json::parse(q.data(), q.size(), back, err)) << err;
    EXPECT_EQ(back.str, std::string("a\"b\\c\n\x01\xc3\xa9", 9));
}

TEST(IoJson, RejectsMalformed) {
    const std::pair<const char *, const char *> cases[] = {
        {"", "unexpected end"},
        {"{\"a\":1,}", "expected a string key"},
        {"[1,]", "unexpected character"},
        {"{\"a\":1 \"b\":2}", "expected ',' or '}'"},
        {"{\"a\":1,\"a\":2}", "duplicate object key"},
        {"01", "leading zero"},
        {"1.", "digits after '.'"},
        {"1e", "exponent"},
        {"-", "truncated number"},
        {"tru", "invalid literal"},
        {"\"abc", "unterminated string"},
        {"\"a\tb\"", "control character"},
        {"\"\\x\"", "invalid escape"},
        {"\"\\ud800\"", "surrogate"},
        {"\"\\udc00\"", "lone low surrogate"},
        {"\"\xff\"", "invalid UTF-8"},
        {"\"\xc0\xaf\"", "invalid UTF-8"},
        {"\"\xe0\x80\xaf\"", "overlong"},
        {"{} x", "trailing"},
        {"NaN", "unexpected character"},
        {"1e999", "out of range"},
    };
    for (const auto & c : cases) {
        sdio::json::value v;
        std::string       err;
        EXPECT_FALSE(sdio::json::parse(c.first, std::strlen(c.first), v, err)) << c.first;
        EXPECT_NE(err.find("offset "), std::string::npos) << err;
        EXPECT_NE(err.find(c.second), std::string::npos) << "input " << c.first << " gave: " << err;
    }
    // Deep nesting is an error, not a stack overflow.
    const std::string deep(100000, '[');
    sdio::json::value v;
    std::string       err;
    EXPECT_FALSE(sdio::json::parse(deep.data(), deep.size(), v, err));
    EXPECT_NE(err.find("nesting"), std::string::npos) << err;
}

// ---------------------------------------------------------------------------------------------
// Half-precision conversions

TEST(IoConvert, F16AndBF16) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        const float f = sdio::f16_to_f32((uint16_t) h);
        if (std::isnan(f)) {
            EXPECT_TRUE(std::isnan(sdio::f16_to_f32(sdio::f32_to_f16(f))));
            continue;
        }
        ASSERT_EQ(sdio::f32_to_f16(f), (uint16_t) h) << h;
        ASSERT_EQ(sdio::f32_to_bf16(sdio::bf16_to_f32((uint16_t) h)), (uint16_t) h) << h;
    }
    EXPECT_EQ(sdio::f16_to_f32(0x3c00), 1.0f);
    EXPECT_EQ(sdio::f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(sdio::f32_to_f16(65519.0f), 0x7bff); // below the tie: max finite
    EXPECT_EQ(sdio::f32_to_f16(65520.0f), 0x7c00); // the tie rounds to even: infinity
    EXPECT_EQ(sdio::f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);         // tie to even (0)
    EXPECT_EQ(sdio::f32_to_f16(std::ldexp(3.0f, -26)), 0x0001);         // 1.5 units of 2^-25 -> 1
    EXPECT_EQ(sdio::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even stays
    EXPECT_EQ(sdio::f32_to_f16(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, odd rounds up
    EXPECT_EQ(sdio::f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even
    EXPECT_EQ(sdio::bf16_to_f32(0x3f80), 1.0f);
}

// ---------------------------------------------------------------------------------------------
// safetensors reader and writer

TEST(IoSafetensors, WriteReadRoundTrip) {
    tmp_dir                       d;
    const std::string             path = d.file("rt.safetensors");
    std::vector<float>            f32  = random_floats(15, 1);
    std::vector<uint16_t>         f16  = {0x3c00, 0xc000, 0x7bff, 0x0001};
    std::vector<int8_t>           i8   = {-128, -1, 0, 1, 127, 5};
    std::vector<int64_t>          i64  = {INT64_MIN, -1, 0, INT64_MAX};
    std::vector<sdio::tensor_out> ts   = {
        {"z.f32", "F32", {3, 5}, bytes_of(f32)},
        {"a.f16", "F16", {4}, bytes_of(f16)},
        {"q\"uote\\d name", "I8", {2, 3}, bytes_of(i8)},
        {"scalar", "I64", {}, bytes_of(std::vector<int64_t>{42})},
        {"empty", "BF16", {0, 7}, {}},
        {"i64", "I64", {2, 2}, bytes_of(i64)},
        {"flags", "BOOL", {3}, {1, 0, 1}},
    };
    const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "caf\xc3\xa9 \"q\"\n\\"}};
    std::string                              err;
    ASSERT_TRUE(sdio::write(path, ts, meta, err)) << err;
    EXPECT_EQ(d.entries(), std::vector<std::string>{"rt.safetensors"});

    const std::string raw = slurp(path);
    uint64_t          n   = 0;
    for (int k = 7; k >= 0; --k) n = (n << 8) | (uint8_t) raw[k];
    EXPECT_EQ((8 + n) % 8, 0u) << "data section is 8-byte aligned";

    auto r = sdio::reader::open(path, err);
    ASSERT_NE(r, nullptr) << err;
    EXPECT_EQ(r->metadata(), meta);
    ASSERT_EQ(r->tensors().size(), ts.size());
    // File order is write order (offsets are assigned in sequence).
    for (size_t k = 0; k < ts.size(); ++k) EXPECT_EQ(r->tensors()[k].name, ts[k].name);
    for (const auto & t : ts) {
        const sdio::tensor_view * v = r->find(t.name);
        ASSERT_NE(v, nullptr) << t.name;
        EXPECT_EQ(v->dtype, t.dtype);
        EXPECT_EQ(v->shape, t.shape);
        ASSERT_EQ(v->nbytes, t.bytes.size());
        EXPECT_TRUE(v->nbytes == 0 || std::memcmp(v->data, t.bytes.data(), v->nbytes) == 0) << t.name;
    }
    EXPECT_EQ(r->find("nope"), nullptr);

    std::vector<float>   back;
    std::vector<int64_t> shape;
    ASSERT_TRUE(sdio::read_floats(*r, "z.f32", back, &shape, err)) << err;
    EXPECT_EQ(back, f32);
    EXPECT_EQ(shape, (std::vector<int64_t>{3, 5}));
    ASSERT_TRUE(sdio::read_floats(*r, "a.f16", back, nullptr, err)) << err;
    EXPECT_EQ(back, (std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)}));
    EXPECT_FALSE(sdio::read_floats(*r, "i64", back, nullptr, err));
    EXPECT_NE(err.find("'i64'"), std::string::npos) << err;
    EXPECT_FALSE(sdio::read_floats(*r, "nope", back, nullptr, err));
    EXPECT_NE(err.find("not found"), std::string::npos) << err;

    // Overwriting an existing file replaces it whole.
    ASSERT_TRUE(sdio::write(path, {{"only", "U8", {2}, {7, 8}}}, {}, err)) << err;
    r = sdio::reader::open(path, err);
    ASSERT_NE(r, nullptr) << err;
    ASSERT_EQ(r->tensors().size(), 1u);
    EXPECT_TRUE(r->metadata().empty());
}

TEST(IoSafetensors, AcceptsUnpaddedHeaderAndGaps) {
    // Hand-written: unaligned data start, a gap between tensors, file order differing from
    // header order. All legal.
    tmp_dir           d;
    const std::string h   = "{\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]},"
                            "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[5,9]},\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[5,5]}}";
    float             one = 1.0f;
    std::string       data("xyzAB", 5);
    data.append((const char *) &one, 4);
    const std::string path = d.file("ok.safetensors");
    spit(path, raw_file(h, data));
    std::string err;
    auto        r = sdio::reader::open(path, err);
    ASSERT_NE(r, nullptr) << err;
    ASSERT_EQ(r->tensors().size(), 3u);
    EXPECT_EQ(r->tensors()[0].name, "b");
    EXPECT_EQ(std::string((const char *) r->find("b")->data, 2), "AB");
    std::vector<float> v;
    ASSERT_TRUE(sdio::read_floats(*r, "a", v, nullptr, err)) << err;
    EXPECT_EQ(v, std::vector<float>{1.0f});
}

TEST(IoSafetensors, RejectsMalformedFiles) {
    tmp_dir           d;
    const std::string ok_t = "{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    const std::string data8(8, '\0');

    expect_open_error(d, "", {"too small"});
    expect_open_error(d, std::string("\x05\0\0", 3), {"too small"});
    expect_open_error(d, raw_file(ok_t, data8, ok_t.size() + 100), {"header length", "exceeds the file"});
    expect_open_error(d, raw_file(ok_t, data8, UINT64_MAX - 1), {"header length", "exceeds the file"});
    // Truncated data section: the header is intact but the bytes are missing.
    expect_open_error(d, raw_file(ok_t, data8.substr(0, 5)), {"'t'", "past the data section"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",", data8), {"not valid JSON", "offset"});
    expect_open_error(d, raw_file("[1,2]", ""), {"not an object"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", data8),
                      {"'t'", "unknown dtype \"F33\""});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", data8),
                      {"'t'", "needs 12 bytes", "span 8"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", data8),
                      {"'t'", "more than 2^64"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", data8),
                      {"'t'", "non-negative"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", data8),
                      {"'t'", "past the data section"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", data8),
                      {"'t'", "end before begin"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", data8),
                      {"'t'", "exactly 2"});
    expect_open_error(d, raw_file("{\"t\":{\"dtype\":\"F32\",\"shape\":[2]}}", data8), {"'t'", "data_offsets"});
    expect_open_error(d, raw_file("{\"t\":5}", data8), {"'t'", "not an object"});
    expect_open_error(d,
                      raw_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                               "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
                               std::string(10, '\0')),
                      {"'b'", "overlap tensor 'a'"});
    expect_open_error(d, raw_file("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                                  "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]}}",
                                  data8),
                      {"duplicate object key \"a\""});
    expect_open_error(d, raw_file("{\"__metadata__\":{\"k\":1}}", ""), {"__metadata__", "'k'", "not a string"});

    std::string err;
    EXPECT_EQ(sdio::reader::open(d.file("does-not-exist"), err), nullptr);
    EXPECT_NE(err.find("cannot open"), std::string::npos) << err;
    EXPECT_EQ(sdio::reader::open(d.path(), err), nullptr);
    EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
}

TEST(IoSafetensors, AtomicWrite) {
    tmp_dir           d;
    const std::string path = d.file("keep.safetensors");
    std::string       err;
    ASSERT_TRUE(sdio::write(path, {{"x", "U8", {3}, {1, 2, 3}}}, {{"v", "1"}}, err)) << err;
    const std::string before = slurp(path);

    // Directory that does not exist (root ignores permission bits, so "unwritable" is made this way).
    const std::string nodir = d.file("no/such/dir/out.safetensors");
    EXPECT_FALSE(sdio::write(nodir, {{"x", "U8", {1}, {1}}}, {}, err));
    EXPECT_NE(err.find(nodir), std::string::npos) << err;
    EXPECT_NE(err.find("temporary"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(nodir));
    // A read-only directory, where permissions apply (not as root, as in CI containers).
    if (geteuid() != 0) {
        const std::string ro = d.file("ro");
        fs::create_directory(ro);
        fs::permissions(ro, fs::perms::owner_read | fs::perms::owner_exec);
        EXPECT_FALSE(sdio::write(ro + "/out.safetensors", {{"x", "U8", {1}, {1}}}, {}, err));
        EXPECT_NE(err.find("Permission denied"), std::string::npos) << err;
        fs::permissions(ro, fs::perms::owner_all);
        EXPECT_TRUE(fs::is_empty(ro));
        fs::remove(ro);
    }

    // Bad input: rejected before anything is created; the existing file is untouched.
    EXPECT_FALSE(sdio::write(path, {{"x", "F32", {3}, {1, 2, 3}}}, {}, err));
    EXPECT_NE(err.find("'x'"), std::string::npos) << err;
    EXPECT_FALSE(sdio::write(path, {{"x", "Q4", {3}, {1, 2, 3}}}, {}, err));
    EXPECT_NE(err.find("unknown dtype"), std::string::npos) << err;
    EXPECT_FALSE(sdio::write(path, {{"x", "U8", {1}, {1}}, {"x", "U8", {1}, {2}}}, {}, err));
    EXPECT_NE(err.find("duplicate"), std::string::npos) << err;
    EXPECT_FALSE(sdio::write(path, {{"__metadata__", "U8", {1}, {1}}}, {}, err));
    EXPECT_NE(err.find("reserved"), std::string::npos) << err;

    // Failure after the temporary file exists (a producer failing midway): no debris, no clobber.
    EXPECT_FALSE(sdio::write_streamed(
        path, {{"a", "U8", {2}, {}}, {"b", "U8", {2}, {}}}, {},
        [](size_t i, std::vector<uint8_t> & buf, std::string & why) {
            if (i == 1) { why = "producer failed"; return false; }
            buf = {1, 2};
            return true;
        },
        err));
    EXPECT_NE(err.find("producer failed"), std::string::npos) << err;
    EXPECT_NE(err.find("'b'"), std::string::npos) << err;
    EXPECT_FALSE(sdio::write_streamed(
        path, {{"a", "U8", {2}, {}}}, {},
        [](size_t, std::vector<uint8_t> & buf, std::string &) { buf = {1, 2, 3}; return true; }, err));
    EXPECT_NE(err.find("3 data bytes"), std::string::npos) << err;
    EXPECT_EQ(slurp(path), before);

    // The target is a directory: refused before a temporary file is created.
    fs::create_directory(d.file("adir"));
    EXPECT_FALSE(sdio::write(d.file("adir"), {{"x", "U8", {1}, {1}}}, {}, err));
    EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
    EXPECT_TRUE(fs::is_directory(d.file("adir")));

    EXPECT_EQ(d.entries(), (std::vector<std::string>{"adir", "keep.safetensors"}));
}

// ---------------------------------------------------------------------------------------------
// ComfyUI int8 modules

TEST(IoComfyInt8, ReadsInt8ConvrotModule) {
    for (const char * sdt : {"F32", "F16", "BF16"}) {
        for (bool flat : {false, true}) {
            tmp_dir             d;
            int8_module_spec    s;
            s.scale_dtype = sdt;
            if (flat) s.scale_shape = {s.out};
            const auto          ts = make_int8_module(s);
            sdio::linear_module m;
            std::string         err;
            ASSERT_TRUE(load_module(d, ts, m, err)) << err;
            EXPECT_EQ(m.name, "m");
            EXPECT_EQ(m.out, 4);
            EXPECT_EQ(m.in, 16);
            EXPECT_TRUE(m.int8);
            EXPECT_TRUE(m.convrot);
            EXPECT_EQ(m.group, 16);
            ASSERT_EQ(m.weight_i8.size(), 64u);
            EXPECT_EQ(std::memcmp(m.weight_i8.data(), ts[0].bytes.data(), 64), 0);
            EXPECT_TRUE(m.weight_f32.empty());
            // 0.5/(o+1) is exact in F16 and BF16 for these rows except 1/6 and 1/8's neighbours:
            // compare through the same narrowing.
            ASSERT_EQ(m.weight_scale.size(), 4u);
            for (int o = 0; o < 4; ++o) {
                float want = 0.5f / (float) (o + 1);
                if (std::string(sdt) == "F16") want = sdio::f16_to_f32(sdio::f32_to_f16(want));
                if (std::string(sdt) == "BF16") want = sdio::bf16_to_f32(sdio::f32_to_bf16(want));
                EXPECT_EQ(m.weight_scale[o], want);
            }
            EXPECT_EQ(m.bias, (std::vector<float>{-1.5f, -0.5f, 0.5f, 1.5f}));
        }
    }
    // Without convrot: group 0; extra keys ignored.
    tmp_dir             d;
    int8_module_spec    s;
    s.comfy   = "{\"format\": \"int8_tensorwise\", \"per_row\": true}";
    s.with_bias = false;
    sdio::linear_module m;
    std::string         err;
    ASSERT_TRUE(load_module(d, make_int8_module(s), m, err)) << err;
    EXPECT_TRUE(m.int8);
    EXPECT_FALSE(m.convrot);
    EXPECT_EQ(m.group, 0);
    EXPECT_TRUE(m.bias.empty());
}

TEST(IoComfyInt8, ReadsFloatModule) {
    tmp_dir                       d;
    std::vector<float>            w = random_floats(6, 3);
    std::vector<uint16_t>         wb;
    for (float f : w) wb.push_back(sdio::f32_to_bf16(f));
    std::vector<sdio::tensor_out> ts = {{"m.weight", "BF16", {2, 3}, bytes_of(wb)}};
    sdio::linear_module           m;
    std::string                   err;
    ASSERT_TRUE(load_module(d, ts, m, err)) << err;
    EXPECT_FALSE(m.int8);
    EXPECT_EQ(m.group, 0);
    ASSERT_EQ(m.weight_f32.size(), 6u);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(m.weight_f32[i], sdio::bf16_to_f32(wb[i]));
    EXPECT_TRUE(m.weight_i8.empty());
    EXPECT_TRUE(m.weight_scale.empty());
}

TEST(IoComfyInt8, RejectsInvalidModules) {
    int8_module_spec s;
    s.weight_dtype = "F32";
    expect_module_error(s, {"'m.weight'", "requires an I8 weight", "F32"});

    for (float bad : {NAN, 0.0f, -0.25f, INFINITY}) {
        int8_module_spec t;
        t.scales = {0.5f, 0.5f, bad, 0.5f};
        expect_module_error(t, {"'m.weight_scale'", "row 2", "finite and > 0"});
    }
    int8_module_spec ns;
    ns.with_scale = false;
    expect_module_error(ns, {"'m.weight_scale'", "not found"});
    int8_module_spec sh;
    sh.scale_shape = {4, 2};
    sh.scales      = std::vector<float>(8, 1.0f);
    expect_module_error(sh, {"'m.weight_scale'", "[4,2]"});

    int8_module_spec bj;
    bj.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": tru}";
    expect_module_error(bj, {"'m.comfy_quant'", "not valid JSON", "invalid literal"});
    int8_module_spec nf;
    nf.comfy = "{\"convrot\": false}";
    expect_module_error(nf, {"'m.comfy_quant'", "\"format\""});
    int8_module_spec uf;
    uf.comfy = "{\"format\": \"float8_e4m3fn\"}";
    expect_module_error(uf, {"'m.comfy_quant'", "unsupported", "float8_e4m3fn"});
    int8_module_spec cb;
    cb.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": 1}";
    expect_module_error(cb, {"'m.comfy_quant'", "true or false"});
    int8_module_spec ng; // no group size: ComfyUI's default 256, which does not divide in = 16
    ng.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true}";
    expect_module_error(ng, {"'m.comfy_quant'", "convrot_groupsize 256 does not divide", "in = 16"});
    int8_module_spec p4;
    p4.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 8}";
    expect_module_error(p4, {"'m.comfy_quant'", "8 is not a power of 4"});
    int8_module_spec dv;
    dv.in    = 20;
    dv.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 16}";
    expect_module_error(dv, {"'m.comfy_quant'", "does not divide", "in = 20"});
    int8_module_spec ct;
    ct.comfy_dtype = "I8";
    expect_module_error(ct, {"'m.comfy_quant'", "must be U8"});
    int8_module_spec big;
    big.comfy = "{\"format\": \"int8_tensorwise\", \"pad\": \"" + std::string(70000, 'x') + "\"}";
    expect_module_error(big, {"'m.comfy_quant'", "64 KiB"});

    // I8 weight without comfy_quant; 1-D weight; wrong bias shape; missing module.
    {
        tmp_dir             d;
        sdio::linear_module m;
        std::string         err;
        EXPECT_FALSE(load_module(d, {{"m.weight", "I8", {2, 2}, {1, 2, 3, 4}}}, m, err));
        EXPECT_NE(err.find("'m.weight'"), std::string::npos) << err;
        EXPECT_NE(err.find("without an int8_tensorwise"), std::string::npos) << err;
        EXPECT_FALSE(load_module(d, {{"m.weight", "F32", {4}, std::vector<uint8_t>(16)}}, m, err));
        EXPECT_NE(err.find("2-D"), std::string::npos) << err;
        EXPECT_FALSE(load_module(d, {{"m.weight", "F32", {2, 1}, std::vector<uint8_t>(8)}, {"m.bias", "F32", {3}, std::vector<uint8_t>(12)}}, m, err));
        EXPECT_NE(err.find("'m.bias'"), std::string::npos) << err;
        EXPECT_FALSE(load_module(d, {{"m.weight", "F32", {2, 1}, std::vector<uint8_t>(8)}, {"m.weight_scale", "F32", {2}, std::vector<uint8_t>(8)}}, m, err));
        EXPECT_NE(err.find("'m.weight_scale'"), std::string::npos) << err;
        EXPECT_FALSE(load_module(d, {{"x.weight", "F32", {1, 1}, std::vector<uint8_t>(4)}}, m, err));
        EXPECT_NE(err.find("'m.weight'"), std::string::npos) << err;
        EXPECT_NE(err.find("not found"), std::string::npos) << err;
    }
}

// Every form ComfyUI's loader reads (comfy/ops.py _load_quantized_module, comfy/utils.py
// convert_old_quants): ConvRot settings at the top level or nested in "params", the default
// group 256, a per-tensor scalar scale, the header's _quantization_metadata entries.
sdio::linear_module expect_module(const int8_module_spec & s, const std::map<std::string, std::string> & meta = {}) {
    tmp_dir             d;
    const std::string   path = d.file("mod.safetensors");
    std::string         err;
    sdio::linear_module m;
    EXPECT_TRUE(sdio::write(path, make_int8_module(s), meta, err)) << err;
    auto r = sdio::reader::open(path, err);
    EXPECT_NE(r, nullptr) << err;
    if (r) {
        EXPECT_TRUE(sdio::read_linear(*r, "m", m, err)) << s.comfy << ": " << err;
    }
    return m;
}

TEST(IoComfyInt8, ReadsNestedParamsForm) {
    int8_module_spec s;
    s.comfy                = "{\"format\":\"int8_tensorwise\",\"params\":{\"convrot\":true,\"convrot_groupsize\":16}}";
    sdio::linear_module m  = expect_module(s);
    EXPECT_TRUE(m.int8);
    EXPECT_TRUE(m.convrot) << "nested params read as no rotation";
    EXPECT_EQ(m.group, 16);
    // mixed: convrot at the top level, the group nested (and the reverse); equal duplicates are fine
    s.comfy = "{\"format\":\"int8_tensorwise\",\"convrot\":true,\"params\":{\"convrot_groupsize\":4}}";
    m       = expect_module(s);
    EXPECT_TRUE(m.convrot);
    EXPECT_EQ(m.group, 4);
    s.in    = 256;
    s.comfy = "{\"format\":\"int8_tensorwise\",\"params\":{\"convrot\":true},\"convrot_groupsize\":64,\"per_row\":true}";
    m       = expect_module(s);
    EXPECT_EQ(m.group, 64);
    s.comfy = "{\"format\":\"int8_tensorwise\",\"convrot\":true,\"convrot_groupsize\":16,\"params\":{\"convrot\":true,\"convrot_groupsize\":16.0}}";
    m       = expect_module(s);
    EXPECT_EQ(m.group, 16) << "an integral float reads as ComfyUI's int() does";
    // params.convrot false: no rotation, even with a group size (ComfyUI ignores it then)
    s.comfy = "{\"format\":\"int8_tensorwise\",\"params\":{\"convrot\":false,\"convrot_groupsize\":16}}";
    m       = expect_module(s);
    EXPECT_FALSE(m.convrot);
    EXPECT_EQ(m.group, 0);
}

TEST(IoComfyInt8, DefaultGroupAndLargeGroups) {
    int8_module_spec s;
    s.out   = 2;
    s.in    = 256;
    s.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true}";
    sdio::linear_module m = expect_module(s);
    EXPECT_TRUE(m.convrot);
    EXPECT_EQ(m.group, 256) << "ComfyUI's default group";
    // groups above 256: convert-to-quant --dynamic-convrot picks the largest power of 4 dividing in
    for (int64_t g : {1024, 4096, 16384}) {
        s.in    = g * (g == 1024 ? 3 : 1);
        s.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": " + std::to_string(g) + "}";
        m       = expect_module(s);
        EXPECT_EQ(m.group, g);
    }
    // group 1: the identity (comfy-kitchen itself refuses a size-1 Hadamard; sdx reads it as no rotation)
    s.in    = 16;
    s.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 1}";
    m       = expect_module(s);
    EXPECT_EQ(m.group, 1);
    int8_module_spec big; // above in
    big.in    = 256;
    big.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 1024}";
    expect_module_error(big, {"'m.comfy_quant'", "1024 does not divide", "in = 256"});
    int8_module_spec huge; // would narrow to int
    huge.comfy = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 4294967296}";
    expect_module_error(huge, {"'m.comfy_quant'", "too large"});
}

TEST(IoComfyInt8, PerTensorScalarScale) {
    for (const std::vector<int64_t> & shape : {std::vector<int64_t>{}, std::vector<int64_t>{1}, std::vector<int64_t>{1, 1}}) {
        for (const char * dt : {"F32", "BF16"}) {
            int8_module_spec s;
            s.scale_shape = shape;
            s.scale_dtype = dt;
            s.scales      = {0.375f};
            tmp_dir                       d;
            std::vector<sdio::tensor_out> ts = make_int8_module(s);
            ts[1].shape                      = shape; // [] is the scalar
            sdio::linear_module m;
            std::string         err;
            ASSERT_TRUE(load_module(d, ts, m, err)) << dt << " " << ts[1].shape.size() << ": " << err;
            EXPECT_TRUE(m.per_tensor_scale);
            EXPECT_EQ(m.weight_scale, std::vector<float>(4, 0.375f)) << "broadcast to every row";
        }
    }
    // one per row written as [1, out] is also what ComfyUI accepts
    int8_module_spec row;
    row.scale_shape = {1, 4};
    sdio::linear_module m = expect_module(row);
    EXPECT_FALSE(m.per_tensor_scale);
    EXPECT_EQ(m.weight_scale, (std::vector<float>{0.5f, 0.25f, 0.5f / 3, 0.125f}));
    // two scales for four rows, or [2,2]: neither per tensor nor per row
    int8_module_spec two;
    two.scale_shape = {2};
    two.scales      = {1.0f, 1.0f};
    expect_module_error(two, {"'m.weight_scale'", "[2]", "one per output row"});
    int8_module_spec sq;
    sq.scale_shape = {2, 2};
    // the message lists every accepted shape (out = 4)
    expect_module_error(sq, {"'m.weight_scale'", "[2,2]", "[], [1], [1,1]", "all 1", "[4], [4,1], [1,4]",
                             "one dimension 4 and the others 1"});
    int8_module_spec zero;
    zero.scale_shape = {};
    zero.scales      = {0.0f};
    {
        tmp_dir                       d;
        std::vector<sdio::tensor_out> ts = make_int8_module(zero);
        ts[1].shape                      = {};
        sdio::linear_module mm;
        std::string         err;
        EXPECT_FALSE(load_module(d, ts, mm, err));
        EXPECT_NE(err.find("'m.weight_scale': the scale is 0"), std::string::npos) << err;
    }
}

TEST(IoComfyInt8, HeaderQuantizationMetadata) {
    // No comfy_quant tensor at all: the header entry configures the module, as in ComfyUI.
    int8_module_spec s;
    tmp_dir          d;
    std::vector<sdio::tensor_out> ts = make_int8_module(s);
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](const sdio::tensor_out & t) { return t.name == "m.comfy_quant"; }), ts.end());
    const std::string meta = "{\"format_version\": \"1.0\", \"layers\": {\"m\": {\"format\": \"int8_tensorwise\", \"convrot\": true, "
                             "\"convrot_groupsize\": 4}, \"unused.layer\": {\"format\": \"nvfp4\"}}}";
    const std::string path = d.file("h.safetensors");
    std::string       err;
    ASSERT_TRUE(sdio::write(path, ts, {{"_quantization_metadata", meta}}, err)) << err;
    auto r = sdio::reader::open(path, err);
    ASSERT_NE(r, nullptr) << err;
    sdio::header_quant hq;
    ASSERT_TRUE(sdio::read_header_quant(*r, hq, err)) << err;
    EXPECT_TRUE(hq.present);
    EXPECT_EQ(hq.layers.size(), 2u);
    sdio::linear_module m;
    ASSERT_TRUE(sdio::read_linear(*r, "m", m, err, &hq)) << err;
    EXPECT_TRUE(m.int8 && m.convrot);
    EXPECT_EQ(m.group, 4);
    ASSERT_TRUE(sdio::read_linear(*r, "m", m, err)) << err; // parses the header itself
    EXPECT_EQ(m.group, 4);

    // Tensor and header agree: fine. Disagree: refused (ComfyUI would silently take the header's).
    ts = make_int8_module(s); // tensor: convrot 16
    const std::string agree = "{\"layers\": {\"m\": {\"format\": \"int8_tensorwise\", \"params\": {\"convrot\": true, \"convrot_groupsize\": 16}}}}";
    ASSERT_TRUE(sdio::write(path, ts, {{"_quantization_metadata", agree}}, err)) << err;
    r = sdio::reader::open(path, err);
    ASSERT_TRUE(r && sdio::read_linear(*r, "m", m, err)) << err;
    EXPECT_EQ(m.group, 16);
    const std::string disagree = "{\"layers\": {\"m\": {\"format\": \"int8_tensorwise\"}}}";
    ASSERT_TRUE(sdio::write(path, ts, {{"_quantization_metadata", disagree}}, err)) << err;
    r = sdio::reader::open(path, err);
    ASSERT_NE(r, nullptr) << err;
    EXPECT_FALSE(sdio::read_linear(*r, "m", m, err));
    EXPECT_NE(err.find("'m.comfy_quant'"), std::string::npos) << err;
    EXPECT_NE(err.find("ConvRot group 16"), std::string::npos) << err;
    EXPECT_NE(err.find("without rotation"), std::string::npos) << err;

    // Malformed header entries: errors naming the entry.
    const std::pair<const char *, const char *> bad[] = {
        {"{\"layers\": 5}", "\"layers\""},
        {"{\"layer\": {}}", "\"layers\""},
        {"not json", "not valid JSON"},
    };
    for (const auto & b : bad) {
        ASSERT_TRUE(sdio::write(path, ts, {{"_quantization_metadata", b.first}}, err)) << err;
        r = sdio::reader::open(path, err);
        ASSERT_NE(r, nullptr) << err;
        EXPECT_FALSE(sdio::read_linear(*r, "m", m, err)) << b.first;
        EXPECT_NE(err.find("_quantization_metadata"), std::string::npos) << err;
        EXPECT_NE(err.find(b.second), std::string::npos) << err;
    }
    ASSERT_TRUE(sdio::write(path, ts, {{"_quantization_metadata", "{\"layers\": {\"m\": \"int8_tensorwise\"}}"}}, err)) << err;
    r = sdio::reader::open(path, err);
    ASSERT_NE(r, nullptr) << err;
    EXPECT_FALSE(sdio::read_linear(*r, "m", m, err));
    EXPECT_NE(err.find("layer 'm'"), std::string::npos) << err;
    EXPECT_NE(err.find("not an object"), std::string::npos) << err;
}

TEST(IoComfyInt8, RejectsWhatItDoesNotUnderstand) {
    const std::pair<std::string, const char *> cases[] = {
        {"{\"format\":\"int8_tensorwise\",\"params\":[1]}", "\"params\" must be an object"},
        {"{\"format\":\"int8_tensorwise\",\"convrot\":true,\"params\":{\"convrot\":false}}", "\"convrot\" is given both"},
        {"{\"format\":\"int8_tensorwise\",\"convrot\":true,\"convrot_groupsize\":4,\"params\":{\"convrot_groupsize\":16}}", "\"convrot_groupsize\" is given both"},
        {"{\"format\":\"int8_tensorwise\",\"params\":{\"convrot\":\"yes\"}}", "\"convrot\" must be true or false"},
        {"{\"format\":\"int8_tensorwise\",\"convrot\":true,\"convrot_groupsize\":\"16\"}", "\"convrot_groupsize\" must be an integer"},
        {"{\"format\":\"int8_tensorwise\",\"convrot\":true,\"convrot_groupsize\":16.5}", "\"convrot_groupsize\" must be an integer"},
        {"{\"format\":\"int8_tensorwise\",\"full_precision_matrix_mult\":1}", "\"full_precision_matrix_mult\" must be true or false"},
        {"{\"format\":\"int8_tensorwise\",\"per_row\":\"yes\"}", "\"per_row\" must be true or false"},
        {"{\"format\":\"int8_tensorwise\",\"orig_dtype\":5}", "\"orig_dtype\" must be a string"},
        {"{\"format\":\"int8_tensorwise\",\"orig_shape\":[16,4]}", "\"orig_shape\" must be [4, 16]"},
        {"{\"format\":\"int8_blockwise\",\"group_size\":128}", "unsupported comfy_quant format \"int8_blockwise\""},
        {"{\"format\":\"convrot_w4a4\"}", "unsupported comfy_quant format \"convrot_w4a4\""},
        {"[\"int8_tensorwise\"]", "not an object"},
    };
    for (const auto & c : cases) {
        int8_module_spec s;
        s.comfy = c.first;
        expect_module_error(s, {"'m.comfy_quant'", c.second});
    }
    // What it does understand: the descriptive keys and full_precision_matrix_mult.
    int8_module_spec ok;
    ok.comfy = "{\"format\":\"int8_tensorwise\",\"full_precision_matrix_mult\":true,\"per_row\":true,\"scale_dtype\":\"torch.float32\","
               "\"orig_dtype\":\"torch.bfloat16\",\"orig_shape\":[4,16]}";
    sdio::linear_module m = expect_module(ok);
    EXPECT_TRUE(m.full_precision_mm);
    EXPECT_FALSE(m.convrot);
    EXPECT_TRUE(m.warnings.empty());
}

// Files from other tools carry keys ComfyUI does not read; ComfyUI ignores them, so do we, with
// a warning naming each key (and the tensor), while the keys that decide the layout still apply.
TEST(IoComfyInt8, UnknownComfyQuantKeysAreWarningsNamingThem) {
    const std::pair<std::string, std::vector<const char *>> cases[] = {
        {"{\"format\":\"int8_tensorwise\",\"transposed\":true}", {"unknown comfy_quant key \"transposed\""}},
        {"{\"format\":\"int8_tensorwise\",\"group_size\":128,\"tool\":\"x\"}",
         {"unknown comfy_quant key \"group_size\"", "unknown comfy_quant key \"tool\""}},
        {"{\"format\":\"int8_tensorwise\",\"params\":{\"convrot\":true,\"convrot_groupsize\":4,\"hadamard\":\"sylvester\"}}",
         {"unknown key \"hadamard\" in comfy_quant \"params\""}},
    };
    for (const auto & c : cases) {
        int8_module_spec s;
        s.comfy               = c.first;
        sdio::linear_module m = expect_module(s);
        ASSERT_EQ(m.warnings.size(), c.second.size()) << c.first;
        for (size_t i = 0; i < c.second.size(); ++i) {
            EXPECT_NE(m.warnings[i].find(c.second[i]), std::string::npos) << m.warnings[i];
            EXPECT_NE(m.warnings[i].find("'m.comfy_quant'"), std::string::npos) << m.warnings[i];
            EXPECT_NE(m.warnings[i].find("ignored"), std::string::npos) << m.warnings[i];
        }
    }
    // the layout keys beside an unknown one still apply
    int8_module_spec g;
    g.comfy               = "{\"format\":\"int8_tensorwise\",\"params\":{\"convrot\":true,\"convrot_groupsize\":4,\"extra\":1}}";
    sdio::linear_module m = expect_module(g);
    EXPECT_TRUE(m.convrot);
    EXPECT_EQ(m.group, 4);
    ASSERT_EQ(m.warnings.size(), 1u);
    EXPECT_NE(m.warnings[0].find("\"extra\""), std::string::npos) << m.warnings[0];
}

TEST(IoComfyInt8, RejectsNonFiniteFloatWeights) {
    for (float bad : {NAN, INFINITY, -INFINITY}) {
        tmp_dir            d;
        std::vector<float> w = random_floats(6, 3);
        w[4]                 = bad;
        sdio::linear_module m;
        std::string         err;
        EXPECT_FALSE(load_module(d, {{"m.weight", "F32", {2, 3}, bytes_of(w)}}, m, err));
        EXPECT_NE(err.find("'m.weight'"), std::string::npos) << err;
        EXPECT_NE(err.find("row 1, column 1"), std::string::npos) << err;
        EXPECT_NE(err.find("finite"), std::string::npos) << err;
        std::vector<float> ok = random_floats(6, 3), bias = {1.0f, bad};
        EXPECT_FALSE(load_module(d, {{"m.weight", "F32", {2, 3}, bytes_of(ok)}, {"m.bias", "F32", {2}, bytes_of(bias)}}, m, err));
        EXPECT_NE(err.find("'m.bias'"), std::string::npos) << err;
    }
}

// ---------------------------------------------------------------------------------------------
// Rotation and quantizer

TEST(IoConvrot, RotationMatchesFactsSheet) {
    EXPECT_TRUE(sdio::is_power_of_4(1));
    EXPECT_TRUE(sdio::is_power_of_4(256));
    EXPECT_TRUE(sdio::is_power_of_4(1024));
    EXPECT_FALSE(sdio::is_power_of_4(0));
    EXPECT_FALSE(sdio::is_power_of_4(2));
    EXPECT_FALSE(sdio::is_power_of_4(8));
    EXPECT_FALSE(sdio::is_power_of_4(-4));

    for (int G : {1, 4, 16, 64, 256}) {
        const int64_t      n   = 2 * G;
        std::vector<float> x   = random_floats((size_t) n, 10 + G, -3.0f, 3.0f);
        std::vector<float> got = x, want = x;
        sdio::convrot_rotate_row(got.data(), n, G);
        ref_rotate(want, G);
        // Bit for bit: the order of every float operation is fixed by the facts sheet.
        EXPECT_EQ(std::memcmp(got.data(), want.data(), (size_t) n * 4), 0) << "G=" << G;
#ifdef SD_IO_TEST_HAVE_CPU_INT8
        std::vector<float> k = x;
        for (int64_t g0 = 0; g0 < n && G > 1; g0 += G) sd_int8::rotate_group_portable(k.data() + g0, G);
        EXPECT_EQ(std::memcmp(got.data(), k.data(), (size_t) n * 4), 0) << "vs CPU kernel, G=" << G;
#endif
        // The matrix is the normalised H4 Kronecker power: compare against it in double.
        const std::vector<double> H = hadamard_matrix(G);
        for (int64_t g0 = 0; g0 < n; g0 += G) {
            for (int i = 0; i < G; ++i) {
                double acc = 0;
                for (int j = 0; j < G; ++j) acc += H[(size_t) i * G + j] * x[(size_t) (g0 + j)];
                EXPECT_NEAR(got[(size_t) (g0 + i)], acc, 1e-5 * std::sqrt((double) G) * 3) << "G=" << G << " i=" << i;
            }
        }
        // Symmetric orthogonal: applying it twice gives the input back (to rounding).
        sdio::convrot_rotate_row(got.data(), n, G);
        for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[(size_t) i], x[(size_t) i], 1e-5) << "G=" << G;
    }
    std::vector<float> x = {1, 2, 3, 4};
    sdio::convrot_rotate_row(x.data(), 4, 0);
    EXPECT_EQ(x, (std::vector<float>{1, 2, 3, 4}));
}

TEST(IoConvrot, QuantizerRoundTrip) {
    for (int G : {0, 1, 4, 16, 64, 256}) {
        const int64_t      out = 5, in = 512;
        std::vector<float> w   = random_floats((size_t) (out * in), 100 + G, -2.0f, 2.0f);
        for (int64_t i = 0; i < in; ++i) w[(size_t) (3 * in + i)] = 0.0f; // an all-zero row
        std::vector<int8_t> q((size_t) (out * in));
        std::vector<float>  s((size_t) out);
        ASSERT_TRUE(sdio::quantize_weight_rows(w.data(), out, in, G, q.data(), s.data()));

        EXPECT_EQ(s[3], 1.0f) << "zero row stores scale 1";
        for (int64_t o = 0; o < out; ++o) {
            std::vector<float> rot(w.begin() + o * in, w.begin() + (o + 1) * in);
            sdio::convrot_rotate_row(rot.data(), in, G);
            float amax = 0;
            for (float v : rot) amax = std::max(amax, std::fabs(v));
            if (o != 3) {
                EXPECT_EQ(s[(size_t) o], amax / 127.0f);
            }
            // In the rotated domain each element is within half a step; the extremes hit ±127.
            int maxq = 0;
            for (int64_t i = 0; i < in; ++i) {
                const int8_t qi = q[(size_t) (o * in + i)];
                EXPECT_GE(qi, -127);
                maxq = std::max(maxq, std::abs((int) qi));
                EXPECT_LE(std::fabs(qi * s[(size_t) o] - rot[(size_t) i]), 0.5f * s[(size_t) o] * (1 + 1e-5f));
                EXPECT_EQ(qi, (int8_t) lrintf(rot[(size_t) i] / s[(size_t) o])) << "division, round half to even";
            }
            EXPECT_EQ(maxq, o == 3 ? 0 : 127);
            // Back in the original domain (R^-1 = R): within one step per element for G <= 4,
            // within sqrt(G)/2 steps for larger groups (an element mixes G rounding errors of at
            // most half a step each, weighted by 1/sqrt(G)), and the row's L2 error is at most
            // sqrt(in)/2 steps since R is orthogonal.
            std::vector<float> deq((size_t) in);
            for (int64_t i = 0; i < in; ++i) deq[(size_t) i] = q[(size_t) (o * in + i)] * s[(size_t) o];
            sdio::convrot_rotate_row(deq.data(), in, G);
            const double step = s[(size_t) o];
            const double bound = step * std::max(1.0, 0.5 * std::sqrt((double) std::max(G, 1))) * 1.0001 + 1e-6;
            double       l2 = 0;
            for (int64_t i = 0; i < in; ++i) {
                const double e = (double) deq[(size_t) i] - w[(size_t) (o * in + i)];
                EXPECT_LE(std::fabs(e), bound) << "G=" << G << " row " << o << " i " << i;
                l2 += e * e;
            }
            EXPECT_LE(std::sqrt(l2), 0.5 * step * std::sqrt((double) in) * 1.001 + 1e-6);
        }
    }

    // Ties round half to even, through a true division: s = 127/127 = 1.
    std::vector<float>  row = {127.0f, 2.5f, 3.5f, -2.5f, 0.5f, -0.5f, 1.5f, 126.5f};
    std::vector<int8_t> q(row.size());
    float               s = 0;
    ASSERT_TRUE(sdio::quantize_weight_rows(row.data(), 1, (int64_t) row.size(), 0, q.data(), &s));
    EXPECT_EQ(s, 1.0f);
    EXPECT_EQ(q, (std::vector<int8_t>{127, 2, 4, -2, 0, 0, 2, 126}));
}

TEST(IoConvrot, QuantizeFile) {
    tmp_dir                       d;
    const std::string             in_path = d.file("in.safetensors"), out_path = d.file("out.safetensors");
    const std::vector<float>      wa = random_floats(8 * 32, 7);
    const std::vector<float>      wb_src = random_floats(4 * 16, 8);
    std::vector<uint16_t>         wb, wc;
    for (float f : wb_src) wb.push_back(sdio::f32_to_bf16(f));
    for (float f : random_floats(3 * 16, 9)) wc.push_back(sdio::f32_to_f16(f));
    const std::vector<float>      skip_w = random_floats(2 * 12, 10);
    const std::vector<float>      norm   = random_floats(32, 11);
    const std::vector<float>      bias   = random_floats(8, 12);
    int8_module_spec              pre;
    pre.in = 16;
    std::vector<sdio::tensor_out> ts = make_int8_module(pre); // already int8: copied as is
    ts.push_back({"a.weight", "F32", {8, 32}, bytes_of(wa)});
    ts.push_back({"a.bias", "F32", {8}, bytes_of(bias)});
    ts.push_back({"b.weight", "BF16", {4, 16}, bytes_of(wb)});
    ts.push_back({"c.weight", "F16", {3, 16}, bytes_of(wc)});
    ts.push_back({"first.weight", "F32", {2, 12}, bytes_of(skip_w)}); // 12 % 16 != 0: stays float
    ts.push_back({"norm.scale", "F32", {32}, bytes_of(norm)});
    ts.push_back({"conv.weight", "F32", {2, 2, 2}, bytes_of(random_floats(8, 13))});
    const std::map<std::string, std::string> meta = {{"format", "pt"}, {"x", "y"}};
    std::string                              err;
    ASSERT_TRUE(sdio::write(in_path, ts, meta, err)) << err;

    std::vector<std::pair<size_t, size_t>> calls;
    ASSERT_TRUE(sdio::quantize_file(in_path, out_path, 16, err, [&](size_t a, size_t b) { calls.emplace_back(a, b); })) << err;
    ASSERT_EQ(calls.size(), ts.size());
    for (size_t k = 0; k < calls.size(); ++k) EXPECT_EQ(calls[k], std::make_pair(k + 1, ts.size()));

    auto in  = sdio::reader::open(in_path, err);
    auto out = sdio::reader::open(out_path, err);
    ASSERT_TRUE(in && out) << err;
    EXPECT_EQ(out->metadata(), meta);
    EXPECT_EQ(out->tensors().size(), ts.size() + 6);

    for (const char * name : {"a", "b", "c"}) {
        sdio::linear_module m, src;
        ASSERT_TRUE(sdio::read_linear(*out, name, m, err)) << err;
        ASSERT_TRUE(sdio::read_linear(*in, name, src, err)) << err;
        EXPECT_TRUE(m.int8 && m.convrot);
        EXPECT_EQ(m.group, 16);
        EXPECT_EQ(out->find(std::string(name) + ".weight_scale")->dtype, "F32");
        EXPECT_EQ(out->find(std::string(name) + ".weight_scale")->shape, (std::vector<int64_t>{m.out, 1}));
        const auto * cq = out->find(std::string(name) + ".comfy_quant");
        EXPECT_EQ(std::string((const char *) cq->data, cq->nbytes),
                  "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 16}");
        std::vector<int8_t> q(src.weight_f32.size());
        std::vector<float>  s((size_t) src.out);
        ASSERT_TRUE(sdio::quantize_weight_rows(src.weight_f32.data(), src.out, src.in, 16, q.data(), s.data()));
        EXPECT_EQ(m.weight_i8, q);
        EXPECT_EQ(m.weight_scale, s);
        EXPECT_EQ(m.bias, src.bias);
    }
    for (const char * name : {"m.weight", "m.weight_scale", "m.comfy_quant", "m.bias", "first.weight", "norm.scale", "conv.weight"}) {
        const auto * a = in->find(name);
        const auto * b = out->find(name);
        ASSERT_TRUE(a && b) << name;
        EXPECT_EQ(a->dtype, b->dtype) << name;
        EXPECT_EQ(a->shape, b->shape) << name;
        ASSERT_EQ(a->nbytes, b->nbytes) << name;
        EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0) << name;
    }

    // Group 0: int8 without rotation; group 8: refused.
    ASSERT_TRUE(sdio::quantize_file(in_path, out_path, 0, err, nullptr)) << err;
    out = sdio::reader::open(out_path, err);
    ASSERT_TRUE(out) << err;
    sdio::linear_module m;
    ASSERT_TRUE(sdio::read_linear(*out, "first", m, err)) << err;
    EXPECT_TRUE(m.int8);
    EXPECT_FALSE(m.convrot);
    EXPECT_FALSE(sdio::quantize_file(in_path, d.file("g8.safetensors"), 8, err, nullptr));
    EXPECT_NE(err.find("power of 4"), std::string::npos) << err;

    // A non-finite weight: error naming it, no output, no debris.
    std::vector<float> bad = wa;
    bad[40] = NAN;
    ASSERT_EQ(ts[4].name, "a.weight");
    ts[4].bytes = bytes_of(bad);
    ASSERT_TRUE(sdio::write(in_path, ts, meta, err)) << err;
    const std::string bad_out = d.file("bad-out.safetensors");
    EXPECT_FALSE(sdio::quantize_file(in_path, bad_out, 16, err, nullptr));
    EXPECT_NE(err.find("'a.weight'"), std::string::npos) << err;
    EXPECT_NE(err.find("non-finite"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(bad_out));
    EXPECT_EQ(d.entries(), (std::vector<std::string>{"in.safetensors", "out.safetensors"}));
}

// Group 1 means no rotation: the file carries no ConvRot keys (comfy-kitchen refuses
// "convrot": true with group 1: "Hadamard size must be a power of 4"); group 0 the same.
TEST(IoConvrot, QuantizeFileGroupOneWritesNoConvrotKeys) {
    tmp_dir                  d;
    const std::string        in_path = d.file("in.safetensors"), out_path = d.file("out.safetensors");
    const std::vector<float> w = random_floats(3 * 8, 21);
    std::string              err;
    ASSERT_TRUE(sdio::write(in_path, {{"a.weight", "F32", {3, 8}, bytes_of(w)}}, {}, err)) << err;
    for (int g : {0, 1}) {
        ASSERT_TRUE(sdio::quantize_file(in_path, out_path, g, err, nullptr)) << err;
        auto r = sdio::reader::open(out_path, err);
        ASSERT_NE(r, nullptr) << err;
        const auto * cq = r->find("a.comfy_quant");
        ASSERT_NE(cq, nullptr);
        EXPECT_EQ(std::string((const char *) cq->data, cq->nbytes), "{\"format\": \"int8_tensorwise\"}") << "group " << g;
        sdio::linear_module m;
        ASSERT_TRUE(sdio::read_linear(*r, "a", m, err)) << err;
        EXPECT_FALSE(m.convrot);
        std::vector<int8_t> q(w.size());
        std::vector<float>  sc(3);
        ASSERT_TRUE(sdio::quantize_weight_rows(w.data(), 3, 8, 0, q.data(), sc.data()));
        EXPECT_EQ(m.weight_i8, q);
        EXPECT_EQ(m.weight_scale, sc);
    }
}

// Finite weights whose rotation overflows (|w| near FLT_MAX / sqrt(G) lined up with a Hadamard
// row) would get an infinite scale: refused with the tensor's name, nothing written.
TEST(IoConvrot, QuantizerRefusesRotationOverflow) {
    const int          G = 16;
    std::vector<float> row(G, 0.0f);
    row[0] = 1.0f;
    sdio::convrot_rotate_row(row.data(), G, G); // entries +-1/4: a row of R
    std::vector<float> w(2 * G, 0.5f);
    for (int i = 0; i < G; ++i) w[(size_t) (G + i)] = row[(size_t) i] * 4.0f * (FLT_MAX / 2); // +-FLT_MAX/2, finite
    for (float v : w) ASSERT_TRUE(std::isfinite(v));
    std::vector<int8_t> q(w.size());
    std::vector<float>  sc(2);
    int64_t             bad = -1;
    EXPECT_FALSE(sdio::quantize_weight_rows(w.data(), 2, G, G, q.data(), sc.data(), &bad));
    EXPECT_EQ(bad, 1);
    EXPECT_TRUE(std::isfinite(sc[1]));
    // without rotation the same row is fine: scale FLT_MAX/2/127
    ASSERT_TRUE(sdio::quantize_weight_rows(w.data(), 2, G, 0, q.data(), sc.data(), &bad));
    EXPECT_EQ(sc[1], (FLT_MAX / 2) / 127.0f);

    tmp_dir           d;
    const std::string in_path = d.file("in.safetensors"), out_path = d.file("out.safetensors");
    std::string       err;
    ASSERT_TRUE(sdio::write(in_path, {{"big.weight", "F32", {2, G}, bytes_of(w)}}, {}, err)) << err;
    EXPECT_FALSE(sdio::quantize_file(in_path, out_path, G, err, nullptr));
    EXPECT_NE(err.find("'big.weight'"), std::string::npos) << err;
    EXPECT_NE(err.find("row 1 overflows"), std::string::npos) << err;
    EXPECT_FALSE(fs::exists(out_path));
    EXPECT_EQ(d.entries(), std::vector<std::string>{"in.safetensors"});
}

// ---------------------------------------------------------------------------------------------
// Interoperability with the reference implementation (Python `safetensors` + numpy)

std::string python() {
    const char * p = std::getenv("SD_PYTHON");
    return p && *p ? p : "python3";
}

std::string sh_quote(const std::string & s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

int run_py(const std::string & args) {
    const std::string cmd = python() + " " + sh_quote(SD_IO_ROUNDTRIP_PY) + " " + args;
    return std::system(cmd.c_str());
}

TEST(IoPython, RoundTripWithReferenceImplementation) {
    const std::string probe = python() + " -c 'import numpy, safetensors' >/dev/null 2>&1";
    // Without the reference implementation nothing is checked: that is a failure, not a skip
    // (scripts/install-deps.sh, which scripts/test.sh runs first, installs it; SD_PYTHON picks
    // another interpreter).
    ASSERT_EQ(std::system(probe.c_str()), 0)
        << python() << " lacks numpy and/or safetensors: run scripts/install-deps.sh (or set SD_PYTHON)";
    tmp_dir           d;
    const std::string ref = d.file("py.safetensors");
    ASSERT_EQ(run_py("write " + sh_quote(ref)), 0);

    // Their file, our reader: the script's fixed content, checked value by value.
    std::string err;
    auto        r = sdio::reader::open(ref, err);
    ASSERT_NE(r, nullptr) << err;
    EXPECT_EQ(r->metadata().at("format"), "pt");
    EXPECT_EQ(r->metadata().at("note"), "caf\xc3\xa9 \"quoted\"");
    std::vector<float>   v;
    std::vector<int64_t> shape;
    ASSERT_TRUE(sdio::read_floats(*r, "t.f32", v, &shape, err)) << err;
    EXPECT_EQ(shape, (std::vector<int64_t>{3, 5}));
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], (float) i * 0.25f - 1.0f);
    ASSERT_TRUE(sdio::read_floats(*r, "t.f16", v, &shape, err)) << err;
    EXPECT_EQ(shape, (std::vector<int64_t>{2, 4}));
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], (float) i * 0.5f - 2.0f);
    ASSERT_TRUE(sdio::read_floats(*r, "t.bf16", v, &shape, err)) << err;
    EXPECT_EQ(shape, (std::vector<int64_t>{6}));
    for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(v[i], (float) i * 1.5f - 3.0f);
    sdio::linear_module m;
    ASSERT_TRUE(sdio::read_linear(*r, "blk.lin", m, err)) << err;
    EXPECT_TRUE(m.int8 && m.convrot);
    EXPECT_EQ(m.group, 4);
    EXPECT_EQ(m.out, 3);
    EXPECT_EQ(m.in, 8);
    for (size_t i = 0; i < m.weight_i8.size(); ++i) EXPECT_EQ(m.weight_i8[i], (int8_t) ((int) (i * 11 % 255) - 127));
    EXPECT_EQ(m.weight_scale, (std::vector<float>{0.5f, 0.25f, 0.125f}));
    EXPECT_EQ(m.bias, (std::vector<float>{1.0f, 2.0f, 3.0f}));

    // Our files, their reader: a plain round trip through write(), then quantize_file output,
    // which the script re-derives with numpy (rotation as a dense Kronecker product).
    const std::string ours = d.file("ours.safetensors");
    std::vector<float>    f32(15);
    std::vector<uint16_t> f16(8), bf16(6);
    for (size_t i = 0; i < f32.size(); ++i) f32[i] = (float) i * 0.25f - 1.0f;
    for (size_t i = 0; i < f16.size(); ++i) f16[i] = sdio::f32_to_f16((float) i * 0.5f - 2.0f);
    for (size_t i = 0; i < bf16.size(); ++i) bf16[i] = sdio::f32_to_bf16((float) i * 1.5f - 3.0f);
    std::vector<int8_t> i8(24);
    for (size_t i = 0; i < i8.size(); ++i) i8[i] = (int8_t) ((int) (i * 11 % 255) - 127);
    const std::string cfg = "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 4}";
    std::vector<sdio::tensor_out> ts = {
        {"t.f32", "F32", {3, 5}, bytes_of(f32)},
        {"t.f16", "F16", {2, 4}, bytes_of(f16)},
        {"t.bf16", "BF16", {6}, bytes_of(bf16)},
        {"blk.lin.weight", "I8", {3, 8}, bytes_of(i8)},
        {"blk.lin.weight_scale", "F32", {3, 1}, bytes_of(std::vector<float>{0.5f, 0.25f, 0.125f})},
        {"blk.lin.comfy_quant", "U8", {(int64_t) cfg.size()}, bytes_of_string(cfg)},
        {"blk.lin.bias", "F32", {3}, bytes_of(std::vector<float>{1.0f, 2.0f, 3.0f})},
    };
    ASSERT_TRUE(sdio::write(ours, ts, {{"format", "pt"}, {"note", "caf\xc3\xa9 \"quoted\""}}, err)) << err;
    EXPECT_EQ(run_py("check " + sh_quote(ours)), 0);

    // Every form ComfyUI reads, written by numpy + safetensors as a ComfyUI-side tool would.
    const std::string forms = d.file("forms.safetensors");
    ASSERT_EQ(run_py("write-comfy-forms " + sh_quote(forms)), 0);
    r = sdio::reader::open(forms, err);
    ASSERT_NE(r, nullptr) << err;
    const struct { const char * name; int group; bool per_tensor; std::vector<float> scales; } forms_want[] = {
        {"nested", 4, false, {0.5f, 0.25f, 0.125f}},
        {"default", 256, false, {0.5f, 0.25f}},
        {"scalar", 0, true, {0.375f, 0.375f, 0.375f, 0.375f}},
        {"header", 16, false, {1.0f, 2.0f}},
    };
    for (const auto & f : forms_want) {
        sdio::linear_module fm;
        ASSERT_TRUE(sdio::read_linear(*r, f.name, fm, err)) << err;
        EXPECT_TRUE(fm.int8) << f.name;
        EXPECT_EQ(fm.convrot, f.group > 0) << f.name;
        EXPECT_EQ(fm.group, f.group) << f.name;
        EXPECT_EQ(fm.per_tensor_scale, f.per_tensor) << f.name;
        EXPECT_EQ(fm.weight_scale, f.scales) << f.name;
    }

    const std::string src = d.file("src.safetensors"), q = d.file("q.safetensors");
    ASSERT_EQ(run_py("write-float " + sh_quote(src)), 0);
    ASSERT_TRUE(sdio::quantize_file(src, q, 16, err, nullptr)) << err;
    EXPECT_EQ(run_py("check-quantized " + sh_quote(src) + " " + sh_quote(q) + " 16"), 0);
}

} // namespace
