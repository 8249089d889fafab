#include "io/json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sdio {
namespace json {

const value * value::get(const std::string & key) const {
    if (k != kind::object) return nullptr;
    for (const auto & kv : obj) {
        if (kv.first == key) return &kv.second;
    }
    return nullptr;
}

namespace {

constexpr int k_max_depth = 128;

class parser {
  public:
    parser(const char * p, size_t n) : s_(p), n_(n) {}

    bool run(value & out, std::string & err) {
        skip_ws();
        if (!parse_value(out, 0)) { err = err_; return false; }
        skip_ws();
        if (pos_ != n_) { fail("unexpected trailing characters after the JSON value"); err = err_; return false; }
        return true;
    }

  private:
    const char * s_;
    size_t       n_;
    size_t       pos_ = 0;
    std::string  err_;

    bool fail(const std::string & msg) {
        if (err_.empty()) err_ = "offset " + std::to_string(pos_) + ": " + msg;
        return false;
    }
    bool at_end() const { return pos_ >= n_; }
    char peek() const { return s_[pos_]; }

    void skip_ws() {
        while (pos_ < n_) {
            const char c = s_[pos_];
            if (c == ' ' || c == '\t' || c == '\n' || c == '\r') ++pos_;
            else break;
        }
    }

    bool expect_literal(const char * lit) {
        const size_t len = std::strlen(lit);
        if (n_ - pos_ < len || std::memcmp(s_ + pos_, lit, len) != 0) {
            return fail(std::string("invalid literal (expected '") + lit + "')");
        }
        pos_ += len;
        return true;
    }

    bool parse_value(value & v, int depth) {
        if (depth > k_max_depth) return fail("nesting deeper than " + std::to_string(k_max_depth));
        if (at_end()) return fail("unexpected end of input, expected a value");
        const char c = peek();
        switch (c) {
            case '{': return parse_object(v, depth);
            case '[': return parse_array(v, depth);
            case '"': v.k = value::kind::string; return parse_string(v.str);
            case 't': v.k = value::kind::boolean; v.b = true; return expect_literal("true");
            case 'f': v.k = value::kind::boolean; v.b = false; return expect_literal("false");
            case 'n': v.k = value::kind::null; return expect_literal("null");
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return parse_number(v);
                return fail(std::string("unexpected character '") + printable(c) + "'");
        }
    }

    static std::string printable(char c) {
        const unsigned char u = (unsigned char) c;
        if (u >= 0x20 && u < 0x7f) return std::string(1, c);
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\x%02x", u);
        return buf;
    }

    bool parse_object(value & v, int depth) {
        v.k = value::kind::object;
        ++pos_; // '{'
        skip_ws();
        if (!at_end() && peek() == '}') { ++pos_; return true; }
        for (;;) {
            skip_ws();
            if (at_end() || peek() != '"') return fail("expected a string key in object");
            std::string key;
            if (!parse_string(key)) return false;
            for (const auto & kv : v.obj) {
                if (kv.first == key) return fail("duplicate object key \"" + key + "\"");
            }
            skip_ws();
            if (at_end() || peek() != ':') return fail("expected ':' after object key");
            ++pos_;
            skip_ws();
            v.obj.emplace_back(std::move(key), value());
            if (!parse_value(v.obj.back().second, depth + 1)) return false;
            skip_ws();
            if (at_end()) return fail("unexpected end of input inside object");
            if (peek() == ',') { ++pos_; continue; }
            if (peek() == '}') { ++pos_; return true; }
            return fail("expected ',' or '}' in object");
        }
    }

    bool parse_array(value & v, int depth) {
        v.k = value::kind::array;
        ++pos_; // '['
        skip_ws();
        if (!at_end() && peek() == ']') { ++pos_; return true; }
        for (;;) {
            skip_ws();
            v.arr.emplace_back();
            if (!parse_value(v.arr.back(), depth + 1)) return false;
            skip_ws();
            if (at_end()) return fail("unexpected end of input inside array");
            if (peek() == ',') { ++pos_; continue; }
            if (peek() == ']') { ++pos_; return true; }
            return fail("expected ',' or ']' in array");
        }
    }

    static void put_utf8(std::string & out, uint32_t cp) {
        if (cp < 0x80) {
            out += (char) cp;
        } else if (cp < 0x800) {
            out += (char) (0xC0 | (cp >> 6));
            out += (char) (0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += (char) (0xE0 | (cp >> 12));
            out += (char) (0x80 | ((cp >> 6) & 0x3F));
            out += (char) (0x80 | (cp & 0x3F));
        } else {
            out += (char) (0xF0 | (cp >> 18));
            out += (char) (0x80 | ((cp >> 12) & 0x3F));
            out += (char) (0x80 | ((cp >> 6) & 0x3F));
            out += (char) (0x80 | (cp & 0x3F));
        }
    }

    bool read_hex4(uint32_t & out) {
        if (n_ - pos_ < 4) return fail("truncated \\u escape");
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
            const char c = s_[pos_ + k];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= (uint32_t) (c - '0');
            else if (c >= 'a' && c <= 'f') v |= (uint32_t) (c - 'a' + 10);
            else if (c >= 'A' && c <= 'F') v |= (uint32_t) (c - 'A' + 10);
            else return fail("invalid hex digit in \\u escape");
        }
        pos_ += 4;
        out = v;
        return true;
    }

