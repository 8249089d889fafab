// Fuzzes the strict JSON parser (src/io/json.*): the tree parser and the event parser must agree,
// a parsed document written back out parses to the same tree, and any bytes quoted by
// append_quoted parse back as a string (exactly when they were valid UTF-8).

#include "fuzz-support.h"
#include "io/json.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#define CHECK(c) FUZZ_CHECK("fuzz-json", c, #c)

using sdio::json::value;

// Counts events, so the event parse is exercised apart from the tree builder.
struct counter : sdio::json::handler {
    size_t n = 0;
    bool   begin_object() override { ++n; return true; }
    bool   key(const std::string &) override { return true; }
    bool   end_object() override { return true; }
    bool   begin_array() override { ++n; return true; }
    bool   end_array() override { return true; }
    bool   scalar(value &&) override { ++n; return true; }
};

void write_json(std::string & o, const value & v) {
    char buf[40];
    switch (v.k) {
        case value::kind::null: o += "null"; break;
        case value::kind::boolean: o += v.b ? "true" : "false"; break;
        case value::kind::number:
            if (v.is_int) std::snprintf(buf, sizeof buf, "%lld", (long long) v.i);
            else {
                std::snprintf(buf, sizeof buf, "%.17g", v.num);
                // keep it a non-integer literal, or it would come back as an exact int
                if (!std::strpbrk(buf, ".eE")) std::strcat(buf, ".0");
            }
            o += buf;
            break;
        case value::kind::string: sdio::json::append_quoted(o, v.str); break;
        case value::kind::array:
            o += '[';
            for (size_t k = 0; k < v.arr.size(); ++k) {
                if (k) o += ',';
                write_json(o, v.arr[k]);
            }
            o += ']';
            break;
        case value::kind::object:
            o += '{';
            for (size_t k = 0; k < v.obj.size(); ++k) {
                if (k) o += ',';
                sdio::json::append_quoted(o, v.obj[k].first);
                o += ':';
                write_json(o, v.obj[k].second);
            }
            o += '}';
            break;
    }
}

bool same(const value & a, const value & b) {
    if (a.k != b.k) return false;
    switch (a.k) {
        case value::kind::null: return true;
        case value::kind::boolean: return a.b == b.b;
        case value::kind::number:
            // %.17g round-trips every double; an exact int stays an exact int
            return a.is_int == b.is_int && (a.is_int ? a.i == b.i : (a.num == b.num || (a.num != a.num && b.num != b.num)));
        case value::kind::string: return a.str == b.str;
        case value::kind::array:
            if (a.arr.size() != b.arr.size()) return false;
            for (size_t k = 0; k < a.arr.size(); ++k)
                if (!same(a.arr[k], b.arr[k])) return false;
            return true;
        case value::kind::object:
            if (a.obj.size() != b.obj.size()) return false;
            for (size_t k = 0; k < a.obj.size(); ++k)
                if (a.obj[k].first != b.obj[k].first || !same(a.obj[k].second, b.obj[k].second)) return false;
            return true;
    }
    return false;
}

// The tree parser's refusal of a document denser than one value per 8 bytes (json.cpp), told from
// every other error by the message's own start, never by a substring a key could contain.
bool is_density_refusal(const std::string & err) {
    return err.rfind("more than ", 0) == 0 && err.find(" bytes of JSON (a tree keeps") != std::string::npos;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const char * p = (const char *) data;
    value        v;
    std::string  err;
    const bool   ok = sdio::json::parse(p, size, v, err);
    CHECK(ok == err.empty());

    // The tree refuses documents denser than one value per 8 bytes; the event parse does not. That
    // refusal is the one message that starts "more than " (a message naming a key, e.g. a duplicate
    // " values in 3", contains that key's text anywhere: a substring test took it for density).
    const bool too_dense = !ok && is_density_refusal(err);
    counter     c;
    std::string err2;
    CHECK(sdio::json::parse_events(p, size, c, err2) == (ok || too_dense));
    if (!too_dense) CHECK(err2 == err);

    if (ok) {
        std::string out;
        write_json(out, v);
        value       back;
        std::string err3;
        // without the input's whitespace the text may be too dense for a tree: compare events then
        if (sdio::json::parse(out.data(), out.size(), back, err3)) CHECK(same(v, back));
        else CHECK(is_density_refusal(err3));
    }

    const std::string s(p, size);
    std::string       q;
    sdio::json::append_quoted(q, s);
    value       sv;
    std::string err4;
    CHECK(sdio::json::parse(q.data(), q.size(), sv, err4));
    CHECK(sv.is_string());
    CHECK(sdio::json::is_valid_utf8(sv.str));
    CHECK((sv.str == s) == sdio::json::is_valid_utf8(s));
    return 0;
}
