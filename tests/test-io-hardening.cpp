// Hostile-input hardening of the checkpoint I/O (src/io) and the sdx outputs, issue 15 items
// 12-17: linear-time JSON with memory bounded by the header size (checked with a counting
// allocator and an operation counter, never the clock), FIFOs and files that shrink after they
// are mapped, a writer that never writes what the reader refuses, output paths (symlinks,
// devices, same file, temporaries cleaned on errors, exceptions and SIGINT/SIGTERM), escaped
// names in messages, and `sdx bench --json` that is valid JSON whatever the paths hold.

#include "io/atomic_file.h"
#include "io/comfy_int8.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "support/io-test-files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <fcntl.h>
#include <malloc.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Counting allocator: every operator new/delete of this test binary goes through here, so a test
// can read the peak heap a call needed (the measure of "memory bounded by the header size").

namespace {
std::atomic<int64_t> g_live{0}, g_peak{0};

void note_alloc(void * p) {
    if (!p) return;
    const int64_t now = g_live.fetch_add((int64_t) malloc_usable_size(p)) + (int64_t) malloc_usable_size(p);
    int64_t       pk  = g_peak.load();
    while (now > pk && !g_peak.compare_exchange_weak(pk, now)) {}
}
void note_free(void * p) {
    if (p) g_live.fetch_sub((int64_t) malloc_usable_size(p));
}
// Peak heap above the level at the call, in bytes.
struct peak_meter {
    int64_t base;
    peak_meter() : base(g_live.load()) { g_peak.store(base); }
    int64_t peak() const { return g_peak.load() - base; }
};
} // namespace

void * operator new(size_t n) {
    void * p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    note_alloc(p);
    return p;
}
void * operator new[](size_t n) { return operator new(n); }
void * operator new(size_t n, const std::nothrow_t &) noexcept {
    void * p = std::malloc(n ? n : 1);
    note_alloc(p);
    return p;
}
void * operator new[](size_t n, const std::nothrow_t & t) noexcept { return operator new(n, t); }
void   operator delete(void * p) noexcept { note_free(p); std::free(p); }
void   operator delete[](void * p) noexcept { operator delete(p); }
void   operator delete(void * p, size_t) noexcept { operator delete(p); }
void   operator delete[](void * p, size_t) noexcept { operator delete(p); }
void   operator delete(void * p, const std::nothrow_t &) noexcept { operator delete(p); }
void   operator delete[](void * p, const std::nothrow_t &) noexcept { operator delete(p); }