    // Validates one raw UTF-8 sequence starting at pos_ (shortest form, no surrogates, <= U+10FFFF).
    bool copy_utf8(std::string & out) {
        const unsigned char c0 = (unsigned char) s_[pos_];
        int len = 0; uint32_t cp = 0;
        if (c0 >= 0xC2 && c0 <= 0xDF) { len = 2; cp = c0 & 0x1F; }
        else if (c0 >= 0xE0 && c0 <= 0xEF) { len = 3; cp = c0 & 0x0F; }
        else if (c0 >= 0xF0 && c0 <= 0xF4) { len = 4; cp = c0 & 0x07; }
        else return fail("invalid UTF-8 byte in string");
        if (n_ - pos_ < (size_t) len) return fail("truncated UTF-8 sequence in string");
        for (int k = 1; k < len; ++k) {
            const unsigned char c = (unsigned char) s_[pos_ + k];
            if ((c & 0xC0) != 0x80) return fail("invalid UTF-8 continuation byte in string");
            cp = (cp << 6) | (c & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return fail("overlong UTF-8 sequence in string");
        if (cp >= 0xD800 && cp <= 0xDFFF) return fail("UTF-8 encoded surrogate in string");
        if (cp > 0x10FFFF) return fail("UTF-8 code point beyond U+10FFFF in string");
        out.append(s_ + pos_, (size_t) len);
        pos_ += (size_t) len;
        return true;
    }

    bool parse_string(std::string & out) {
        ++pos_; // opening quote
        out.clear();
        for (;;) {
            if (at_end()) return fail("unterminated string");
            const unsigned char c = (unsigned char) s_[pos_];
            if (c == '"') { ++pos_; return true; }
            if (c < 0x20) return fail("raw control character in string (must be escaped)");
            if (c == '\\') {
                ++pos_;
                if (at_end()) return fail("unterminated escape in string");
                const char e = s_[pos_++];
                switch (e) {
                    case '"': out += '"'; break;
                    case '\\': out += '\\'; break;
                    case '/': out += '/'; break;
                    case 'b': out += '\b'; break;
                    case 'f': out += '\f'; break;
                    case 'n': out += '\n'; break;
                    case 'r': out += '\r'; break;
                    case 't': out += '\t'; break;
                    case 'u': {
                        uint32_t cp = 0;
                        if (!read_hex4(cp)) return false;
                        if (cp >= 0xD800 && cp <= 0xDBFF) {
                            if (n_ - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') {
                                return fail("high surrogate not followed by a \\u low surrogate");
                            }
                            pos_ += 2;
                            uint32_t lo = 0;
                            if (!read_hex4(lo)) return false;
                            if (lo < 0xDC00 || lo > 0xDFFF) return fail("invalid low surrogate in \\u escape");
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                            return fail("lone low surrogate in \\u escape");
                        }
                        put_utf8(out, cp);
                        break;
                    }
                    default:
                        --pos_;
                        return fail(std::string("invalid escape '\\") + printable(e) + "' in string");
                }
                continue;
            }
            if (c < 0x80) { out += (char) c; ++pos_; continue; }
            if (!copy_utf8(out)) return false;
        }
    }

    bool parse_number(value & v) {
        const size_t start = pos_;
        if (peek() == '-') ++pos_;
        if (at_end()) return fail("truncated number");
        if (peek() == '0') {
            ++pos_;
            if (!at_end() && peek() >= '0' && peek() <= '9') return fail("leading zero in number");
        } else if (peek() >= '1' && peek() <= '9') {
            while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
        } else {
            return fail("invalid number");
        }
        bool integral = true;
        if (!at_end() && peek() == '.') {
            integral = false;
            ++pos_;
            if (at_end() || !(peek() >= '0' && peek() <= '9')) return fail("expected digits after '.' in number");
            while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
        }
        if (!at_end() && (peek() == 'e' || peek() == 'E')) {
            integral = false;
            ++pos_;
            if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
            if (at_end() || !(peek() >= '0' && peek() <= '9')) return fail("expected digits in number exponent");
            while (!at_end() && peek() >= '0' && peek() <= '9') ++pos_;
        }
        // strtod/strtoll need a terminated copy: the input buffer (an mmap) is not.
        const std::string text(s_ + start, pos_ - start);
        v.k   = value::kind::number;
        v.num = std::strtod(text.c_str(), nullptr);
        if (std::isinf(v.num)) { pos_ = start; return fail("number out of range"); }
        if (integral) {
            errno = 0;
            const long long ll = std::strtoll(text.c_str(), nullptr, 10);
            if (errno == 0) { v.is_int = true; v.i = (int64_t) ll; }
        }
        return true;
    }
};

} // namespace

bool parse(const char * data, size_t n, value & out, std::string & err) {
    out = value();
    parser p(data, n);
    return p.run(out, err);
}

void append_quoted(std::string & out, const std::string & s) {
    out += '"';
    for (const char ch : s) {
        const unsigned char c = (unsigned char) ch;
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

} // namespace json
} // namespace sdio
