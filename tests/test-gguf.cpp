// GGUF files (gguf.h, ggml/src/formats/gguf.cpp): writer/reader round trips of every value type, arrays,
// alignment, tensor offsets, meta-only writes; hostile files (truncated at every byte, absurd
// counts and lengths, bad alignment, tensors outside the file or overlapping, duplicates) that
// must give NULL and a message; and the cross-check both ways with the Python gguf package
// (tests/gguf_crosscheck.py; fails when the package is missing).

#include "gguf.h"
#include "ggml.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

namespace {

std::string tmp_dir() {
    static std::string dir;
    if (dir.empty()) {
        char tmpl[] = "/tmp/test-gguf-XXXXXX";
        const char * d = mkdtemp(tmpl);
        if (!d) abort();
        dir = d;
        // removed when the process ends (a plain buffer: the string may be destroyed first)
        static char path[256];
        snprintf(path, sizeof path, "%s", d);
        std::atexit([] { if (std::system((std::string("rm -rf '") + path + "'").c_str()) != 0) {} });
    }
    return dir;
}

std::vector<uint8_t> read_all(const std::string & path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

void write_all(const std::string & path, const std::vector<uint8_t> & b) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write((const char *) b.data(), (std::streamsize) b.size());
}

struct ctx_deleter {
    void operator()(gguf_context * c) const { gguf_free(c); }
};
using gguf_ptr = std::unique_ptr<gguf_context, ctx_deleter>;

gguf_ptr open_file(const std::string & path, ggml_context ** gc = nullptr, bool no_alloc = false) {
    gguf_init_params p = {no_alloc, gc};
    return gguf_ptr(gguf_init_from_file(path.c_str(), p));
}

// The tensor formula shared with gguf_crosscheck.py: multiples of 1/64 in [-7.8, 7.8].
std::vector<float> formula(int k, int64_t n) {
    std::vector<float> v((size_t) n);
    for (int64_t i = 0; i < n; ++i) v[(size_t) i] = (float) ((i * 7919 + 13 * k) % 1001 - 500) / 64.0f;
    return v;
}

// A context with every value type, arrays of every type, and a few tensors.
struct sample {
    gguf_ptr                        ctx{gguf_init_empty()};
    ggml_context *                  gc = nullptr;
    std::vector<ggml_tensor *>      tensors;

    sample() {
        gguf_context * c = ctx.get();
        gguf_set_val_u8(c, "x.u8", 200);
        gguf_set_val_i8(c, "x.i8", -100);
        gguf_set_val_u16(c, "x.u16", 40000);
        gguf_set_val_i16(c, "x.i16", -20000);
        gguf_set_val_u32(c, "x.u32", 3000000000u);
        gguf_set_val_i32(c, "x.i32", -2000000000);
        gguf_set_val_f32(c, "x.f32", 1.5f);
        gguf_set_val_bool(c, "x.bool", true);
        gguf_set_val_str(c, "x.str", "h\xc3\xa9llo w\xc3\xb6rld");
        gguf_set_val_u64(c, "x.u64", (1ull << 63) + 5);
        gguf_set_val_i64(c, "x.i64", -(1ll << 62) - 3);
        gguf_set_val_f64(c, "x.f64", 0.1);
        const uint8_t  au8[]  = {0, 1, 255};
        const int8_t   ai8[]  = {-128, 0, 127};
        const uint16_t au16[] = {0, 65535};
        const int16_t  ai16[] = {-32768, 32767};
        const uint32_t au32[] = {0, 4294967295u};
        const int32_t  ai32[] = {INT32_MIN, INT32_MAX, 7};
        const float    af32[] = {0.25f, -2.0f, 3.5f};
        const uint8_t  abool[] = {1, 0, 1};
        const uint64_t au64[] = {UINT64_MAX, 0};
        const int64_t  ai64[] = {INT64_MIN, INT64_MAX};
        const double   af64[] = {0.1, -1e300};
        gguf_set_arr_data(c, "a.u8", GGUF_TYPE_UINT8, au8, 3);
        gguf_set_arr_data(c, "a.i8", GGUF_TYPE_INT8, ai8, 3);
        gguf_set_arr_data(c, "a.u16", GGUF_TYPE_UINT16, au16, 2);
        gguf_set_arr_data(c, "a.i16", GGUF_TYPE_INT16, ai16, 2);
        gguf_set_arr_data(c, "a.u32", GGUF_TYPE_UINT32, au32, 2);
        gguf_set_arr_data(c, "a.i32", GGUF_TYPE_INT32, ai32, 3);
        gguf_set_arr_data(c, "a.f32", GGUF_TYPE_FLOAT32, af32, 3);
        gguf_set_arr_data(c, "a.bool", GGUF_TYPE_BOOL, abool, 3);
        const char * strs[] = {"a", "", "\xc3\xbcn\xc3\xaf"};
        gguf_set_arr_str(c, "a.str", strs, 3);
        gguf_set_arr_data(c, "a.u64", GGUF_TYPE_UINT64, au64, 2);
        gguf_set_arr_data(c, "a.i64", GGUF_TYPE_INT64, ai64, 2);
        gguf_set_arr_data(c, "a.f64", GGUF_TYPE_FLOAT64, af64, 2);
        gguf_set_arr_data(c, "a.empty", GGUF_TYPE_INT32, nullptr, 0);
    }
    ~sample() {
        if (gc) ggml_free(gc);
    }