namespace {

// ---------------------------------------------------------------------------------------------
// Helpers

// A fresh directory under $TMPDIR (or /tmp), removed at the end of the test.
struct tmp_dir : sd_test::tmp_dir {
    tmp_dir() : sd_test::tmp_dir(sd_test::env_tmpdir() + "/sd-test-io-hard.XXXXXX") {}
};

using sd_test::bytes_of;
using sd_test::bytes_of_string;
using sd_test::raw_file;
using sd_test::slurp;
using sd_test::spit;

// ---------------------------------------------------------------------------------------------
// 12: cost of hostile headers

TEST(IoHeaderCost, DuplicateKeyCheckIsNotQuadratic) {
    const size_t k = 200000;
    std::string  text = "{";
    for (size_t i = 0; i < k; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
    text += "}";
    sdio::json::value       v;
    std::string             err;
    sdio::json::parse_stats st;
    ASSERT_TRUE(sdio::json::parse(text.data(), text.size(), v, err, &st)) << err;
    EXPECT_EQ(v.obj.size(), k);
    // The pairwise check would make k^2/2 = 2e10 comparisons; sorting makes about k log2 k.
    const double bound = 3.0 * (double) k * std::log2((double) k);
    EXPECT_LT((double) st.key_comparisons, bound) << st.key_comparisons;
    std::printf("[ info ] 200k keys: %llu key comparisons (pairwise: %.2e)\n", (unsigned long long) st.key_comparisons,
                0.5 * (double) k * (double) (k - 1));
    EXPECT_EQ(st.values, k + 1);

    // A duplicate far apart is still found, and named.
    text.back() = ',';
    text += "\"k123\":1}";
    sdio::json::parse_stats st2;
    EXPECT_FALSE(sdio::json::parse(text.data(), text.size(), v, err, &st2));
    EXPECT_NE(err.find("duplicate object key \"k123\""), std::string::npos) << err;
    EXPECT_LT((double) st2.key_comparisons, bound);

    // Small objects keep the exact position of the duplicate.
    const std::string small = "{\"a\":1,\"b\":2,\"a\":3}";
    EXPECT_FALSE(sdio::json::parse(small.data(), small.size(), v, err));
    EXPECT_NE(err.find("offset 16: duplicate object key \"a\""), std::string::npos) << err;
}

// The whole reader on a 200k-tensor header: accepted, all tensors there.
TEST(IoHeaderCost, ReaderTakes200kTensors) {
    tmp_dir     d;
    std::string h = "{";
    for (int i = 0; i < 200000; ++i)
        h += (i ? ",\"t" : "\"t") + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
    h += "}";
    spit(d.file("many.safetensors"), raw_file(h));
    std::string err;
    auto        r = sdio::reader::open(d.file("many.safetensors"), err);
    ASSERT_TRUE(r) << err;
    EXPECT_EQ(r->tensors().size(), 200000u);
    EXPECT_NE(r->find("t199999"), nullptr);
}

// Peak heap of reader::open divided by the file size, for headers built to cost the most.
double open_peak_ratio(const tmp_dir & d, const std::string & header, bool expect_ok, std::string & err) {
    const std::string path  = d.file("cost.safetensors");
    const std::string bytes = raw_file(header);
    spit(path, bytes);
    peak_meter m;
    {
        auto r = sdio::reader::open(path, err);
        EXPECT_EQ((bool) r, expect_ok) << err;
    }
    return (double) m.peak() / (double) bytes.size();
}

TEST(IoHeaderCost, ReaderMemoryIsASmallMultipleOfTheHeader) {
    tmp_dir     d;
    std::string err;
    const size_t n = 8u << 20; // 8 MiB of values: each costs ~2 bytes of text

    // [0,0,...]: a JSON tree would take ~56x the text (112-byte values); refused at the '['.
    std::string zeros = "[0";
    while (zeros.size() < n) zeros += ",0";
    zeros += "]";
    double ratio = open_peak_ratio(d, zeros, false, err);
    std::printf("[ info ] peak heap / file size: [0,0,...] header %.2f\n", ratio);
    EXPECT_NE(err.find("not an object"), std::string::npos) << err;
    EXPECT_LT(ratio, 3.0) << "array header";

    // The same values inside an unknown field of an entry: skipped, never kept.
    std::string skipped = "{\"t\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0],\"x\":" + zeros + "}}";
    ratio = open_peak_ratio(d, skipped, true, err);
    std::printf("[ info ] peak heap / file size: skipped field %.2f\n", ratio);
    EXPECT_LT(ratio, 3.0) << "skipped field";

    // A shape with millions of dimensions (valid: an empty tensor) keeps 8 bytes a dimension.
    std::string dims = "{\"t\":{\"dtype\":\"U8\",\"data_offsets\":[0,0],\"shape\":[0";
    while (dims.size() < n) dims += ",1";
    dims += "]}}";
    ratio = open_peak_ratio(d, dims, true, err);
    std::printf("[ info ] peak heap / file size: 4M-dim shape %.2f\n", ratio);
    EXPECT_LT(ratio, 16.0) << "long shape";

    // Many small tensors.
    std::string many = "{";
    for (int i = 0; many.size() < n; ++i)
        many += (i ? ",\"" : "\"") + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,0]}";
    many += "}";
    ratio = open_peak_ratio(d, many, false, err); // a 0-d U8 needs 1 byte: refused at the first entry
    EXPECT_LT(ratio, 3.0) << "refused entry";
    many = "{";
    for (int i = 0; many.size() < n; ++i)
        many += (i ? ",\"" : "\"") + std::to_string(i) + "\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
    many += "}";
    ratio = open_peak_ratio(d, many, true, err);
    EXPECT_LT(ratio, 16.0) << "many tensors";
    std::printf("[ info ] peak heap / file size, 8 MiB headers: many tensors %.2f\n", ratio);
}

