#pragma once

// A small strict JSON (RFC 8259) parser and string escaper, enough for safetensors headers and
// ComfyUI comfy_quant blobs. No external dependency, so the loader stays self-contained.
//
// Strictness: exactly one value with optional surrounding whitespace; no comments, trailing
// commas, single quotes, NaN/Infinity, leading zeros or lone surrogates; strings must be valid
// UTF-8 without raw control characters; duplicate object keys are rejected (a header with two
// entries of the same name is ambiguous). Nesting is limited so hostile input cannot exhaust
// the stack.

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

// Parses the whole of [data, data + n). On failure returns false and sets err to a one-line
// message with the byte offset ("offset 17: expected ':' after object key").
bool parse(const char * data, size_t n, value & out, std::string & err);

// Appends s to out as a JSON string literal (quotes included), escaping '"', '\\' and control
// characters; other bytes (UTF-8) are copied as they are.
void append_quoted(std::string & out, const std::string & s);

} // namespace json
} // namespace sdio
