#include "io/json.h"

#include <algorithm>
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

// Below this many keys an object is checked for duplicates on each insertion (exact offset in
// the message); from it on, once at the end by sorting (O(k log k) instead of O(k^2)).
constexpr size_t k_linear_key_check = 8;

// Decodes the UTF-8 sequence at s[pos] (shortest form, no surrogates, <= U+10FFFF); returns its
// length, or 0 when it is not valid. The one definition of valid UTF-8 for parser and writers.
size_t utf8_sequence(const unsigned char * s, size_t avail) {
    const unsigned char c0 = s[0];
    if (c0 < 0x80) return 1;
    size_t len = 0; uint32_t cp = 0;
    if (c0 >= 0xC2 && c0 <= 0xDF) { len = 2; cp = c0 & 0x1F; }
    else if (c0 >= 0xE0 && c0 <= 0xEF) { len = 3; cp = c0 & 0x0F; }
    else if (c0 >= 0xF0 && c0 <= 0xF4) { len = 4; cp = c0 & 0x07; }
    else return 0;
    if (avail < len) return 0;
    for (size_t k = 1; k < len; ++k) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return 0;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp > 0x10FFFF) return 0;
    return len;
}

class parser {
  public:
    parser(const char * p, size_t n, handler & h, parse_stats & st) : s_(p), n_(n), h_(h), st_(st) {}

    bool run(std::string & err) {
        skip_ws();
        if (!parse_value(0)) { err = err_; return false; }
        skip_ws();
        if (pos_ != n_) { fail("unexpected trailing characters after the JSON value"); err = err_; return false; }
        return true;
    }

  private:
    const char *  s_;
    size_t        n_;
    handler &     h_;
    parse_stats & st_;
    size_t        pos_ = 0;
    std::string   err_;

    // The keys of every open object, innermost last: their bytes in one buffer and (offset,
    // length) refs, so memory is the key bytes plus 16 bytes a key, whatever the nesting.
    struct key_ref { size_t off, len; };
    std::string          key_bytes_;
    std::vector<key_ref> keys_;

    std::string key_at(size_t k) const { return key_bytes_.substr(keys_[k].off, keys_[k].len); }
    bool        key_equal(size_t a, size_t b) {
        ++st_.key_comparisons;
        return keys_[a].len == keys_[b].len &&
               key_bytes_.compare(keys_[a].off, keys_[a].len, key_bytes_, keys_[b].off, keys_[b].len) == 0;
    }

    bool fail(const std::string & msg) {
        if (err_.empty()) err_ = "offset " + std::to_string(pos_) + ": " + msg;
        return false;
    }
    // The handler refused: its message is the error, ours stays empty.
    static bool stopped() { return false; }
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

    bool emit(value && v) { return h_.scalar(std::move(v)) ? true : stopped(); }

    bool parse_value(int depth) {
        if (depth > k_max_depth) return fail("nesting deeper than " + std::to_string(k_max_depth));
        if (at_end()) return fail("unexpected end of input, expected a value");
        ++st_.values;
        const char c = peek();
        value      v;
        switch (c) {
            case '{': return parse_object(depth);
            case '[': return parse_array(depth);
            case '"':
                v.k = value::kind::string;
                if (!parse_string(v.str)) return false;
                return emit(std::move(v));
            case 't': v.k = value::kind::boolean; v.b = true; return expect_literal("true") && emit(std::move(v));
            case 'f': v.k = value::kind::boolean; v.b = false; return expect_literal("false") && emit(std::move(v));
            case 'n': v.k = value::kind::null; return expect_literal("null") && emit(std::move(v));
            default:
                if (c == '-' || (c >= '0' && c <= '9')) return parse_number(v) && emit(std::move(v));
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

    // A key in a message: control characters escaped so they never reach a terminal raw.
    static std::string printable_key(const std::string & k) {
        std::string o;
        for (const char c : k) {
            const unsigned char u = (unsigned char) c;
            o += (u < 0x20 || u == 0x7f || c == '\\') ? (c == '\\' ? std::string("\\\\") : printable(c)) : std::string(1, c);
        }
        return o;
    }

    // Keys [first, keys_.size()) belong to the object just closed: any two equal?
    bool check_duplicates_sorted(size_t first) {
        const size_t          k = keys_.size() - first;
        std::vector<uint32_t> order(k);
        for (size_t j = 0; j < k; ++j) order[j] = (uint32_t) (first + j);
        std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
            ++st_.key_comparisons;
            return key_bytes_.compare(keys_[a].off, keys_[a].len, key_bytes_, keys_[b].off, keys_[b].len) < 0;
        });
        for (size_t j = 1; j < k; ++j) {
            if (key_equal(order[j - 1], order[j])) return fail("duplicate object key \"" + printable_key(key_at(order[j])) + "\"");
        }
        return true;
    }