    // tensors: (name, type, ne) with data from formula() converted to the type
    ggml_tensor * add(const char * name, ggml_type type, std::vector<int64_t> ne) {
        if (!gc) {
            ggml_init_params ip = {64u << 20, nullptr, false};
            gc                  = ggml_init(ip);
        }
        ggml_tensor * t = ggml_new_tensor(gc, type, (int) ne.size(), ne.data());
        ggml_set_name(t, name);
        const int64_t      n = ggml_nelements(t);
        std::vector<float> f = formula((int) tensors.size(), n);
        if (type == GGML_TYPE_F32) {
            memcpy(t->data, f.data(), (size_t) n * 4);
        } else {
            ggml_quantize_chunk(type, f.data(), t->data, 0, n / ne[0], ne[0], nullptr);
        }
        gguf_add_tensor(ctx.get(), t);
        tensors.push_back(t);
        return t;
    }
};

void expect_sample_values(const gguf_context * c) {
    auto id = [&](const char * k) {
        const int64_t i = gguf_find_key(c, k);
        EXPECT_GE(i, 0) << k;
        return i;
    };
    EXPECT_EQ(gguf_get_val_u8(c, id("x.u8")), 200);
    EXPECT_EQ(gguf_get_val_i8(c, id("x.i8")), -100);
    EXPECT_EQ(gguf_get_val_u16(c, id("x.u16")), 40000);
    EXPECT_EQ(gguf_get_val_i16(c, id("x.i16")), -20000);
    EXPECT_EQ(gguf_get_val_u32(c, id("x.u32")), 3000000000u);
    EXPECT_EQ(gguf_get_val_i32(c, id("x.i32")), -2000000000);
    EXPECT_EQ(gguf_get_val_f32(c, id("x.f32")), 1.5f);
    EXPECT_EQ(gguf_get_val_bool(c, id("x.bool")), true);
    EXPECT_STREQ(gguf_get_val_str(c, id("x.str")), "h\xc3\xa9llo w\xc3\xb6rld");
    EXPECT_EQ(gguf_get_val_u64(c, id("x.u64")), (1ull << 63) + 5);
    EXPECT_EQ(gguf_get_val_i64(c, id("x.i64")), -(1ll << 62) - 3);
    EXPECT_EQ(gguf_get_val_f64(c, id("x.f64")), 0.1);
    EXPECT_EQ(*(const uint32_t *) gguf_get_val_data(c, id("x.u32")), 3000000000u);
    EXPECT_EQ(gguf_get_kv_type(c, id("x.str")), GGUF_TYPE_STRING);

    struct arr { const char * k; gguf_type t; size_t n; std::vector<uint8_t> bytes; };
    auto b = [](const auto & a) {
        const uint8_t * p = (const uint8_t *) a;
        return std::vector<uint8_t>(p, p + sizeof(a));
    };
    const uint8_t  au8[]  = {0, 1, 255};
    const int8_t   ai8[]  = {-128, 0, 127};
    const uint16_t au16[] = {0, 65535};
    const int16_t  ai16[] = {-32768, 32767};
    const uint32_t au32[] = {0, 4294967295u};
    const int32_t  ai32[] = {INT32_MIN, INT32_MAX, 7};
    const float    af32[] = {0.25f, -2.0f, 3.5f};
    const uint8_t  abool[] = {1, 0, 1};
    const uint64_t au64[] = {UINT64_MAX, 0};
    const int64_t  ai64[] = {INT64_MIN, INT64_MAX};
    const double   af64[] = {0.1, -1e300};
    const arr      arrs[] = {
        {"a.u8", GGUF_TYPE_UINT8, 3, b(au8)},       {"a.i8", GGUF_TYPE_INT8, 3, b(ai8)},
        {"a.u16", GGUF_TYPE_UINT16, 2, b(au16)},    {"a.i16", GGUF_TYPE_INT16, 2, b(ai16)},
        {"a.u32", GGUF_TYPE_UINT32, 2, b(au32)},    {"a.i32", GGUF_TYPE_INT32, 3, b(ai32)},
        {"a.f32", GGUF_TYPE_FLOAT32, 3, b(af32)},   {"a.bool", GGUF_TYPE_BOOL, 3, b(abool)},
        {"a.u64", GGUF_TYPE_UINT64, 2, b(au64)},    {"a.i64", GGUF_TYPE_INT64, 2, b(ai64)},
        {"a.f64", GGUF_TYPE_FLOAT64, 2, b(af64)},
    };
    for (const arr & a : arrs) {
        const int64_t i = id(a.k);
        if (i < 0) continue;
        ASSERT_EQ(gguf_get_kv_type(c, i), GGUF_TYPE_ARRAY) << a.k;
        ASSERT_EQ(gguf_get_arr_type(c, i), a.t) << a.k;
        ASSERT_EQ(gguf_get_arr_n(c, i), a.n) << a.k;
        EXPECT_EQ(memcmp(gguf_get_arr_data(c, i), a.bytes.data(), a.bytes.size()), 0) << a.k;
    }
    const int64_t s = id("a.str");
    ASSERT_EQ(gguf_get_arr_type(c, s), GGUF_TYPE_STRING);
    ASSERT_EQ(gguf_get_arr_n(c, s), 3u);
    EXPECT_STREQ(gguf_get_arr_str(c, s, 0), "a");
    EXPECT_STREQ(gguf_get_arr_str(c, s, 1), "");
    EXPECT_STREQ(gguf_get_arr_str(c, s, 2), "\xc3\xbcn\xc3\xaf");
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Round trips

TEST(GGUF, TypeNames) {
    EXPECT_STREQ(gguf_type_name(GGUF_TYPE_UINT8), "u8");
    EXPECT_STREQ(gguf_type_name(GGUF_TYPE_STRING), "str");
    EXPECT_STREQ(gguf_type_name(GGUF_TYPE_FLOAT64), "f64");
    EXPECT_EQ(gguf_type_name((gguf_type) 13), nullptr);
    EXPECT_EQ(GGUF_TYPE_ARRAY, 9);
    EXPECT_EQ(GGUF_TYPE_FLOAT64, 12);
}

TEST(GGUF, RoundTripEveryValueTypeAndTensors) {
    sample s;
    s.add("t.f32", GGML_TYPE_F32, {5, 3});       // 60 bytes: padded to 64
    s.add("t.f16", GGML_TYPE_F16, {32, 3, 2});
    s.add("t.bf16", GGML_TYPE_BF16, {7});
    s.add("t.q8_0", GGML_TYPE_Q8_0, {64, 2, 1, 2});
    expect_sample_values(s.ctx.get());
    const std::string path = tmp_dir() + "/rt.gguf";
    ASSERT_TRUE(gguf_write_to_file(s.ctx.get(), path.c_str(), false));

    ggml_context * gc = nullptr;
    gguf_ptr       r  = open_file(path, &gc);
    ASSERT_TRUE(r) << gguf_last_error();
    EXPECT_EQ(gguf_get_version(r.get()), 3u);
    EXPECT_EQ(gguf_get_alignment(r.get()), 32u);
    EXPECT_EQ(gguf_get_n_kv(r.get()), gguf_get_n_kv(s.ctx.get()));
    for (int64_t i = 0; i < gguf_get_n_kv(r.get()); ++i) EXPECT_STREQ(gguf_get_key(r.get(), i), gguf_get_key(s.ctx.get(), i));
    expect_sample_values(r.get());
    EXPECT_EQ(gguf_get_arr_n(r.get(), gguf_find_key(r.get(), "a.empty")), 0u);
    EXPECT_EQ(gguf_find_key(r.get(), "nope"), -1);

    // offsets: one after another, each padded to the alignment; the data section follows the meta
    EXPECT_EQ(gguf_get_data_offset(r.get()), gguf_get_meta_size(s.ctx.get()));
    EXPECT_EQ(gguf_get_data_offset(r.get()) % 32, 0u);
    ASSERT_EQ(gguf_get_n_tensors(r.get()), 4);
    size_t expect = 0;
    for (int64_t i = 0; i < 4; ++i) {
        ggml_tensor * src = s.tensors[(size_t) i];
        EXPECT_STREQ(gguf_get_tensor_name(r.get(), i), src->name);
        EXPECT_EQ(gguf_find_tensor(r.get(), src->name), i);
        EXPECT_EQ(gguf_get_tensor_type(r.get(), i), src->type);
        EXPECT_EQ(gguf_get_tensor_size(r.get(), i), ggml_nbytes(src));
        EXPECT_EQ(gguf_get_tensor_offset(r.get(), i), expect);
        EXPECT_EQ(gguf_get_tensor_offset(s.ctx.get(), i), expect);
        expect += GGML_PAD(ggml_nbytes(src), 32);
        ggml_tensor * t = ggml_get_tensor(gc, src->name);
        ASSERT_NE(t, nullptr);
        EXPECT_EQ(t->type, src->type);
        for (int d = 0; d < GGML_MAX_DIMS; ++d) EXPECT_EQ(t->ne[d], src->ne[d]);
        EXPECT_EQ(memcmp(t->data, src->data, ggml_nbytes(src)), 0) << src->name;
    }
    EXPECT_EQ(read_all(path).size(), gguf_get_data_offset(r.get()) + expect);
    ggml_free(gc);
}

TEST(GGUF, NoAllocCreatesTensorsWithoutData) {
    sample s;
    s.add("w", GGML_TYPE_F32, {4, 4});
    const std::string path = tmp_dir() + "/noalloc.gguf";
    ASSERT_TRUE(gguf_write_to_file(s.ctx.get(), path.c_str(), false));
    ggml_context * gc = nullptr;
    gguf_ptr       r  = open_file(path, &gc, true);
    ASSERT_TRUE(r);
    ggml_tensor * t = ggml_get_tensor(gc, "w");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->data, nullptr);
    EXPECT_EQ(t->ne[1], 4);
    ggml_free(gc);
    // no ggml context asked for: only the infos
    gguf_ptr r2 = open_file(path);
    ASSERT_TRUE(r2);
    EXPECT_EQ(gguf_get_n_tensors(r2.get()), 1);
}

TEST(GGUF, AlignmentKey) {
    sample s;
    gguf_set_val_u32(s.ctx.get(), GGUF_KEY_GENERAL_ALIGNMENT, 64);
    s.add("a", GGML_TYPE_F32, {3});
    s.add("b", GGML_TYPE_F32, {5});
    EXPECT_EQ(gguf_get_alignment(s.ctx.get()), 64u);
    EXPECT_EQ(gguf_get_tensor_offset(s.ctx.get(), 1), 64u);
    EXPECT_EQ(gguf_get_meta_size(s.ctx.get()) % 64, 0u);
    const std::string path = tmp_dir() + "/align.gguf";
    ASSERT_TRUE(gguf_write_to_file(s.ctx.get(), path.c_str(), false));
    gguf_ptr r = open_file(path);
    ASSERT_TRUE(r) << gguf_last_error();
    EXPECT_EQ(gguf_get_alignment(r.get()), 64u);
    EXPECT_EQ(gguf_get_data_offset(r.get()) % 64, 0u);
    EXPECT_EQ(gguf_get_tensor_offset(r.get(), 1), 64u);
    // removing the key restores the default and re-lays out the tensors
    EXPECT_GE(gguf_remove_key(s.ctx.get(), GGUF_KEY_GENERAL_ALIGNMENT), 0);
    EXPECT_EQ(gguf_get_alignment(s.ctx.get()), 32u);
    EXPECT_EQ(gguf_get_tensor_offset(s.ctx.get(), 1), 32u);
}

TEST(GGUF, OnlyMetaAndMetaData) {
    sample s;
    ggml_tensor *     t    = s.add("w", GGML_TYPE_F32, {8, 2});
    const std::string full = tmp_dir() + "/full.gguf", meta = tmp_dir() + "/meta.gguf";
    ASSERT_TRUE(gguf_write_to_file(s.ctx.get(), full.c_str(), false));
    ASSERT_TRUE(gguf_write_to_file(s.ctx.get(), meta.c_str(), true));
    const std::vector<uint8_t> fb = read_all(full), mb = read_all(meta);
    const size_t               ms = gguf_get_meta_size(s.ctx.get());
    ASSERT_EQ(mb.size(), ms);
    std::vector<uint8_t> md(ms);
    gguf_get_meta_data(s.ctx.get(), md.data());
    EXPECT_EQ(md, mb);
    EXPECT_TRUE(std::equal(mb.begin(), mb.end(), fb.begin()));
    // the meta-only file lacks the data: refused; with the data appended it reads back
    EXPECT_FALSE(open_file(meta));
    std::vector<uint8_t> appended = mb;
    appended.insert(appended.end(), (const uint8_t *) t->data, (const uint8_t *) t->data + ggml_nbytes(t));
    write_all(meta, appended);
    EXPECT_TRUE(open_file(meta)) << gguf_last_error();
}

TEST(GGUF, SettersReplaceRemoveAndCopy) {
    gguf_ptr c(gguf_init_empty());
    gguf_set_val_i32(c.get(), "k1", 1);
    gguf_set_val_str(c.get(), "k2", "two");
    gguf_set_val_f32(c.get(), "k1", 2.5f); // replaced: moves to the end with its new type
    ASSERT_EQ(gguf_get_n_kv(c.get()), 2);
    EXPECT_STREQ(gguf_get_key(c.get(), 0), "k2");
    EXPECT_EQ(gguf_get_kv_type(c.get(), 1), GGUF_TYPE_FLOAT32);
    EXPECT_EQ(gguf_get_val_f32(c.get(), 1), 2.5f);
    EXPECT_EQ(gguf_remove_key(c.get(), "k2"), 0);
    EXPECT_EQ(gguf_remove_key(c.get(), "k2"), -1);
    gguf_ptr d(gguf_init_empty());
    gguf_set_val_u8(d.get(), "k1", 9);
    gguf_set_kv(d.get(), c.get());
    ASSERT_EQ(gguf_get_n_kv(d.get()), 1);
    EXPECT_EQ(gguf_get_val_f32(d.get(), 0), 2.5f);
}

TEST(GGUF, SetTensorTypeRecomputesOffsets) {
    gguf_ptr         c(gguf_init_empty());
    ggml_init_params ip = {1 << 20, nullptr, true};
    ggml_context *   gc = ggml_init(ip);
    ggml_tensor *    a  = ggml_new_tensor_2d(gc, GGML_TYPE_F32, 64, 4);
    ggml_tensor *    b  = ggml_new_tensor_1d(gc, GGML_TYPE_F32, 8);
    ggml_set_name(a, "a");
    ggml_set_name(b, "b");
    gguf_add_tensor(c.get(), a);
    gguf_add_tensor(c.get(), b);
    EXPECT_EQ(gguf_get_tensor_offset(c.get(), 1), 1024u);
    gguf_set_tensor_type(c.get(), "a", GGML_TYPE_Q8_0); // 4 rows of 2 blocks of 34 bytes = 272
    EXPECT_EQ(gguf_get_tensor_size(c.get(), 0), 272u);
    EXPECT_EQ(gguf_get_tensor_offset(c.get(), 1), 288u);
    // without data the whole file cannot be written (only the meta)
    const std::string path = tmp_dir() + "/nodata.gguf";
    EXPECT_FALSE(gguf_write_to_file(c.get(), path.c_str(), false));
    std::vector<uint8_t> bytes(272 + 32);
    gguf_set_tensor_data(c.get(), "a", bytes.data());
    gguf_set_tensor_data(c.get(), "b", bytes.data());
    EXPECT_TRUE(gguf_write_to_file(c.get(), path.c_str(), false));
    ggml_free(gc);
}

// ---------------------------------------------------------------------------------------------
// Hostile files

namespace {

// Builds GGUF bytes field by field, so each test can break exactly one thing.
struct bytes_builder {
    std::vector<uint8_t> b;
    template <typename T> bytes_builder & val(T v) {
        const uint8_t * p = (const uint8_t *) &v;
        b.insert(b.end(), p, p + sizeof(T));
        return *this;
    }
    bytes_builder & str(const std::string & s) {
        val<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    bytes_builder & header(int64_t n_tensors, int64_t n_kv, uint32_t version = 3) {
        b.insert(b.end(), {'G', 'G', 'U', 'F'});
        return val<uint32_t>(version).val<int64_t>(n_tensors).val<int64_t>(n_kv);
    }
    bytes_builder & kv_u32(const std::string & k, uint32_t v) { return str(k).val<int32_t>(GGUF_TYPE_UINT32).val<uint32_t>(v); }
    bytes_builder & tensor(const std::string & name, std::vector<int64_t> ne, int32_t type, uint64_t off) {
        str(name).val<uint32_t>((uint32_t) ne.size());
        for (int64_t n : ne) val<int64_t>(n);
        return val<int32_t>(type).val<uint64_t>(off);
    }
    bytes_builder & pad(size_t a = 32) {
        while (b.size() % a) b.push_back(0);
        return *this;
    }
    bytes_builder & zeros(size_t n) {
        b.insert(b.end(), n, 0);
        return *this;
    }
};

// Opens bytes as a file: expects NULL and a message containing `what`.
void expect_refused(const std::vector<uint8_t> & bytes, const std::string & what, bool with_ctx = true) {
    const std::string path = tmp_dir() + "/hostile.gguf";
    write_all(path, bytes);
    ggml_context * gc = nullptr;
    gguf_ptr       r  = open_file(path, with_ctx ? &gc : nullptr);
    EXPECT_FALSE(r) << "accepted a file that should fail with: " << what;
    EXPECT_EQ(gc, nullptr);
    if (gc) ggml_free(gc);
    const std::string err = gguf_last_error();
    EXPECT_NE(err.find(what), std::string::npos) << "message: " << err << "\nexpected to contain: " << what;
    EXPECT_EQ(err.find('\n'), std::string::npos);
}

std::vector<uint8_t> small_valid() {
    bytes_builder g;
    g.header(2, 3).kv_u32("k.a", 7).str("k.s").val<int32_t>(GGUF_TYPE_STRING).str("hello");
    g.str("k.arr").val<int32_t>(GGUF_TYPE_ARRAY).val<int32_t>(GGUF_TYPE_STRING).val<uint64_t>(2).str("x").str("yz");
    g.tensor("t0", {8}, GGML_TYPE_F32, 0).tensor("t1", {32, 1}, GGML_TYPE_Q8_0, 32).pad();
    g.zeros(32); // t0: 8 floats
    for (int i = 0; i < 34; ++i) g.b.push_back((uint8_t) i); // t1: one Q8_0 block (d = small half)
    return g.b;
}

} // namespace

TEST(GGUFHostile, SmallValidFileOpens) {
    const std::string path = tmp_dir() + "/valid.gguf";
    write_all(path, small_valid());
    ggml_context * gc = nullptr;
    gguf_ptr       r  = open_file(path, &gc);
    ASSERT_TRUE(r) << gguf_last_error();
    EXPECT_STREQ(gguf_get_arr_str(r.get(), 2, 1), "yz");
    EXPECT_EQ(((const uint8_t *) ggml_get_tensor(gc, "t1")->data)[33], 33);
    ggml_free(gc);
}

TEST(GGUFHostile, TruncatedAtEveryByte) {
    const std::vector<uint8_t> v = small_valid();
    const std::string          path = tmp_dir() + "/trunc.gguf";
    for (size_t n = 0; n < v.size(); ++n) {
        write_all(path, std::vector<uint8_t>(v.begin(), v.begin() + (long) n));
        for (bool with_ctx : {false, true}) {
            ggml_context * gc = nullptr;
            gguf_ptr       r  = open_file(path, with_ctx ? &gc : nullptr);
            EXPECT_FALSE(r) << "truncated at " << n << " of " << v.size() << " bytes was accepted";
            EXPECT_FALSE(std::string(gguf_last_error()).empty());
            if (gc) ggml_free(gc);
        }
    }
}

TEST(GGUFHostile, HeaderFields) {
    expect_refused({'G', 'G', 'U', 'X', 3, 0, 0, 0}, "bad magic");
    expect_refused(bytes_builder().header(0, 0, 1).b, "version 1");
    expect_refused(bytes_builder().header(0, 0, 4).b, "newer");
    expect_refused(bytes_builder().header(0, 0, 0x03000000).b, "big-endian");
    expect_refused(bytes_builder().header(-1, 0).b, "tensor count");
    expect_refused(bytes_builder().header(1ll << 62, 0).b, "tensor count");
    expect_refused(bytes_builder().header(0, INT64_MIN).b, "key/value count");
    expect_refused(bytes_builder().header(0, 1000).zeros(100).b, "key/value count");
}

TEST(GGUFHostile, AbsurdLengths) {
    expect_refused(bytes_builder().header(0, 1).val<uint64_t>(UINT64_MAX).zeros(16).b, "length");
    expect_refused(bytes_builder().header(0, 1).val<uint64_t>(1ull << 40).zeros(16).b, "length");
    // an array of 2^61 u64 / of 2^60 strings
    expect_refused(bytes_builder().header(0, 1).str("k").val<int32_t>(GGUF_TYPE_ARRAY).val<int32_t>(GGUF_TYPE_UINT64).val<uint64_t>(1ull << 61).zeros(64).b,
                   "array length");
    expect_refused(bytes_builder().header(0, 1).str("k").val<int32_t>(GGUF_TYPE_ARRAY).val<int32_t>(GGUF_TYPE_STRING).val<uint64_t>(1ull << 60).zeros(64).b,
                   "array length");
    // a string inside an array claiming more than the file
    expect_refused(bytes_builder().header(0, 1).str("k").val<int32_t>(GGUF_TYPE_ARRAY).val<int32_t>(GGUF_TYPE_STRING).val<uint64_t>(1).val<uint64_t>(999).zeros(8).b,
                   "length 999");
    expect_refused(bytes_builder().header(0, 1).str("k").val<int32_t>(77).zeros(8).b, "invalid value type 77");
    expect_refused(bytes_builder().header(0, 1).str("k").val<int32_t>(GGUF_TYPE_ARRAY).val<int32_t>(GGUF_TYPE_ARRAY).val<uint64_t>(0).b,
                   "invalid array element type");
    expect_refused(bytes_builder().header(0, 1).str("k").val<int32_t>(-1).zeros(8).b, "invalid value type -1");
}

TEST(GGUFHostile, BadAlignment) {
    for (uint32_t a : {0u, 3u, 48u}) {
        expect_refused(bytes_builder().header(0, 1).kv_u32(GGUF_KEY_GENERAL_ALIGNMENT, a).b, "not a power of two");
    }
    expect_refused(bytes_builder().header(0, 1).str(GGUF_KEY_GENERAL_ALIGNMENT).val<int32_t>(GGUF_TYPE_INT32).val<int32_t>(64).b, "expected u32");
    // a tensor offset that is not a multiple of the alignment
    expect_refused(bytes_builder().header(1, 0).tensor("t", {4}, GGML_TYPE_F32, 8).pad().zeros(64).b, "not a multiple of the alignment");
}

TEST(GGUFHostile, TensorInfos) {
    auto one = [](std::vector<int64_t> ne, int32_t type, uint64_t off, size_t data = 64) {
        return bytes_builder().header(1, 0).tensor("t", ne, type, off).pad().zeros(data).b;
    };
    expect_refused(one({4, 1, 1, 1, 1}, GGML_TYPE_F32, 0), "5 dimensions");
    expect_refused(one({4, -1}, GGML_TYPE_F32, 0), "negative");
    expect_refused(one({1ll << 40, 1ll << 40}, GGML_TYPE_F32, 0), "overflows");
    expect_refused(one({INT64_MAX, INT64_MAX, INT64_MAX}, GGML_TYPE_F32, 0), "overflows");
    expect_refused(one({4}, 99, 0), "unknown or unsupported ggml type 99");
    expect_refused(one({4}, -5, 0), "unknown or unsupported ggml type -5");
    expect_refused(one({4}, 4, 0), "unknown or unsupported ggml type 4"); // removed Q4_2
    expect_refused(one({33}, GGML_TYPE_Q8_0, 0), "not a multiple of the q8_0 block size");
    expect_refused(one({32}, GGML_TYPE_F32, 0, 64), "outside the file");          // 128 bytes, 64 present
    expect_refused(one({4}, GGML_TYPE_F32, 1ull << 63), "data offset");            // far out
    expect_refused(one({4}, GGML_TYPE_F32, UINT64_MAX - 31), "data offset");       // wraps
    expect_refused(bytes_builder().header(1, 0).tensor(std::string(GGML_MAX_NAME, 'n'), {4}, GGML_TYPE_F32, 0).pad().zeros(32).b, "limit is");
}

TEST(GGUFHostile, OverlappingAndOutOfOrderTensors) {
    // t1 at offset 0 overlaps t0
    expect_refused(bytes_builder().header(2, 0).tensor("t0", {8}, GGML_TYPE_F32, 0).tensor("t1", {8}, GGML_TYPE_F32, 0).pad().zeros(64).b,
                   "expected 32");
    // t1 inside t0
    expect_refused(bytes_builder().header(2, 0).tensor("t0", {32}, GGML_TYPE_F32, 0).tensor("t1", {8}, GGML_TYPE_F32, 64).pad().zeros(256).b,
                   "expected 128");
}

TEST(GGUFHostile, Duplicates) {
    expect_refused(bytes_builder().header(0, 2).kv_u32("k", 1).kv_u32("k", 2).b, "duplicate key 'k'");
    expect_refused(bytes_builder().header(2, 0).tensor("t", {8}, GGML_TYPE_F32, 0).tensor("t", {8}, GGML_TYPE_F32, 32).pad().zeros(64).b,
                   "duplicate tensor name 't'");
}

TEST(GGUFHostile, NotARegularFile) {
    expect_refused({}, "not a GGUF file"); // an empty file
    gguf_init_params p = {false, nullptr};
    EXPECT_EQ(gguf_init_from_file(tmp_dir().c_str(), p), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("not a regular file"), std::string::npos);
    const std::string fifo = tmp_dir() + "/fifo";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_EQ(gguf_init_from_file(fifo.c_str(), p), nullptr); // must not block
    EXPECT_EQ(gguf_init_from_file((tmp_dir() + "/absent").c_str(), p), nullptr);
    EXPECT_NE(std::string(gguf_last_error()).find("cannot open"), std::string::npos);
}

TEST(GGUFHostile, NulBytesInKeysAndNames) {
    // found by fuzz-gguf: "a\0x" and "a\0y" are different keys that lookups by C string confuse
    expect_refused(bytes_builder().header(0, 1).kv_u32(std::string("a\0x", 3), 1).b, "contains a NUL byte");
    expect_refused(bytes_builder().header(1, 0).tensor(std::string("t\0u", 3), {4}, GGML_TYPE_F32, 0).pad().zeros(32).b, "contains a NUL byte");
}

TEST(GGUFHostile, ControlCharactersInNamesAreEscaped) {
    expect_refused(bytes_builder().header(0, 2).kv_u32("a\x1b[2Jb", 1).kv_u32("a\x1b[2Jb", 2).b, "a\\x1b[2Jb");
}

// ---------------------------------------------------------------------------------------------
// Cross-check with the Python gguf package

#ifdef SD_GGUF_CROSSCHECK_PY
namespace {

int run_python(const std::string & args) {
    const std::string cmd = "python3 " SD_GGUF_CROSSCHECK_PY " " + args + " 2>&1";
    FILE *            p   = popen(cmd.c_str(), "r");
    if (!p) return -1;
    char buf[512];
    while (fgets(buf, sizeof(buf), p)) fputs(buf, stdout);
    const int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

struct py_tensor { const char * name; ggml_type type; std::vector<int64_t> ne; };

// gguf_crosscheck.py's TENSORS / TENSORS_Q / TENSORS_ALIGN, ne in ggml order
const std::vector<py_tensor> k_tensors = {
    {"t.f32", GGML_TYPE_F32, {64, 3}}, {"t.f16", GGML_TYPE_F16, {32, 3, 2}}, {"t.bf16", GGML_TYPE_BF16, {32, 5}},
    {"t.q8_0", GGML_TYPE_Q8_0, {96, 4}}, {"t.vec", GGML_TYPE_F32, {7}},
};
const std::vector<py_tensor> k_tensors_q = {
    {"t.q4_0", GGML_TYPE_Q4_0, {64, 4}}, {"t.q4_1", GGML_TYPE_Q4_1, {64, 4}}, {"t.q5_0", GGML_TYPE_Q5_0, {64, 3}}, {"t.q5_1", GGML_TYPE_Q5_1, {64, 3}},
};
const std::vector<py_tensor> k_tensors_align = {{"t.a", GGML_TYPE_F32, {3}}, {"t.b", GGML_TYPE_F16, {5}}};

bool type_known(ggml_type t) {
    return ggml_get_type_traits(t)->type_name != nullptr;
}

// Reads <dir>/<stem>.gguf (written by the gguf package) and compares with the sidecars.
void check_python_file(const std::string & dir, const std::string & stem, const std::vector<py_tensor> & list, size_t alignment) {
    ggml_context * gc = nullptr;
    gguf_ptr       r  = open_file(dir + "/" + stem + ".gguf", &gc);
    ASSERT_TRUE(r) << gguf_last_error();
    EXPECT_EQ(gguf_get_alignment(r.get()), alignment);
    const int64_t arch = gguf_find_key(r.get(), "general.architecture");
    ASSERT_GE(arch, 0);
    EXPECT_STREQ(gguf_get_val_str(r.get(), arch), "sdxtest");
    ASSERT_EQ(gguf_get_n_tensors(r.get()), (int64_t) list.size());
    for (size_t k = 0; k < list.size(); ++k) {
        const py_tensor & e = list[k];
        ggml_tensor *     t = ggml_get_tensor(gc, e.name);
        ASSERT_NE(t, nullptr) << e.name;
        EXPECT_EQ(t->type, e.type) << e.name;
        for (size_t d = 0; d < GGML_MAX_DIMS; ++d) EXPECT_EQ(t->ne[d], d < e.ne.size() ? e.ne[d] : 1) << e.name;
        EXPECT_EQ(gguf_get_tensor_offset(r.get(), gguf_find_tensor(r.get(), e.name)) % alignment, 0u);
        const std::vector<uint8_t> bytes = read_all(dir + "/" + stem + "." + e.name + ".bytes");
        ASSERT_EQ(bytes.size(), ggml_nbytes(t)) << e.name;
        EXPECT_EQ(memcmp(bytes.data(), t->data, bytes.size()), 0) << e.name << ": bytes differ from what the gguf package wrote";
        // our dequantizer against gguf.quants.dequantize, where we have one
        const ggml_type_traits * tr = ggml_get_type_traits(e.type);
        const std::vector<uint8_t> deq = read_all(dir + "/" + stem + "." + e.name + ".deq");
        ASSERT_EQ(deq.size(), (size_t) ggml_nelements(t) * 4);
        std::vector<float> ours((size_t) ggml_nelements(t));
        if (tr->to_float) tr->to_float(t->data, ours.data(), ggml_nelements(t));
        else memcpy(ours.data(), t->data, ours.size() * 4); // F32
        EXPECT_EQ(memcmp(ours.data(), deq.data(), deq.size()), 0) << e.name << ": our to_float differs from gguf.quants.dequantize";
    }
    ggml_free(gc);
}

// Writes <dir>/<stem>.gguf with our writer (formula data quantized by our quantizers) and the
// exact bytes as sidecars for the Python side.
void write_ours(const std::string & dir, const std::string & stem, const std::vector<py_tensor> & list, uint32_t alignment, bool kvs) {
    sample s;
    if (!kvs) s.ctx.reset(gguf_init_empty());
    if (alignment != 32) gguf_set_val_u32(s.ctx.get(), GGUF_KEY_GENERAL_ALIGNMENT, alignment);
    for (const py_tensor & e : list) {
        ggml_tensor * t = s.add(e.name, e.type, e.ne);
        write_all(dir + "/" + stem + "." + e.name + ".bytes",
                  std::vector<uint8_t>((const uint8_t *) t->data, (const uint8_t *) t->data + ggml_nbytes(t)));
    }
    ASSERT_TRUE(gguf_write_to_file(s.ctx.get(), (dir + "/" + stem + ".gguf").c_str(), false));
}

} // namespace

TEST(GGUFCrossCheck, PythonPackageBothWays) {
    const std::string dir = tmp_dir() + "/py";
    mkdir(dir.c_str(), 0700);
    ASSERT_EQ(run_python("write " + dir), 0) << "gguf_crosscheck.py write failed (is the Python gguf package installed? scripts/install-deps.sh)";

    // files the gguf package wrote, read here
    {
        ggml_context * gc = nullptr;
        gguf_ptr       r  = open_file(dir + "/py.gguf", &gc);
        ASSERT_TRUE(r) << gguf_last_error();
        expect_sample_values(r.get());
        ggml_free(gc);
    }
    check_python_file(dir, "py", k_tensors, 32);
    check_python_file(dir, "py-align", k_tensors_align, 64);
    bool all_q_known = true;
    for (const py_tensor & e : k_tensors_q) all_q_known = all_q_known && type_known(e.type);
    if (all_q_known) {
        check_python_file(dir, "py-q", k_tensors_q, 32);
    } else {
        // Expected decline while the Q4_0..Q5_1 traits do not exist here (branch qtypes): the
        // file must be refused with a message naming the type; this fails once they exist,
        // when the branch above takes over.
        gguf_ptr r = open_file(dir + "/py-q.gguf");
        EXPECT_FALSE(r);
        EXPECT_NE(std::string(gguf_last_error()).find("unknown or unsupported ggml type"), std::string::npos);
    }

    // files we write, read there (and our quantizers against gguf.quants on the same floats)
    write_ours(dir, "cpp", k_tensors, 32, true);
    write_ours(dir, "cpp-align", k_tensors_align, 64, false);
    bool all_q_quantizable = true;
    for (const py_tensor & e : k_tensors_q) all_q_quantizable = all_q_quantizable && type_known(e.type) && ggml_get_type_traits(e.type)->from_float_ref;
    if (all_q_quantizable) write_ours(dir, "cpp-q", k_tensors_q, 32, false);
    EXPECT_EQ(run_python("check " + dir), 0) << "gguf.GGUFReader disagrees with what we wrote (lines above)";
}
#endif