// JSON held in the header as a string (ComfyUI's _quantization_metadata) is parsed into a tree:
// the tree refuses documents denser than real ones, so the peak stays a small multiple too.
TEST(IoHeaderCost, DenseJsonInMetadataIsRefusedWithinTheBound) {
    tmp_dir     d;
    std::string zeros = "[0";
    while (zeros.size() < (4u << 20)) zeros += ",0";
    zeros += "]";
    sdio::json::value v;
    std::string       err;
    {
        peak_meter m;
        EXPECT_FALSE(sdio::json::parse(zeros.data(), zeros.size(), v, err));
        EXPECT_NE(err.find("values in"), std::string::npos) << err;
        EXPECT_LT((double) m.peak() / (double) zeros.size(), 16.0);
    }
    // The densest document accepted (a value per 9 bytes): exact reservations, no doubling.
    std::string nines = "[12345678";
    while (nines.size() < (4u << 20)) nines += ",12345678";
    nines += "]";
    {
        peak_meter m;
        EXPECT_TRUE(sdio::json::parse(nines.data(), nines.size(), v, err)) << err;
        EXPECT_LT((double) m.peak() / (double) nines.size(), 16.0);
        std::printf("[ info ] peak heap / text: densest JSON tree accepted %.2f\n", (double) m.peak() / (double) nines.size());
        v = sdio::json::value();
    }
    const std::string meta = "{\"layers\":{\"m\":" + zeros + "}}";
    std::string       quoted;
    sdio::json::append_quoted(quoted, meta);
    const std::string header = "{\"__metadata__\":{\"_quantization_metadata\":" + quoted +
                               "},\"m.weight\":{\"dtype\":\"F32\",\"shape\":[1,4],\"data_offsets\":[0,16]}}";
    const std::string bytes = raw_file(header, std::string(16, '\0'));
    spit(d.file("meta.safetensors"), bytes);
    peak_meter m;
    auto       r = sdio::reader::open(d.file("meta.safetensors"), err);
    ASSERT_TRUE(r) << err;
    sdio::linear_module lm;
    EXPECT_FALSE(sdio::read_linear(*r, "m", lm, err));
    EXPECT_NE(err.find("_quantization_metadata"), std::string::npos) << err;
    EXPECT_LT((double) m.peak() / (double) bytes.size(), 16.0);
    std::printf("[ info ] peak heap / file size: dense _quantization_metadata %.2f\n", (double) m.peak() / (double) bytes.size());
}

// ---------------------------------------------------------------------------------------------
// 13: files that are not regular, files that shrink

TEST(IoFiles, FifoAndDirectoryRefusedWithoutBlocking) {
    tmp_dir           d;
    const std::string fifo = d.file("fifo.safetensors");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::string err;
    // Without O_NONBLOCK this open waits forever for a writer (the test then times out).
    EXPECT_EQ(sdio::reader::open(fifo, err), nullptr);
    EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
    EXPECT_EQ(sdio::reader::open(d.path(), err), nullptr);
    EXPECT_NE(err.find(d.path()), std::string::npos) << err;
}