    bool parse_object(int depth) {
        ++pos_; // '{'
        if (!h_.begin_object()) return stopped();
        const size_t first = keys_.size();
        const size_t bytes = key_bytes_.size();
        auto         close = [&](bool ok) {
            keys_.resize(first);
            key_bytes_.resize(bytes);
            return ok;
        };
        skip_ws();
        if (!at_end() && peek() == '}') {
            ++pos_;
            return h_.end_object() ? true : stopped();
        }
        std::string key;
        for (;;) {
            skip_ws();
            if (at_end() || peek() != '"') return close(fail("expected a string key in object"));
            if (!parse_string(key)) return close(false);
            keys_.push_back({key_bytes_.size(), key.size()});
            key_bytes_ += key;
            const size_t count = keys_.size() - first;
            if (count <= k_linear_key_check) {
                for (size_t j = first; j + 1 < keys_.size(); ++j) {
                    if (key_equal(j, keys_.size() - 1)) return close(fail("duplicate object key \"" + printable_key(key) + "\""));
                }
            }
            skip_ws();
            if (at_end() || peek() != ':') return close(fail("expected ':' after object key"));
            ++pos_;
            skip_ws();
            if (!h_.key(key)) return close(stopped());
            if (!parse_value(depth + 1)) return close(false);
            skip_ws();
            if (at_end()) return close(fail("unexpected end of input inside object"));
            if (peek() == ',') { ++pos_; continue; }
            if (peek() == '}') {
                ++pos_;
                if (keys_.size() - first > k_linear_key_check && !check_duplicates_sorted(first)) return close(false);
                return close(h_.end_object() ? true : stopped());
            }
            return close(fail("expected ',' or '}' in object"));
        }
    }

