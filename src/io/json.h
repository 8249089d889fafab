#pragma once

// A small strict JSON (RFC 8259) parser and string escaper, enough for safetensors headers and
// ComfyUI comfy_quant blobs. No external dependency, so the loader stays self-contained (the
// choice against nlohmann-json / simdjson is explained in docs/architecture.md).
//
// Strictness: exactly one value with optional surrounding whitespace; no comments, trailing
// commas, single quotes, NaN/Infinity, leading zeros or lone surrogates; strings must be valid
// UTF-8 without raw control characters; duplicate object keys are rejected (a header with two
// entries of the same name is ambiguous). Nesting is limited so hostile input cannot exhaust
// the stack.
//
// Cost on hostile input: parse_events is linear in the input (the duplicate-key check sorts each
// large object's keys once, O(k log k)) and keeps only the keys of the open objects (their bytes
// plus 16 bytes each), so a caller that keeps little (the safetensors reader) stays within a
// small multiple of the input size. parse() builds a tree of ~100 bytes per value: use it for
// small documents only (comfy_quant is capped at 64 KiB).

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sdio {
namespace json {

struct value {
    enum class kind { null, boolean, number, string, array, object };

    kind        k = kind::null;
    bool        b = false;
    double      num = 0.0;
    // Integers written without fraction or exponent that fit in int64 are also kept exactly:
    // tensor byte offsets can exceed 2^53, where a double would silently round them.
    bool        is_int = false;
    int64_t     i = 0;
    std::string str;
    std::vector<value>                               arr;
    std::vector<std::pair<std::string, value>>       obj; // in document order

    bool is_null() const { return k == kind::null; }
    bool is_bool() const { return k == kind::boolean; }
    bool is_number() const { return k == kind::number; }
    bool is_string() const { return k == kind::string; }
    bool is_array() const { return k == kind::array; }
    bool is_object() const { return k == kind::object; }

    // Member lookup on an object; nullptr when absent or when this is not an object.
    const value * get(const std::string & key) const;
};

// Counters of the work a parse did, so tests can check the cost structurally (not by the clock).
struct parse_stats {
    uint64_t values          = 0; // values parsed (scalars, arrays and objects)
    uint64_t key_comparisons = 0; // key comparisons made by the duplicate-key check
};

// Receives a document's parts in document order (parse_events). Each call may return false to
// stop the parse; the parse then fails with the handler's own error (parse_events leaves err
// empty, the handler keeps its message).
class handler {
  public:
    virtual ~handler() = default;
    virtual bool begin_object() = 0;
    virtual bool key(const std::string & k) = 0; // the next value belongs to this key
    virtual bool end_object() = 0;
    virtual bool begin_array() = 0;
    virtual bool end_array() = 0;
    virtual bool scalar(value && v) = 0; // null, boolean, number or string
};

// Parses the whole of [data, data + n) and reports it to h. On a syntax error returns false and
// sets err to a one-line message with the byte offset ("offset 17: expected ':' after object
// key"); when the handler stopped the parse, returns false with err empty.
bool parse_events(const char * data, size_t n, handler & h, std::string & err, parse_stats * stats = nullptr);

// Parses the whole of [data, data + n) into a tree. On failure returns false and sets err as
// parse_events does (or, when the document is too dense, to that reason). A tree costs ~100
// bytes a value, so documents with more than 1024 + n/8 values are refused: memory stays within
// ~15x the text. Dense or large untrusted data goes through parse_events.
bool parse(const char * data, size_t n, value & out, std::string & err, parse_stats * stats = nullptr);

// Appends s to out as a JSON string literal (quotes included) that is always valid JSON: '"',
// '\\' and control characters (incl. DEL) are escaped, valid UTF-8 is copied, and each byte
// that is not part of valid UTF-8 becomes U+FFFD (the output of a lossy conversion, e.g. a file
// name in a report). Writers that must round-trip exactly check is_valid_utf8 first.
void append_quoted(std::string & out, const std::string & s);

// True when s is valid UTF-8 by the parser's rules (shortest form, no surrogates, <= U+10FFFF).
bool is_valid_utf8(const std::string & s);

} // namespace json
} // namespace sdio