TEST(IoFiles, FileShrunkAfterOpenIsAnErrorNotSigbus) {
    tmp_dir           d;
    const std::string path = d.file("shrink.safetensors");
    std::vector<float> w(64 * 256, 0.25f), b(64, 1.0f);
    std::string        err;
    ASSERT_TRUE(sdio::write(path, {{"m.weight", "F32", {64, 256}, bytes_of(w)}, {"m.bias", "F32", {64}, bytes_of(b)}}, {}, err)) << err;
    auto r = sdio::reader::open(path, err);
    ASSERT_TRUE(r) << err;
    const sdio::tensor_view * t = r->find("m.weight");
    ASSERT_NE(t, nullptr);
    // Cut the file to its header: every data page of the mapping is now past the end.
    const size_t data_start = (size_t) (t->data - r->find("m.weight")->data) + 8;
    (void) data_start;
    ASSERT_EQ(truncate(path.c_str(), 16), 0);
    std::vector<uint8_t> buf(t->nbytes);
    EXPECT_FALSE(r->copy(*t, 0, t->nbytes, buf.data(), err));
    EXPECT_NE(err.find("shrank"), std::string::npos) << err;
    EXPECT_NE(err.find("m.weight"), std::string::npos) << err;
    // The module readers go through the same guard.
    std::vector<float> f;
    EXPECT_FALSE(sdio::read_floats(*r, "m.weight", f, nullptr, err));
    EXPECT_NE(err.find("shrank"), std::string::npos) << err;
    sdio::linear_module m;
    EXPECT_FALSE(sdio::read_linear(*r, "m", m, err));
    EXPECT_NE(err.find("shrank"), std::string::npos) << err;
    // Out-of-range requests are refused before touching memory.
    EXPECT_FALSE(r->copy(*t, 1, t->nbytes, buf.data(), err));
    EXPECT_NE(err.find("outside the tensor"), std::string::npos) << err;
}

// Empty tensors are copied without a memcpy on null pointers (UB the sanitizer build aborts on).
TEST(IoFiles, EmptyTensorsReadAndCopy) {
    tmp_dir           d;
    const std::string path = d.file("empty.safetensors"), out = d.file("q.safetensors");
    std::string       err;
    ASSERT_TRUE(sdio::write(path, {{"e.weight", "F32", {0, 4}, {}}, {"h", "BF16", {0}, {}}, {"u", "U8", {0}, {}}}, {}, err)) << err;
    auto r = sdio::reader::open(path, err);
    ASSERT_TRUE(r) << err;
    std::vector<float> f;
    EXPECT_TRUE(sdio::read_floats(*r, "e.weight", f, nullptr, err)) << err;
    EXPECT_TRUE(f.empty());
    EXPECT_TRUE(sdio::read_floats(*r, "h", f, nullptr, err)) << err;
    EXPECT_TRUE(r->copy(*r->find("u"), 0, 0, nullptr, err)) << err;
    EXPECT_TRUE(sdio::quantize_file(path, out, 4, err, nullptr)) << err;
    auto q = sdio::reader::open(out, err);
    ASSERT_TRUE(q) << err;
    EXPECT_EQ(q->tensors().size(), 3u);
}

// ---------------------------------------------------------------------------------------------
// 14 (writer half): never write what the reader refuses

TEST(IoWriter, RefusesWhatTheReaderWouldReject) {
    tmp_dir           d;
    const std::string path = d.file("out.safetensors");
    std::string       err;
    ASSERT_TRUE(sdio::write(path, {{"x", "U8", {1}, {7}}}, {}, err)) << err;
    const std::string before = slurp(path);

    EXPECT_FALSE(sdio::write(path, {{std::string("bad\xff", 4), "U8", {1}, {1}}}, {}, err));
    EXPECT_NE(err.find("not valid UTF-8"), std::string::npos) << err;
    EXPECT_FALSE(sdio::write(path, {{"x", "U8", {1}, {1}}}, {{"k", std::string("\xc0\xaf", 2)}}, err));
    EXPECT_NE(err.find("not valid UTF-8"), std::string::npos) << err;
    // A header over the reader's 100 MB limit (one very long name).
    const std::string long_name(sdio::k_max_header_bytes, 'n');
    EXPECT_FALSE(sdio::write(path, {{long_name, "U8", {1}, {1}}}, {}, err));
    EXPECT_NE(err.find("limit"), std::string::npos) << err;

    EXPECT_EQ(slurp(path), before);
    EXPECT_EQ(d.entries(), std::vector<std::string>{"out.safetensors"});
    EXPECT_EQ(sdio::registered_temp_files(), 0);
}