    bool parse_array(int depth) {
        ++pos_; // '['
        if (!h_.begin_array()) return stopped();
        skip_ws();
        if (!at_end() && peek() == ']') {
            ++pos_;
            return h_.end_array() ? true : stopped();
        }
        for (;;) {
            skip_ws();
            if (!parse_value(depth + 1)) return false;
            skip_ws();
            if (at_end()) return fail("unexpected end of input inside array");
            if (peek() == ',') { ++pos_; continue; }
            if (peek() == ']') {
                ++pos_;
                return h_.end_array() ? true : stopped();
            }
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

// First pass of parse(): counts the values (stopping past max_values, before any tree exists)
// and the children of each container in document order, so the tree can reserve exact sizes.
class size_counter : public handler {
  public:
    explicit size_counter(size_t max_values) : max_values_(max_values) {}

    std::vector<uint32_t> children; // per container, in the order they open
    bool                  too_many = false;

    bool begin_object() override { return open(); }
    bool begin_array() override { return open(); }
    bool end_object() override { stack_.pop_back(); return true; }
    bool end_array() override { stack_.pop_back(); return true; }
    bool key(const std::string &) override { return true; }
    bool scalar(value &&) override { return count(); }

  private:
    const size_t        max_values_;
    size_t              values_ = 0;
    std::vector<size_t> stack_; // indices into children of the open containers

    bool count() {
        if (++values_ > max_values_) {
            too_many = true;
            return false;
        }
        if (!stack_.empty()) ++children[stack_.back()];
        return true;
    }
    bool open() {
        if (!count()) return false;
        stack_.push_back(children.size());
        children.push_back(0);
        return true;
    }
};

// Second pass: each value goes into the innermost open container, reserved to its exact size.
class tree_builder : public handler {
  public:
    tree_builder(value & root, const std::vector<uint32_t> & children) : root_(root), children_(children) {}

    bool begin_object() override { open(value::kind::object); return true; }
    bool begin_array() override { open(value::kind::array); return true; }
    bool end_object() override { stack_.pop_back(); return true; }
    bool end_array() override { stack_.pop_back(); return true; }
    bool key(const std::string & k) override {
        stack_.back()->obj.emplace_back(k, value());
        return true;
    }
    bool scalar(value && v) override {
        *slot() = std::move(v);
        return true;
    }

  private:
    value &                       root_;
    const std::vector<uint32_t> & children_;
    size_t                        next_ = 0; // next container's index into children_
    // Open containers, innermost last. A parent never grows while a child is open (the child
    // is its last element), so these pointers stay valid.
    std::vector<value *>          stack_;

    value * slot() {
        if (stack_.empty()) return &root_;
        value * top = stack_.back();
        if (top->k == value::kind::array) {
            top->arr.emplace_back();
            return &top->arr.back();
        }
        return &top->obj.back().second;
    }
    void open(value::kind k) {
        value * v = slot();
        v->k      = k;
        const uint32_t n = next_ < children_.size() ? children_[next_] : 0;
        ++next_;
        if (k == value::kind::array) v->arr.reserve(n);
        else v->obj.reserve(n);
        stack_.push_back(v);
    }
};

} // namespace

bool parse_events(const char * data, size_t n, handler & h, std::string & err, parse_stats * stats) {
    parse_stats local;
    parser      p(data, n, h, stats ? *stats : local);
    err.clear();
    return p.run(err);
}

bool parse(const char * data, size_t n, value & out, std::string & err, parse_stats * stats) {
    out = value();
    // At most one value per 8 bytes beyond the first 1024: real documents (safetensors
    // metadata, comfy_quant) hold one per 15-20 bytes. With exact reservations the tree then
    // stays within ~15x the text, where [0,0,...] (a value per 2 bytes, vectors grown by
    // doubling) took ~56x-170x.
    const size_t max_values = 1024 + n / 8;
    size_counter sizes(max_values);
    if (!parse_events(data, n, sizes, err, stats)) {
        if (err.empty() && sizes.too_many) {
            err = "more than " + std::to_string(max_values) + " values in " + std::to_string(n) +
                  " bytes of JSON (a tree keeps ~100 bytes a value; dense data needs parse_events)";
        }
        return false;
    }
    tree_builder b(out, sizes.children);
    return parse_events(data, n, b, err); // cannot fail: the same text parsed a moment ago
}

bool is_valid_utf8(const std::string & s) {
    const unsigned char * p = (const unsigned char *) s.data();
    for (size_t i = 0; i < s.size();) {
        const size_t len = utf8_sequence(p + i, s.size() - i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

void append_quoted(std::string & out, const std::string & s) {
    out += '"';
    const unsigned char * p = (const unsigned char *) s.data();
    for (size_t i = 0; i < s.size();) {
        const unsigned char c = p[i];
        if (c >= 0x80) {
            const size_t len = utf8_sequence(p + i, s.size() - i);
            if (len == 0) {
                out += "\xEF\xBF\xBD"; // U+FFFD for one byte that is not valid UTF-8
                ++i;
            } else {
                out.append(s, i, len);
                i += len;
            }
            continue;
        }
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            default:
                if (c < 0x20 || c == 0x7f) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", c);
                    out += buf;
                } else {
                    out += (char) c;
                }
        }
        ++i;
    }
    out += '"';
}

} // namespace json
} // namespace sdio