TEST(IoWriter, QuantizerRefusesScalesThatOverflow) {
    tmp_dir           d;
    const std::string in = d.file("big.safetensors"), out = d.file("q.safetensors");
    // Finite weights whose rotation sums four values near FLT_MAX: the scale would be inf.
    std::vector<float> w = {3e38f, 3e38f, 3e38f, -3e38f, 1.0f, 2.0f, 3.0f, 4.0f};
    std::string        err;
    ASSERT_TRUE(sdio::write(in, {{"m.weight", "F32", {2, 4}, bytes_of(w)}}, {}, err)) << err;
    spit(out, "old output");
    EXPECT_FALSE(sdio::quantize_file(in, out, 4, err, nullptr));
    EXPECT_NE(err.find("infinite"), std::string::npos) << err;
    EXPECT_EQ(slurp(out), "old output");
    EXPECT_EQ(d.entries(), (std::vector<std::string>{"big.safetensors", "q.safetensors"}));
}

// ---------------------------------------------------------------------------------------------
// 15: output paths

TEST(IoOutput, RefusesSymlinksAndNonRegularTargets) {
    tmp_dir           d;
    const std::string victim = d.file("victim"), link = d.file("link.safetensors"), fifo = d.file("fifo.safetensors");
    spit(victim, "precious");
    ASSERT_EQ(symlink(victim.c_str(), link.c_str()), 0);
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    std::string err;
    for (const std::string & p : {link, fifo, d.path()}) {
        EXPECT_FALSE(sdio::write(p, {{"x", "U8", {1}, {1}}}, {}, err)) << p;
        EXPECT_NE(err.find(p), std::string::npos) << err;
        EXPECT_FALSE(sdio::write_text_atomic(p, "text", err)) << p;
        EXPECT_FALSE(sdio::check_output_path(p, err)) << p;
    }
    struct stat st;
    ASSERT_EQ(lstat(link.c_str(), &st), 0);
    EXPECT_TRUE(S_ISLNK(st.st_mode));
    ASSERT_EQ(lstat(fifo.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode));
    EXPECT_EQ(slurp(victim), "precious");
    EXPECT_EQ(d.entries(), (std::vector<std::string>{"fifo.safetensors", "link.safetensors", "victim"}));
}

TEST(IoOutput, SameFileComparesInodesNotStrings) {
    tmp_dir d;
    spit(d.file("a"), "a");
    spit(d.file("b"), "b");
    ASSERT_EQ(link(d.file("a").c_str(), d.file("hard").c_str()), 0);
    EXPECT_TRUE(sdio::same_file(d.file("a"), d.path() + "/./a"));
    EXPECT_TRUE(sdio::same_file(d.file("a"), d.file("hard")));
    EXPECT_FALSE(sdio::same_file(d.file("a"), d.file("b")));
    EXPECT_FALSE(sdio::same_file(d.file("a"), d.file("missing")));

    // The quantizer itself refuses to replace its input, whatever the spelling.
    std::string err;
    ASSERT_TRUE(sdio::write(d.file("in.st"), {{"m.weight", "F32", {1, 4}, bytes_of(std::vector<float>{1, 2, 3, 4})}}, {}, err));
    const std::string before = slurp(d.file("in.st"));
    EXPECT_FALSE(sdio::quantize_file(d.file("in.st"), d.path() + "/./in.st", 4, err, nullptr));
    EXPECT_NE(err.find("input file itself"), std::string::npos) << err;
    EXPECT_EQ(slurp(d.file("in.st")), before);
}

// Runs a streamed write in a child that raises `sig` while filling tensor 2 (of 4): the child must
// die by the signal, the old output stay byte for byte, and no temporary remain.
void expect_signal_leaves_no_trace(int sig) {
    tmp_dir           d;
    const std::string path = d.file("out.safetensors");
    spit(path, "old output");
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        std::string err;
        sdio::write_streamed(
            path, {{"a", "U8", {4096}, {}}, {"b", "U8", {4096}, {}}, {"c", "U8", {4096}, {}}, {"d", "U8", {4096}, {}}}, {},
            [&](size_t i, std::vector<uint8_t> & buf, std::string &) {
                if (i == 2) raise(sig);
                buf.assign(4096, (uint8_t) i);
                return true;
            },
            err);
        _exit(0); // not reached when the signal killed the write
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_EQ(slurp(path), "old output");
    EXPECT_EQ(d.entries(), std::vector<std::string>{"out.safetensors"});
}

TEST(IoOutput, SigintMidWriteKeepsOldOutputAndRemovesTemporary) { expect_signal_leaves_no_trace(SIGINT); }
TEST(IoOutput, SigtermMidWriteKeepsOldOutputAndRemovesTemporary) { expect_signal_leaves_no_trace(SIGTERM); }

// A program with its own graceful SIGINT handler (an abort flag) keeps it: the handler still runs,
// the temporary is removed, this write fails, and a later write succeeds.
volatile sig_atomic_t g_flag = 0;
extern "C" void       set_flag(int) { g_flag = 1; }

TEST(IoOutput, SigintChainsToTheProgramsHandler) {
    tmp_dir           d;
    const std::string path = d.file("out.safetensors");
    spit(path, "old output");
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        signal(SIGINT, set_flag);
        std::string err;
        const bool  ok = sdio::write_streamed(
            path, {{"a", "U8", {16}, {}}, {"b", "U8", {16}, {}}}, {},
            [&](size_t i, std::vector<uint8_t> & buf, std::string &) {
                if (i == 1) raise(SIGINT);
                buf.assign(16, 1);
                return true;
            },
            err);
        int code = 0;
        if (ok || err.find("interrupted") == std::string::npos) code |= 1;
        if (!g_flag) code |= 2;
        if (slurp(path) != "old output") code |= 4;
        if (std::distance(fs::directory_iterator(d.path()), fs::directory_iterator()) != 1) code |= 8;
        if (!sdio::write(path, {{"x", "U8", {1}, {1}}}, {}, err)) code |= 16;
        struct sigaction sa;
        sigaction(SIGINT, nullptr, &sa);
        if (sa.sa_handler != set_flag) code |= 32;
        _exit(code);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << status;
    EXPECT_EQ(WEXITSTATUS(status), 0) << "bits: 1 write not refused, 2 handler not run, 4 old output changed, "
                                         "8 debris, 16 later write failed, 32 handler not restored";
}

TEST(IoOutput, ExceptionMidWriteRemovesTemporary) {
    tmp_dir           d;
    const std::string path = d.file("out.safetensors");
    spit(path, "old output");
    std::string err;
    EXPECT_THROW(sdio::write_streamed(
                     path, {{"a", "U8", {2}, {}}, {"b", "U8", {2}, {}}}, {},
                     [](size_t i, std::vector<uint8_t> & buf, std::string &) -> bool {
                         if (i == 1) throw std::runtime_error("producer threw");
                         buf = {1, 2};
                         return true;
                     },
                     err),
                 std::runtime_error);
    EXPECT_EQ(slurp(path), "old output");
    EXPECT_EQ(d.entries(), std::vector<std::string>{"out.safetensors"});
    EXPECT_EQ(sdio::registered_temp_files(), 0);
    // The signal dispositions are back to what they were once nothing is registered.
    struct sigaction sa;
    sigaction(SIGINT, nullptr, &sa);
    EXPECT_TRUE(!(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL);
}

// ---------------------------------------------------------------------------------------------
// 16/17: text from files in messages and in JSON output

TEST(IoMessages, ControlCharactersInNamesAreEscaped) {
    tmp_dir           d;
    const std::string path = d.file("evil.safetensors");
    // "\u001b]0;pwned\u0007" sets a terminal title; "\u009b" is the one-byte CSI.
    spit(path, raw_file("{\"\\u001b]0;pwned\\u0007\\u009b\":{\"dtype\":\"Q9\",\"shape\":[],\"data_offsets\":[0,0]}}"));
    std::string err;
    EXPECT_EQ(sdio::reader::open(path, err), nullptr);
    EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
    EXPECT_EQ(err.find('\x07'), std::string::npos) << err;
    EXPECT_EQ(err.find("\xc2\x9b"), std::string::npos) << err;
    EXPECT_NE(err.find("\\x1b]0;pwned\\x07\\xc2\\x9b"), std::string::npos) << err;
    EXPECT_EQ(sdio::display_name("caf\xc3\xa9 \\ \xff"), "caf\xc3\xa9 \\\\ \\xff");

    const std::string e = "{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}";
    spit(path, raw_file("{\"\\u001b[2J\":" + e + ",\"\\u001b[2J\":" + e + "}"));
    EXPECT_EQ(sdio::reader::open(path, err), nullptr);
    EXPECT_EQ(err.find('\x1b'), std::string::npos) << err;
    EXPECT_NE(err.find("duplicate"), std::string::npos) << err;
}

TEST(IoMessages, QuotedStringsAreAlwaysValidJson) {
    static const char k_raw[] = "ok \"q\" \\ \x01\x7f caf\xc3\xa9 bad:\xff\xc0\xaf\xed\xa0\x80 end";
    const std::string raw(k_raw, sizeof k_raw - 1);
    std::string       q;
    sdio::json::append_quoted(q, raw);
    EXPECT_EQ(q.find('\x7f'), std::string::npos);
    sdio::json::value v;
    std::string       err;
    ASSERT_TRUE(sdio::json::parse(q.data(), q.size(), v, err)) << err << " in " << q;
    EXPECT_TRUE(sdio::json::is_valid_utf8(v.str));
    EXPECT_EQ(v.str.substr(0, 17), "ok \"q\" \\ \x01\x7f caf\xc3\xa9");
    EXPECT_NE(v.str.find("bad:\xef\xbf\xbd"), std::string::npos);
}

TEST(IoComfy, GroupsizeAboveIntMaxIsRefusedNotNarrowed) {
    tmp_dir           d;
    const std::string path = d.file("g.safetensors");
    // An empty [0, 2^32] module: 2^32 is a power of 4 dividing in, and (int) 2^32 == 0.
    const std::string cq = "{\"format\":\"int8_tensorwise\",\"convrot\":true,\"convrot_groupsize\":4294967296}";
    std::string       err;
    ASSERT_TRUE(sdio::write(path,
                            {{"m.weight", "I8", {0, 4294967296LL}, {}},
                             {"m.weight_scale", "F32", {0, 1}, {}},
                             {"m.comfy_quant", "U8", {(int64_t) cq.size()}, bytes_of_string(cq)}},
                            {}, err))
        << err;
    auto r = sdio::reader::open(path, err);
    ASSERT_TRUE(r) << err;
    sdio::linear_module m;
    EXPECT_FALSE(sdio::read_linear(*r, "m", m, err)) << "group read as " << m.group;
    EXPECT_NE(err.find("convrot_groupsize"), std::string::npos) << err;
}

// ---------------------------------------------------------------------------------------------
// 16: sdx bench --json

#ifdef SDX_BIN

// The smallest Krea2 layout sdx runs (hidden 256 = 2 heads, 1 KV head, MLP 256), int8 ConvRot
// G=4 modules with constant weights: enough for bench to run its four configurations quickly.
std::vector<sdio::tensor_out> tiny_krea2() {
    const std::string                cq = "{\"format\":\"int8_tensorwise\",\"convrot\":true,\"convrot_groupsize\":4}";
    const struct { const char * n; int64_t in, out; } lin[] = {
        {"attn.wq", 256, 256}, {"attn.wk", 256, 128}, {"attn.wv", 256, 128}, {"attn.gate", 256, 256},
        {"attn.wo", 256, 256}, {"mlp.gate", 256, 256}, {"mlp.up", 256, 256}, {"mlp.down", 256, 256}};
    std::vector<sdio::tensor_out> t;
    for (const auto & l : lin) {
        const std::string p = std::string("blocks.0.") + l.n;
        std::vector<int8_t> w((size_t) (l.in * l.out));
        for (size_t i = 0; i < w.size(); ++i) w[i] = (int8_t) ((int) (i * 37 % 255) - 127);
        t.push_back({p + ".weight", "I8", {l.out, l.in}, bytes_of(w)});
        t.push_back({p + ".weight_scale", "F32", {l.out, 1}, bytes_of(std::vector<float>((size_t) l.out, 1e-3f))});
        t.push_back({p + ".comfy_quant", "U8", {(int64_t) cq.size()}, bytes_of_string(cq)});
    }
    const struct { const char * n; int64_t size; } vec[] = {
        {"mod.lin", 6 * 256}, {"prenorm.scale", 256}, {"postnorm.scale", 256}, {"attn.qknorm.qnorm.scale", 128}, {"attn.qknorm.knorm.scale", 128}};
    for (const auto & v : vec) t.push_back({std::string("blocks.0.") + v.n, "F32", {v.size}, bytes_of(std::vector<float>((size_t) v.size, 0.1f))});
    return t;
}

// Runs sdx with argv (no shell: the paths hold quotes and control bytes) in dir; returns the
// exit status (128 + signal when killed).
int run_sdx(const std::string & dir, const std::vector<std::string> & args) {
    const pid_t pid = fork();
    if (pid == 0) {
        if (chdir(dir.c_str()) != 0) _exit(126);
        const int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        std::vector<char *> argv;
        argv.push_back((char *) SDX_BIN);
        for (const auto & a : args) argv.push_back((char *) a.c_str());
        argv.push_back(nullptr);
        execv(SDX_BIN, argv.data());
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

TEST(SdxBench, JsonIsValidForLongAndNonUtf8Paths) {
    tmp_dir     d;
    std::string dir = d.path();
    for (char c : std::string("abcde")) { // > 1024 bytes of path, past the old fixed buffer
        dir += "/" + std::string(220, c);
        ASSERT_TRUE(fs::create_directory(dir));
    }
    const std::string weights = dir + "/we\"ird\x01\xff\xc0name.safetensors";
    std::string       err;
    ASSERT_TRUE(sdio::write(weights, tiny_krea2(), {}, err)) << err;
    ASSERT_EQ(run_sdx(d.path(), {"bench", "--weights", weights, "--blocks", "1", "--tokens", "8", "--runs", "1", "--json",
                                 "out.json", "--html", "out.html"}),
              0);
    const std::string text = slurp(d.file("out.json"));
    sdio::json::value v;
    ASSERT_TRUE(sdio::json::parse(text.data(), text.size(), v, err)) << err;
    const sdio::json::value * cfg = v.get("config");
    ASSERT_TRUE(cfg && cfg->get("weights") && cfg->get("weights")->is_string());
    const std::string & w = cfg->get("weights")->str;
    EXPECT_EQ(w.substr(0, dir.size()), dir);
    EXPECT_NE(w.find("we\"ird\x01\xef\xbf\xbd\xef\xbf\xbdname.safetensors"), std::string::npos) << w;
    ASSERT_TRUE(v.get("results") && v.get("results")->is_array());
    // four configurations always; q8_0-native / q4_k-native each run or are listed as not run
    ASSERT_TRUE(v.get("not_run") && v.get("not_run")->is_array());
    EXPECT_GE(v.get("results")->arr.size(), 4u);
    EXPECT_EQ(v.get("results")->arr.size() + v.get("not_run")->arr.size(), 6u);

    // An output path that is a symlink is refused before the benchmark runs; its target stays.
    spit(d.file("victim"), "precious");
    ASSERT_EQ(symlink(d.file("victim").c_str(), d.file("link.json").c_str()), 0);
    EXPECT_EQ(run_sdx(d.path(), {"bench", "--weights", weights, "--blocks", "1", "--tokens", "8", "--runs", "1", "--json",
                                 "link.json", "--html", "out.html"}),
              1);
    EXPECT_EQ(slurp(d.file("victim")), "precious");
}

#endif // SDX_BIN

} // namespace
